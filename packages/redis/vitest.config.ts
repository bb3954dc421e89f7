import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One standalone server and one 3-master cluster, started once for every file.
    globalSetup: ['test/support/global-setup.ts'],
    // Files run one at a time: the fault and cross-process tests measure settling times and must not share two
    // cores with another file's traffic.
    fileParallelism: false,
    testTimeout: 20_000,
    hookTimeout: 60_000,
  },
});
