import { inPeriod, type Limit, perSecond, quota } from '@ratecard/core';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisStore, redisStore } from '../src/index.js';
import { consumeRpm, minute, resetRpm, U } from './support/limits.js';
import { connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

const T0 = 1_700_000_000_000;

describe.skipIf(REDIS_URL === null)('the deny cache', () => {
  let client: Redis;
  let clock: { now: number };
  let store: RedisStore;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  function freshStore(denyCacheSize?: number): RedisStore {
    clock = { now: T0 };
    store = redisStore({ client, clock: 'client', now: () => clock.now, denyCacheSize });
    return store;
  }

  /** Empties a Developer bucket (10 per minute) and has one request denied, which the cache remembers. */
  async function drainedBucket(cost = 1): Promise<string> {
    const org = uniqueOrg('deny');
    expect(await consumeRpm(store, org, 'e', 10, 10)).toBe(0);
    expect(await consumeRpm(store, org, 'e', 10, cost)).toBe(-1);
    return org;
  }

  it('answers a bucket short of tokens locally, with the exact outcome', async () => {
    freshStore();
    const org = await drainedBucket();
    const sent = store.stats().sent;
    clock.now += 234;
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(-1 - 2_340);
    expect(store.stats()).toMatchObject({ sent, denyCacheHits: 1 });
  });

  it('remembers the denials of a batch, each decided on its own key in the one script call', async () => {
    freshStore();
    const orgs = [uniqueOrg('batch'), uniqueOrg('batch'), uniqueOrg('batch')];
    const allOf = (cost: number) => Promise.all(orgs.map((org) => consumeRpm(store, org, 'e', 10, cost)));
    expect(await allOf(10)).toEqual([0, 0, 0]);
    const { batches } = store.stats();
    expect(await allOf(1)).toEqual([-1, -1, -1]);
    expect(store.stats().batches).toBe(batches + 1);
    const { sent } = store.stats();
    clock.now += 234;
    expect(await allOf(1)).toEqual([-1 - 2_340, -1 - 2_340, -1 - 2_340]);
    expect(store.stats()).toMatchObject({ sent, denyCacheHits: 3 });
  });

  it('asks Redis again at the exact instant enough tokens have refilled', async () => {
    freshStore();
    // 600 per minute: a token (100 units) every 100 ms, one unit a millisecond.
    const org = uniqueOrg('refill');
    expect(await consumeRpm(store, org, 'e', 600, 600)).toBe(0);
    expect(await consumeRpm(store, org, 'e', 600, 1)).toBe(-1);
    clock.now = T0 + 99;
    expect(await consumeRpm(store, org, 'e', 600, 1)).toBe(-1 - 59_400);
    clock.now = T0 + 100;
    expect(await consumeRpm(store, org, 'e', 600, 1)).toBe(0);
    expect(store.stats().denyCacheHits).toBe(1);
  });

  it('remembers a denial for 1 s at most, so that a reset by another process reaches it within 1 s', async () => {
    freshStore();
    // A Developer bucket drained: its next token is 6 s away, but another store (another process) resets it.
    const org = await drainedBucket();
    const other = redisStore({ client, clock: 'client', now: () => clock.now });
    await resetRpm(other, org, 'e');
    clock.now = T0 + 999;
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(-1 - 9_990);
    expect(store.stats().denyCacheHits).toBe(1);
    clock.now = T0 + 1_000;
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(9 * U);
    other.close();
  });

  it('answers only the same or a larger cost, at the same limit', async () => {
    freshStore();
    // 600 per minute: a token every 100 ms.
    const org = uniqueOrg('cost');
    expect(await consumeRpm(store, org, 'e', 600, 600)).toBe(0);
    expect(await consumeRpm(store, org, 'e', 600, 2)).toBe(-1);
    clock.now += 100;
    // One token is back: a cost of 1 would be admitted, so it must go to Redis.
    expect(await consumeRpm(store, org, 'e', 600, 3)).toBe(-1 - U);
    expect(await consumeRpm(store, org, 'e', 25, 2)).toBe(-1 - U);
    expect(store.stats().denyCacheHits).toBe(1);
    expect(await consumeRpm(store, org, 'e', 600, 1)).toBe(0);
  });

  it("answers a quota's refusal until its period ends, 1 s at most, and never a call of the next period", async () => {
    freshStore();
    const org = uniqueOrg('quota');
    const daily = quota(2, { per: 'day', name: 'daily' });
    const today = inPeriod([daily], T0)[0] as Limit;
    const end = today.periodEnd as number;
    expect(await store.consume(org, 'e', [today], 2)).toEqual([0]);
    expect(await store.consume(org, 'e', [today], 1)).toEqual([-1]);
    const sent = store.stats().sent;
    clock.now = T0 + 999;
    expect(await store.consume(org, 'e', [today], 1)).toEqual([-1]);
    expect(store.stats()).toMatchObject({ sent, denyCacheHits: 1 });
    // A second on, Redis answers again (a reset elsewhere would reach this process then).
    clock.now = T0 + 1_000;
    expect(await store.consume(org, 'e', [today], 1)).toEqual([-1]);
    expect(store.stats()).toMatchObject({ sent: sent + 1, denyCacheHits: 1 });
    // Refused in the period's last ms, remembered only until its end: the next period's call is admitted.
    clock.now = end - 1;
    expect(await store.consume(org, 'e', [inPeriod([daily], clock.now)[0] as Limit], 1)).toEqual([-1]);
    clock.now = end;
    expect(await store.consume(org, 'e', [inPeriod([daily], clock.now)[0] as Limit], 1)).toEqual([1]);
    expect(store.stats()).toMatchObject({ sent: sent + 3, denyCacheHits: 1 });
  });

  it('forgets a bucket once a call charges it', async () => {
    freshStore();
    const org = uniqueOrg('charged');
    await consumeRpm(store, org, 'e', 10, 7);
    expect(await consumeRpm(store, org, 'e', 10, 5)).toBe(-1 - 3 * U);
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(2 * U);
    const sent = store.stats().sent;
    expect(await consumeRpm(store, org, 'e', 10, 5)).toBe(-1 - 2 * U);
    expect(store.stats().sent).toBe(sent + 1);
  });

  it('is cleared by reset', async () => {
    freshStore();
    const org = await drainedBucket();
    await resetRpm(store, org, 'e');
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(9 * U);
    expect(store.stats().denyCacheHits).toBe(0);
  });

  it('does not remember a denial that was in flight when the bucket was reset', async () => {
    freshStore();
    const org = uniqueOrg('reset-race');
    expect(await consumeRpm(store, org, 'e', 10, 10)).toBe(0);
    const inFlight = consumeRpm(store, org, 'e', 10, 1);
    // The flush leaves on the next tick; the reset starts right after, before the denial can come back.
    await new Promise((resolve) => process.nextTick(resolve));
    await resetRpm(store, org, 'e');
    expect(await inFlight).toBe(-1);
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(9 * U);
    expect(store.stats()).toMatchObject({ denyCacheHits: 0, denyCacheSize: 0 });
  });

  it('remembers a bucket refused under a changed limit, which refills at that limit from then on', async () => {
    freshStore();
    const org = uniqueOrg('plan-change');
    await consumeRpm(store, org, 'e', 250, 250);
    // The refusal converts the bucket to the request's limit (nothing charged): from now it refills at 600 per minute.
    expect(await consumeRpm(store, org, 'e', 600, 1)).toBe(-1);
    expect(store.stats().denyCacheSize).toBe(1);
    clock.now = T0 + 99;
    expect(await consumeRpm(store, org, 'e', 600, 1)).toBe(-1 - 59_400);
    expect(store.stats().denyCacheHits).toBe(1);
    clock.now = T0 + 100;
    expect(await consumeRpm(store, org, 'e', 600, 1)).toBe(0);
  });

  it('neither answers nor remembers a call of several limits, and forgets the denial of its endpoint', async () => {
    freshStore();
    const org = await drainedBucket();
    const sent = store.stats().sent;
    expect(store.stats().denyCacheSize).toBe(1);
    // The drained '1m' bucket beside a full '1s' one of 10 units a token: Redis answers, and refuses both.
    const two = [...minute(10), perSecond(100)];
    expect(await store.consume(org, 'e', two, 1)).toEqual([-1, -1 - 1_000]);
    // A refused call of several limits may have converted the '1m' bucket to another shape (a plan change), which the
    // next one-limit call must convert back: the denial of its endpoint goes, and that call goes to Redis.
    expect(store.stats()).toMatchObject({ sent: sent + 1, denyCacheHits: 0, denyCacheSize: 0 });
    expect(await store.consume(org, 'e', two, 1)).toEqual([-1, -1 - 1_000]);
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(-1);
    expect(store.stats()).toMatchObject({ sent: sent + 3, denyCacheHits: 0, denyCacheSize: 1 });
    // Then it answers again.
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(-1);
    expect(store.stats()).toMatchObject({ sent: sent + 3, denyCacheHits: 1 });
  });

  it('counts each call it saved', async () => {
    freshStore();
    const org = await drainedBucket();
    for (let i = 0; i < 100; i++) consumeRpm(store, org, 'e', 10, 1);
    expect(store.stats()).toMatchObject({ denyCacheHits: 100, sent: 2 });
  });

  it('can be turned off', async () => {
    freshStore(0);
    const org = await drainedBucket();
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(-1);
    expect(store.stats()).toMatchObject({ denyCacheHits: 0, sent: 3 });
  });

  it('keeps answering while Redis is unreachable, since the bucket is short of tokens regardless', async () => {
    const own = await connectStandalone();
    const cached = redisStore({ client: own, clock: 'client', now: () => T0 });
    const org = uniqueOrg('outage');
    await consumeRpm(cached, org, 'e', 10, 10);
    expect(await consumeRpm(cached, org, 'e', 10, 1)).toBe(-1);
    own.disconnect();
    expect(await consumeRpm(cached, org, 'e', 10, 1)).toBe(-1);
    await expect(consumeRpm(cached, uniqueOrg('other'), 'e', 10, 1)).rejects.toMatchObject({
      code: 'store_unavailable',
    });
  });

  it('never outlasts the exact instant with the Redis clock', async () => {
    const redisClock = redisStore({ client });
    const org = uniqueOrg('redis-clock');
    // 60 000 per minute: a token per ms.
    expect(await consumeRpm(redisClock, org, 'e', 60_000, 60_000)).toBe(0);
    expect(await consumeRpm(redisClock, org, 'e', 60_000, 60_000)).toBeLessThan(0);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await consumeRpm(redisClock, org, 'e', 60_000, 2)).toBeGreaterThanOrEqual(0);
  });
});
