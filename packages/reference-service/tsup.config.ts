import { defineConfig } from 'tsup';
import { base } from '../tsup.base.ts';

// A private service: ESM only, no declarations; dependencies stay external (tsup's default), so nothing is bundled.
export default defineConfig({ ...base, entry: ['src/main.ts', 'src/app.ts'], format: ['esm'], dts: false });
