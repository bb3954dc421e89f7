import { storeContractSuite } from '@ratecard/core/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { redisStore } from '../src/index.js';
import { CLIENTS, type Connected } from './support/clients.js';
import { CLUSTER_NODES, REDIS_URL } from './support/redis.js';

// The core's contract, its committed test vectors included, with the suite's clock passed as clock 'client', on
// every supported client, against a standalone server and a 3-master cluster.

for (const kind of CLIENTS) {
  describe.skipIf(REDIS_URL === null)(`${kind.name}, standalone`, () => {
    let connected: Connected;
    beforeAll(async () => {
      connected = await kind.standalone(REDIS_URL as string);
    });
    afterAll(() => connected.close());

    storeContractSuite(
      `redis, ${kind.name}, standalone`,
      { create: (now) => redisStore({ client: connected.client, clock: 'client', now }) },
      { describe, it },
    );
  });

  describe.skipIf(CLUSTER_NODES === null)(`${kind.name}, 3-master cluster`, () => {
    let connected: Connected;
    beforeAll(async () => {
      connected = await kind.cluster(CLUSTER_NODES ?? []);
    });
    afterAll(() => connected.close());

    storeContractSuite(
      `redis, ${kind.name}, cluster`,
      { create: (now) => redisStore({ client: connected.client, clock: 'client', now }) },
      { describe, it },
    );
  });
}
