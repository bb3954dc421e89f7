import { createHash } from 'node:crypto';

/** A Lua script as Redis will see it: normalised text and the SHA1 of that text, computed once at load. */
export interface LuaScript {
  /** For error messages and stats. */
  readonly name: string;
  /** The normalised source, sent with EVAL when a node does not know the script. */
  readonly text: string;
  /** SHA1 of `text`, sent with EVALSHA. */
  readonly sha: string;
}

/**
 * Drops comments and blank lines and collapses runs of spaces, so that re-indenting or re-commenting a script never
 * changes its SHA (nor what travels on the wire). The scripts hold no string literal containing `--` or
 * significant runs of spaces, which is what makes this safe.
 */
export function normaliseLua(source: string): string {
  return source
    .split('\n')
    .map((line) => {
      const comment = line.indexOf('--');
      return (comment === -1 ? line : line.slice(0, comment)).replace(/\s+/g, ' ').trim();
    })
    .filter((line) => line.length > 0)
    .join('\n');
}

export function luaScript(name: string, source: string): LuaScript {
  const text = normaliseLua(source);
  return Object.freeze({ name, text, sha: createHash('sha1').update(text).digest('hex') });
}
