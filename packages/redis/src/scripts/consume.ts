import type { Limit } from '@ratecard/core';
import { MAX_KEPT_ENTRIES } from '../value.js';
import { BUCKET_LUA, READ_ENTRIES_LUA, REDIS_NOW_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * Charges a batch of calls in order, each all or nothing, in one atomic run: a call names one key (its organization's
 * and endpoint's, holding the buckets of every limit named there), k limits and a cost, and is admitted only if each
 * of its limits' buckets holds cost tokens, then charged on every one; if any refuses, none is charged (a bucket last
 * written under another shape than the call's is written converted to it, as core's stores do, charged nothing). A key
 * that appears in several calls of the batch is charged in turn, each call seeing the one before.
 *
 * KEYS: one per call. ARGV[1]: now in ms, or '' for Redis TIME. ARGV[2]: the limits and costs: per call k and cost
 * (little-endian doubles), then for each of its k limits its name (zero-terminated) and capacity, unitsPerMs,
 * unitsPerToken (doubles); when every call of the batch has the same limits and cost, that list once for all. ARGV[3]:
 * '1' when a key may appear more than once in the batch, else ''. ARGV[4]: the last ms by Redis TIME at which anyone
 * still waits for the batch, or '' when the store cannot tell yet: a run that starts later (the batch waited in a
 * paused or hung server, or a client sent it again after reconnecting) charges nothing.
 * Reply: one string of little-endian doubles: Redis TIME in ms, then the Outcome of each limit of each call, then one
 * flag per limited outcome, in the same order: 1 when the bucket refills at the request's own shape since now or
 * before (so a deny cache may extrapolate it exactly), else 0. A run too late for its batch replies with the time
 * alone.
 *
 * Cost per call: one MGET read for the whole batch, and, when charged, one SET ... PXAT (PX on the caller's clock)
 * that writes the value and its expiry together, however many limits the call names. Inside a script every
 * redis.call costs about a microsecond of bookkeeping, so the reads are shared and nothing else is called. The numbers
 * travel packed (one argument, one reply) because each bulk string costs Redis an object to parse and Lua a string to
 * intern, and text numbers a strtod or printf each.
 *
 * The value written is the call's entries in its limits' order, then the entries of limits it does not name (another
 * call's on the same endpoint, or a limit since renamed) that are not full again yet, at most MAX_KEPT_ENTRIES of them; the
 * key expires when the last of them is full again.
 */
function consumeScript(name: string, header: string, keys: string, read: string): LuaScript {
  return luaScript(
    name,
    `${header}${BUCKET_LUA}${REDIS_NOW_LUA}
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
local o = 1                                       -- outcomes in reply so far, after the time
local flags                                       -- made at the first refusal
-- The call's limits, in order: a table per limit with its numbers, its shape's text, the start ('<name> ') and end
-- (' <now> <shape>') of an entry written at now under it, and what the call read of its bucket.
local limits = {}
local byBytes                                     -- calls after the first: each limit made once, by its packed bytes
local shared = false                              -- every call has the limits and cost of the first, read once
local pos, k, cost = 1, 0, 0
for i = 1, n do
  if not shared then
    k, cost, pos = sunpack('<dd', packed, pos)
    if k < 1 then return redis.error_reply('ratecard: a call without buckets') end
    for j = 1, k do
      local start = pos
      local nm, c, r, u, limit, bytes
      nm, c, r, u, pos = sunpack('<sddd', packed, pos)
      if i > 1 then
        bytes = ssub(packed, start, pos - 1)
        byBytes = byBytes or {}
        limit = byBytes[bytes]
      end
      if not limit then
        -- '%d' prints the shape's numbers exactly (each is below 2^53; tostring would print a double past 1e14 in
        -- exponent form). Lua interns strings, so two equal shape texts are one string: comparing them compares two
        -- pointers.
        local shape = sformat('%d/%d/%d', c, r, u)
        limit = {name = nm, c = c, r = r, u = u, full = c * u, shape = shape, head = nm .. ' ',
          tail = sformat(' %d %s', now, shape), held = 0, at = 0, moved = false, found = 0}
        if bytes then byBytes[bytes] = limit end
      end
      limits[j] = limit
    end
    shared = i == 1 and pos > #packed
  end
  local key = keys[i]
  local raw = values[i]                           -- false (RESP2) or nil (RESP3) for a missing key
  if written then raw = written[key] or raw end
${READ_ENTRIES_LUA}
  local admit, rewrite, seen = true, false, 0
  for j = 1, k do
    local limit = limits[j]
    -- The first entry of the limit's name; none is a full bucket.
    local nm, x = limit.name, 0
    for y = 1, m do if en[y] == nm then x = y break end end
    local full = limit.full
    local h, at, moved = full, now, false
    if x > 0 then
      seen = seen + 1
      if es[x] == limit.shape then                -- the request's shape, one pointer compared
        -- rare.heldAt's first branch, inline: the path of nearly every call.
        local su, st = eu[x] + 0, et[x] + 0
        if st <= MAX_UPDATED_AT and su <= full then
          if st > now then                        -- a clock gone backwards refills nothing
            h, at = su, st
          else
            local refill = (now - st) * limit.r   -- past 2^53 it rounds to at least 2^53: still above what is missing
            if refill >= full - su then h = full else h = su + refill end
          end
        end
      else
        rare = rare or rarePaths(en, eu, et, es)
        h, at, moved = rare.heldAt(x, now, limit.c, limit.r, limit.u, full, limit.shape)
        if moved then rewrite = true end
      end
    end
    limit.held, limit.at, limit.moved, limit.found = h, at, moved, x
    if h < cost * limit.u then admit = false end  -- take(held, cost) refuses
  end
  -- Each limit's outcome, and its entry when the value is written: charged, on every bucket; refused, nothing is
  -- charged, and a bucket last written under another shape takes the request's (what it holds converted), so that it
  -- refills at the rate its Retry-After was computed with.
  local value, fullAt
  for j = 1, k do
    local limit = limits[j]
    local units, at, entry, f = limit.held, limit.at
    o = o + 1
    if admit then
      units = units - cost * limit.u
      reply[o] = units
    else
      reply[o] = -1 - units
      -- Steady: refilling at the request's own shape since now or before, so a deny cache may extrapolate it.
      flags = flags or {}
      if at == now then flags[#flags + 1] = 1 else flags[#flags + 1] = 0 end
    end
    if admit or limit.moved then
      if at == now then entry = limit.head .. sformat('%d', units) .. limit.tail
      else entry = limit.head .. sformat('%d %d ', units, at) .. limit.shape end
      -- Full again at: core's msUntilFull, ceilDiv of two integers below 2^53, whose quotient is rounded once and
      -- never across an integer, so its ceiling is exact.
      f = at + ceil((limit.full - units) / limit.r)
    elseif rewrite and limit.found > 0 then
      -- Refused, the call's other buckets stay as they were (written refilled to now, a clock that then stepped back
      -- would find more units than core's stores keep); one ratecard would not write goes, a full one anyway.
      rare = rare or rarePaths(en, eu, et, es)
      f = rare.otherFullAt(limit.found)
      if f then entry = rare.entryText(limit.found) end
    end
    -- Refused, a bucket the key did not hold stays out: a missing bucket is a full one under any later shape.
    if entry then
      if value then
        value = value .. ', ' .. entry
        if f > fullAt then fullAt = f end
      else
        value, fullAt = entry, f
      end
    end
  end
  if admit or rewrite then
    if seen < m then                              -- entries of limits this call does not name
      rare = rare or rarePaths(en, eu, et, es)
      local kept = 0
      for y = 1, m do
        if kept < ${MAX_KEPT_ENTRIES} then
          -- An entry of a name the call has is its bucket, written above, or a second one, dropped.
          local other = true
          for j = 1, k do if en[y] == limits[j].name then other = false break end end
          local f = other and rare.otherFullAt(y)
          if f and f > now then
            value = value .. ', ' .. rare.entryText(y)
            kept = kept + 1
            if f > fullAt then fullAt = f end
          end
        end
      end
    end
    -- The key expires once every bucket in it is full again (a missing key is full buckets, so nothing is lost). On
    -- Redis' clock that is an instant Redis knows: PXAT, exact however long the script has run. The caller's clock
    -- may stand apart from Redis', so then the TTL is counted from now: PX, + 1 because Redis counts it from the start
    -- of the command, which may fall in the ms before now. Formatted here as an integer, cheaper than the %.17g Redis
    -- 7.0 prints a number argument with.
    if redisClock then
      redis.call('SET', key, value, 'PXAT', sformat('%d', fullAt))
    else
      redis.call('SET', key, value, 'PX', sformat('%d', fullAt - now + 1))
    end
    if written then written[key] = value end
  end
end
if flags then for j = 1, #flags do reply[o + j] = flags[j] end end
-- Doubles packed little-endian, in pieces: Lua's unpack of more values than its C stack holds (8 000) would fail.
local size = #reply
if size <= 4000 then return spack('<' .. string.rep('d', size), unpack(reply)) end
local parts = {}
for i = 1, size, 4000 do
  local last = i + 3999
  if last > size then last = size end
  parts[#parts + 1] = spack('<' .. string.rep('d', last - i + 1), unpack(reply, i, last))
end
return table.concat(parts)
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

/** The bytes packCall writes for one call of these limits. */
export function packedSize(limits: readonly Limit[]): number {
  let size = 16;
  for (const limit of limits) size += limit.name.length + 1 + 24;
  return size;
}

/**
 * Writes one call's limits and cost at `offset` as the scripts read them: k and cost, then each limit's name
 * (zero-terminated; a name is ASCII, see core's limits.ts) and capacity, unitsPerMs, unitsPerToken, the numbers
 * little-endian doubles (exact for integers below 2^53). Returns the offset after them.
 */
export function packCall(buffer: Buffer, offset: number, limits: readonly Limit[], cost: number): number {
  let at = buffer.writeDoubleLE(limits.length, offset);
  at = buffer.writeDoubleLE(cost, at);
  for (const limit of limits) {
    at += buffer.write(limit.name, at, 'latin1');
    at = buffer.writeUInt8(0, at);
    at = buffer.writeDoubleLE(limit.capacity, at);
    at = buffer.writeDoubleLE(limit.unitsPerMs, at);
    at = buffer.writeDoubleLE(limit.unitsPerToken, at);
  }
  return at;
}
