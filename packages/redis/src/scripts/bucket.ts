import { MAX_LIMIT } from '@ratecard/core';
import { MAX_UPDATED_AT } from '../value.js';

/**
 * The Lua half of core's bucket arithmetic (packages/core/src/bucket.ts) and the bucket value, shared by the consume
 * and peek scripts. unitsAt and msUntilFull mirror their TypeScript namesakes line for line. Lua numbers are doubles and every value
 * here stays an integer below 2^53 (core's MAX_LIMIT and MAX_UPDATED_AT see to that), so the results are the same
 * numbers core computes.
 */
export const BUCKET_LUA: string = `
local U = 60000                                   -- UNITS_PER_TOKEN: a bucket of limit C refills C units per ms
local MAX_LIMIT = ${MAX_LIMIT}
local MAX_UPDATED_AT = ${MAX_UPDATED_AT}
local floor, ceil = math.floor, math.ceil
local sformat = string.format
local smatch = string.match
local spack, sunpack = struct.pack, struct.unpack  -- not 'unpack': that name is Lua's own

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

-- msUntilFull: ms until a bucket holding units under limit is full again, core's ceilDiv: the quotient of two
-- integers below 2^53 is rounded once, and never across an integer, so its ceiling is exact.
local function msUntilFull(units, limit)
  return ceil((limit * U - units) / limit)
end

-- The bucket value: '<units> <updatedAt> <limit>', three integers in decimal, what redis-cli GET shows. '%d' prints
-- them exactly (each is below 2^53) and Lua's tonumber reads them back exactly.
local function encode(units, updatedAt, limit)
  return sformat('%d %d %d', units, updatedAt, limit)
end

-- units, updatedAt and limit of a value: three runs of decimal digits one space apart, each number in its range
-- (leading zeros read as the number they pad); nil for any other value, which reads as a full bucket. A run of
-- digits past 2^53 converts to a double at least 2^53, past every range, so nothing out of range passes. value.ts's
-- decodeBucketValue accepts exactly the same values.
local function decode(raw)
  local u, t, l = smatch(raw, '^(%d+) (%d+) (%d+)$')
  if not u then return nil end
  -- Arithmetic converts a string once; Lua 5.1's tonumber converts it twice (lua_isnumber, then lua_tonumber).
  local units, updatedAt, limit = u + 0, t + 0, l + 0
  if limit < 1 or limit > MAX_LIMIT or units > limit * U or updatedAt > MAX_UPDATED_AT then return nil end
  return units, updatedAt, limit
end

-- Redis TIME (seconds, microseconds) in whole ms. Arithmetic converts each string once, as in decode.
local function redisTime()
  local t = redis.call('TIME')
  return t[1] * 1000 + floor(t[2] / 1000)
end
`;
