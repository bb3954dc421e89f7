import { concurrency, type Limit, perMinute, perSecond, RateLimitError } from '@ratecard/core';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey, redisStore } from '../src/index.js';
import { CLIENTS, type Connected } from './support/clients.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

// The operators' calls on Redis beyond the contract (contract-operations.ts): inspect charges a lease whose instant has
// come as the next script run does, reads a quota entry, writes nothing, and answers by Redis TIME; blocks live in one
// hash with a TTL, names that differ stay apart, ended ones leave it; an unusable client refuses both at once.

const T0 = 1_700_000_000_000;
const MINUTE: readonly Limit[] = [perMinute(10)];
const SECOND: readonly Limit[] = [perSecond(5)];

function operationsSuite(connect: () => Promise<Connected>, admin: () => Promise<Redis | Cluster>) {
  let connected: Connected;
  let raw: Redis | Cluster;
  beforeAll(async () => {
    connected = await connect();
    raw = await admin();
  });
  afterAll(async () => {
    await connected.close();
    raw.disconnect();
  });
  const clocked = (prefix?: string) => {
    const clock = { now: T0 };
    const store = redisStore({ client: connected.client, clock: 'client', now: () => clock.now, prefix });
    return { store, clock };
  };

  it('writes nothing: the value and its expiry are as they were', async () => {
    const { store } = clocked();
    const org = uniqueOrg('inspect');
    await store.consume(org, 'e', [...MINUTE, concurrency(2, { name: 'c' })], [3, 1], undefined, {
      id: 'a',
      ms: 9_000,
    });
    const key = endpointKey(org, 'e');
    const before = [await raw.get(key), await raw.pexpiretime(key)];
    const state = await store.inspect(org, 'e');
    expect(state.buckets.map((bucket) => bucket.name)).toEqual(['1m']);
    expect(state.leases).toEqual([
      {
        id: 'a',
        expiresAt: T0 + 9_000,
        holds: [
          { name: '1m', amount: 3 },
          { name: 'c', amount: 1 },
        ],
      },
    ]);
    expect([await raw.get(key), await raw.pexpiretime(key)]).toEqual(before);
  });

  it('charges a lease whose instant has come as the next call on the key does', async () => {
    const { store, clock } = clocked();
    const org = uniqueOrg('inspect');
    await store.consume(org, 'e', MINUTE, 2);
    await store.consume(org, 'e', MINUTE, 3, undefined, { id: 'a', ms: 1_000 });
    clock.now = T0 + 4_000;
    const seen = await store.inspect(org, 'e');
    expect(seen.leases).toEqual([]);
    // A call of another limit on the key expires the lease in Redis and writes the charged bucket back.
    await store.consume(org, 'e', SECOND, 1);
    const written = await store.inspect(org, 'e');
    const minute = (state: typeof seen) => state.buckets.find((bucket) => bucket.name === '1m');
    expect(minute(seen)).toEqual(minute(written));
    // Full at T0 less 2 tokens, refilled 1 000 units to the expiry, then 3 tokens charged: 60 000 − 12 000 + 1 000 − 18 000.
    expect(minute(seen)).toMatchObject({ units: 31_000, updatedAt: T0 + 1_000 });
  });

  it('reads a quota entry: units kept for the period ending at its updatedAt, never refilling', async () => {
    const { store } = clocked();
    const org = uniqueOrg('inspect');
    const periodEnd = T0 + 3_600_000;
    await raw.set(endpointKey(org, 'e'), `daily 2 ${periodEnd} 5/0/1`, 'PX', 60_000);
    expect((await store.inspect(org, 'e')).buckets).toEqual([
      { name: 'daily', units: 2, updatedAt: periodEnd, capacity: 5, unitsPerToken: 1, unitsPerMs: 0 },
    ]);
  });

  it("answers by Redis TIME with the store's own clock", async () => {
    const store = redisStore({ client: connected.client });
    const time = async () => {
      const [seconds, micros] = (await raw.time()) as [number | string, number | string];
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };
    const before = await time();
    const { now } = await store.inspect(uniqueOrg('inspect'), 'e');
    const blocks = await store.blocks();
    const after = await time();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(blocks.now).toBeGreaterThanOrEqual(now);
    expect(after).toBeGreaterThanOrEqual(blocks.now);
  });

  it('keeps blocks in one hash per prefix, expiring with its last block, names that differ apart', async () => {
    const prefix = `ops-${uniqueOrg('p')}:`;
    const { store, clock } = clocked(prefix);
    await store.blocks({ organization: 'a:b', endpoint: 'c', ms: 5_000, reason: 'one' });
    await store.blocks({ organization: 'a', endpoint: 'b:c', ms: 9_000, reason: 'two, with a space' });
    const { blocks } = await store.blocks({ organization: '{a}%', endpoint: 'ALL /*', ms: 7_000, reason: 'é' });
    expect([...blocks].sort((x, y) => x.until - y.until)).toEqual([
      { organization: 'a:b', endpoint: 'c', until: T0 + 5_000, reason: 'one' },
      { organization: '{a}%', endpoint: 'ALL /*', until: T0 + 7_000, reason: 'é' },
      { organization: 'a', endpoint: 'b:c', until: T0 + 9_000, reason: 'two, with a space' },
    ]);
    expect(await raw.hlen(`${prefix}blocks`)).toBe(3);
    const ttl = await raw.pttl(`${prefix}blocks`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(9_000);
    clock.now = T0 + 7_000;
    expect((await store.blocks()).blocks.map((block) => block.organization)).toEqual(['a']);
    expect(await raw.hlen(`${prefix}blocks`)).toBe(1);
    await store.blocks({ organization: 'a', endpoint: 'b:c', ms: 0, reason: '' });
    expect(await raw.exists(`${prefix}blocks`)).toBe(0);
  });

  it('refuses both at once when the client cannot send', async () => {
    const closing = await connect();
    const store = redisStore({ client: closing.client });
    await closing.close();
    for (const call of [() => store.inspect('o', 'e'), () => store.blocks()]) {
      const error = await call().then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error).toBeInstanceOf(RateLimitError);
      expect((error as RateLimitError).code).toBe('store_unavailable');
    }
  });
}

for (const kind of CLIENTS.filter((candidate) =>
  ['ioredis 6', 'node-redis 6 RESP3', 'node-redis 5 RESP2'].includes(candidate.name),
)) {
  describe.skipIf(REDIS_URL === null)(`operations, ${kind.name}, standalone`, () => {
    operationsSuite(
      () => kind.standalone(REDIS_URL as string),
      () => connectStandalone(),
    );
  });
  describe.skipIf(CLUSTER_NODES === null)(`operations, ${kind.name}, 3-master cluster`, () => {
    operationsSuite(
      () => kind.cluster(CLUSTER_NODES ?? []),
      () => connectCluster(),
    );
  });
}
