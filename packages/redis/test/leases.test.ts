import { concurrency, DEBT_OFFSET, inPeriod, type Limit, perMinute, perSecond, quota, refusal } from '@ratecard/core';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEndpointLeases, decodeEndpointValue, endpointKey, type RedisStore, redisStore } from '../src/index.js';
import { CLIENTS, type Connected } from './support/clients.js';
import { CLUSTER_NODES, connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

// Leases in the Redis store (docs/stores.md, "Leases"), against the store directly with the client clock, so every
// number below is worked out by hand from the rules there. perMinute(10): a token is 6 000 units, a full bucket
// 60 000, refilling 1 unit a ms.

const T0 = 1_700_000_000_000;
const MINUTE: readonly Limit[] = [perMinute(10)];
const SLOTS: readonly Limit[] = [concurrency(2, { name: 'c' })];
const BOTH: readonly Limit[] = [perMinute(10), concurrency(2, { name: 'c' })];

/** A store on `client` whose clock the test moves. */
function clocked(client: Connected['client'], options: { denyCacheSize?: number } = {}) {
  const clock = { now: T0 };
  const store = redisStore({ client, clock: 'client', now: () => clock.now, ...options });
  return { store, clock };
}

function leaseSuite(connect: () => Promise<Connected>) {
  let connected: Connected;
  let store: RedisStore;
  let clock: { now: number };
  beforeAll(async () => {
    connected = await connect();
  });
  afterAll(() => connected.close());
  const fresh = () => {
    ({ store, clock } = clocked(connected.client));
    return uniqueOrg('lease');
  };

  it('sets a reserve aside: later calls see Q - P, with the outcomes a consume gives', async () => {
    const org = fresh();
    expect(await store.consume(org, 'e', MINUTE, 4, undefined, { id: 'a', ms: 1_000 })).toEqual([36_000]);
    expect(await store.consume(org, 'e', MINUTE, 6)).toEqual([0]);
    expect(await store.consume(org, 'e', MINUTE, 1)).toEqual([refusal(0)]);
    expect(await store.peek(org, 'e', MINUTE, 1)).toEqual([refusal(0)]);
  });

  it('settles with the actual cost: unused tokens go back, never above what the bucket could hold', async () => {
    const org = fresh();
    await store.consume(org, 'e', MINUTE, 4, undefined, { id: 'a', ms: 1_000 });
    await store.consume(org, 'e', MINUTE, 6);
    clock.now = T0 + 500;
    // Q = 24 000 + 500 refilled, less 2 tokens.
    expect(await store.settle(org, 'e', MINUTE, { id: 'a', actual: 2 })).toBe(true);
    expect(await store.peek(org, 'e', MINUTE, 2)).toEqual([500]);
    expect(await store.settle(org, 'e', MINUTE, { id: 'a', actual: 2 })).toBe(false);
  });

  it('cancels: every token reserved goes back', async () => {
    const org = fresh();
    await store.consume(org, 'e', MINUTE, 10, undefined, { id: 'a', ms: 1_000 });
    expect(await store.consume(org, 'e', MINUTE, 1)).toEqual([refusal(0)]);
    expect(await store.settle(org, 'e', MINUTE, { id: 'a', actual: 0 })).toBe(true);
    expect(await store.consume(org, 'e', MINUTE, 10)).toEqual([0]);
  });

  it('takes a settle past empty into debt, down to minus the capacity, and counts it in the outcome', async () => {
    const org = fresh();
    await store.consume(org, 'e', MINUTE, 1, undefined, { id: 'a', ms: 1_000 });
    expect(await store.settle(org, 'e', MINUTE, { id: 'a', actual: 25 })).toBe(true);
    expect(await store.consume(org, 'e', MINUTE, 1)).toEqual([-60_000 - 1 - DEBT_OFFSET]);
    const value = (await store.peek(org, 'e', MINUTE, 1))[0] as number;
    expect(value).toBe(refusal(-60_000));
    clock.now = T0 + 70_000;
    expect(await store.consume(org, 'e', MINUTE, 1)).toEqual([4_000]);
  });

  it('expires leases in order of their instant, each keeping its charge', async () => {
    const org = fresh();
    await store.consume(org, 'e', MINUTE, 5, undefined, { id: 'b', ms: 2_000 });
    await store.consume(org, 'e', MINUTE, 5, undefined, { id: 'a', ms: 1_000 });
    clock.now = T0 + 3_000;
    // a at +1 s: Q full, less 30 000; b at +2 s: 31 000 less 30 000; then 1 000 refilled.
    expect(await store.peek(org, 'e', MINUTE, 1)).toEqual([refusal(2_000)]);
    expect(await store.consume(org, 'e', MINUTE, 1)).toEqual([refusal(2_000)]);
    expect(await store.settle(org, 'e', MINUTE, { id: 'a', actual: 0 })).toBe(false);
  });

  it('extends a lease from now', async () => {
    const org = fresh();
    await store.consume(org, 'e', SLOTS, 1, undefined, { id: 'a', ms: 1_000 });
    clock.now = T0 + 900;
    expect(await store.settle(org, 'e', SLOTS, { id: 'a', holdMs: 1_000 })).toBe(true);
    clock.now = T0 + 1_500;
    expect(await store.settle(org, 'e', SLOTS, { id: 'a', actual: 1 })).toBe(true);
    expect(await store.settle(org, 'e', SLOTS, { id: 'a', holdMs: 1_000 })).toBe(false);
  });

  it('admits at most n leases of a concurrency limit, a slot freed by a settle or an expiry', async () => {
    const org = fresh();
    const reserve = (id: string, ms = 60_000) => store.consume(org, 'e', BOTH, 1, undefined, { id, ms });
    expect(await reserve('a')).toEqual([54_000, 1]);
    expect(await reserve('b', 1_000)).toEqual([48_000, 0]);
    expect(await reserve('c')).toEqual([refusal(48_000), refusal(0)]);
    expect(await store.settle(org, 'e', BOTH, { id: 'a', actual: [1, 1] })).toBe(true);
    expect(await reserve('c')).toEqual([42_000, 0]);
    clock.now = T0 + 1_000;
    expect(await reserve('d')).toEqual([37_000, 0]);
    expect(store.stats().denyCacheHits).toBe(0);
  });

  it('never answers a concurrency refusal from the deny cache', async () => {
    const org = fresh();
    await store.consume(org, 'e', SLOTS, 1, undefined, { id: 'a', ms: 60_000 });
    await store.consume(org, 'e', SLOTS, 1, undefined, { id: 'b', ms: 60_000 });
    for (let i = 0; i < 3; i++) {
      expect(await store.consume(org, 'e', SLOTS, 1, undefined, { id: `x${i}`, ms: 60_000 })).toEqual([refusal(0)]);
    }
    expect(store.stats().denyCacheHits).toBe(0);
    await store.settle(org, 'e', SLOTS, { id: 'a', actual: 0 });
    expect(await store.consume(org, 'e', SLOTS, 1, undefined, { id: 'c', ms: 60_000 })).toEqual([0]);
  });

  it("sets a quota's requests aside, and an expiry charges them to the period the quota holds", async () => {
    const org = fresh();
    const daily = quota(5, { per: 'day', name: 'daily' });
    const today = inPeriod([daily], T0)[0] as Limit;
    const end = today.periodEnd as number;
    expect(await store.consume(org, 'e', [today], 2, undefined, { id: 'a', ms: 1_000 })).toEqual([3]);
    expect(await store.consume(org, 'e', [today], 1, undefined, { id: 'b', ms: 2_000 })).toEqual([2]);
    expect(await store.settle(org, 'e', [today], { id: 'b', actual: 0 })).toBe(true);
    clock.now = T0 + 1_000;
    expect(await store.peek(org, 'e', [today], 3)).toEqual([0]);
    // Still counted for the period ending at `end` (had the expiry written its own instant, the bucket would read full).
    expect(await store.consume(org, 'e', [today], 1)).toEqual([2]);
    clock.now = end;
    expect(await store.peek(org, 'e', [inPeriod([daily], end)[0] as Limit], 5)).toEqual([0]);
  });

  it('charges a cost per limit, in plain consume too', async () => {
    const org = fresh();
    const limits = [perSecond(10), perMinute(100)];
    // perSecond(10): 100 units a token; perMinute(100): 600.
    expect(await store.consume(org, 'e', limits, [1, 5])).toEqual([900, 57_000]);
    expect(await store.consume(org, 'e', limits, [9, 95])).toEqual([0, 0]);
    expect(await store.consume(org, 'e', limits, [1, 0])).toEqual([refusal(0), refusal(0)]);
  });

  it('refuses a reserve whose id is held already', async () => {
    const org = fresh();
    await store.consume(org, 'e', MINUTE, 1, undefined, { id: 'a', ms: 1_000 });
    await expect(store.consume(org, 'e', MINUTE, 1, undefined, { id: 'a', ms: 1_000 })).rejects.toMatchObject({
      code: 'invalid_argument',
    });
  });

  it('settles, reserves and consumes made together in one script call, in order', async () => {
    const org = fresh();
    await store.consume(org, 'e', BOTH, 1, undefined, { id: 'a', ms: 60_000 });
    await store.consume(org, 'e', BOTH, 1, undefined, { id: 'b', ms: 60_000 });
    const batches = store.stats().batches;
    const [settled, reserved, consumed, again] = await Promise.all([
      store.settle(org, 'e', BOTH, { id: 'a', actual: 3 }),
      store.consume(org, 'e', BOTH, 1, undefined, { id: 'c', ms: 60_000 }),
      store.consume(org, 'e', MINUTE, 1),
      store.settle(org, 'e', BOTH, { id: 'a', actual: 0 }),
    ]);
    expect(store.stats().batches).toBe(batches + 1);
    // Q: 60 000 less a's 3 tokens; P: b and c.
    expect([settled, reserved, consumed, again]).toEqual([true, [30_000, 0], [24_000], false]);
  });

  it('forgets a lease its hold on the limits reset, and the lease holding nothing more', async () => {
    const org = fresh();
    await store.consume(org, 'e', BOTH, [2, 1], undefined, { id: 'a', ms: 60_000 });
    await store.consume(org, 'e', MINUTE, 3, undefined, { id: 'b', ms: 60_000 });
    await store.reset(org, 'e', MINUTE);
    expect(await store.peek(org, 'e', BOTH, 1)).toEqual([54_000, 0]);
    expect(await store.settle(org, 'e', MINUTE, { id: 'b', actual: 0 })).toBe(false);
    // a holds its slot alone now: its settle charges the bucket nothing.
    expect(await store.settle(org, 'e', BOTH, { id: 'a', actual: 1 })).toBe(true);
    expect(await store.peek(org, 'e', BOTH, 1)).toEqual([54_000, 1]);
  });
}

for (const kind of CLIENTS) {
  describe.skipIf(REDIS_URL === null)(`leases, ${kind.name}, standalone`, () => {
    leaseSuite(() => kind.standalone(REDIS_URL as string));
  });
}

for (const kind of CLIENTS.slice(0, 3)) {
  describe.skipIf(CLUSTER_NODES === null)(`leases, ${kind.name}, 3-master cluster`, () => {
    leaseSuite(() => kind.cluster(CLUSTER_NODES ?? []));
  });
}

describe.skipIf(REDIS_URL === null)('the value and TTL of a key with leases', () => {
  let admin: Redis;
  beforeAll(async () => {
    admin = await connectStandalone();
  });
  afterAll(() => admin.disconnect());

  it('is readable with redis-cli and decodeEndpointValue, and lives until the last lease expires', async () => {
    const org = uniqueOrg('lease-value');
    // Redis' clock, so that PXAT is the instant itself.
    const store = redisStore({ client: admin });
    const second = [perSecond(10)];
    const limits = [...second, concurrency(3, { name: 'c' })];
    await store.consume(org, 'e', limits, [4, 1], undefined, { id: 'a', ms: 30_000 });
    await store.consume(org, 'e', second, 1);
    const key = endpointKey(org, 'e');
    const value = (await admin.get(key)) as string;
    const [bucket] = decodeEndpointValue(value) ?? [];
    const [lease] = decodeEndpointLeases(value) ?? [];
    const at = lease?.expiresAt;
    expect(value).toBe(`1s 900 ${bucket?.updatedAt} 10/1/100, @ ${at} ${at} 1s=4 c=1, @a ${at} 1s=4 c=1`);
    expect(lease?.holds).toEqual({ '1s': 4, c: 1 });
    // Full again, counting what the lease set aside: 500 units, a ms each, after the lease expires.
    expect(await admin.pexpiretime(key)).toBe((lease?.expiresAt as number) + 500);
    expect(await store.settle(org, 'e', limits, { id: 'a', actual: 4 })).toBe(true);
    const settled = (await admin.get(key)) as string;
    expect(decodeEndpointLeases(settled)).toEqual([]);
    expect(settled).not.toContain('@');
  });

  it('of concurrency limits alone holds the leases only, and goes when the last is settled', async () => {
    const org = uniqueOrg('lease-slots');
    const store = redisStore({ client: admin, clock: 'client', now: () => T0 });
    await store.consume(org, 'e', SLOTS, 1, undefined, { id: 'a', ms: 5_000 });
    const key = endpointKey(org, 'e');
    expect(await admin.get(key)).toBe(`@ ${T0 + 5_000} ${T0 + 5_000} c=1, @a ${T0 + 5_000} c=1`);
    expect(await admin.pttl(key)).toBeGreaterThan(4_900);
    expect(await store.settle(org, 'e', SLOTS, { id: 'a', actual: 0 })).toBe(true);
    expect(await admin.exists(key)).toBe(0);
  });
});
