/**
 * The Lua half of core's bucket arithmetic (packages/core/src/bucket.ts), shared by the consume and peek scripts.
 * Each function mirrors its TypeScript namesake line for line. Lua numbers are doubles and every value here stays an
 * integer below 2^53 (core's MAX_LIMIT sees to that), so the results are the same numbers core computes.
 */
export const BUCKET_LUA = `
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

-- A bucket's value: units, updatedAt (ms) and the limit then in force, little-endian unsigned integers. 12 bytes
-- while the limit fits in 16 bits (units then fit in 32), 16 bytes above that; the length says which.
local function decode(raw)
  if #raw == 12 then return sunpack('<I4I6I2', raw) end
  if #raw == 16 then return sunpack('<I6I6I4', raw) end
  return nil                                      -- not written by ratecard: read as missing, i.e. full
end

local function encode(units, updatedAt, limit)
  if limit < 65536 then return spack('<I4I6I2', units, updatedAt, limit) end
  return spack('<I6I6I4', units, updatedAt, limit)
end

-- Whole ms: the caller's time (clock 'client'), or Redis TIME (seconds, microseconds) when the argument is ''.
local function clock(arg)
  local now = tonumber(arg)
  if now then return now end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end
`;
