import { MAX_BUCKET_UNITS, MAX_INTERVAL_MS } from '@ratecard/core';
import { MAX_UPDATED_AT } from '../value.js';

/**
 * The Lua half of core's bucket arithmetic (packages/core/src/bucket.ts) and the endpoint value, shared by the consume
 * and peek scripts. refilled and unitsAt mirror core's unitsAt line for line, a shape passed as its three numbers:
 * capacity, unitsPerToken (U) and unitsPerMs (R). Lua numbers are doubles and every value here stays an integer below
 * 2^53 (core's limit bounds and MAX_UPDATED_AT see to that), so the results are the numbers core computes.
 *
 * One key holds every bucket of an (organization, endpoint): its value is the buckets' entries joined by ', ', each
 * '<name> <units> <updatedAt> <capacity>/<unitsPerMs>/<unitsPerToken>' (docs/redis.md, "What Redis holds"). A call of
 * any number of limits therefore reads one key and writes one, and the reads and writes are most of what a decision
 * costs Redis.
 *
 * What a script run makes, Redis pays for in every run: each function is an allocation, each local it captures another,
 * each table one or two, and the garbage collector sweeps them all again. A decision made alone (one call in flight)
 * pays that whole, so the functions here are only those of the rare paths (a bucket under another shape, entries no
 * limit of the call names), made by rarePaths when a run first takes one; the path of nearly every call is written
 * inline in the scripts (`script-cost --lone`, docs/redis.md).
 */
export const BUCKET_LUA: string = `
local floor, ceil = math.floor, math.ceil
local sformat, smatch, ssub = string.format, string.match, string.sub
local spack, sunpack = struct.pack, struct.unpack  -- not 'unpack': that name is Lua's own
local MAX_UPDATED_AT = ${MAX_UPDATED_AT}

-- The entries of the value read last, one array per field (name, units text, updatedAt text, shape text), each made
-- with room for one entry, the usual count. READ_ENTRIES fills them.
local en, eu, et, es = {false}, {false}, {false}, {false}

-- The functions of the rare paths, over the entry arrays. They capture nothing of the script (constants written in,
-- arrays passed in), so making them costs a run nothing until it needs them.
local function rarePaths(en, eu, et, es)
  local floor, ceil, smatch = math.floor, math.ceil, string.match

  -- refilled: what a bucket that held units at updatedAt holds at now under its own shape (R units per ms, full when it
  -- holds full units): the first half of core's unitsAt, all of it when the shape has not changed.
  local function refilled(units, updatedAt, now, r, full)
    local elapsed = now - updatedAt
    if elapsed <= 0 then return units end         -- a clock gone backwards refills nothing
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
    if held < full then return held end           -- a smaller capacity caps what the bucket holds
    return full
  end

  -- storedShape: the capacity, U and R of a shape text other than the request's, given the units the entry holds; nil
  -- unless it is three runs of digits joined by '/', each in the bounds core puts on a limit, and holds those units.
  local function storedShape(s, units)
    local a, b, c = smatch(s, '^(%d+)/(%d+)/(%d+)$')
    if not a then return nil end
    -- Arithmetic converts a string once; Lua 5.1's tonumber converts it twice (lua_isnumber, then lua_tonumber).
    local capacity, r, u = a + 0, b + 0, c + 0
    if capacity < 1 or u < 1 or u > ${MAX_INTERVAL_MS} or r < 1 or capacity * u > ${MAX_BUCKET_UNITS}
      or units > capacity * u then return nil end
    return capacity, u, r
  end

  local rare = {}

  -- Entry x as the value held it.
  function rare.entryText(x)
    return en[x] .. ' ' .. eu[x] .. ' ' .. et[x] .. ' ' .. es[x]
  end

  -- What entry x holds at now for a limit of capacity c, R r, U u, whose full bucket is full units and whose shape's
  -- text is shape: the units, the time they count from (max(now, updatedAt): an interval never refills twice), and
  -- whether the entry was written under another shape. An entry ratecard would not write is a full bucket.
  function rare.heldAt(x, now, c, r, u, full, shape)
    local su, st = eu[x] + 0, et[x] + 0
    if st > ${MAX_UPDATED_AT} then return full, now, false end
    if es[x] == shape then                        -- the request's shape, one pointer compared (Lua interns strings)
      if su > full then return full, now, false end
      if st > now then return su, st, false end   -- a clock gone backwards refills nothing
      return refilled(su, st, now, r, full), now, false
    end
    local sc, sU, sR = storedShape(es[x], su)     -- another shape (or the request's padded with zeros)
    if not sc then return full, now, false end
    local at = now
    if st > now then at = st end
    return unitsAt(su, st, sc, sU, sR, now, c, u), at, true
  end

  -- When entry x, which no limit of the call names, is full again by its own shape (nil for one ratecard would not
  -- write): an entry is kept in the value until then, so that a limit a later call names again finds its bucket.
  function rare.otherFullAt(x)
    local su, st = eu[x] + 0, et[x] + 0
    if st > ${MAX_UPDATED_AT} then return nil end
    local sc, sU, sR = storedShape(es[x], su)
    if not sc then return nil end
    return st + ceil((sc * sU - su) / sR)
  end

  return rare
end
local rare                                        -- rarePaths(...), once a run needs it
`;

/**
 * Lua statements reading the value `raw` (a string, or false/nil for a missing key) into the entry arrays, leaving
 * their count in the local `m`: 0 for a missing key or a value ratecard would not write, which reads as no bucket at
 * all (every bucket full). Each run of digits may carry leading zeros, read as the number they pad; one past 2^53
 * converts to a double at least 2^53, past every range. A name is read as any run of characters but a space, a shape
 * as any but a comma, and both are checked where they are used (a name compared with the call's, a shape with the
 * request's or by storedShape): value.ts's decodeEndpointValue reads exactly the values this does.
 */
export const READ_ENTRIES_LUA: string = `
local m = 0
if raw then
  local at, len = 1, #raw
  while true do
    local name, a, b, s, e = smatch(raw, '^([^ ]+) (%d+) (%d+) ([^,]+)()', at)
    if not name then m = 0 break end
    m = m + 1
    en[m], eu[m], et[m], es[m] = name, a, b, s
    if e > len then break end
    if ssub(raw, e, e + 1) ~= ', ' then m = 0 break end
    at = e + 2
  end
end
`;

/** Lua statements setting the local `redisNow` to Redis TIME (seconds, microseconds) in whole ms. */
export const REDIS_NOW_LUA: string = `
local time = redis.call('TIME')
local redisNow = time[1] * 1000 + floor(time[2] / 1000)  -- arithmetic converts each string once
`;
