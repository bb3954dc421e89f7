import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server } from 'node:net';
import { type Limit, perMinute, perSecond } from '@ratecard/core';
import calculateSlot from 'cluster-key-slot';
import { type Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey, redisStore } from '../src/index.js';
import { CLIENTS } from './support/clients.js';
import { consumeRpm, inU, minute, U } from './support/limits.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, nextTick, REDIS_URL, uniqueOrg } from './support/redis.js';

const T0 = 1_700_000_000_000;

describe.skipIf(REDIS_URL === null)('auto-batching on a standalone server', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  it('sends the calls made in one tick as one script call', async () => {
    const store = redisStore({ client });
    const orgs = Array.from({ length: 100 }, (_, i) => `${uniqueOrg('tick')}-${i}`);
    await Promise.all(orgs.map((org) => consumeRpm(store, org, 'e', 10, 1)));
    expect(store.stats()).toMatchObject({ sent: 100, batches: 1, largestBatch: 100 });
  });

  it('sends a tick of 128 to 256 calls as two halves, so Redis runs one while the other is settled', async () => {
    const store = redisStore({ client });
    const orgs = Array.from({ length: 200 }, (_, i) => `${uniqueOrg('halves')}-${i}`);
    const outcomes = await Promise.all(orgs.map((org) => consumeRpm(store, org, 'e', 10, 1)));
    expect(store.stats()).toMatchObject({ sent: 200, batches: 2, largestBatch: 100 });
    expect(outcomes).toEqual(orgs.map(() => 9 * U));
  });

  it('sends a lone call on the next tick, without waiting for a timer', async () => {
    const store = redisStore({ client });
    const answer = consumeRpm(store, uniqueOrg('lone'), 'e', 10, 1);
    expect(store.stats().sent).toBe(0);
    await nextTick();
    expect(store.stats()).toMatchObject({ sent: 1, batches: 1 });
    expect(await answer).toBe(9 * U);
  });

  it('gathers calls issued from promise continuations of the same turn', async () => {
    const store = redisStore({ client });
    const org = uniqueOrg('continuations');
    const calls = Array.from({ length: 50 }, async (_, i) => {
      for (let hop = 0; hop < i % 5; hop++) await Promise.resolve();
      return consumeRpm(store, org, 'e', 100, 1);
    });
    const outcomes = await Promise.all(calls);
    expect(store.stats().batches).toBe(1);
    expect(outcomes.sort((a, b) => b - a)).toEqual(Array.from({ length: 50 }, (_, i) => (99 - i) * U));
  });

  it('holds calls back while two flushes are out, then sends them together', async () => {
    const store = redisStore({ client });
    const org = uniqueOrg('held');
    const first = consumeRpm(store, org, 'e', 100, 1);
    await nextTick();
    const second = consumeRpm(store, org, 'e', 100, 1);
    await nextTick();
    const rest = Array.from({ length: 10 }, () => consumeRpm(store, org, 'e', 100, 1));
    await nextTick();
    expect(store.stats()).toMatchObject({ sent: 2, batches: 2 });
    await Promise.all([first, second, ...rest]);
    expect(store.stats()).toMatchObject({ sent: 12, batches: 3, largestBatch: 10 });
  });

  it('keeps calls of different turns in different script calls', async () => {
    const store = redisStore({ client });
    const org = uniqueOrg('turns');
    await consumeRpm(store, org, 'e', 10, 1);
    await consumeRpm(store, org, 'e', 10, 1);
    expect(store.stats()).toMatchObject({ sent: 2, batches: 2, largestBatch: 1 });
  });

  it('charges one bucket repeated in a batch once per call, in order', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('repeat');
    const outcomes = await Promise.all([3, 4, 5, 2, 1].map((cost) => consumeRpm(store, org, 'e', 10, cost)));
    expect(outcomes).toEqual([7 * U, 3 * U, -1 - 3 * U, U, 0]);
    expect(store.stats().batches).toBe(1);
  });

  it('charges each call of a batch at its own limit and cost', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('mixed');
    const calls: [string, number, number][] = [
      [`${org}-a`, 10, 3],
      [`${org}-b`, 100_000, 5],
      [`${org}-a`, 10, 8],
      [`${org}-c`, 20, 20],
    ];
    const outcomes = await Promise.all(calls.map(([o, limit, cost]) => consumeRpm(store, o, 'e', limit, cost)));
    expect(outcomes).toEqual([7 * U, 99_995 * U, -1 - 7 * U, 0]);
    expect(store.stats().batches).toBe(1);
  });

  it('charges calls of one and two limits in one script call, each all or nothing, in order', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('two-limits');
    // 5 per second in bursts of 10 (a token is 200 units), and 30 per minute (a token is 2 000 units).
    const two = [perSecond(5, { burst: 10 }), perMinute(30)];
    const minuteOnly = [two[1] as Limit];
    const outcomes = await Promise.all([
      store.consume(org, 'e', two, 4),
      store.consume(org, 'e', minuteOnly, 20),
      store.consume(org, 'e', two, 4),
      // '1s' holds 2 tokens, short of 3: refused, and '1m', which had them, is not charged either...
      store.consume(org, 'e', two, 3),
      // ...so its last 2 tokens are still there.
      store.consume(org, 'e', minuteOnly, 2),
    ]);
    expect(outcomes).toEqual([[1_200, 52_000], [12_000], [400, 4_000], [-401, -4_001], [0]]);
    expect(store.stats()).toMatchObject({ sent: 5, batches: 1 });
  });

  it('splits a large batch into script calls of at most 256 calls', async () => {
    const store = redisStore({ client });
    const org = uniqueOrg('large');
    await Promise.all(Array.from({ length: 600 }, () => consumeRpm(store, org, 'e', 1_000, 1)));
    expect(store.stats()).toMatchObject({ sent: 600, batches: 3, largestBatch: 256 });
  });

  it('sends the calls of one tick as one script call, answered in order', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const base = uniqueOrg('batch');
    const calls = Array.from({ length: 20 }, (_, i) => ({
      organization: `${base}-${i % 7}`,
      endpoint: 'e',
      limit: 10,
      cost: 1,
    }));
    const outcomes = await Promise.all(
      calls.map((c) => consumeRpm(store, c.organization, c.endpoint, c.limit, c.cost)),
    );
    expect(store.stats().batches).toBe(1);
    expect(outcomes).toEqual(calls.map((_, i) => (9 - Math.floor(i / 7)) * U));
  });
});

/** A TCP relay to a Redis server that keeps each chunk the client wrote, as the relay read it. */
async function recordingRelay(url: string): Promise<{ url: string; chunks: string[]; server: Server }> {
  const target = new URL(url);
  const chunks: string[] = [];
  const server = createServer((inbound) => {
    const outbound = connect(Number(target.port), target.hostname);
    inbound.on('data', (chunk) => {
      chunks.push(chunk.toString('latin1'));
      outbound.write(chunk);
    });
    outbound.pipe(inbound);
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`, chunks, server };
}

const NODE_REDIS = CLIENTS.filter((kind) => kind.name.startsWith('node-redis'));

describe.skipIf(REDIS_URL === null).each(NODE_REDIS)(
  'auto-batching on $name, which writes at the next turn',
  (kind) => {
    it('writes the two halves of a tick apart, a turn between them, so that Redis answers each on its own', async () => {
      const relay = await recordingRelay(REDIS_URL as string);
      const { client, close } = await kind.standalone(relay.url);
      try {
        const store = redisStore({ client });
        const orgs = Array.from({ length: 200 }, (_, i) => `${uniqueOrg('written')}-${i}`);
        relay.chunks.length = 0;
        const outcomes = await Promise.all(orgs.map((org) => consumeRpm(store, org, 'e', 10, 1)));
        expect(outcomes).toEqual(orgs.map(() => 9 * U));
        expect(store.stats()).toMatchObject({ sent: 200, batches: 2, largestBatch: 100 });
        // Each script call (its first command, EVALSHA, or EVAL after a NOSCRIPT) in a chunk of its own.
        const scriptCalls = relay.chunks.map((chunk) => chunk.match(/\r\nevalsha\r\n/gi)?.length ?? 0);
        expect(scriptCalls.filter((count) => count > 0)).toEqual([1, 1]);
      } finally {
        await close();
        relay.server.close();
      }
    });

    it('sends no held half once the store is closed: its calls are refused, the first half is answered', async () => {
      const { client, close } = await kind.standalone(REDIS_URL as string);
      try {
        const store = redisStore({ client });
        const orgs = Array.from({ length: 200 }, (_, i) => `${uniqueOrg('held-half')}-${i}`);
        const calls = orgs.map((org) => consumeRpm(store, org, 'e', 10, 1));
        await nextTick();
        store.close();
        const settled = await Promise.allSettled(calls);
        expect(settled.slice(0, 100)).toEqual(orgs.slice(0, 100).map(() => ({ status: 'fulfilled', value: 9 * U })));
        const refused = settled.slice(100).map((result) => result.status === 'rejected' && result.reason.code);
        expect(refused).toEqual(orgs.slice(100).map(() => 'store_closed'));
        expect(store.stats()).toMatchObject({ sent: 100, batches: 1 });
      } finally {
        await close();
      }
    });
  },
);

/** `count` organizations whose hash tags share one cluster slot. */
function orgsInOneSlot(count: number): string[] {
  const bySlot = new Map<number, string[]>();
  const base = uniqueOrg('same-slot');
  for (let i = 0; ; i++) {
    const org = `${base}-${i}`;
    const slot = calculateSlot(endpointKey(org, 'e'));
    const orgs = bySlot.get(slot) ?? [];
    orgs.push(org);
    bySlot.set(slot, orgs);
    if (orgs.length === count) return orgs;
  }
}

describe.skipIf(CLUSTER_NODES === null)('auto-batching on a cluster', () => {
  let client: Cluster;
  beforeAll(async () => {
    client = await connectCluster();
  });
  afterAll(() => client.disconnect());

  it('sends one script call per master, whatever the slots of its keys', async () => {
    const store = redisStore({ client });
    // The first calls also connect the client to every master; from then on calls go straight to them.
    await Promise.all(Array.from({ length: 30 }, (_, i) => consumeRpm(store, `${uniqueOrg('warm')}-${i}`, 'e', 10, 1)));
    const before = store.stats();
    const orgs = Array.from({ length: 40 }, (_, i) => `${uniqueOrg('slots')}-${i}`);
    const calls = orgs.flatMap((org) => [org, org, org]);
    const outcomes = await Promise.all(calls.map((org) => consumeRpm(store, org, 'e', 10, 1)));
    expect(outcomes.filter((outcome) => outcome < 0)).toEqual([]);
    const masters = new Set(orgs.map((org) => client.slots[calculateSlot(endpointKey(org, 'e'))]?.[0]));
    expect(store.stats().sent - before.sent).toBe(120);
    expect(store.stats().batches - before.batches).toBe(masters.size);
    expect(store.stats().rerouted).toBe(before.rerouted);
  });

  it('keeps one script call out per master: calls for a held master wait and go together, the others go on', async () => {
    const store = redisStore({ client });
    await Promise.all(Array.from({ length: 30 }, (_, i) => consumeRpm(store, `${uniqueOrg('warm')}-${i}`, 'e', 10, 1)));
    const masterOf = (org: string) => client.slots[calculateSlot(endpointKey(org, 'e'))]?.[0] as string;
    const orgs = Array.from({ length: 200 }, (_, i) => `${uniqueOrg('held-master')}-${i}`);
    const held = masterOf(orgs[0] as string);
    const onHeld = orgs.filter((org) => masterOf(org) === held).slice(0, 5);
    const other = masterOf(orgs.find((org) => masterOf(org) !== held) as string);
    const elsewhere = orgs.filter((org) => masterOf(org) === other).slice(0, 3);
    const [host, port] = held.split(':');
    const direct = new Redis({ host, port: Number(port) });
    try {
      // Scripts that may write wait while the master is paused: its first script call stays out for 300 ms.
      await direct.client('PAUSE', 300, 'WRITE');
      const before = store.stats();
      const first = consumeRpm(store, onHeld[0] as string, 'e', 10, 1);
      await nextTick();
      const waiting = onHeld.slice(1).map((org) => consumeRpm(store, org, 'e', 10, 1));
      const others = await Promise.all(elsewhere.map((org) => consumeRpm(store, org, 'e', 10, 1)));
      expect(others).toEqual(elsewhere.map(() => 9 * U));
      // The other master answered while the held one's calls waited here, unsent.
      expect(store.stats()).toMatchObject({ sent: before.sent + 4, batches: before.batches + 2, queued: 4 });
      expect(await Promise.all([first, ...waiting])).toEqual(onHeld.map(() => 9 * U));
      expect(store.stats()).toMatchObject({ sent: before.sent + 8, batches: before.batches + 3, queued: 0 });
    } finally {
      direct.disconnect();
    }
  });

  it('puts organizations that share a slot in the same script call', async () => {
    const store = redisStore({ client });
    const orgs = orgsInOneSlot(3);
    await Promise.all(orgs.map((org) => consumeRpm(store, org, 'e', 10, 1)));
    expect(store.stats()).toMatchObject({ sent: 3, batches: 1, largestBatch: 3 });
  });
});

describe.skipIf(CLUSTER_NODES === null).each(CLIENTS.filter((kind) => !kind.name.startsWith('node-redis')))(
  'a fresh cluster client, $name',
  (kind) => {
    it("leaves batched from its first calls, which wait within the budget for the client's node connections", async () => {
      // ioredis and iovalkey connect to a master on the first command routed to it; the store waits for that.
      const { client, close } = await kind.cluster(CLUSTER_NODES as { host: string; port: number }[]);
      try {
        const store = redisStore({ client });
        const orgs = Array.from({ length: 500 }, (_, i) => `${uniqueOrg('fresh')}-${i}`);
        const outcomes = await Promise.all(orgs.map((org) => store.consume(org, 'e', minute(10), 1, 100)));
        expect(outcomes.map((outcome) => inU(outcome[0] as number, 10))).toEqual(orgs.map(() => 9 * U));
        // One script call per master, none by key (before, each call went alone by key).
        expect(store.stats()).toMatchObject({ sent: 500, batches: 3, rerouted: 0 });
      } finally {
        await close();
      }
    });
  },
);
