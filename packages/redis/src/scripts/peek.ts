import { BUCKET_LUA, READ_ENTRIES_LUA, REDIS_NOW_LUA } from './bucket.js';
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
${READ_ENTRIES_LUA}
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
      now = now or tonumber(ARGV[1])              -- the caller's time (clock 'client'), or Redis TIME
      if not now then
${REDIS_NOW_LUA}
        now = redisNow
      end
      rare = rare or rarePaths(en, eu, et, es)
      h = rare.heldAt(x, now, c, r, u, full, sformat('%d/%d/%d', c, r, u))
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
