import { type LuaScript, luaScript } from './lua-script.js';

/** Makes a call's buckets full again by forgetting them (a missing bucket is a full one). KEYS: the buckets. */
export const RESET: LuaScript = luaScript(
  'reset',
  `
return redis.call('DEL', unpack(KEYS))            -- how many of the buckets existed
`,
);
