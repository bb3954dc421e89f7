import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Each file starts workerd and bundles a Worker (a few seconds); calls then take milliseconds. A file that imports the
// store's source in Node gets a `cloudflare:workers` of its own (test/support/cloudflare-workers.ts).
export default defineConfig({
  resolve: {
    alias: { 'cloudflare:workers': fileURLToPath(new URL('test/support/cloudflare-workers.ts', import.meta.url)) },
  },
  test: { include: ['test/**/*.test.ts'], testTimeout: 30_000, hookTimeout: 60_000 },
});
