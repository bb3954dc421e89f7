import type { Options } from 'tsup';

// Every package ships the same shape: ESM + CJS + declarations for both, one file per entry.
export const base: Options = {
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'node20',
  splitting: false,
  treeshake: true,
};
