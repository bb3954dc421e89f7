import { COMPACT_LIMIT, COMPACT_MISSING_SPAN, COMPACT_TIME_WRAP } from '../value.js';

/**
 * The Lua half of core's bucket arithmetic (packages/core/src/bucket.ts), shared by the consume and peek scripts.
 * Each function mirrors its TypeScript namesake line for line. Lua numbers are doubles and every value here stays an
 * integer below 2^53 (core's MAX_LIMIT sees to that), so the results are the same numbers core computes.
 */
export const BUCKET_LUA: string = `
local U = 60000                                   -- UNITS_PER_TOKEN: a bucket of limit C refills C units per ms
local floor = math.floor
local sformat = string.format
local spack, sunpack = struct.pack, struct.unpack  -- not 'unpack': that name is Lua's own

-- ceilDiv(a, b) is ceil(a / b), as in core: the quotient of two integers below 2^53 is rounded once, and never
-- across an integer.
local ceil = math.ceil

-- unitsAt: what a bucket that held units at updatedAt under storedLimit holds at now, seen with limit.
local function unitsAt(units, updatedAt, storedLimit, now, limit)
  local storedFull = storedLimit * U
  local elapsed = now - updatedAt
  local held = units
  if elapsed > 0 then                             -- a clock gone backwards refills nothing
    -- As in core: a product past 2^53 rounds to at least 2^53, above any missing amount, so the test stays exact.
    local refill = elapsed * storedLimit
    if refill >= storedFull - units then
      held = storedFull
    else
      held = units + refill
    end
  end
  local full = limit * U
  if held > full then return full end             -- a lower limit caps what the bucket holds
  return held
end

-- The compact value, for limits below COMPACT_LIMIT (its constants come from value.ts, the TypeScript reader of the
-- same layout): one integer below 2^53 (so Lua reads it exactly with one
-- tonumber), written in decimal: ((limit * MISSING_SPAN) + missing units) * TIME_WRAP + updatedAt modulo TIME_WRAP.
-- Redis keeps such a value as an integer inside the key's object header, the smallest value it stores, and INCRBY
-- can move it without touching the TTL. Its 14 to 16 digits never match the packed layouts' 12 and 17 bytes.
local COMPACT_LIMIT = ${COMPACT_LIMIT}
local MISSING_SPAN = ${COMPACT_MISSING_SPAN}
local TIME_WRAP = ${COMPACT_TIME_WRAP}
-- A key lives at most STEP + 60 s past its updatedAt, so updatedAt is the instant congruent to the stored time
-- within TIME_WRAP / 2 of now: exact unless clocks disagree (or step) by more than about 15 minutes.
local HALF_WRAP = TIME_WRAP / 2
-- A compact key expires on a multiple of STEP ms at or after the instant its bucket is full again. Charges that
-- leave that multiple where it was need no new TTL, so they write with INCRBY; a key may outlive its bucket by STEP.
local STEP = 10000

-- Whether decoded compact fields are ones ratecard writes: a whole number, a limit in the compact range, a missing
-- amount within it. Anything else under the prefix was not written by ratecard and reads as a full bucket.
local function compactFields(limit, missing, wrapped)
  return wrapped % 1 == 0 and limit >= 1 and limit < COMPACT_LIMIT and missing <= limit * U
end

local function compactValue(limit, missing, updatedAt)
  return sformat('%d', (limit * MISSING_SPAN + missing) * TIME_WRAP + updatedAt % TIME_WRAP)
end

-- The instant a compact key expires: full at untilFull, rounded up to a multiple of STEP.
local function compactExpiry(untilFull)
  return ceil(untilFull / STEP) * STEP
end

-- A bucket's value: units, updatedAt (ms) and the limit then in force, plus whether it was the compact form. From
-- the compact range up, little-endian unsigned integers: 12 bytes while the limit fits in 16 bits (units then fit
-- in 32), 17 bytes above that. The length says which form a value is.
local function decode(raw, now)
  local n = #raw
  if n >= 14 and n <= 16 then
    local v = tonumber(raw)
    if not v then return nil end
    local wrapped = v % TIME_WRAP                 -- powers of two: every step below is exact
    local rest = (v - wrapped) / TIME_WRAP
    local missing = rest % MISSING_SPAN
    local limit = (rest - missing) / MISSING_SPAN
    if not compactFields(limit, missing, wrapped) then return nil end
    local ahead = (wrapped - now) % TIME_WRAP     -- Lua's % is never negative here
    if ahead >= HALF_WRAP then ahead = ahead - TIME_WRAP end
    return limit * U - missing, now + ahead, limit, true
  end
  local units, updatedAt, limit
  if n == 12 then
    units, updatedAt, limit = sunpack('<I4I6I2', raw)
  elseif n == 17 then
    units, updatedAt, limit = sunpack('<I6I6I5', raw)
  end
  return units, updatedAt, limit, false           -- any other value was not written by ratecard: missing, i.e. full
end

local function encode(units, updatedAt, limit)
  if limit < 65536 then return spack('<I4I6I2', units, updatedAt, limit) end
  return spack('<I6I6I5', units, updatedAt, limit)
end

-- Whole ms: the caller's time (clock 'client'), or Redis TIME (seconds, microseconds) when the argument is ''.
local function clock(arg)
  local now = tonumber(arg)
  if now then return now end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end
`;
