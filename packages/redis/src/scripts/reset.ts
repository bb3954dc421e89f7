import { type LuaScript, luaScript } from './lua-script.js';

/**
 * Makes a call's buckets full again by forgetting them (a missing bucket is a full one): their entries leave the
 * value, the others stay with the key's expiry (it was set for the last of all of them to be full again). KEYS: the
 * key. ARGV: the limits' names. Reply: how many of the buckets existed.
 */
export const RESET: LuaScript = luaScript(
  'reset',
  `
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local gone = {}
for i = 1, #ARGV do gone[ARGV[i]] = true end
local kept, forgotten = {}, 0
for entry in string.gmatch(raw, '[^,]+') do
  local name = string.match(entry, '^ ?([^ ]+)')
  if name and gone[name] then forgotten = forgotten + 1 else kept[#kept + 1] = string.gsub(entry, '^ ', '') end
end
if #kept == 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], table.concat(kept, ', '), 'KEEPTTL')
end
return forgotten
`,
);
