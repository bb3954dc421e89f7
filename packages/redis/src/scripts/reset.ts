import { REDIS_NOW_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * Makes a call's buckets full again by forgetting them (a missing bucket is a full one): their entries leave the
 * value, and so does every held lease's hold on them (docs/stores.md, "Leases"); the others stay with the key's expiry
 * (it was set for the last of all of them to be full again, and the last lease to expire). KEYS: the
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
local leases, sums, names = {}, {}, {}             -- the leases left, and what they hold per name, in order
-- Entries are joined by ', ': split at commas, each but the first starts with a space. A held lease ('@<id>
-- <expiresAt> <name>=<amount> ...') lets go of the forgotten limits, and goes when it holds nothing more; the leases'
-- header ('@ <first> <last> <name>=<amount> ...') is made again from those left.
for entry in string.gmatch(raw, '[^,]+') do
  entry = string.gsub(entry, '^ ', '')
  if string.sub(entry, 1, 2) == '@ ' then
    -- the header: made again below
  elseif string.sub(entry, 1, 1) == '@' then
    local head, e, holds = string.match(entry, '^(@[^ ]+ (%d+))(.*)$')
    if head then
      local left = string.gsub(holds, ' ([^ =]+)=(%d+)', function(name) if gone[name] then return '' end end)
      if left ~= '' then
        leases[#leases + 1] = {text = head .. left, e = e}
        for name, amount in string.gmatch(left, ' ([^ =]+)=(%d+)') do
          if not sums[name] then names[#names + 1], sums[name] = name, 0 end
          sums[name] = sums[name] + amount
        end
      end
    end
  else
    local name = string.match(entry, '^([^ ]+)')
    if name and gone[name] then forgotten = forgotten + 1 else kept[#kept + 1] = entry end
  end
end
if #leases > 0 then
  local header = '@ ' .. leases[1].e .. ' ' .. leases[#leases].e
  for _, name in ipairs(names) do header = header .. ' ' .. name .. '=' .. string.format('%d', sums[name]) end
  kept[#kept + 1] = header
  for _, lease in ipairs(leases) do kept[#kept + 1] = lease.text end
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
