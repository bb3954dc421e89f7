import { MAX_BUCKET_UNITS, MAX_INTERVAL_MS } from '@ratecard/core';
import { MAX_UPDATED_AT } from '../value.js';

/**
 * The Lua half of core's bucket arithmetic (packages/core/src/bucket.ts) and the bucket value, shared by the consume
 * and peek scripts. refilled and unitsAt mirror core's unitsAt line for line, a shape passed as its three numbers:
 * capacity, unitsPerToken (U) and unitsPerMs (R). Lua numbers are doubles and every value here stays an integer below
 * 2^53 (core's limit bounds and MAX_UPDATED_AT see to that), so the results are the numbers core computes. The consume
 * script runs decode, refilled and core's msUntilFull inline in its loop over keys, where each call costs a few hundred
 * instructions a key (docs/redis.md, "What a decision costs").
 */
export const BUCKET_LUA: string = `
local MAX_BUCKET_UNITS = ${MAX_BUCKET_UNITS}
local MAX_INTERVAL_MS = ${MAX_INTERVAL_MS}
local MAX_UPDATED_AT = ${MAX_UPDATED_AT}
local floor, ceil = math.floor, math.ceil
local sformat = string.format
local smatch, ssub = string.match, string.sub
local spack, sunpack = struct.pack, struct.unpack  -- not 'unpack': that name is Lua's own

-- refilled: what a bucket that held units at updatedAt holds at now under its own shape (R units per ms, full when it
-- holds full units): the first half of core's unitsAt, all of it when the shape has not changed.
local function refilled(units, updatedAt, now, r, full)
  local elapsed = now - updatedAt
  if elapsed <= 0 then return units end           -- a clock gone backwards refills nothing
  -- As in core: a product past 2^53 rounds to at least 2^53, above any missing amount, so the test stays exact.
  local refill = elapsed * r
  if refill >= full - units then return full end
  return units + refill
end

-- unitsAt: what a bucket that held units at updatedAt under the stored shape (sc, sU, sR) holds at now, seen by a
-- limit of capacity c and U units per token.
local function unitsAt(units, updatedAt, sc, sU, sR, now, c, u)
  local held = refilled(units, updatedAt, now, sR, sc * sU)
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

-- A shape as the value holds it: '<capacity>/<unitsPerMs>/<unitsPerToken>', three integers in decimal. '%d' prints
-- them exactly (each is below 2^53; tostring would print a double past 1e14 in exponent form). Lua interns strings, so
-- two equal shape texts are one string and comparing them compares two pointers.
local function shapeText(c, r, u)
  return sformat('%d/%d/%d', c, r, u)
end

-- The bucket value: '<units> <updatedAt> <shape>', what redis-cli GET shows; the two numbers written with '%d' too.
-- VALUE matches one, capturing the two numbers and the shape's text; the shape is read only when its text is not the
-- request's (see decode). Each run of digits may carry leading zeros, read as the number they pad; one past 2^53
-- converts to a double at least 2^53, past every range, and a product of two such bounds past 2^52 never rounds down
-- to it, so nothing out of range passes. value.ts's decodeBucketValue accepts exactly the values decode does.
local VALUE = '^(%d+) (%d+) (.+)$'

-- storedShape: the capacity, U and R of a shape text other than the request's, given the units the value holds; nil
-- unless it is three runs of digits joined by '/', each in the bounds core puts on a limit, and holds those units.
local function storedShape(s, units)
  local a, b, c = smatch(s, '^(%d+)/(%d+)/(%d+)$')
  if not a then return nil end
  -- Arithmetic converts a string once; Lua 5.1's tonumber converts it twice (lua_isnumber, then lua_tonumber).
  local capacity, r, u = a + 0, b + 0, c + 0
  if capacity < 1 or u < 1 or u > MAX_INTERVAL_MS or r < 1 or capacity * u > MAX_BUCKET_UNITS
    or units > capacity * u then return nil end
  return capacity, u, r
end

-- decode: a value read under a request whose shape text is shape and whose full bucket holds full units. Returns the
-- units and updatedAt, then the stored shape's capacity, U and R only when its text is not the request's (another
-- shape, or the request's written with leading zeros: either way it is parsed and checked); nil for a value that
-- ratecard would not write, which reads as a full bucket. The consume script runs the same steps inline.
local function decode(raw, shape, full)
  local a, b, s = smatch(raw, VALUE)
  if not a then return nil end
  local units, updatedAt = a + 0, b + 0
  if updatedAt > MAX_UPDATED_AT then return nil end
  if s == shape then                              -- the request's own shape, in the bounds: units up to its full
    if units > full then return nil end
    return units, updatedAt
  end
  local sc, sU, sR = storedShape(s, units)
  if not sc then return nil end
  return units, updatedAt, sc, sU, sR
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
