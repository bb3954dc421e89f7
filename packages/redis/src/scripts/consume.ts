import { BUCKET_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * Charges a batch of buckets in order, as core's take() would, in one atomic run: a key that appears twice in the
 * batch is charged twice, in turn.
 *
 * KEYS[i]: a bucket. ARGV[1]: now in ms, or '' for Redis TIME. ARGV[2i], ARGV[2i+1]: limit and cost for KEYS[i].
 * Reply: the Outcome for each key, then one flag per limited outcome, in the same order: 1 when the bucket has been
 * refilling since before now at the request's own limit (so a deny cache may extrapolate it exactly), else 0.
 *
 * Cost per key: one MGET read for the whole batch, and one SET for each admitted charge. Inside a script every
 * redis.call costs about a microsecond of bookkeeping, so the reads are shared and nothing else is called.
 */
export const CONSUME: LuaScript = luaScript(
  'consume',
  `${BUCKET_LUA}
local now = clock(ARGV[1])
local values = redis.call('MGET', unpack(KEYS))  -- false for a missing key
local written = {}                                -- values this run wrote, for a key repeated in the batch
local reply = {}
local flags = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local limit = tonumber(ARGV[2 * i])
  local cost = tonumber(ARGV[2 * i + 1])
  local full = limit * U
  local held = full                               -- a missing bucket is a full one
  local at = now                                  -- the updatedAt an admitted charge writes
  local steady = 0
  local units, updatedAt, storedLimit
  local raw = written[key] or values[i]
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
    redis.call('SET', key, value, 'PX', at - now + ceilDiv(full - left, limit) + 1)
    written[key] = value
    reply[i] = left
  else
    reply[i] = -1 - held                          -- limited: nothing charged, nothing written
    flags[#flags + 1] = steady
  end
end
for j = 1, #flags do reply[#reply + 1] = flags[j] end
return reply
`,
);
