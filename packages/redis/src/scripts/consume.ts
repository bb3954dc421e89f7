import { costAt, type Limit } from '@ratecard/core';
import { MAX_KEPT_ENTRIES } from '../value.js';
import { BUCKET_LUA, RARE_LUA, READ_ENTRIES_LUA, REDIS_NOW_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/** The Lua expressions straightLua decides a call with. */
interface StraightCall {
  /** The call's key, and its value as read (false or nil for none). */
  key: string;
  raw: string;
  /** The limit's name, its shape's text, its full bucket and cost in units, and its units per ms. */
  name: string;
  shape: string;
  full: string;
  need: string;
  r: string;
  /**
   * For a call of a batch (which may reserve or settle): the limit's table, whose entry pattern matches its bucket,
   * and whose key (' <name>='), hold (made here: ' <name>=<cost>'), cost and u the lease text takes; the locals op,
   * id ('@<id> ') and ms are the call's.
   */
  limit?: string;
}

/** Lua statements writing `value` to `key` with its expiry `fullAt` in one SET (see the general path's write). */
function setLua(key: string): string {
  return `if redisClock then redis.call('SET', ${key}, value, 'PXAT', sformat('%d', fullAt))
          else redis.call('SET', ${key}, value, 'PX', sformat('%d', fullAt - now + 1)) end`;
}

/**
 * A Lua expression: the entry of the limit table `limit` holding `units` at the local `at`, then `then` (text joined in
 * the same concatenation). Only the numbers are formatted (string.format runs sprintf for a %s as well); at now, between
 * the limit's head and tail, made once per run.
 */
function entryLua(limit: string, units: string, then = ''): string {
  return `(at == now and ${limit}.head .. sformat('%d', ${units}) .. ${limit}.tail${then}
            or ${limit}.head .. sformat('%d %d ', ${units}, at) .. ${limit}.shape${then})`;
}

/** Lua statements adding `entry`, full again at `f`, to the value written after what it holds (`value`, `fullAt`). */
function joinLua(entry: string, f: string): string {
  return `if value then
          value = value .. ', ' .. ${entry}
          if ${f} > fullAt then fullAt = ${f} end
        else
          value, fullAt = ${entry}, ${f}
        end`;
}

/**
 * Lua statements deciding a call of one token bucket straight through when its key holds nothing but that bucket,
 * under the call's shape, or nothing at all; for a settle, that bucket and the one lease the call settles, holding it
 * alone. Refilled to now by the shared refilled, then:
 *
 * - a consume is charged by take, and written when admitted;
 * - a reserve is admitted by take, and the bucket is written as read beside the key's one lease, which sets the cost
 *   aside ('@ <e> <e> <name>=<cost>, @<id> <e> <name>=<cost>');
 * - a settle charges the actual cost (no deeper than the debt floor) and writes the bucket alone, its lease gone.
 *
 * Each write is one SET with the key's expiry, as the general path makes it. The statements set the locals `outcome`
 * (nil when the key holds anything else, for the general path to decide; a settle's is 1) and, refused, `steady` (see
 * the reply's flags). The lone call and each call of a batch take them, written out where each is used, so that
 * neither pays for a function call; the lone call is a consume, and its text has no lease branches.
 */
function straightLua(call: StraightCall): string {
  const { key, raw, name, shape, full, need, r, limit } = call;
  // The bucket's entry holding `units`, only the numbers formatted; in a batch, as the general path writes it. Text
  // after the entry (`then`) is joined in the same concatenation: one string made, not two.
  const entry = (units: string, then = '') =>
    limit === undefined
      ? `${name} .. sformat(' %d %d ', ${units}, at) .. ${shape}${then}`
      : entryLua(limit, units, then);
  // The bucket's numbers, if the value starts with its entry: matched with the general entry pattern, then the name and
  // shape compared; in a batch of several calls, with the limit's entry pattern instead, its name and shape as literals
  // (made once per run: a pattern costs Lua tens of instructions per character it walks, a class such as [^,] more than
  // a literal, and making one costs about what it saves in one match).
  const general = (numbers: string) => `${numbers} = smatch(${raw}, '^([^ @]+) (%-?%d+) (%d+) ([^,]+)()')
        alone = name == ${name} and s == ${shape}`;
  const read =
    limit === undefined
      ? general('local name, a, b, s, e')
      : `local a, b, e
        if ${limit}.entry then
          a, b, e = smatch(${raw}, ${limit}.entry)
          alone = a ~= nil
        else
          local name, s
          ${general('name, a, b, s, e')}
        end`;
  const set = setLua(key);
  const settleRead =
    limit === undefined
      ? `alone = alone and e > #${raw}`
      : `if alone and op == SETTLE then
          -- The key's only lease is the one settled, holding this bucket alone, its header repeating its expiry and
          -- holds (matched as back-references: compared, not scanned again); its expiry still to come.
          local f, t, lease = smatch(${raw}, '^, @ (%d+) %1( [^ ,]+), (@[^ ,]+ )%1%2$', e)
          alone = f and lease == id and sfind(t, ${limit}.key, 1, true) == 1 and f + 0 > now
        else
          alone = alone and e > #${raw}
        end`;
  const written =
    limit === undefined
      ? `else
          local value = ${entry('outcome')}
          local fullAt = at + ceil((${full} - outcome) / ${r})
          ${set}`
      : `elseif op == CONSUME then
          value = ${entry('outcome')}
          fullAt = at + ceil((${full} - outcome) / ${r})
        else
          -- Reserved: the bucket as read (nothing charged), then the key's one lease, its cost set aside until e.
          local e = now + ms
          local text = sformat('%d', e)
          if not ${limit}.hold then ${limit}.hold = ${limit}.key .. sformat('%d', ${limit}.cost) end
          local hold = ${limit}.hold
          value = ${entry('held', " .. ', @ ' .. text .. ' ' .. text .. hold .. ', ' .. id .. text .. hold")}
          -- Full again once the lease has expired, counting what it sets aside (docs/stores.md).
          local from = at
          if e > from then from = e end
          fullAt = from + ceil((${full} - held + ${limit}.cost * ${limit}.u) / ${r})`;
  const noLease = `elseif op == SETTLE then
        alone = false                             -- no lease held: the general path answers 0`;
  const settled =
    limit === undefined
      ? ''
      : `if op == SETTLE then
        -- Settled: the actual cost charged, no deeper than core's debtFloor; the lease, the key's only one, goes.
        local floorUnits = -${full}
        if ${full} >= DEBT_OFFSET then floorUnits = 1 - DEBT_OFFSET end
        held = held - ${need}
        if held < floorUnits then held = floorUnits end
        outcome = 1
        value = ${entry('held')}
        fullAt = at + ceil((${full} - held) / ${r})
      else`;
  return `
    do
      local held, at, alone = ${full}, now, true     -- no value: a full bucket
      if ${raw} then
        ${read}
        ${settleRead}
        if alone then
          local su, st = a + 0, b + 0
          alone = st <= MAX_UPDATED_AT and su <= ${full} and su >= -${full}
          if alone then
            held = refilled(su, st, now, ${r}, ${full})
            if st > now then at = st end          -- a clock gone backwards: counted from the stored time
          end
        end
      ${limit === undefined ? '' : noLease}
      end
      if alone then
        ${limit === undefined ? '' : 'local value, fullAt'}
        ${settled}
        outcome = take(held, ${need})
        if outcome < 0 then
          steady = 0
          if at == now then steady = 1 end
        ${written}
        end
        ${
          limit === undefined
            ? ''
            : `end
        if value then ${set} end`
        }
      end
    end`;
}

/**
 * Charges a batch of calls in order, each all or nothing, in one atomic run: a call names one key (its organization's
 * and endpoint's, holding the buckets of every limit named there and the leases held on them), k limits and a cost
 * per limit, and is admitted only if each of its limits' buckets holds its cost in tokens beside what held leases set
 * aside (a concurrency limit: that many slots free), then charged on every one; if any refuses, none is charged (a
 * bucket last written under another shape than the call's is written converted to it, as core's stores do, charged
 * nothing). A key that appears in several calls of the batch is charged in turn, each call seeing the one before.
 *
 * A call may instead reserve (take a lease: admitted, its costs are set aside under the lease's id until it expires),
 * settle or extend a lease, or peek (the outcomes, nothing written): docs/stores.md, "Leases". Every call first
 * expires the key's leases whose instant has come, in order of it; a key that holds none costs one search for '@'.
 *
 * KEYS: one per call. ARGV[1], the one argument, packed as little-endian doubles and zero-terminated strings: a header
 * (packHeader) of now in ms (-1 for Redis TIME), the last ms by Redis TIME at which anyone still waits for the batch
 * (-1 when the store cannot tell yet: a run that starts later, because the batch waited in a paused or hung server or a
 * client sent it again after reconnecting, charges nothing) and 1 when a key may appear more than once in the batch,
 * else 0; then the calls (packCall): per call k, op (op 0 consume, 1 reserve, 2 settle, 3 extend, 4 peek), the lease's
 * ms (ops 1 and 3; else 0) and its id (ops 1 to 3; else empty), written as the lease text starts it ('@<id> ': the
 * script searches for it and writes it as it came), all four read with one unpack; then for each of its k limits its
 * name, its shape's text ('<capacity>/<unitsPerMs>/<unitsPerToken>', as the value holds it) and capacity, unitsPerMs,
 * unitsPerToken, cost (for a settle, the actual tokens) and a quota's periodEnd (0 for any other limit). A call of k 0
 * names the limits and costs of the call before it (a batch of reserves or settles of one plan sends them once); when
 * every call of the batch is the same, that list comes once for all.
 * Reply: one string of little-endian doubles: Redis TIME in ms, then the Outcome of each limit of each call (one
 * number for a settle or extend: 1 when the lease was held, else 0; 2^53 for each limit of a reserve whose id is held
 * already), then one flag per limited outcome, in the same order: 1 when the bucket refills at the request's own shape
 * since now or before with nothing set aside (so a deny cache may extrapolate it exactly), else 0. A run too late for
 * its batch replies with the time alone.
 *
 * Cost per call: one MGET read for the whole batch, and, when charged, one SET ... PXAT (PX on the caller's clock)
 * that writes the value and its expiry together, however many limits the call names. Inside a script every
 * redis.call costs about a microsecond of bookkeeping, so the reads are shared and nothing else is called. The numbers
 * travel packed (one argument, one reply) because each bulk string costs Redis an object to parse and Lua a string to
 * intern, and text numbers a strtod or printf each.
 *
 * The value written is the call's entries in its limits' order, then the entries of limits it does not name (another
 * call's on the same endpoint, or a limit since renamed) that are not full again yet, at most MAX_KEPT_ENTRIES of them
 * besides those a held lease names, then the held leases; the key expires when the last of its buckets is full again,
 * and with leases held no sooner than the last expires (docs/redis.md, "The value, and TTLs").
 */
function consumeScript(name: string, header: string, keys: string, read: string): LuaScript {
  return luaScript(
    name,
    `${header}${BUCKET_LUA}${REDIS_NOW_LUA}
local packed = ARGV[1]
local clock, lastWaited, repeats = sunpack('<ddd', packed)
if lastWaited >= 0 and redisNow > lastWaited then return spack('<d', redisNow) end
local now, redisClock = clock, clock < 0
if redisClock then now = redisNow end
-- What a call does, its op: CONSUME and PEEK carry no lease; RESERVE a lease's ms and id; SETTLE a lease id, the
-- actual tokens in each limit's cost; EXTEND how long from now a lease is held, and its id. An id comes as '@<id> ',
-- the start of the lease's text.
local CONSUME, RESERVE, SETTLE, EXTEND, PEEK = 0, 1, 2, 3, 4
${keys}
local n = #keys
local values                                      -- each key's value, read before any is written
-- A lone call of one token bucket (the path of a decision made at one call in flight, which pays alone for what a run
-- makes): read the call and the value, and decided straight through if it can be (straightLua); else the general
-- path below decides it, with the value already read.
local k, op = sunpack('<dd', packed, 25)
if n == 1 and k == 1 and op == CONSUME then
  local nm, shape, c, r, u, cost, pe, stop = sunpack('<ssddddd', packed, 50)  -- after ms 0 and the empty id
  if r ~= 0 and pe == 0 and stop > #packed then
    local key, full, need = keys[1], c * u, cost * u
    local raw = redis.call('GET', key)
    local outcome, steady
${straightLua({ key: 'key', raw: 'raw', name: 'nm', shape: 'shape', full: 'full', need: 'need', r: 'r' })}
    if outcome then
      if steady then return spack('<ddd', redisNow, outcome, steady) end
      return spack('<dd', redisNow, outcome)
    end
    values = {raw}
  end
end
-- The general path: any number of calls and limits, leases, quotas, entries of other limits, shapes changed.
${RARE_LUA}
local written                                     -- values this run wrote, when a key may repeat in the batch
if repeats == 1 then written = {} end
if not values then ${read} end
local reply = {redisNow}
local o = 1                                       -- outcomes in reply so far, after the time
local flags                                       -- made at the first refusal
-- The call's limits, in order: a table per limit with its numbers, its cost in units, its shape's text, the start
-- ('<name> ') and end (' <now> <shape>') of an entry written at now under it, its key in the lease totals
-- (' <name>=') and what a lease of the call holds of it (' <name>=<cost>'), the pattern of its entry (for a call of
-- several limits, or of it alone in a batch of several calls), and what the call read of its bucket.
local limits = {}
local byBytes                                     -- calls after the first: each limit made once, by its packed bytes
local shared = false                              -- every call has the limits and costs of the first, read once
local pos, id, ms = 25, nil, nil
k = 0
for i = 1, n do
  if not shared then
    local count
    -- One unpack for k, op and a lease's ms and id: each call of a string function costs hundreds of instructions.
    count, op, ms, id, pos = sunpack('<ddds', packed, pos)
    if id == '' then id = nil end                 -- a call without a lease
    if count > 0 then k = count end               -- 0: the limits and costs of the call before
    if k < 1 then return redis.error_reply('ratecard: a call without buckets') end
    for j = 1, count do
      local start = pos
      local nm, shape, c, r, u, cost, pe, limit, bytes
      nm, shape, c, r, u, cost, pe, pos = sunpack('<ssddddd', packed, pos)
      if i > 1 then
        bytes = ssub(packed, start, pos - 1)
        byBytes = byBytes or {}
        limit = byBytes[bytes]
      end
      if not limit then
        -- Lua interns strings, so two equal shape texts are one string: comparing them compares two pointers. A
        -- concurrency limit has R 0 (it never refills) and no entry; a quota has R 0 and its period's end.
        if pe == 0 then pe = nil end
        limit = {name = nm, c = c, r = r, u = u, cost = cost, need = cost * u, full = c * u, shape = shape, pe = pe,
          slots = r == 0 and not pe,
          head = nm .. ' ', tail = sformat(' %d %s', now, shape), key = ' ' .. nm .. '=', hold = false, entry = false,
          held = 0, p = 0, at = 0, moved = false, found = 0, settled = false, outcome = 0}
        if bytes then byBytes[bytes] = limit end
      end
      -- A call of one limit in a batch of several calls, or a call of several limits, may be decided straight
      -- through with its entries' patterns: the name ('.' and '-' escaped: a name is [A-Za-z0-9._-]) and the shape
      -- as literals.
      if (count > 1 or n > 1) and not limit.entry then
        limit.entry = '^' .. sgsub(limit.name, '[%.%-]', '%%%0') .. ' (%-?%d+) (%d+) ' .. limit.shape .. '()'
      end
      limits[j] = limit
    end
    shared = i == 1 and pos > #packed
  end
  local key = keys[i]
  local raw = values[i]                           -- false (RESP2) or nil (RESP3) for a missing key
  if written then raw = written[key] or raw end
  -- A consume, reserve or settle of one token bucket, decided straight through if it can be: most calls of a batch.
  local limit = limits[1]
  local outcome, steady, several
  if k == 1 and op ~= EXTEND and op ~= PEEK and not written and not limit.slots and not limit.pe then
    local full, r, need = limit.full, limit.r, limit.need
${straightLua({ key: 'key', raw: 'raw', name: 'limit.name', shape: 'limit.shape', full: 'full', need: 'need', r: 'r', limit: 'limit' })}
  elseif k > 1 and op == CONSUME and not written then
    -- A consume of several token buckets, decided straight through when its key holds their entries alone, in the
    -- call's order and under its shapes, or nothing: each entry matched where the one before ends, refilled, taken;
    -- then all or nothing, as the general path decides it (no lease, no other entry, no shape to convert).
    local pos, admit = 1, true
    several = true
    for j = 1, k do
      local limit = limits[j]
      if limit.slots or limit.pe then several = false break end
      local full, h, at = limit.full, limit.full, now
      if raw then
        local a, b, e = smatch(raw, limit.entry, pos)
        if not a then several = false break end
        if j < k then
          if sfind(raw, ', ', e, true) ~= e then several = false break end
          pos = e + 2
        elseif e <= #raw then
          several = false break
        end
        local su, st = a + 0, b + 0
        if st > MAX_UPDATED_AT or su > full or su < -full then several = false break end
        h = refilled(su, st, now, limit.r, full)
        if st > now then at = st end              -- a clock gone backwards: counted from the stored time
      end
      limit.held, limit.at, limit.outcome = h, at, take(h, limit.need)
      if limit.outcome < 0 then admit = false end
    end
    if several then
      -- Admitted, each bucket's entry charged, in order, in one SET; refused, the outcomes and nothing written.
      local value, fullAt
      for j = 1, k do
        local limit = limits[j]
        local units, at = limit.outcome, limit.at
        o = o + 1
        if admit then
          reply[o] = units
          local entry = ${entryLua('limit', 'units')}
          local f = at + ceil((limit.full - units) / limit.r)
          ${joinLua('entry', 'f')}
        else
          reply[o] = refusal(limit.held)
          flags = flags or {}
          if at == now then flags[#flags + 1] = 1 else flags[#flags + 1] = 0 end
        end
      end
      if value then ${setLua('key')} end
    end
  end
  if outcome then
    o = o + 1
    reply[o] = outcome
    if steady then
      flags = flags or {}
      flags[#flags + 1] = steady
    end
  elseif not several then
${READ_ENTRIES_LUA}
  -- Leases whose instant has come expire first, in order of it, each keeping its charge: a call on a key whose first
  -- lease is not due reads none of them.
  if first and first <= now then
    rare = rare or rarePaths(en, eu, et, es, refilled)
    leases, first, totals = rare.expire(leases, totals, now, m)
    if leases == false then m, leases, first, totals = 0, nil, nil, nil end
    if not leases then last = nil end
  end
  -- Where the lease a reserve, settle or extend names is in the lease text, if held: one search for its id.
  local leaseAt = id and leases and sfind(leases, id, 1, true)
  local value, fullAt, write                      -- what the call writes, and when the key expires
  local section                                   -- the lease section written, when a reserve wrote it whole
  if (op == SETTLE or op == EXTEND) and not leaseAt or op == RESERVE and leaseAt then
    -- One answer and nothing changed: a settle or extend of a lease not held gets 0; a reserve of an id held already
    -- 2^53 per limit, which no outcome is.
    if op == RESERVE then
      for j = 1, k do reply[o + j] = 2 * DEBT_OFFSET end
      o = o + k
    else
      o = o + 1
      reply[o] = 0
    end
  elseif op == EXTEND then
    o = o + 1
    reply[o] = 1
    rare = rare or rarePaths(en, eu, et, es, refilled)
    leases, first, last = rare.extend(leases, leaseAt, now + ms)
    if not leases then m, first, last, totals = 0, nil, nil, nil end
    -- The buckets as they were, then the leases.
    for y = 1, m do
      local once = true
      for z = 1, y - 1 do if en[z] == en[y] then once = false break end end
      local f = once and rare.otherFullAt(y, totals and rare.heldOf(totals, ' ' .. en[y] .. '=') or 0, last)
      if f and f > now then
        if value then value = value .. ', ' .. rare.entryText(y) else value = rare.entryText(y) end
        if not fullAt or f > fullAt then fullAt = f end
      end
    end
    write = true
  else
    if op == SETTLE then
      -- Which limits the lease held, release marks (limit.settled).
      rare = rare or rarePaths(en, eu, et, es, refilled)
      leases, totals, first, last = rare.release(leases, leaseAt, id, totals, now, m, limits, k)
      if leases == false then
        m, leases, totals, first, last = 0, nil, nil, nil, nil
        for j = 1, k do limits[j].settled = false end
      end
      o = o + 1
      reply[o] = 1
    end
    local admit, rewrite, seen = true, false, 0
    for j = 1, k do
      local limit = limits[j]
      local full = limit.full
      local h, at, moved, x = full, limit.pe or now, false, 0
      if not limit.slots then
        -- The first entry of the limit's name; none is a full bucket.
        local nm = limit.name
        for y = 1, m do if en[y] == nm then x = y break end end
        if x > 0 then
          seen = seen + 1
          if limit.pe then
            rare = rare or rarePaths(en, eu, et, es, refilled)
            h, at, moved = rare.quotaAt(x, limit.pe, full, limit.shape)
            if moved then rewrite = true end
          elseif es[x] == limit.shape then          -- the request's shape, one pointer compared
            -- rare.heldAt's first branch, inline: the path of nearly every call.
            local su, st = eu[x] + 0, et[x] + 0
            if st <= MAX_UPDATED_AT and su <= full and su >= -full then
              h = refilled(su, st, now, limit.r, full)
              if st > now then at = st end          -- a clock gone backwards: counted from the stored time
            end
          else
            rare = rare or rarePaths(en, eu, et, es, refilled)
            h, at, moved = rare.heldAt(x, now, limit.c, limit.r, limit.u, full, limit.shape)
            if moved then rewrite = true end
          end
        end
      end
      -- The tokens held leases set aside on the bucket (P; a concurrency limit: the slots they hold).
      local p = 0
      if totals then
        local s, e = sfind(totals, limit.key, 1, true)
        if s then p = smatch(totals, '^%d+', e + 1) + 0 end
      end
      local free = h - p * limit.u                -- what the bucket holds for a decision: Q - P
      if op == SETTLE then
        -- A bucket the lease held is charged the actual (the call's cost), but no deeper than core's debtFloor (minus
        -- the capacity, and above -2^52) below what the other leases set aside; a concurrency limit's slot is freed by
        -- the lease leaving; a limit the lease did not hold is left as it was.
        local settled = not limit.slots and limit.settled
        if settled then
          local floorUnits = -full
          if full >= DEBT_OFFSET then floorUnits = 1 - DEBT_OFFSET end
          h = h - limit.need
          if h - p * limit.u < floorUnits then h = floorUnits + p * limit.u end
        end
        limit.settled = settled
      else
        limit.outcome = take(free, limit.need)
        if limit.outcome < 0 then admit = false end
      end
      limit.held, limit.free, limit.p, limit.at, limit.moved, limit.found = h, free, p, at, moved, x
    end
    if admit and op == RESERVE then
      -- The lease, held with the call's costs from now on, in its place among the others by expiry.
      local e, holds = now + ms, nil
      for j = 1, k do
        local limit = limits[j]
        if not limit.hold then limit.hold = limit.key .. sformat('%d', limit.cost) end
        if holds then holds = holds .. limit.hold else holds = limit.hold end   -- one limit's: no string made
        limit.p = limit.p + limit.cost
      end
      local text = sformat('%d', e)               -- formatted once: the only lease's header repeats it twice
      if not leases then
        -- The key's only lease: its section made whole, in one string.
        first, last, totals = e, e, holds
        section = '@ ' .. text .. ' ' .. text .. holds .. ', ' .. id .. text .. holds
      else
        local lease = id .. text .. holds
        rare = rare or rarePaths(en, eu, et, es, refilled)
        for j = 1, k do totals = rare.addHeld(totals, limits[j].name, limits[j].cost) end
        if e >= last then leases, last = leases .. ', ' .. lease, e else leases = rare.insert(leases, lease, e) end
        if e < first then first = e end
      end
    end
    -- Each limit's outcome, and its entry when the value is written: charged, on every bucket (a reserve sets its cost
    -- aside instead; a settle charged the actual above); refused, nothing is charged, and a bucket last written under
    -- another shape takes the request's (what it holds converted), so that it refills at the rate its Retry-After was
    -- computed with.
    for j = 1, k do
      local limit = limits[j]
      local units, free, at, entry, f = limit.held, limit.free, limit.at
      if op ~= SETTLE then
        o = o + 1
        if admit then
          reply[o] = limit.outcome
          if op == CONSUME then units = units - limit.need end
        else
          reply[o] = refusal(free)                -- all or nothing: one that had the tokens too
          -- Steady: refilling at the request's own shape since now or before (a quota: holding what it holds until its
          -- period ends), with nothing set aside that a settle could give back, so a deny cache may extrapolate it.
          flags = flags or {}
          if limit.p == 0 and (at == now and limit.r ~= 0 or limit.pe) then flags[#flags + 1] = 1
          else flags[#flags + 1] = 0 end
        end
      end
      if limit.slots or op == PEEK then
        -- A concurrency limit keeps no entry: its leases are its state. A peek writes nothing.
      elseif (admit or limit.moved) and (op ~= SETTLE or limit.settled) then
        entry = ${entryLua('limit', 'units')}
        -- Full again at: core's msUntilFull, ceilDiv of two integers below 2^53, whose quotient is rounded once and
        -- never across an integer, so its ceiling is exact. With leases held, no sooner than the last expires,
        -- counting what they set aside. A quota's is the end of its period (at), or the last expiry if later.
        if limit.pe then
          f = at
          if last and last > f then f = last end
        elseif last then
          local from = at
          if last > from then from = last end
          f = from + ceil((limit.full - units + limit.p * limit.u) / limit.r)
        else
          f = at + ceil((limit.full - units) / limit.r)
        end
      elseif (rewrite or op == SETTLE) and limit.found > 0 then
        -- Refused, the call's other buckets stay as they were (written refilled to now, a clock that then stepped back
        -- would find more units than core's stores keep); one ratecard would not write goes, a full one anyway. So
        -- does a bucket a settled lease did not hold.
        rare = rare or rarePaths(en, eu, et, es, refilled)
        f = rare.otherFullAt(limit.found, limit.p, last)
        if f then entry = rare.entryText(limit.found) end
      end
      -- Refused, a bucket the key did not hold stays out: a missing bucket is a full one under any later shape.
      if entry then ${joinLua('entry', 'f')} end
    end
    if (admit or rewrite) and op ~= PEEK then
      if seen < m then                              -- entries of limits this call does not name
        rare = rare or rarePaths(en, eu, et, es, refilled)
        local kept = 0
        for y = 1, m do
          -- Past the bound, an entry a held lease names is still kept: its lease charges it when it expires.
          local p = totals and rare.heldOf(totals, ' ' .. en[y] .. '=') or 0
          if kept < ${MAX_KEPT_ENTRIES} or p > 0 then
            -- An entry of a name the call has is its bucket, written above, or a second one, dropped.
            local other = true
            for j = 1, k do if en[y] == limits[j].name then other = false break end end
            local f = other and rare.otherFullAt(y, p, last)
            if f and f > now then
              if value then value = value .. ', ' .. rare.entryText(y) else value = rare.entryText(y) end
              kept = kept + 1
              if not fullAt or f > fullAt then fullAt = f end
            end
          end
        end
      end
      write = true
    end
  end
  if write and (section or leases) then
    -- The leases after the buckets: their header, then the leases in order of expiry.
    section = section or '@ ' .. sformat('%d %d', first, last) .. totals .. ', ' .. leases
    if value then value = value .. ', ' .. section else value = section end
    if not fullAt or last > fullAt then fullAt = last end
  end
  if write then
    -- The key expires once every bucket in it is full again (a missing key is full buckets, so nothing is lost). On
    -- Redis' clock that is an instant Redis knows: PXAT, exact however long the script has run. The caller's clock
    -- may stand apart from Redis', so then the TTL is counted from now: PX, + 1 because Redis counts it from the start
    -- of the command, which may fall in the ms before now. Formatted here as an integer, cheaper than the %.17g Redis
    -- 7.0 prints a number argument with.
    if not value then
      redis.call('DEL', key)                      -- a call of concurrency limits alone, its lease gone
    elseif redisClock then
      redis.call('SET', key, value, 'PXAT', sformat('%d', fullAt))
    else
      redis.call('SET', key, value, 'PX', sformat('%d', fullAt - now + 1))
    end
    if written then written[key] = value or '' end
  end
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
  "values = redis.call('MGET', unpack(keys))",
);

/**
 * The same on one Redis Cluster master, for keys of any slots it serves: the keys come after the argument above
 * (ARGV[2] on), since keys declared in KEYS across slots are refused with CROSSSLOT before the script runs, and the
 * flag lets the script touch keys of several slots. A key the master does not serve (its slot moved, or is moving and
 * the key is not there) stops the script at the GET that reads it with "non local key": every key is read before any
 * is written, so such a run writes nothing, and the store sends its calls again by key. MGET over several slots is
 * refused inside such a script, hence one GET per key. Needs Redis 7 (script flags).
 */
export const CONSUME_ON_MASTER: LuaScript = consumeScript(
  'consume-on-master',
  '#!lua flags=allow-cross-slot-keys\n',
  'local keys = {} for i = 2, #ARGV do keys[i - 1] = ARGV[i] end',
  "values = {} for i = 1, #keys do values[i] = redis.call('GET', keys[i]) end",
);

/** What a call of the consume script does: its op (see the script). */
export const Op = { consume: 0, reserve: 1, settle: 2, extend: 3, peek: 4 } as const;
export type Op = (typeof Op)[keyof typeof Op];

/** The bytes packHeader writes. */
export const HEADER_SIZE = 24;

/**
 * Writes the script call's header at the start of `buffer`: the caller's now in ms (-1 for Redis TIME), the last ms by
 * Redis TIME at which anyone still waits for the batch (-1 for none yet), and 1 when a key may appear more than once
 * in the batch, else 0. Returns the offset after it.
 */
export function packHeader(
  buffer: Buffer,
  now: number | undefined,
  lastWaited: number | undefined,
  repeats: boolean,
): number {
  let at = buffer.writeDoubleLE(now ?? -1, 0);
  at = buffer.writeDoubleLE(lastWaited ?? -1, at);
  return buffer.writeDoubleLE(repeats ? 1 : 0, at);
}

/** A limit's shape as the value holds it: '<capacity>/<unitsPerMs>/<unitsPerToken>', made once per limit. */
const shapes = new WeakMap<Limit, string>();
function shapeText(limit: Limit): string {
  let text = shapes.get(limit);
  if (text === undefined) {
    text = `${limit.capacity}/${limit.unitsPerMs}/${limit.unitsPerToken}`;
    shapes.set(limit, text);
  }
  return text;
}

/**
 * The bytes packCall writes for one call of these limits, with a lease id if it is given one; only its k, op, ms
 * and id for a call that repeats the limits and costs of the call before.
 */
export function packedSize(limits: readonly Limit[], id?: string, repeated = false): number {
  let size = 24 + 1;
  if (!repeated) for (const limit of limits) size += limit.name.length + 1 + shapeText(limit).length + 1 + 40;
  if (id !== undefined) size += id.length + 2;
  return size;
}

/**
 * Writes one call at `offset` as the scripts read it: k, op, a reserve's or extend's `ms` (else 0) and a reserve's,
 * settle's or extend's lease id (ASCII) as the lease's text starts it, '@<id> ' (else empty; zero-terminated); then
 * each limit's name (zero-terminated; a name is ASCII, see core's limits.ts), its shape's text (zero-terminated) and
 * capacity, unitsPerMs, unitsPerToken, cost (costAt: one number for every limit, or one per limit) and a quota's
 * periodEnd (0 for any other limit); or, for a call `repeated` that names the limits and costs of the call before it,
 * k 0 and none of them. The numbers are little-endian doubles (exact for integers below 2^53). Returns the offset
 * after them.
 */
export function packCall(
  buffer: Buffer,
  offset: number,
  limits: readonly Limit[],
  cost: number | readonly number[],
  op: Op = Op.consume,
  id?: string,
  ms?: number,
  repeated = false,
): number {
  let at = buffer.writeDoubleLE(repeated ? 0 : limits.length, offset);
  at = buffer.writeDoubleLE(op, at);
  at = buffer.writeDoubleLE(ms ?? 0, at);
  if (id !== undefined) at += buffer.write(`@${id} `, at, 'latin1');
  at = buffer.writeUInt8(0, at);
  for (let j = 0; !repeated && j < limits.length; j++) {
    const limit = limits[j] as Limit;
    at += buffer.write(limit.name, at, 'latin1');
    at = buffer.writeUInt8(0, at);
    at += buffer.write(shapeText(limit), at, 'latin1');
    at = buffer.writeUInt8(0, at);
    at = buffer.writeDoubleLE(limit.capacity, at);
    at = buffer.writeDoubleLE(limit.unitsPerMs, at);
    at = buffer.writeDoubleLE(limit.unitsPerToken, at);
    at = buffer.writeDoubleLE(costAt(cost, j), at);
    at = buffer.writeDoubleLE(limit.periodEnd ?? 0, at);
  }
  return at;
}
