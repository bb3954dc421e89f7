import { defineConfig } from 'vitest/config';

// Packing and type-checking every package takes a while on 2 cores.
export default defineConfig({ test: { include: ['test/**/*.test.ts'], testTimeout: 120_000, hookTimeout: 180_000 } });
