import { REDIS_NOW_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * Operators' blocks (`Store.blocks`), every one a store keeps in one hash, so that a process reads them all in one
 * call: field '<organization>:<endpoint>', each percent-encoded (keys.ts: a ':' in either is '%3A', so no two pairs
 * share a field), value '<until> <reason>', until in ms on the store's clock. A run makes the change it is given, drops
 * the blocks that have ended, and answers those in force; the hash expires with its last block.
 * KEYS: the hash. ARGV[1]: now in ms, or '' for Redis TIME. ARGV[2]: the field to change, or '' to only read.
 * ARGV[3]: how long from now the block lasts (0 lifts it). ARGV[4]: its reason. Reply: the now, then each block in
 * force as its field and value.
 */
export const BLOCKS: LuaScript = luaScript(
  'blocks',
  `local floor = math.floor
${REDIS_NOW_LUA}
local now = tonumber(ARGV[1]) or redisNow
local key = KEYS[1]
if ARGV[2] ~= '' then
  local ms = tonumber(ARGV[3])
  if ms > 0 then
    redis.call('HSET', key, ARGV[2], string.format('%d', now + ms) .. ' ' .. ARGV[4])
  else
    redis.call('HDEL', key, ARGV[2])
  end
end
local all = redis.call('HGETALL', key)
local reply, ended, last = {now}, {}, 0
for i = 1, #all, 2 do
  local ends = tonumber(string.match(all[i + 1], '^(%d+) '))
  if ends and ends > now then
    reply[#reply + 1] = all[i]
    reply[#reply + 1] = all[i + 1]
    if ends > last then last = ends end
  else
    ended[#ended + 1] = all[i]                    -- ended, or a value ratecard would not write
  end
end
if #ended > 0 then redis.call('HDEL', key, unpack(ended)) end
-- The hash lives as long as its last block; PEXPIRE counts from Redis' own clock, so the length is from now on the
-- store's clock (a client clock ahead of Redis' keeps it no shorter than the block).
if last > 0 and (#ended > 0 or ARGV[2] ~= '') then redis.call('PEXPIRE', key, last - now) end
return reply
`,
);
