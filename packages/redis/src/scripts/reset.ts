import { type LuaScript, luaScript } from './lua-script.js';

/** Makes a bucket full again by forgetting it (a missing bucket is a full one). KEYS[1]: the bucket. */
export const RESET: LuaScript = luaScript(
  'reset',
  `
return redis.call('DEL', KEYS[1])                 -- 1 when the bucket existed, 0 when it was already full
`,
);
