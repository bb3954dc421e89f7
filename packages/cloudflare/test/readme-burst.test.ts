import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { burst, startReadmeWorker } from './support/burst.js';
import { type Workerd, workerdRuns } from './support/workerd.js';

// The README's Worker as written (fallback: memoryStore(), the default storeTimeoutMs), free plan perMinute(100),
// served by workerd in four isolates sharing its objects: 300 concurrent requests of one organization must admit no
// more than an exact limiter may over the burst's duration (issue 37). A smaller run of bench/burst.ts.

const ISOLATES = 4;

describe.runIf(workerdRuns())("the README's Worker under a burst of 300 requests", () => {
  let worker: Awaited<ReturnType<typeof startReadmeWorker>>;
  let workerd: Workerd;

  beforeAll(async () => {
    worker = await startReadmeWorker('perMinute(100)', ISOLATES);
    workerd = worker.workerd;
  });

  afterAll(async () => {
    await worker?.stop();
  });

  for (const round of [1, 2]) {
    it(`admits at most capacity + refill over the burst's duration (round ${round}, a new organization)`, async () => {
      const organization = `readme-burst-${process.pid}-${Date.now()}-${round}`;
      const result = await burst(workerd, 'perMinute(100)', organization, 300);
      expect(result.other).toBe(0);
      expect(result.admitted, JSON.stringify(result)).toBeLessThanOrEqual(result.bound);
    });
  }
});
