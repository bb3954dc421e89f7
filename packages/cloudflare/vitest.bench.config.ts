import { defineConfig } from 'vitest/config';

// The package's measurements, apart from its tests: `pnpm --filter @ratecard/cloudflare bench`.
export default defineConfig({
  test: { include: ['bench/**/*.ts'], testTimeout: 600_000, hookTimeout: 600_000 },
});
