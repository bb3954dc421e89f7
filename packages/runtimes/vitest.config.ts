import { defineConfig } from 'vitest/config';

// Each runtime starts as a child process and runs a whole fixture; the slowest is well under a minute.
export default defineConfig({ test: { include: ['test/**/*.test.ts'], testTimeout: 60_000, hookTimeout: 120_000 } });
