import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One standalone server and one 3-master cluster, started once for every file.
    globalSetup: ['test/support/global-setup.ts'],
    // Files run one at a time: the fault and cross-process tests start processes of their own and bound how long
    // calls take; `pnpm test` runs this suite beside the other packages' tests, so two files at once would crowd two
    // cores further than those bounds allow for.
    fileParallelism: false,
    testTimeout: 20_000,
    hookTimeout: 60_000,
  },
});
