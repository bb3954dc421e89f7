import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // main.test.ts and load.test.ts both build dist/ (tsup cleans it first) and start it; the load run also wants
    // both cores to itself.
    fileParallelism: false,
  },
});
