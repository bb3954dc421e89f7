import type { Options } from 'tsup';

// Every package ships the same shape: ESM + CJS + declarations for both, one file per entry. Silent: a build prints
// only its errors, so that `pnpm bench` and `pnpm test` fit an 80-column terminal.
export const base: Options = {
  silent: true,
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'node20',
  splitting: false,
  treeshake: true,
  // Keep `node:` on Node's built-in modules (tsup 8 strips it by default): Deno, Bun and Workers' nodejs_compat read
  // a bare `assert` or `crypto` as an npm package, or fail on it.
  removeNodeProtocol: false,
};
