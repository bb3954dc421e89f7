import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { redisForTests } from '@ratecard/redis/testing';
import { build } from 'tsup';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeReport, runLoad } from './load/run-load.js';

/**
 * A short run keeps the load path from rotting; `pnpm --filter @ratecard/reference-service load` runs the same test
 * for 30 s (RATECARD_LOAD_SECONDS=30) and prints the figures docs/reliability.md quotes.
 */
const SECONDS = Number(process.env.RATECARD_LOAD_SECONDS ?? 3);
const RATE = Number(process.env.RATECARD_LOAD_RATE ?? 2_000);
/** What a run may leave on the heap, after a full GC: the Redis client's buffers and lazily made caches. */
const HEAP_GROWTH_BOUND = 8 * 2 ** 20;

const packageDir = fileURLToPath(new URL('..', import.meta.url));

// Under CI=true this throws when no Redis can be had, so the suite fails instead of passing by skipping.
const redis = await redisForTests('reference-service load');

describe.skipIf(redis === undefined)('the service on Redis under steady load', () => {
  beforeAll(async () => {
    await build({ config: join(packageDir, 'tsup.config.ts'), silent: true });
  }, 30_000);
  afterAll(async () => {
    await redis?.stop();
  });

  it(
    `answers ${RATE} requests/s for ${SECONDS} s with no 5xx and no lost request, its heap stable`,
    async () => {
      const report = await runLoad({
        main: join(packageDir, 'dist', 'main.js'),
        redisUrl: redis?.url ?? '',
        rate: RATE,
        durationMs: SECONDS * 1000,
        warmupMs: 1_000,
        connections: 32,
      });
      console.log(describeReport(report));
      expect(Object.keys(report.statuses).filter((status) => status >= '500')).toEqual([]);
      expect(report.errors).toBe(0);
      expect(report.answered).toBe(report.sent);
      expect(Object.keys(report.statuses).sort()).toEqual(['200', '201', '202', '429']);
      expect(report.serviceErrors).toBe('');
      expect(report.heapAfter - report.heapBefore).toBeLessThan(HEAP_GROWTH_BOUND);
    },
    (SECONDS + 60) * 1000,
  );
});
