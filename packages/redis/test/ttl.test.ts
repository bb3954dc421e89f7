import { createLimiter, msUntilFull, UNITS_PER_TOKEN as U } from '@ratecard/core';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketKey, decodeBucketValue, redisStore } from '../src/index.js';
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

  it('are the ms until the bucket is full again (limits from 256, packed values)', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('exact-ttl');
    const outcome = await store.consume(org, 'e', 1_000, 300);
    const ttl = await client.pttl(bucketKey(org, 'e'));
    // msUntilFull, plus the 1 ms the script adds for Redis' expiry rounding, minus the time since the write.
    expect(ttl).toBeLessThanOrEqual(msUntilFull(outcome, 1_000) + 1);
    expect(ttl).toBeGreaterThan(msUntilFull(outcome, 1_000) - 1_000);
  });

  it('end on the first multiple of 10 s at or after the bucket is full again (limits below 256)', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 + 1_234 });
    const org = uniqueOrg('step-ttl');
    const outcome = await store.consume(org, 'e', 10, 3);
    // Full at T0 + 1 234 + 18 000 ms; T0 is a multiple of 10 s, so the key expires at T0 + 20 000.
    expect(T0 + 1_234 + msUntilFull(outcome, 10)).toBe(T0 + 19_234);
    const ttl = await client.pttl(bucketKey(org, 'e'));
    expect(ttl).toBeLessThanOrEqual(20_000 - 1_234 + 1);
    expect(ttl).toBeGreaterThan(20_000 - 1_234 - 1_000);
  });

  it('stay put while charges keep the expiry on the same multiple of 10 s, and move when they pass it', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('incrby');
    const key = bucketKey(org, 'e');
    // 100 per minute: each token is 600 ms of refill. 16 tokens are full again at T0 + 9 600, still within the
    // first 10 s; the 17th makes it T0 + 10 200, which moves the expiry to T0 + 20 000.
    for (let i = 0; i < 16; i++) await store.consume(org, 'e', 100, 1);
    const early = await client.pttl(key);
    expect(early).toBeLessThanOrEqual(10_001);
    expect(early).toBeGreaterThan(9_000);
    expect(await client.object('ENCODING', key)).toBe('int');
    await store.consume(org, 'e', 100, 1);
    const moved = await client.pttl(key);
    expect(moved).toBeGreaterThan(10_001);
    expect(moved).toBeLessThanOrEqual(20_001);
    const value = (await client.getBuffer(key)) as Buffer;
    expect(decodeBucketValue(value, T0)).toEqual({ units: 83 * U, updatedAt: T0, limit: 100, layout: 'compact' });
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

  it('hold an integer below a limit of 256, 12 bytes up to 65 535 and 17 bytes above', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('size');
    // Half of each bucket, so its TTL (the time until full) is about 30 s: long enough to read the key back.
    await store.consume(org, 'compact', 255, 127);
    await store.consume(org, 'small', 256, 128);
    await store.consume(org, 'mid', 65_535, 32_767);
    await store.consume(org, 'large', 1_000_000_000, 500_000_000);
    const compact = bucketKey(org, 'compact');
    expect(await client.object('ENCODING', compact)).toBe('int');
    expect(await client.strlen(compact)).toBeGreaterThanOrEqual(14);
    expect(await client.strlen(compact)).toBeLessThanOrEqual(16);
    expect(await client.strlen(bucketKey(org, 'small'))).toBe(12);
    expect(await client.strlen(bucketKey(org, 'mid'))).toBe(12);
    expect(await client.strlen(bucketKey(org, 'large'))).toBe(17);
    const read = async (endpoint: string) =>
      decodeBucketValue((await client.getBuffer(bucketKey(org, endpoint))) as Buffer, T0);
    expect(await read('compact')).toEqual({ units: 128 * U, updatedAt: T0, limit: 255, layout: 'compact' });
    expect(await read('large')).toEqual({
      units: 500_000_000 * U,
      updatedAt: T0,
      limit: 1_000_000_000,
      layout: 'packed',
    });
    expect(await store.peek(org, 'compact', 255, 1)).toBe((255 - 127 - 1) * U);
    expect(await store.peek(org, 'mid', 65_535, 1)).toBe((65_535 - 32_767 - 1) * U);
    expect(await store.peek(org, 'large', 1_000_000_000, 1)).toBe((1_000_000_000 - 500_000_000 - 1) * U);
  });

  it('weigh no more than an integer key of the same name: the compact value lives in the object header', async () => {
    const store = redisStore({ client });
    const org = uniqueOrg('weight');
    const key = bucketKey(org, 'POST /browsers');
    await store.consume(org, 'POST /browsers', 250, 1);
    // The same name but its first character, so both keys take the same allocation.
    const twin = `x${key.slice(1)}`;
    await client.set(twin, '123456789', 'PX', 60_000);
    expect(await client.memory('USAGE', key)).toBe(await client.memory('USAGE', twin));
    await client.del(twin);
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
