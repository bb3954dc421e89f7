import { REDIS_NOW_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * Makes a call's buckets full again by forgetting them (a missing bucket is a full one): their entries leave the
 * value, the others stay with the key's expiry (it was set for the last of all of them to be full again). KEYS: the
 * key. ARGV[1]: the last ms by Redis TIME at which the caller still waits, or '' when the store cannot tell yet: a run
 * that starts later (held in a paused or hung server, or sent again by a client after it reconnected) forgets
 * nothing, as a late consume charges nothing. ARGV[2] on: the limits' names. Reply: Redis TIME in ms, then how many of
 * the buckets existed; the time alone for a run too late for its caller.
 */
export const RESET: LuaScript = luaScript(
  'reset',
  `local floor = math.floor
${REDIS_NOW_LUA}
local lastWaited = tonumber(ARGV[1])
if lastWaited and redisNow > lastWaited then return {redisNow} end
local raw = redis.call('GET', KEYS[1])
if not raw then return {redisNow, 0} end          -- no bucket of the key exists: all are full
local gone = {}                                   -- the names to forget, as a set
for i = 2, #ARGV do gone[ARGV[i]] = true end
local kept, forgotten = {}, 0
-- Entries are joined by ', ': split at commas, each but the first starts with a space.
for entry in string.gmatch(raw, '[^,]+') do
  local name = string.match(entry, '^ ?([^ ]+)')
  if name and gone[name] then forgotten = forgotten + 1 else kept[#kept + 1] = string.gsub(entry, '^ ', '') end
end
if #kept == 0 then
  redis.call('DEL', KEYS[1])
else
  -- The entries left keep the key's expiry: the latest instant any bucket in it is full again, theirs included.
  redis.call('SET', KEYS[1], table.concat(kept, ', '), 'KEEPTTL')
end
return {redisNow, forgotten}
`,
);
