import {
  createLimiter,
  inPeriod,
  type Limit,
  msUntilFull,
  perDay,
  perHour,
  perMinute,
  perSecond,
  quota,
  tokenBucket,
} from '@ratecard/core';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEndpointValue, endpointKey, redisStore } from '../src/index.js';
import { consumeRpm, rpmValue, U } from './support/limits.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, REDIS_URL, scanKeys, uniqueOrg } from './support/redis.js';
import { runTraffic } from './support/traffic.js';

const T0 = 1_700_000_000_000;

function uniquePrefix(label: string): string {
  return `ratecard-${label}-${process.pid}-${Date.now().toString(36)}:`;
}

/**
 * The instant a key expires (PEXPIRETIME) beside the instant its value says the bucket is full again (core's
 * msUntilFull counted from updatedAt), read in one MULTI; undefined when the key expired before it. Both are epoch ms
 * by Redis' clock, so no reading of the time stands between them.
 */
async function fullAtAndExpiry(client: Redis, key: string): Promise<{ fullAt: number; expiresAt: number } | undefined> {
  const replies = (await client.multi().get(key).pexpiretime(key).exec()) ?? [];
  const [[, value], [, expiresAt]] = replies as [[unknown, string | null], [unknown, number]];
  if (value === null) return undefined;
  const buckets = decodeEndpointValue(value);
  if (buckets === undefined || buckets.length === 0) {
    throw new Error(`${key} holds ${value}, which ratecard would not write`);
  }
  // The key lives until the last of its buckets is full again.
  const fullAt = Math.max(...buckets.map((bucket) => bucket.updatedAt + msUntilFull(bucket.units, bucket)));
  return { fullAt, expiresAt };
}

/**
 * Reads of keys that do not expire at the very ms their bucket is full again (the default clock, Redis TIME, writes
 * that instant with PXAT): a key with no expiry (-1) is one, as is one that outlives its bucket or goes before it.
 */
async function expiringOffTime(client: Redis, keys: readonly string[]): Promise<unknown[]> {
  const off: unknown[] = [];
  for (const key of keys) {
    const read = await fullAtAndExpiry(client, key);
    if (read !== undefined && read.expiresAt !== read.fullAt) off.push({ key, ...read });
  }
  return off;
}

describe.skipIf(REDIS_URL === null)('TTLs on a standalone server', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  it('end when the bucket is full again, on every key of a run (SCAN, GET, PEXPIRETIME)', async () => {
    const prefix = uniquePrefix('scan');
    const limiter = createLimiter({
      store: redisStore({ client, prefix }),
      onStoreError: 'throw',
      storeTimeoutMs: 2_000,
    });
    const orgs = Array.from({ length: 200 }, (_, i) => `${uniqueOrg('ttl')}-${i}`);
    const { failures } = await runTraffic(limiter, orgs, 3_000, 32, 25);
    expect(failures).toEqual([]);
    const keys = await scanKeys(client, `${prefix}*`);
    expect(keys.length).toBeGreaterThan(100);
    expect(await expiringOffTime(client, keys)).toEqual([]);
  });

  it('are the ms until the bucket is full again, for every limit', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('exact-ttl');
    const limits = [
      perMinute(10),
      perMinute(250),
      perMinute(65_536),
      perMinute(1_000_000_000),
      perSecond(5, { burst: 10 }),
      perHour(1_000, { burst: 7 }),
      perDay(10_000),
      tokenBucket({ capacity: 9, refill: 7, intervalMs: 3_001 }),
    ];
    for (const [i, limit] of limits.entries()) {
      // Half of the bucket (at least a second's worth of refill), so the TTL can be read back.
      const outcome = (await store.consume(org, String(i), [limit], Math.floor(limit.capacity / 2)))[0] as number;
      const ttl = await client.pttl(endpointKey(org, String(i)));
      // msUntilFull, plus the 1 ms the script adds for Redis' expiry rounding, minus the time since the write.
      expect(ttl).toBeLessThanOrEqual(msUntilFull(outcome, limit) + 1);
      expect(ttl).toBeGreaterThan(msUntilFull(outcome, limit) - 1_000);
    }
  });

  it('are the ms until the last bucket of the key is full again, for a call of several limits', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('several-ttl');
    // Half of 10 per minute is full again in 30 s, half of 20 per hour in 15 minutes: in either order, the later.
    for (const [endpoint, limits] of [
      ['minute-first', [perMinute(10), perHour(20)]],
      ['hour-first', [perHour(20), perMinute(10)]],
    ] as const) {
      await store.consume(org, endpoint, limits, 5);
      const ttl = await client.pttl(endpointKey(org, endpoint));
      expect(ttl).toBeLessThanOrEqual(900_000 + 1);
      expect(ttl).toBeGreaterThan(900_000 - 1_000);
    }
  });

  it('move with every charge, and with a plan change', async () => {
    let now = T0;
    const store = redisStore({ client, clock: 'client', now: () => now });
    const org = uniqueOrg('every-charge');
    const key = endpointKey(org, 'e');
    // 100 per minute: each token is 600 ms of refill.
    const expectTtl = async (untilFull: number) => {
      const ttl = await client.pttl(key);
      expect(ttl).toBeLessThanOrEqual(untilFull + 1);
      expect(ttl).toBeGreaterThan(untilFull - 1_000);
    };
    for (let i = 0; i < 16; i++) await consumeRpm(store, org, 'e', 100, 1);
    await expectTtl(9_600);
    await consumeRpm(store, org, 'e', 100, 1);
    await expectTtl(10_200);
    // 100 ms later, 1 token's worth less refill to wait for a charge of 2: 10 100 + 1 200.
    now = T0 + 100;
    await consumeRpm(store, org, 'e', 100, 2);
    await expectTtl(11_300);
    // A plan of 10 caps the bucket at 10 tokens; one charged leaves 9, full 6 s later at 10 per minute.
    await consumeRpm(store, org, 'e', 10, 1);
    await expectTtl(6_000);
    expect(await client.get(key)).toBe(rpmValue(9 * U, T0 + 100, 10));
  });

  it('count from the stored time when the clock went backwards', async () => {
    let now = T0;
    const store = redisStore({ client, clock: 'client', now: () => now });
    const org = uniqueOrg('backwards');
    await consumeRpm(store, org, 'e', 10, 1);
    now = T0 - 30_000;
    const outcome = await consumeRpm(store, org, 'e', 10, 1);
    expect(outcome).toBe(8 * U);
    // Written at the stored time T0, so the bucket is full 12 s after T0, which is 42 s after now.
    expect(await client.pttl(endpointKey(org, 'e'))).toBeGreaterThan(42_000 - 1_000);
  });

  it("end when a quota's period ends, beside a token bucket and on either clock", async () => {
    const daily = quota(1_000, { per: 'day', name: 'daily' });
    // Redis' clock: PXAT the period's end, exactly (its end by this process's clock, which the limiter states).
    const org = uniqueOrg('quota-ttl');
    const today = inPeriod([daily])[0] as Limit;
    expect(await redisStore({ client }).consume(org, 'e', [perMinute(10), today], 1)).toEqual([54_000, 999]);
    const read = await fullAtAndExpiry(client, endpointKey(org, 'e'));
    expect(read).toEqual({ fullAt: today.periodEnd, expiresAt: today.periodEnd });
    // The client's clock: PX until then, + 1 ms.
    const atT0 = inPeriod([daily], T0)[0] as Limit;
    await redisStore({ client, clock: 'client', now: () => T0 }).consume(org, 'q', [atT0], 1);
    const ttl = await client.pttl(endpointKey(org, 'q'));
    expect(ttl).toBeLessThanOrEqual((atT0.periodEnd as number) - T0 + 1);
    expect(ttl).toBeGreaterThan((atT0.periodEnd as number) - T0 - 1_000);
  });

  it('let Redis drop a bucket once it is full again', async () => {
    const store = redisStore({ client });
    const org = uniqueOrg('expires');
    // 60 000 per minute refills a token per ms: the key lives 2 ms.
    await consumeRpm(store, org, 'e', 60_000, 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await client.exists(endpointKey(org, 'e'))).toBe(0);
  });
});

describe.skipIf(CLUSTER_NODES === null)('TTLs on a cluster', () => {
  let client: Cluster;
  beforeAll(async () => {
    client = await connectCluster();
  });
  afterAll(() => client.disconnect());

  it('end when the bucket is full again, on every key of a run on every master (SCAN, GET, PEXPIRETIME)', async () => {
    const prefix = uniquePrefix('cluster-scan');
    const limiter = createLimiter({
      store: redisStore({ client, prefix }),
      onStoreError: 'throw',
      storeTimeoutMs: 2_000,
    });
    const orgs = Array.from({ length: 200 }, (_, i) => `${uniqueOrg('ttl')}-${i}`);
    const { failures } = await runTraffic(limiter, orgs, 3_000, 32, 25);
    expect(failures).toEqual([]);
    let total = 0;
    for (const node of client.nodes('master')) {
      const keys = await scanKeys(node, `${prefix}*`);
      total += keys.length;
      expect(await expiringOffTime(node, keys)).toEqual([]);
    }
    expect(total).toBeGreaterThan(100);
  });
});
