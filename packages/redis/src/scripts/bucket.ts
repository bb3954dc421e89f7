import { DEBT_OFFSET, MAX_BUCKET_UNITS, MAX_INTERVAL_MS } from '@ratecard/core';
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
local sformat, smatch, ssub, sfind = string.format, string.match, string.sub, string.find
local spack, sunpack = struct.pack, struct.unpack  -- not 'unpack': that name is Lua's own
local MAX_UPDATED_AT = ${MAX_UPDATED_AT}
local DEBT_OFFSET = ${DEBT_OFFSET}

-- The entries of the value read last, one array per field (name, units text, updatedAt text, shape text), each made
-- with room for one entry, the usual count. READ_ENTRIES fills them.
local en, eu, et, es = {false}, {false}, {false}, {false}

-- The functions of the rare paths, over the entry arrays. They capture nothing of the script (constants written in,
-- arrays passed in), so making them costs a run nothing until it needs them.
local function rarePaths(en, eu, et, es)
  local floor, ceil, smatch, ssub, sformat = math.floor, math.ceil, string.match, string.sub, string.format
  local sgsub, sgmatch = string.gsub, string.gmatch

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
      or units > capacity * u or units < -capacity * u then return nil end
    return capacity, u, r
  end

  local rare = {}

  -- Entry x as the value holds it (its numbers may be numbers since an expired lease charged it: '%d' prints both).
  function rare.entryText(x)
    return sformat('%s %d %d %s', en[x], eu[x], et[x], es[x])
  end

  -- What entry x holds at now for a limit of capacity c, R r, U u, whose full bucket is full units and whose shape's
  -- text is shape: the units, the time they count from (max(now, updatedAt): an interval never refills twice), and
  -- whether the entry was written under another shape. An entry ratecard would not write is a full bucket.
  function rare.heldAt(x, now, c, r, u, full, shape)
    local su, st = eu[x] + 0, et[x] + 0
    if st > ${MAX_UPDATED_AT} then return full, now, false end
    if es[x] == shape then                        -- the request's shape, one pointer compared (Lua interns strings)
      if su > full or su < -full then return full, now, false end
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
  -- write): an entry is kept in the value until then, so that a limit a later call names again finds its bucket. With
  -- leases held (aside: tokens they set aside per name; lastExp: the latest expiry), not before the last expires, and
  -- counting what they set aside as taken (docs/stores.md: max(expiresAt) + msUntilFull(Q - P) is a safe bound).
  function rare.otherFullAt(x, aside, lastExp)
    local su, st = eu[x] + 0, et[x] + 0
    if st > ${MAX_UPDATED_AT} then return nil end
    local sc, sU, sR = storedShape(es[x], su)
    if not sc then return nil end
    if not aside then return st + ceil((sc * sU - su) / sR) end
    if lastExp > st then st = lastExp end
    return st + ceil((sc * sU - su + (aside[en[x]] or 0) * sU) / sR)
  end

  -- Charges entry 'name' (the first of that name; none, or one ratecard would not write, is a full bucket and stays
  -- one) 'tokens' at the instant e, under its own shape: refilled to e (core's unitsAt), then less tokens x U. Entries
  -- 1..m are the value's; their numbers become numbers here.
  local function charge(name, tokens, e, m)
    for x = 1, m do
      if en[x] == name then
        local su, st = eu[x] + 0, et[x] + 0
        if st > ${MAX_UPDATED_AT} then return end
        local sc, sU, sR = storedShape(es[x], su)
        if not sc then return end
        eu[x] = refilled(su, st, e, sR, sc * sU) - tokens * sU
        if e > st then et[x] = e end
        return
      end
    end
  end

  local function byExpiry(a, b) return a.exp < b.exp end

  -- The leases of the value's lease section (text: '@<id> <expiresAt> <name>=<amount>[ ...]' joined by ', ', or nil
  -- for none), with those whose instant has come (expiresAt <= now) expired in order of it, each charging the buckets
  -- it names what it set aside (entries 1..m). Returns the leases still held (a table per lease: id, exp, names,
  -- amounts), the amount they hold per limit name (tokens of a bucket, slots of a concurrency limit) and the latest
  -- expiry (0 for none); nil for a section ratecard would not write, which makes the whole value read as nothing.
  function rare.leasesAt(text, m, now)
    local leases, aside, lastExp = {}, {}, 0
    if not text then return leases, aside, lastExp end
    local at, len, due = 1, #text, nil
    while true do
      local id, e, holds, stop = smatch(text, '^@([^ ,]+) (%d+)( [^,]+)()', at)
      if not id or sgsub(holds, ' [^ =]+=%d+', '') ~= '' then return nil end
      e = e + 0
      if e > ${MAX_UPDATED_AT} then return nil end
      local lease = {id = id, exp = e, names = {}, amounts = {}}
      for name, amount in sgmatch(holds, ' ([^ =]+)=(%d+)') do
        lease.names[#lease.names + 1] = name
        lease.amounts[#lease.amounts + 1] = amount + 0
      end
      if e <= now then
        due = due or {}
        due[#due + 1] = lease
      else
        leases[#leases + 1] = lease
        for h = 1, #lease.names do aside[lease.names[h]] = (aside[lease.names[h]] or 0) + lease.amounts[h] end
        if e > lastExp then lastExp = e end
      end
      if stop > len then break end
      if ssub(text, stop, stop + 1) ~= ', ' then return nil end
      at = stop + 2
    end
    if due then
      -- Two leases of one instant charge the same refilled bucket: their order does not matter.
      table.sort(due, byExpiry)
      for d = 1, #due do
        local lease = due[d]
        for h = 1, #lease.names do charge(lease.names[h], lease.amounts[h], lease.exp, m) end
      end
    end
    return leases, aside, lastExp
  end

  -- The lease section of the value, or nil when no lease is held.
  function rare.leaseText(leases)
    local parts = {}
    for l = 1, #leases do
      local lease, holds = leases[l], ''
      for h = 1, #lease.names do holds = holds .. sformat(' %s=%d', lease.names[h], lease.amounts[h]) end
      parts[l] = sformat('@%s %d', lease.id, lease.exp) .. holds
    end
    if #parts == 0 then return nil end
    return table.concat(parts, ', ')
  end

  -- The index of the held lease 'id', or nil.
  function rare.find(leases, id)
    for l = 1, #leases do if leases[l].id == id then return l end end
    return nil
  end

  -- Settles lease l at now (docs/stores.md, "Leases"): each bucket it names that the call names too (limits 1..k, each
  -- with the actual tokens in its cost) is charged the actual, no deeper than its debt floor below what the other
  -- leases set aside; one the call does not name is charged what the lease set aside; slots are freed. The lease
  -- leaves the list and aside. Returns the new entry count (a bucket missing until now gets an entry).
  function rare.settle(leases, l, aside, limits, k, now, m)
    local lease = leases[l]
    for h = 1, #lease.names do
      local name, amount = lease.names[h], lease.amounts[h]
      aside[name] = aside[name] - amount
      local limit
      for j = 1, k do if limits[j].name == name then limit = limits[j] break end end
      if not limit then
        charge(name, amount, now, m)
      elseif limit.r > 0 then                      -- a concurrency limit's slot is freed by the lease leaving
        local x = 0
        for y = 1, m do if en[y] == name then x = y break end end
        local full, u = limit.full, limit.u
        local q, at = full, now
        if x > 0 then q, at = rare.heldAt(x, now, limit.c, limit.r, u, full, limit.shape) end
        q = q - limit.cost * u
        -- core's debtFloor: minus the capacity, and above -2^52.
        local floorUnits = -full
        if full >= DEBT_OFFSET then floorUnits = 1 - DEBT_OFFSET end
        local rest = aside[name] * u
        if q - rest < floorUnits then q = floorUnits + rest end
        if x == 0 then
          m = m + 1
          x = m
          en[x] = name
        end
        eu[x], et[x], es[x] = q, at, limit.shape
      end
    end
    table.remove(leases, l)
    return m
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
    local name, a, b, s, e = smatch(raw, '^([^ ]+) (%-?%d+) (%d+) ([^,]+)()', at)
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
