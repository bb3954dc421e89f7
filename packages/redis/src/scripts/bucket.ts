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
local sformat, smatch, ssub, sfind, sgsub = string.format, string.match, string.sub, string.find, string.gsub
local spack, sunpack = struct.pack, struct.unpack  -- not 'unpack': that name is Lua's own
local MAX_UPDATED_AT = ${MAX_UPDATED_AT}
local DEBT_OFFSET = ${DEBT_OFFSET}

-- refilled: what a bucket that held units at updatedAt holds at now under its own shape (R units per ms, full when it
-- holds full units): the first half of core's unitsAt, all of it when the shape has not changed. The one copy of the
-- refill: every path calls it.
local function refilled(units, updatedAt, now, r, full)
  local elapsed = now - updatedAt
  if elapsed <= 0 then return units end           -- a clock gone backwards refills nothing
  -- As in core: a product past 2^53 rounds to at least 2^53, above any missing amount, so the test stays exact.
  local refill = elapsed * r
  if refill >= full - units then return full end
  return units + refill
end

-- refusal: core's outcome of a refusal by a bucket holding held units for a decision (Q - P; negative in debt).
local function refusal(held)
  if held >= 0 then return -1 - held end
  return held - 1 - ${DEBT_OFFSET}
end

-- take: core's outcome of asking need units of a bucket that holds free for a decision: admitted, the units left.
-- The one copy of the take: every path calls it.
local function take(free, need)
  if free >= need then return free - need end
  return refusal(free)
end
`;

/**
 * The entry arrays and the functions of the rare paths: made only by a run that takes the general path (consume.ts),
 * never by a lone call of one limit decided straight through.
 */
export const RARE_LUA: string = `
-- The entries of the value read last, one array per field (name, units text, updatedAt text, shape text), each made
-- with room for one entry, the usual count. READ_ENTRIES fills them.
local en, eu, et, es = {false}, {false}, {false}, {false}

-- The functions of the rare paths, over the entry arrays. They capture nothing of the script (constants written in,
-- arrays passed in), so making them costs a run nothing until it needs them.
local function rarePaths(en, eu, et, es, refilled)
  local floor, ceil, smatch, ssub, sfind, sformat = math.floor, math.ceil, string.match, string.sub, string.find,
    string.format
  local sgmatch = string.gmatch

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
    -- R is at least 1, but a quota's: 0, with U 1.
    if capacity < 1 or u < 1 or u > ${MAX_INTERVAL_MS} or r < 1 and (r ~= 0 or u ~= 1) or capacity * u > ${MAX_BUCKET_UNITS}
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
      if st > now then return su, st, false end   -- a clock gone backwards: counted from the stored time
      return refilled(su, st, now, r, full), now, false
    end
    local sc, sU, sR = storedShape(es[x], su)     -- another shape (or the request's padded with zeros)
    if not sc then return full, now, false end
    local at = now
    if st > now then at = st end
    return unitsAt(su, st, sc, sU, sR, now, c, u), at, true
  end

  -- What entry x holds for a quota whose call falls in the period ending at pe (core's unitsAt with periodEnd): what it
  -- stored for the period ending at its updatedAt, a full bucket if that period ended before pe (the stored shape
  -- aside); then the period it is written for, the later of the two (writtenAt), and whether it was written under
  -- another shape. An entry ratecard would not write is a full bucket.
  function rare.quotaAt(x, pe, full, shape)
    local su, st = eu[x] + 0, et[x] + 0
    if st > ${MAX_UPDATED_AT} then return full, pe, false end
    local moved = es[x] ~= shape
    if moved and not storedShape(es[x], su) or not moved and (su > full or su < -full) then return full, pe, false end
    local at = pe
    if st > pe then at = st end
    if st < pe or su > full then return full, at, moved end
    return su, at, moved
  end

  -- When entry x, which no limit of the call names, is full again by its own shape (nil for one ratecard would not
  -- write): an entry is kept in the value until then, so that a limit a later call names again finds its bucket. With
  -- leases held (p: the tokens they set aside on it; last: the latest expiry), not before the last expires, and
  -- counting what they set aside as taken (docs/stores.md: max(expiresAt) + msUntilFull(Q - P) is a safe bound).
  function rare.otherFullAt(x, p, last)
    local su, st = eu[x] + 0, et[x] + 0
    if st > ${MAX_UPDATED_AT} then return nil end
    local sc, sU, sR = storedShape(es[x], su)
    if not sc then return nil end
    if sR == 0 then                               -- a quota: full again when its period ends
      if last and last > st then return last end
      return st
    end
    if not last then return st + ceil((sc * sU - su) / sR) end
    if last > st then st = last end
    return st + ceil((sc * sU - su + p * sU) / sR)
  end

  -- The amount held under key (' <name>=') in text (the totals or a lease's holds), or 0.
  local function heldOf(text, key)
    local s, e = sfind(text, key, 1, true)
    if not s then return 0 end
    return smatch(text, '^%d+', e + 1) + 0
  end
  rare.heldOf = heldOf

  -- The totals text with delta added to name's amount: a name whose amount comes to 0 leaves it; nil when none is left.
  local function addHeld(totals, name, delta)
    if not totals then return ' ' .. name .. '=' .. sformat('%d', delta) end
    local s, e = sfind(totals, ' ' .. name .. '=', 1, true)
    if not s then return totals .. ' ' .. name .. '=' .. sformat('%d', delta) end
    local digits = smatch(totals, '^%d+', e + 1)
    local rest, p = ssub(totals, e + 1 + #digits), digits + delta
    if p > 0 then return ssub(totals, 1, e) .. sformat('%d', p) .. rest end
    totals = ssub(totals, 1, s - 1) .. rest
    if totals == '' then return nil end
    return totals
  end
  rare.addHeld = addHeld

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
        if e > st and sR ~= 0 then et[x] = e end   -- a quota's updatedAt is its period's end
        return
      end
    end
  end
  rare.charge = charge

  -- Expires the leases whose instant has come (expiresAt <= now) from the front of the lease text (held in order of
  -- expiry, so the due ones lead), each charging the buckets it names what it set aside (entries 1..m) at its instant
  -- and leaving the totals. Returns the leases left (nil for none), the first one's expiry, and the totals; false for a
  -- lease ratecard would not write, which makes the whole value read as nothing.
  function rare.expire(leases, totals, now, m)
    local at, len = 1, #leases
    while true do
      local e, holds, stop = smatch(leases, '^@[^ ,]+ (%d+)( [^,]+)()', at)
      if not e then return false end
      e = e + 0
      if e > now then return ssub(leases, at), e, totals end
      for name, amount in sgmatch(holds, ' ([^ =]+)=(%d+)') do
        charge(name, amount + 0, e, m)
        totals = addHeld(totals, name, -amount)
      end
      if stop > len then return nil, nil, nil end
      if ssub(leases, stop, stop + 1) ~= ', ' then return false end
      at = stop + 2
    end
  end

  -- The lease text with lease (expiring at e) put in its place: after every lease that expires no later.
  function rare.insert(leases, lease, e)
    local at = 1
    while true do
      local x, stop = smatch(leases, '^@[^ ,]+ (%d+)[^,]*()', at)
      if not x or x + 0 > e then
        if at == 1 then return lease .. ', ' .. leases end
        return ssub(leases, 1, at - 1) .. lease .. ', ' .. ssub(leases, at)
      end
      if stop > #leases then return leases .. ', ' .. lease end
      at = stop + 2
    end
  end

  -- The expiry of the last lease of the text (the latest, as they are held in order).
  function rare.lastExpiry(leases)
    return smatch(leases, '@[^ ,]+ (%d+)[^@]*$') + 0
  end

  -- The lease text without the lease from pos to stop (the position after it); nil when it was the only one.
  local function cut(leases, pos, stop)
    if stop > #leases then
      if pos == 1 then return nil end
      return ssub(leases, 1, pos - 3)
    end
    if pos == 1 then return ssub(leases, stop + 2) end
    return ssub(leases, 1, pos - 3) .. ssub(leases, stop)
  end

  -- The first and last expiry of a lease text, or nil for none.
  local function ends(leases)
    if not leases then return nil, nil end
    return smatch(leases, '^@[^ ,]+ (%d+)') + 0, rare.lastExpiry(leases)
  end

  -- Lets go of the lease at pos of the lease text for a settle at now of limits 1..k: what it holds leaves the totals,
  -- and a bucket it holds that the call does not name is charged what it set aside (entries 1..m). Returns the leases,
  -- totals, first and last expiry left, and marks the limits of the call the lease holds (limit.settled); false for a
  -- lease ratecard would not write.
  function rare.release(leases, pos, id, totals, now, m, limits, k)
    -- The caller found id ('@<id> ') at pos, so the pattern starts at the expiry: each character a pattern walks costs
    -- Lua tens of instructions.
    local holds, stop = smatch(leases, '^%d+( [^,]+)()', pos + #id)
    if not holds then return false end
    -- Whether the call names every limit the lease holds (as a settle by the plan that reserved it does): then no hold
    -- need be read one by one, which costs thousands of instructions. A limit's hold (' <name>=<amount>') runs to the
    -- next space, and the call's names are distinct, so the holds they find cover the text only if they are all of it.
    local covered, size = 0, #holds
    for j = 1, k do
      local limit = limits[j]
      local s, e = sfind(holds, limit.key, 1, true)
      limit.settled = s ~= nil
      if s then covered = covered + (sfind(holds, ' ', e, true) or size + 1) - s end
    end
    local named = covered == size
    -- The only lease held: the lease section goes whole, totals and all (they are its holds), with no string surgery.
    local only = pos == 1 and stop > #leases
    if not (named and only) then
      for name, amount in sgmatch(holds, ' ([^ =]+)=(%d+)') do
        if not only then totals = addHeld(totals, name, -amount) end
        if not named then
          local found = false
          for j = 1, k do if limits[j].name == name then found = true break end end
          if not found then charge(name, amount + 0, now, m) end
        end
      end
    end
    if only then return nil, nil, nil, nil end
    leases = cut(leases, pos, stop)
    local first, last = ends(leases)
    return leases, totals, first, last
  end

  -- The lease text with the lease at pos held until e instead, in its place for that instant; then its first and last
  -- expiry. nil for a lease ratecard would not write.
  function rare.extend(leases, pos, e)
    local id, holds, stop = smatch(leases, '^(@[^ ,]+) %d+( [^,]+)()', pos)
    if not id then return nil end
    local lease = id .. ' ' .. sformat('%d', e) .. holds
    leases = cut(leases, pos, stop)
    if leases then leases = rare.insert(leases, lease, e) else leases = lease end
    return leases, ends(leases)
  end

  return rare
end
local rare                                        -- rarePaths(...), once a run needs it
`;

/**
 * Lua statements reading the value `raw` (a string, or false/nil for a missing key) into the entry arrays, leaving
 * their count in the local `m`: 0 for a missing key or a value ratecard would not write, which reads as no bucket at
 * all (every bucket full). Each run of digits may carry leading zeros, read as the number they pad; one past 2^53
 * converts to a double at least 2^53, past every range. A name is read as any run of characters but a space or '@', a
 * shape as any but a comma, and both are checked where they are used (a name compared with the call's, a shape with
 * the request's or by storedShape): value.ts's decodeEndpointValue reads exactly the values this does.
 *
 * Held leases follow the buckets, from the first entry that starts with '@' (no name holds one, so a value without
 * leases costs nothing more to read): their header '@ <first> <last> <name>=<amount>...' (the earliest and latest
 * expiry, and per limit name what all of them hold) read into the locals `first`, `last` and `totals` (' <name>=<amount>
 * ...'), then the leases themselves, in order of expiry, left as text in `leases` until a call expires, settles or
 * extends one. A header ratecard would not write makes the whole value read as nothing.
 */
export const READ_ENTRIES_LUA: string = `
local m, first, last, totals, leases = 0, nil, nil, nil, nil
if raw then
  local at, len = 1, #raw
  while true do
    local name, a, b, s, e = smatch(raw, '^([^ @]+) (%-?%d+) (%d+) ([^,]+)()', at)
    if not name then
      -- The header, if there is one (a pattern that starts with '@' fails at once on anything else).
      local f, l, t, rest = smatch(raw, '^@ (%d+) (%d+)( [^,]+), (@.+)$', at)
      if f then first, last, totals, leases = f + 0, l + 0, t, rest else m = 0 end
      break
    end
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
