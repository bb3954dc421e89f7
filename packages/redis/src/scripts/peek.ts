import { BUCKET_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * The outcomes consume would give now for one call, charging and writing nothing: all admitted, or all refused.
 * KEYS: the call's key. ARGV[1]: now in ms, or '' for Redis TIME. ARGV[2]: as one call of the consume script's
 * ARGV[2]: k and cost, then each limit's name (zero-terminated) and capacity, unitsPerMs, unitsPerToken.
 * Reply: one Outcome per limit.
 */
export const PEEK: LuaScript = luaScript(
  'peek',
  `${BUCKET_LUA}
local k, cost, pos = sunpack('<dd', ARGV[2])
local raw = redis.call('GET', KEYS[1])
local m = 0
if raw then m = entries(raw) end
local now
local held, need = {}, {}
local admit = true
for j = 1, k do
  local nm, c, r, u
  nm, c, r, u, pos = sunpack('<sddd', ARGV[2], pos)
  local full = c * u
  local h = full                                  -- a missing bucket is a full one
  for x = 1, m do
    if en[x] == nm then
      now = now or tonumber(ARGV[1]) or redisTime()  -- the caller's time (clock 'client'), or Redis TIME
      h = heldAt(x, now, c, r, u, full, shapeText(c, r, u))
      break
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
