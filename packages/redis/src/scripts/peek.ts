import { BUCKET_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * The outcomes consume would give now for one call, charging and writing nothing: all admitted, or all refused.
 * KEYS: the call's buckets. ARGV[1]: now in ms, or '' for Redis TIME. ARGV[2]: as one call of the consume script's
 * ARGV[2], little-endian doubles: k, cost, then capacity, unitsPerMs, unitsPerToken per bucket.
 * Reply: one Outcome per key.
 */
export const PEEK: LuaScript = luaScript(
  'peek',
  `${BUCKET_LUA}
local k, cost, pos = sunpack('<dd', ARGV[2])
local values = redis.call('MGET', unpack(KEYS))
local now
local held, need = {}, {}
local admit = true
for j = 1, k do
  local c, r, u
  c, r, u, pos = sunpack('<ddd', ARGV[2], pos)
  local full = c * u
  local h = full                                  -- a missing bucket is a full one
  local raw = values[j]
  if raw then
    now = now or tonumber(ARGV[1]) or redisTime()  -- the caller's time (clock 'client'), or Redis TIME
    local su, st, sc, sU, sR = decode(raw, shapeText(c, r, u), full)
    if sc then                                    -- written under another shape: refilled at it, then converted
      h = unitsAt(su, st, sc, sU, sR, now, c, u)
    elseif su then
      h = refilled(su, st, now, r, full)
    end
  end
  held[j], need[j] = h, cost * u
  if h < need[j] then admit = false end           -- take(held, cost), without the write
end
local reply = {}
for j = 1, k do
  if admit then reply[j] = held[j] - need[j] else reply[j] = -1 - held[j] end
end
return reply
`,
);
