import { BUCKET_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * Charges a batch of buckets in order, as core's take() would, in one atomic run: a key that appears twice in the
 * batch is charged twice, in turn.
 *
 * KEYS[i]: a bucket. ARGV[1]: now in ms, or '' for Redis TIME. ARGV[2]: the limits and costs, little-endian doubles:
 * one pair (limit, cost) that every key shares, or one pair per key, in order. ARGV[3]: '1' when a key may appear
 * more than once in the batch, else ''. ARGV[4]: the last ms by Redis TIME at which anyone still waits for the batch,
 * or '' when the store cannot tell yet: a run that starts later (the batch waited in a paused or hung server, or a
 * client sent it again after reconnecting) charges nothing.
 * Reply: one string of little-endian doubles: Redis TIME in ms, then the Outcome for each key, then one flag per
 * limited outcome, in the same order: 1 when the bucket has been refilling since before now at the request's own
 * limit (so a deny cache may extrapolate it exactly), else 0. A run too late for its batch replies with the time alone.
 *
 * Cost per key: one MGET read for the whole batch, and one SET ... PXAT (PX on the caller's clock) for each admitted
 * charge, which writes the value and its expiry together. Inside a script every redis.call costs about a microsecond
 * of bookkeeping, so the reads are shared and nothing else is called. The numbers travel packed (one argument, one
 * reply) because each bulk string costs Redis an object to parse and Lua a string to intern, and text numbers a strtod
 * or printf each.
 */
function consumeScript(name: string, header: string, keys: string, read: string): LuaScript {
  return luaScript(
    name,
    `${header}${BUCKET_LUA}
local redisNow = redisTime()
local lastWaited = tonumber(ARGV[4])
if lastWaited and redisNow > lastWaited then return spack('<d', redisNow) end
local now = tonumber(ARGV[1]) or redisNow
local redisClock = ARGV[1] == ''
${keys}
local n = #keys
local packed = ARGV[2]
local limit, cost = sunpack('<dd', packed)       -- the pair every key shares...
local each                                        -- ...or a pair per key
if #packed ~= 16 then each = {sunpack('<' .. string.rep('d', 2 * n), packed)} end
local written                                     -- values this run wrote, when a key may repeat in the batch
if ARGV[3] == '1' then written = {} end
${read}                                            -- every key read before any is written
local reply = {redisNow}
local flags = {}
-- Most writes are at now under the limit every key shares: their values end alike, so that end is formatted once and
-- each such write formats only its units (encode's three numbers cost about 4 600 instructions a write, this 2 500).
local tail
if not each then tail = sformat(' %d %d', now, limit) end
for i = 1, n do
  local key = keys[i]
  if each then limit, cost = each[2 * i - 1], each[2 * i] end
  local raw = values[i]                           -- false (RESP2) or nil (RESP3) for a missing key
  if written then raw = written[key] or raw end
  -- A missing key, or a value ratecard would not write, is a full bucket.
  local units, updatedAt, storedLimit = limit * U, now, limit
  if raw then
    local u, t, l = decode(raw)
    if u then units, updatedAt, storedLimit = u, t, l end
  end
  local held = unitsAt(units, updatedAt, storedLimit, now, limit)
  local need = cost * U
  if held >= need then                            -- take(held, cost)
    local left = held - need
    local at = now                                -- max(now, updatedAt): an interval never refills twice
    if updatedAt > now then at = updatedAt end
    local fullAt = at + msUntilFull(left, limit)
    -- The key expires once the bucket is full again (a missing key is a full bucket, so nothing is lost). On Redis'
    -- clock that is an instant Redis knows: PXAT, exact however long the script has run. The caller's clock may
    -- stand apart from Redis', so then the TTL is counted from now: PX, + 1 because Redis counts it from the start
    -- of the command, which may fall in the ms before now. Formatted here as an integer, cheaper than the %.17g
    -- Redis 7.0 prints a number argument with.
    local value
    if tail and at == now then value = sformat('%d', left) .. tail else value = encode(left, at, limit) end
    if redisClock then
      redis.call('SET', key, value, 'PXAT', sformat('%d', fullAt))
    else
      redis.call('SET', key, value, 'PX', sformat('%d', fullAt - now + 1))
    end
    if written then written[key] = value end
    reply[i + 1] = left
  else
    reply[i + 1] = -1 - held                      -- limited: nothing charged, nothing written
    -- Steady: refilling since before now at the request's own limit, so a deny cache may extrapolate it.
    if storedLimit == limit and updatedAt <= now then flags[#flags + 1] = 1 else flags[#flags + 1] = 0 end
  end
end
for j = 1, #flags do reply[n + 1 + j] = flags[j] end
return spack('<' .. string.rep('d', #reply), unpack(reply))
`,
  );
}

export const CONSUME: LuaScript = consumeScript(
  'consume',
  '',
  'local keys = KEYS',
  "local values = redis.call('MGET', unpack(keys))",
);

/**
 * The same on one Redis Cluster master, for keys of any slots it serves: the keys come after the four arguments above
 * (ARGV[5] on), since keys declared in KEYS across slots are refused with CROSSSLOT before the script runs, and the
 * flag lets the script touch keys of several slots. A key the master does not serve (its slot moved, or is moving and
 * the key is not there) stops the script at the GET that reads it with "non local key": every key is read before any
 * is written, so such a run writes nothing, and the store sends its calls again by key. MGET over several slots is
 * refused inside such a script, hence one GET per key. Needs Redis 7 (script flags).
 */
export const CONSUME_ON_MASTER: LuaScript = consumeScript(
  'consume-on-master',
  '#!lua flags=allow-cross-slot-keys\n',
  'local keys = {} for i = 5, #ARGV do keys[i - 4] = ARGV[i] end',
  "local values = {} for i = 1, #keys do values[i] = redis.call('GET', keys[i]) end",
);
