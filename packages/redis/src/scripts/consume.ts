import { BUCKET_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * Charges a batch of buckets in order, as core's take() would, in one atomic run: a key that appears twice in the
 * batch is charged twice, in turn.
 *
 * KEYS[i]: a bucket. ARGV[1]: now in ms, or '' for Redis TIME. ARGV[2]: the limits and costs, little-endian doubles:
 * one pair (limit, cost) that every key shares, or one pair per key, in order. ARGV[3]: '1' when a key may appear
 * more than once in the batch, else ''.
 * Reply: one string of little-endian doubles: the Outcome for each key, then one flag per limited outcome, in the
 * same order: 1 when the bucket has been refilling since before now at the request's own limit (so a deny cache may
 * extrapolate it exactly), else 0.
 *
 * Cost per key: one MGET read for the whole batch, and one SET ... PX for each admitted charge. Inside a script every
 * redis.call costs about a microsecond of bookkeeping, so the reads are shared and nothing else is called. The
 * numbers travel packed (one argument, one reply) because each bulk string costs Redis an object to parse and Lua a
 * string to intern, and text numbers a strtod or printf each.
 */
export const CONSUME: LuaScript = luaScript(
  'consume',
  `${BUCKET_LUA}
local now = clock(ARGV[1])
local n = #KEYS
local packed = ARGV[2]
local limit, cost = sunpack('<dd', packed)       -- the pair every key shares...
local each                                        -- ...or a pair per key
if #packed ~= 16 then each = {sunpack('<' .. string.rep('d', 2 * n), packed)} end
local written                                     -- values this run wrote, when a key may repeat in the batch
if ARGV[3] == '1' then written = {} end
local values = redis.call('MGET', unpack(KEYS))  -- false for a missing key
local reply = {}
local flags = {}
for i = 1, n do
  local key = KEYS[i]
  if each then limit, cost = each[2 * i - 1], each[2 * i] end
  local full = limit * U
  local held = full                               -- a missing bucket is a full one
  local at = now                                  -- the updatedAt an admitted charge writes
  local steady = 0
  local units, updatedAt, storedLimit
  local raw = values[i]
  if written then raw = written[key] or raw end
  if raw then units, updatedAt, storedLimit = decode(raw) end
  if units then
    held = unitsAt(units, updatedAt, storedLimit, now, limit)
    if updatedAt > now then at = updatedAt end    -- max(now, updatedAt): an interval never refills twice
    if storedLimit == limit and updatedAt <= now then steady = 1 end
  end
  local need = cost * U                           -- take(held, cost)
  if held >= need then
    local left = held - need
    local value = encode(left, at, limit)
    -- The TTL is core's msUntilFull counted from at, plus 1 ms: Redis counts it from the start of the command,
    -- which may fall in the ms before now. A missing key and a full bucket are the same, so nothing is lost.
    -- The TTL is formatted here as an integer, cheaper than the %.17g Redis 7.0 prints a number argument with.
    redis.call('SET', key, value, 'PX', sformat('%d', at - now + ceil((full - left) / limit) + 1))
    if written then written[key] = value end
    reply[i] = left
  else
    reply[i] = -1 - held                          -- limited: nothing charged, nothing written
    flags[#flags + 1] = steady
  end
end
for j = 1, #flags do reply[n + j] = flags[j] end
return spack('<' .. string.rep('d', #reply), unpack(reply))
`,
);
