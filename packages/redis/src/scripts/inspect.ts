import { REDIS_NOW_LUA } from './bucket.js';
import { type LuaScript, luaScript } from './lua-script.js';

/**
 * What an endpoint key holds, for operators (`Store.inspect`): the store's now and the key's value, read together in
 * one run so that the figures are of one instant. Writes nothing: due leases are charged by the reader (store.ts), as
 * the next call on the key would charge them. KEYS: the key. ARGV[1]: now in ms, or '' for Redis TIME. Reply: the
 * now, then the value when the key exists.
 */
export const INSPECT: LuaScript = luaScript(
  'inspect',
  `local floor = math.floor
${REDIS_NOW_LUA}
local now = tonumber(ARGV[1]) or redisNow
local raw = redis.call('GET', KEYS[1])
if not raw then return {now} end
return {now, raw}
`,
);
