import { redisStore } from '@ratecard/redis';
import { redisForTests } from '@ratecard/redis/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe } from 'vitest';
import { serviceSuite } from './service-suite.js';

// Under CI=true this throws when no Redis can be had, so the suite fails instead of passing by skipping.
const target = await redisForTests('reference-service in Redis mode');

describe.skipIf(target === undefined)('the reference service on the Redis store', () => {
  let client: Redis;
  beforeAll(async () => {
    client = new Redis(target?.url ?? '');
    // Once PING answers the client is ready, so no decision falls back to memory for want of a connection.
    await client.ping();
  });
  afterAll(async () => {
    await client.quit();
    await target?.stop();
  });

  serviceSuite(() => redisStore({ client }));
});
