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
};
