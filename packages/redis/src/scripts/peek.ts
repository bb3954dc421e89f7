import { BUCKET_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * The outcome consume would give now, charging and writing nothing.
 * KEYS[1]: the bucket. ARGV[1]: now in ms, or '' for Redis TIME. ARGV[2], ARGV[3]: limit and cost.
 */
export const PEEK: LuaScript = luaScript(
  'peek',
  `${BUCKET_LUA}
local limit = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local held = limit * U                            -- a missing bucket is a full one
local raw = redis.call('GET', KEYS[1])
if raw then
  local now = tonumber(ARGV[1]) or redisTime()    -- the caller's time (clock 'client'), or Redis TIME
  local units, updatedAt, storedLimit = decode(raw)
  if units then held = unitsAt(units, updatedAt, storedLimit, now, limit) end
end
local need = cost * U                             -- take(held, cost), without the write
if held >= need then return held - need end
return -1 - held
`,
);
