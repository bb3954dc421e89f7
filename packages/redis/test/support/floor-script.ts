import type { Limit } from '@ratecard/core';
import { type LuaScript, luaScript } from '../../src/scripts/lua-script.js';

/**
 * The floor of a lone one-limit decision in ratecard's design (issue 40): what any script must do to decide it on
 * Redis' clock in the endpoint value's format, and nothing more. TIME, GET, one entry matched, core's refill, SET ...
 * PXAT, and the reply packed as the consume script packs it. `script-cost consume --lone` measures it in the same run
 * as the store's script, so the ratio between them is measured, not remembered.
 *
 * It is no store: it reads the value's first entry only (a second entry, a lease, a debt or a value ratecard would not
 * write is dropped or misread), is given its limit as cheaply as a script can be (the shape's text from the client,
 * the numbers packed: 4% fewer instructions than as text) and checks nothing. test/floor-script.test.ts checks that
 * it decides as the consume script does where it applies: one limit, one entry.
 *
 * KEYS[1]: the endpoint's key. ARGV: the limit's name, its shape ('<capacity>/<unitsPerMs>/<unitsPerToken>'), and
 * three little-endian doubles: its full bucket in units, its units per ms, the cost in units. Reply: little-endian
 * doubles: Redis TIME in ms and the outcome (admitted: the units left; refused: -1 - the units held), then for a
 * refusal the steady flag.
 */
export const FLOOR: LuaScript = luaScript(
  'floor',
  `
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local name, shape = ARGV[1], ARGV[2]
local full, r, need = struct.unpack('<ddd', ARGV[3])
local held, at = full, now                        -- no entry: a full bucket
local raw = redis.call('GET', KEYS[1])
if raw then
  local n, u, t, s = string.match(raw, '^([^ ]+) (%-?%d+) (%d+) ([^,]+)')
  if n == name and s == shape then
    u, t = u + 0, t + 0
    if t > now then
      held, at = u, t                             -- a clock gone backwards refills nothing
    elseif (now - t) * r < full - u then
      held = u + (now - t) * r
    end
  end
end
if held < need then
  local steady = 0
  if at == now then steady = 1 end
  return struct.pack('<ddd', now, -1 - held, steady)
end
held = held - need
local value = string.format('%s %d %d %s', name, held, at, shape)
redis.call('SET', KEYS[1], value, 'PXAT', string.format('%d', at + math.ceil((full - held) / r)))
return struct.pack('<dd', now, held)
`,
);

/** The floor's ARGV for one call of `cost` tokens on `limit`. */
export function floorArgs(limit: Limit, cost: number): [string, string, Buffer] {
  const { name, capacity, unitsPerMs, unitsPerToken } = limit;
  const numbers = Buffer.alloc(24);
  numbers.writeDoubleLE(capacity * unitsPerToken, 0);
  numbers.writeDoubleLE(unitsPerMs, 8);
  numbers.writeDoubleLE(cost * unitsPerToken, 16);
  return [name, `${capacity}/${unitsPerMs}/${unitsPerToken}`, numbers];
}
