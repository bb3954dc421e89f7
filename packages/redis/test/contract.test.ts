import { storeContractSuite } from '@ratecard/core/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { redisStore } from '../src/index.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, REDIS_URL } from './support/redis.js';

// The core's contract, its committed test vectors included, with the suite's clock passed as clock 'client'.

describe.skipIf(REDIS_URL === null)('on a standalone server', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  storeContractSuite(
    'redis, standalone',
    { create: (now) => redisStore({ client, clock: 'client', now }) },
    { describe, it },
  );
});

describe.skipIf(CLUSTER_NODES === null)('on a 3-master cluster', () => {
  let client: Cluster;
  beforeAll(async () => {
    client = await connectCluster();
  });
  afterAll(() => client.disconnect());

  storeContractSuite(
    'redis, cluster',
    { create: (now) => redisStore({ client, clock: 'client', now }) },
    { describe, it },
  );
});
