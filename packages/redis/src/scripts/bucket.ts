import { MAX_BUCKET_UNITS, MAX_INTERVAL_MS } from '@ratecard/core';
import { MAX_UPDATED_AT } from '../value.js';

/**
 * The Lua half of core's bucket arithmetic (packages/core/src/bucket.ts) and the bucket value, shared by the consume
 * and peek scripts. unitsAt and msUntilFull mirror their TypeScript namesakes line for line, a shape passed as its
 * three numbers: capacity, unitsPerToken (U) and unitsPerMs (R). Lua numbers are doubles and every value here stays an
 * integer below 2^53 (core's limit bounds and MAX_UPDATED_AT see to that), so the results are the numbers core computes.
 */
export const BUCKET_LUA: string = `
local MAX_BUCKET_UNITS = ${MAX_BUCKET_UNITS}
local MAX_INTERVAL_MS = ${MAX_INTERVAL_MS}
local MAX_UPDATED_AT = ${MAX_UPDATED_AT}
local floor, ceil = math.floor, math.ceil
local sformat = string.format
local smatch = string.match
local spack, sunpack = struct.pack, struct.unpack  -- not 'unpack': that name is Lua's own

-- unitsAt: what a bucket that held units at updatedAt under the stored shape (sc, sU, sR) holds at now, seen by a
-- limit of capacity c and U units per token.
local function unitsAt(units, updatedAt, sc, sU, sR, now, c, u)
  local storedFull = sc * sU
  local elapsed = now - updatedAt
  local held = units
  if elapsed > 0 then                             -- a clock gone backwards refills nothing
    -- As in core: a product past 2^53 rounds to at least 2^53, above any missing amount, so the test stays exact.
    local refill = elapsed * sR
    if refill >= storedFull - units then
      held = storedFull
    else
      held = units + refill
    end
  end
  local full = c * u
  if u ~= sU then
    -- Whole tokens convert exactly; the part token rounds down. rest * u < sU * u <= (a day in ms)^2 < 2^53.
    local tokens = floor(held / sU)
    if tokens >= c then return full end
    held = tokens * u + floor(((held - tokens * sU) * u) / sU)
  end
  if held < full then return held end             -- a smaller capacity caps what the bucket holds
  return full
end

-- msUntilFull: ms until a bucket holding units under a limit (c, u, r) is full again, core's ceilDiv: the quotient of
-- two integers below 2^53 is rounded once, and never across an integer, so its ceiling is exact.
local function msUntilFull(units, c, u, r)
  return ceil((c * u - units) / r)
end

-- The bucket value: '<units> <updatedAt> <capacity> <unitsPerMs> <unitsPerToken>', five integers in decimal, what
-- redis-cli GET shows. '%d' prints them exactly (each is below 2^53; tostring would print a double past 1e14 in
-- exponent form) and Lua reads them back exactly.
local function encode(units, updatedAt, c, r, u)
  return sformat('%d %d %d %d %d', units, updatedAt, c, r, u)
end

-- The five numbers of a value, returned as units, updatedAt, capacity, U, R: five runs of decimal digits one space
-- apart, each in its range (leading zeros read as the number they pad); nil for any other value, which reads as a full
-- bucket. A run of digits past 2^53 converts to a double at least 2^53, past every range, and a product of two such
-- bounds past 2^52 never rounds down to it, so nothing out of range passes. value.ts's decodeBucketValue accepts
-- exactly the same values.
local function decode(raw)
  local a, b, c, d, e = smatch(raw, '^(%d+) (%d+) (%d+) (%d+) (%d+)$')
  if not a then return nil end
  -- Arithmetic converts a string once; Lua 5.1's tonumber converts it twice (lua_isnumber, then lua_tonumber).
  local units, updatedAt, capacity, r, u = a + 0, b + 0, c + 0, d + 0, e + 0
  if capacity < 1 or u < 1 or u > MAX_INTERVAL_MS or r < 1 or capacity * u > MAX_BUCKET_UNITS
    or units > capacity * u or updatedAt > MAX_UPDATED_AT then return nil end
  return units, updatedAt, capacity, u, r
end

-- Redis TIME (seconds, microseconds) in whole ms. Arithmetic converts each string once, as in decode.
local function redisTime()
  local t = redis.call('TIME')
  return t[1] * 1000 + floor(t[2] / 1000)
end

-- Doubles packed little-endian, in pieces: Lua's unpack of more values than its C stack holds (8 000) would fail.
local function packDoubles(list)
  local n = #list
  if n <= 4000 then return spack('<' .. string.rep('d', n), unpack(list)) end
  local parts = {}
  for i = 1, n, 4000 do
    local j = i + 3999
    if j > n then j = n end
    parts[#parts + 1] = spack('<' .. string.rep('d', j - i + 1), unpack(list, i, j))
  end
  return table.concat(parts)
end
`;
