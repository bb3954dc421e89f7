import { createLimiter, msUntilFull, UNITS_PER_TOKEN as U } from '@ratecard/core';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketKey, redisStore } from '../src/index.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, REDIS_URL, scanKeys, uniqueOrg } from './support/redis.js';
import { runTraffic } from './support/traffic.js';

const T0 = 1_700_000_000_000;

function uniquePrefix(label: string): string {
  return `ratecard-${label}-${process.pid}-${Date.now().toString(36)}:`;
}

describe.skipIf(REDIS_URL === null)('TTLs on a standalone server', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  it('leave no key under the prefix without a TTL after a run (SCAN + PTTL)', async () => {
    const prefix = uniquePrefix('scan');
    const limiter = createLimiter({ store: redisStore({ client, prefix }), onStoreError: 'throw' });
    const orgs = Array.from({ length: 200 }, (_, i) => `${uniqueOrg('ttl')}-${i}`);
    const { failures } = await runTraffic(limiter, orgs, 3_000, 32, 25);
    expect(failures).toEqual([]);
    const keys = await scanKeys(client, `${prefix}*`);
    expect(keys.length).toBeGreaterThan(100);
    const ttls = await Promise.all(keys.map((key) => client.pttl(key)));
    expect(ttls.filter((ttl) => ttl <= 0)).toEqual([]);
  });

  it('are the ms until the bucket is full again', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('exact-ttl');
    const outcome = await store.consume(org, 'e', 10, 3);
    const ttl = await client.pttl(bucketKey(org, 'e'));
    // msUntilFull, plus the 1 ms the script adds for Redis' expiry rounding, minus the time since the write.
    expect(ttl).toBeLessThanOrEqual(msUntilFull(outcome, 10) + 1);
    expect(ttl).toBeGreaterThan(msUntilFull(outcome, 10) - 1_000);
  });

  it('count from the stored time when the clock went backwards', async () => {
    let now = T0;
    const store = redisStore({ client, clock: 'client', now: () => now });
    const org = uniqueOrg('backwards');
    await store.consume(org, 'e', 10, 1);
    now = T0 - 30_000;
    const outcome = await store.consume(org, 'e', 10, 1);
    expect(outcome).toBe(8 * U);
    // Written at the stored time T0, so the bucket is full 12 s after T0, which is 42 s after now.
    expect(await client.pttl(bucketKey(org, 'e'))).toBeGreaterThan(30_000 + msUntilFull(outcome, 10) - 1_000);
  });

  it('let Redis drop a bucket once it is full again', async () => {
    const store = redisStore({ client });
    const org = uniqueOrg('expires');
    // 60 000 per minute refills a token per ms: the key lives 2 ms.
    await store.consume(org, 'e', 60_000, 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await client.exists(bucketKey(org, 'e'))).toBe(0);
  });

  it('go with a 12-byte value while the limit fits 16 bits, and a 16-byte one above', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('size');
    // Half of each bucket, so its TTL (the time until full) is 30 s: long enough to read the key back.
    await store.consume(org, 'small', 65_535, 32_767);
    await store.consume(org, 'large', 1_000_000_000, 500_000_000);
    expect(await client.strlen(bucketKey(org, 'small'))).toBe(12);
    expect(await client.strlen(bucketKey(org, 'large'))).toBe(16);
    expect(await store.peek(org, 'small', 65_535, 1)).toBe((65_535 - 32_767 - 1) * U);
    expect(await store.peek(org, 'large', 1_000_000_000, 1)).toBe((1_000_000_000 - 500_000_000 - 1) * U);
  });
});

describe.skipIf(CLUSTER_NODES === null)('TTLs on a cluster', () => {
  let client: Cluster;
  beforeAll(async () => {
    client = await connectCluster();
  });
  afterAll(() => client.disconnect());

  it('leave no key on any master without a TTL after a run (SCAN + PTTL)', async () => {
    const prefix = uniquePrefix('cluster-scan');
    const limiter = createLimiter({ store: redisStore({ client, prefix }), onStoreError: 'throw' });
    const orgs = Array.from({ length: 200 }, (_, i) => `${uniqueOrg('ttl')}-${i}`);
    const { failures } = await runTraffic(limiter, orgs, 3_000, 32, 25);
    expect(failures).toEqual([]);
    let total = 0;
    for (const node of client.nodes('master')) {
      const keys = await scanKeys(node, `${prefix}*`);
      total += keys.length;
      const ttls = await Promise.all(keys.map((key) => node.pttl(key)));
      expect(ttls.filter((ttl) => ttl <= 0)).toEqual([]);
    }
    expect(total).toBeGreaterThan(100);
  });
});
