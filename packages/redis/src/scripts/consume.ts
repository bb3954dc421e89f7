import { BUCKET_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * Charges a batch of calls in order, each all or nothing, in one atomic run: a call of k limits names k buckets and a
 * cost, and is admitted only if every one of its buckets holds cost tokens, then charged on every one; if any refuses,
 * none is charged (a bucket last written under another shape than the call's is written converted to it, as core's
 * stores do, charged nothing). A bucket that appears in several calls of the batch is charged in turn, each call seeing the one
 * before.
 *
 * KEYS: the buckets of every call, call after call. ARGV[1]: now in ms, or '' for Redis TIME. ARGV[2]: the shapes and
 * costs, little-endian doubles: per call k, cost, then capacity, unitsPerMs, unitsPerToken of each of its k buckets;
 * when every call of the batch has the same limits and cost, that list once for all. ARGV[3]: '1' when a key may
 * appear more than once in the batch, else ''. ARGV[4]: the last ms by Redis TIME at which anyone still waits for the
 * batch, or '' when the store cannot tell yet: a run that starts later (the batch waited in a paused or hung server,
 * or a client sent it again after reconnecting) charges nothing.
 * Reply: one string of little-endian doubles: Redis TIME in ms, then the Outcome for each key, then one flag per
 * limited outcome, in the same order: 1 when the bucket refills at the request's own shape since now or before (so a
 * deny cache may extrapolate it exactly), else 0. A run too late for its batch replies with the time alone.
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
local written                                     -- values this run wrote, when a key may repeat in the batch
if ARGV[3] == '1' then written = {} end
${read}                                            -- every key read before any is written
local reply = {redisNow}
local flags = {}
-- The call's limits, j = 1 .. k: capacity, R, the full bucket and the cost in units, the shape's text, and the end of
-- a value written at now under it.
local caps, rates, fulls, needs, shapes, tails = {}, {}, {}, {}, {}, {}
local sizes = {}                                  -- U of each limit, for unitsAt's conversion
local held, ats, moved = {}, {}, {}               -- per bucket of the call, read before any is written
-- Formatted once per run, by the 24 packed bytes of a limit: its shape's text, and ' <now> <shape>', the end of every
-- value written at now under it, so that each such write formats only its units.
local shapeOf, tailOf = {}, {}
local nowText = sformat('%d', now)
local shared = false                              -- every call has the limits and cost of the first, read once
local pos, k, cost = 1, 0, 0
local first = 1                                   -- the call's first key
while first <= n do
  if not shared then
    k, cost, pos = sunpack('<dd', packed, pos)
    if k < 1 then return redis.error_reply('ratecard: a call without buckets') end
    for j = 1, k do
      local bytes = ssub(packed, pos, pos + 23)
      local c, r, u
      c, r, u, pos = sunpack('<ddd', packed, pos)
      local shape = shapeOf[bytes]
      if not shape then
        shape = shapeText(c, r, u)
        shapeOf[bytes] = shape
        tailOf[bytes] = ' ' .. nowText .. ' ' .. shape
      end
      caps[j], rates[j], sizes[j], fulls[j], needs[j] = c, r, u, c * u, cost * u
      shapes[j], tails[j] = shape, tailOf[bytes]
    end
    shared = first == 1 and pos > #packed
  end
  local admit = true
  for j = 1, k do
    local i = first + j - 1
    local raw = values[i]                         -- false (RESP2) or nil (RESP3) for a missing key
    if written then raw = written[keys[i]] or raw end
    local full = fulls[j]
    -- A missing key, or a value ratecard would not write, is a full bucket under the request's shape.
    local h, at, m = full, now, false
    -- decode (scripts/bucket.ts), inline: about 540 instructions a key less than the call.
    local a, b, s
    if raw then a, b, s = smatch(raw, VALUE) end
    if a then
      local su, st = a + 0, b + 0
      if st > MAX_UPDATED_AT then                 -- not a value ratecard writes: a full bucket
      elseif s == shapes[j] then                  -- the request's shape, one pointer compared (Lua interns strings)
        if su <= full then
          -- refilled (scripts/bucket.ts), inline: about 500 instructions a key less than the call.
          local elapsed = now - st
          if elapsed <= 0 then                    -- a clock gone backwards refills nothing
            h = su
            at = st                               -- max(now, updatedAt): an interval never refills twice
          else
            local refill = elapsed * rates[j]     -- past 2^53 it rounds to at least 2^53: still above what is missing
            if refill >= full - su then h = full else h = su + refill end
          end
        end
      else                                        -- another shape (or the request's padded with zeros)
        local sc, sU, sR = storedShape(s, su)
        if sc then
          h = unitsAt(su, st, sc, sU, sR, now, caps[j], sizes[j])
          m = true
          if st > now then at = st end
        end
      end
    end
    held[j], ats[j], moved[j] = h, at, m
    if h < needs[j] then admit = false end        -- take(held, cost) refuses
  end
  for j = 1, k do
    local i = first + j - 1
    local units = held[j]
    if admit then                                 -- charged on every bucket
      units = units - needs[j]
      reply[i + 1] = units
    else                                          -- refused: nothing charged anywhere
      reply[i + 1] = -1 - units
      -- Steady: refilling at the request's own shape since now or before, so a deny cache may extrapolate it.
      if ats[j] == now then flags[#flags + 1] = 1 else flags[#flags + 1] = 0 end
    end
    -- Written when charged; refused, a bucket last written under another shape takes the request's (what it holds
    -- converted, nothing charged), so that it refills at the rate its Retry-After was computed with.
    if admit or moved[j] then
      local at = ats[j]
      local value
      if at == now then
        value = sformat('%d', units) .. tails[j]
      else
        value = sformat('%d %d ', units, at) .. shapes[j]
      end
      -- Full again at: core's msUntilFull, ceilDiv of two integers below 2^53, whose quotient is rounded once and
      -- never across an integer, so its ceiling is exact.
      local fullAt = at + ceil((fulls[j] - units) / rates[j])
      -- The key expires once the bucket is full again (a missing key is a full bucket, so nothing is lost). On
      -- Redis' clock that is an instant Redis knows: PXAT, exact however long the script has run. The caller's clock
      -- may stand apart from Redis', so then the TTL is counted from now: PX, + 1 because Redis counts it from the
      -- start of the command, which may fall in the ms before now. Formatted here as an integer, cheaper than the
      -- %.17g Redis 7.0 prints a number argument with.
      if redisClock then
        redis.call('SET', keys[i], value, 'PXAT', sformat('%d', fullAt))
      else
        redis.call('SET', keys[i], value, 'PX', sformat('%d', fullAt - now + 1))
      end
      if written then written[keys[i]] = value end
    end
  end
  first = first + k
end
for j = 1, #flags do reply[n + 1 + j] = flags[j] end
return packDoubles(reply)
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
