import { defineConfig } from 'vitest/config';

// Packing, installing and type-checking every package takes a while on 2 cores.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/pack.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
  },
});
