import { defineConfig } from 'tsup';
import { base } from '../packages/tsup.base.ts';

// A private command-line package: ESM only, no declarations; the workspace packages stay external.
export default defineConfig({
  ...base,
  entry: ['src/bench.ts', 'src/worker.ts', 'src/size.ts', 'src/smoke.ts'],
  format: ['esm'],
  dts: false,
  sourcemap: false,
});
