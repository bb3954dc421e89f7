import { createLimiter } from '@ratecard/core';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisStore } from '../src/index.js';
import { startFixture } from './support/fixture-process.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

// A block made by one process refuses the organization in another within a second, and lifting it admits it again
// within a second (docs/operations.md): an application process (test/fixtures/blocked-app.ts) asks every 10 ms, this
// process blocks and unblocks with a limiter of its own. A slow machine makes the application decide less often, never
// decide by blocks older than a second, so the check is on when each decision started, not on how soon one came.

const KINDS = ['ioredis 6', 'node-redis 6 RESP3'];

function acrossProcesses(target: () => string, admin: () => Promise<Redis | Cluster>) {
  let client: Redis | Cluster;
  beforeAll(async () => {
    client = await admin();
  });
  afterAll(() => client.disconnect());

  for (const kind of KINDS) {
    it(`${kind}: a block refuses within a second, and an unblock admits within a second`, async () => {
      const limiter = createLimiter({ store: redisStore({ client }), onStoreError: 'throw' });
      const organization = uniqueOrg('blocked');
      const app = startFixture('blocked-app', [kind, target(), organization]);
      try {
        expect(await app.nextLine()).toBe('ready');
        await limiter.block({ organization, forMs: 60_000, reason: 'abuse report 17' });
        const blockedAt = Date.now();
        const [refused, source, lastAdmittedStart] = (await app.nextLine()).split(' ');
        expect([refused, source]).toEqual(['refused', 'block']);
        // The last decision that admitted started before a second had passed since the block was made.
        expect(Number(lastAdmittedStart)).toBeLessThan(blockedAt + 1_000);

        await limiter.unblock({ organization });
        const unblockedAt = Date.now();
        const [admitted, , lastRefusedStart] = (await app.nextLine()).split(' ');
        expect(admitted).toBe('admitted');
        expect(Number(lastRefusedStart)).toBeLessThan(unblockedAt + 1_000);
      } finally {
        app.child.stdin?.end();
        await limiter.close();
      }
    }, 20_000);
  }
}

describe.skipIf(REDIS_URL === null)('blocks across processes, standalone', () => {
  acrossProcesses(
    () => REDIS_URL as string,
    () => connectStandalone(),
  );
});

describe.skipIf(CLUSTER_NODES === null)('blocks across processes, 3-master cluster', () => {
  acrossProcesses(
    () => JSON.stringify(CLUSTER_NODES),
    () => connectCluster(),
  );
});
