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
 * Cost per key: one MGET read for the whole batch, and one write for each admitted charge: INCRBY on a compact value
 * whose expiry can stay (most charges), else SET ... PX. Inside a script every redis.call costs about a microsecond of
 * bookkeeping, so the reads are shared and nothing else is called; INCRBY is the cheapest write that keeps a TTL (no
 * options to parse, the integer updated in place, a number for a reply where SET's status becomes a Lua table). The
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
  local need = cost * U
  local raw = values[i]
  if written then raw = written[key] or raw end
  -- The bucket as stored, in missing units (full minus units held); a missing key is a full bucket.
  local stored, updatedAt, storedLimit, compact = 0, now, limit, false
  if raw then
    local len = #raw
    local v
    if len >= 14 and len <= 16 then v = tonumber(raw) end
    if v then                                     -- decode's compact branch, inlined: most reads are compact
      local wrapped = v % TIME_WRAP
      local rest = (v - wrapped) / TIME_WRAP
      local missingThen = rest % MISSING_SPAN
      local limitThen = (rest - missingThen) / MISSING_SPAN
      -- compactFields, inlined (a Lua call per key costs about as much as the test itself)
      if limitThen >= 1 and limitThen < COMPACT_LIMIT and missingThen <= limitThen * U and wrapped % 1 == 0 then
        stored, storedLimit, compact = missingThen, limitThen, true
        local ahead = (wrapped - now) % TIME_WRAP
        if ahead >= HALF_WRAP then ahead = ahead - TIME_WRAP end
        updatedAt = now + ahead
      end                                         -- else not written by ratecard: a full bucket
    else
      local units
      units, updatedAt, storedLimit = decode(raw, now)
      if units then stored = storedLimit * U - units else updatedAt, storedLimit = now, limit end
    end
  end
  -- unitsAt, in missing units: time since updatedAt refills at the stored limit, and a lower limit caps.
  local missing = stored
  local at = now                                  -- the updatedAt an admitted charge writes
  local elapsed = now - updatedAt
  if elapsed > 0 then                             -- a clock gone backwards refills nothing
    -- As in core: a product past 2^53 rounds to at least 2^53, above any missing amount, so the test stays exact.
    local refill = elapsed * storedLimit
    if refill >= missing then missing = 0 else missing = missing - refill end
  elseif elapsed < 0 then
    at = updatedAt                                -- max(now, updatedAt): an interval never refills twice
  end
  local held = storedLimit * U - missing
  if held > full then held = full end
  if held >= need then                            -- take(held, cost)
    local left = held - need
    missing = full - left
    -- ceil(a / b) = (a + (-a) % b) / b for integers, and x rounded up to a multiple of STEP is x + (-x) % STEP:
    -- operators only (Lua's % is never negative here), each an exact integer, cheaper than calls to math.ceil.
    local untilFull = at + (missing + (-missing) % limit) / limit  -- core's msUntilFull, counted from at
    -- Redis counts a TTL from the start of the command, which may fall in the ms before now: hence + 1. A missing
    -- key and a full bucket are the same, so a key that expires once its bucket is full loses nothing. TTLs and
    -- increments are formatted here as integers, cheaper than the %.17g Redis 7.0 prints a number argument with.
    local value
    if limit < COMPACT_LIMIT then
      local stays = false
      if compact and storedLimit == limit then
        local storedFull = updatedAt + (stored + (-stored) % limit) / limit
        stays = untilFull <= storedFull + (-storedFull) % STEP
      end
      if stays then
        -- The key already expires at this multiple of STEP: move the digits, keep the TTL. Both differences are
        -- small integers, so the increment is exact.
        local moved = (missing - stored) * TIME_WRAP + at % TIME_WRAP - updatedAt % TIME_WRAP
        redis.call('INCRBY', key, sformat('%d', moved))
      else
        value = compactValue(limit, missing, at)
        redis.call('SET', key, value, 'PX', sformat('%d', untilFull + (-untilFull) % STEP - now + 1))
      end
      if written then written[key] = value or compactValue(limit, missing, at) end
    else
      value = encode(left, at, limit)
      redis.call('SET', key, value, 'PX', sformat('%d', untilFull - now + 1))
      if written then written[key] = value end
    end
    reply[i] = left
  else
    reply[i] = -1 - held                          -- limited: nothing charged, nothing written
    -- Steady: refilling since before now at the request's own limit, so a deny cache may extrapolate it.
    if storedLimit == limit and elapsed >= 0 then flags[#flags + 1] = 1 else flags[#flags + 1] = 0 end
  end
end
for j = 1, #flags do reply[n + j] = flags[j] end
return spack('<' .. string.rep('d', #reply), unpack(reply))
`,
);
