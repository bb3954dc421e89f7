import { defineConfig } from 'vitest/config';

// Each file starts workerd and bundles a Worker (a few seconds); calls then take milliseconds.
export default defineConfig({ test: { include: ['test/**/*.test.ts'], testTimeout: 30_000, hookTimeout: 60_000 } });
