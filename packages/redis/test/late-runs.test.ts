import { createLimiter, type Decision, type Limiter, type LimitRequest, RateLimitError } from '@ratecard/core';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey, type RedisStore, redisStore } from '../src/index.js';
import {
  canStartRedis,
  type RedisCluster,
  type RedisServer,
  redisCommand,
  startRedis,
  startRedisCluster,
} from '../src/testing.js';
import { sleep } from './faults/fleet.js';
import { FAULT_CLIENTS } from './faults/scenario.js';
import { type Connected, clientKind } from './support/clients.js';
import { minute } from './support/limits.js';
import { CLUSTER_NODES, REDIS_EXTERNAL, REDIS_URL, uniqueOrg } from './support/redis.js';

/**
 * Calls the store sent in time, which reach Redis only after the limiter stopped waiting: held in a paused server, or
 * sent again by the client after it reconnected. The limiter has answered them by its policy, so none may charge, and
 * a reset it has rejected may not forget a bucket. CLIENT PAUSE would stall every other suite on a shared server, so
 * these start their own.
 */
const canSpawn = REDIS_URL !== null && (!REDIS_EXTERNAL || canStartRedis('@ratecard/redis late-run tests'));

const BUDGET_MS = 50;

function developer(organization: string): LimitRequest {
  return { organization, endpoint: 'POST /browsers', plan: 'developer' };
}

/** What a promise rejected with, or undefined when it resolved. */
function rejection(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (error: unknown) => error,
  );
}

/** Asserts that a call rejected with a RateLimitError of `code`. */
function expectCode(error: unknown, code: string): void {
  expect(error).toBeInstanceOf(RateLimitError);
  expect((error as RateLimitError).code).toBe(code);
}

/** A new organization whose Developer bucket (10 a minute) one call of cost 10 has drained. */
async function drainedOrganization(limiter: Limiter, label: string): Promise<string> {
  const organization = uniqueOrg(label);
  const decision = await limiter.consume({ ...developer(organization), cost: 10 });
  expect(decision).toMatchObject({ allowed: true, remaining: 0, source: 'store' });
  return organization;
}

/** Whether Redis still holds the organization's Developer bucket drained: a token refills in 6 s, longer than a test. */
async function stillDrained(limiter: Limiter, organization: string): Promise<boolean> {
  const decision = await limiter.peek(developer(organization));
  expect(decision.source).toBe('store');
  return !decision.allowed;
}

for (const clientName of FAULT_CLIENTS) {
  describe.skipIf(!canSpawn)(`calls that reach Redis after their deadline, ${clientName}`, () => {
    let server: RedisServer;
    let admin: Redis;
    let connected: Connected;
    let store: RedisStore;
    let limiter: Limiter;
    beforeAll(async () => {
      server = await startRedis();
      admin = new Redis(server.url);
      connected = await clientKind(clientName).standalone(server.url);
      store = redisStore({ client: connected.client });
      limiter = createLimiter({ store, onStoreError: 'deny', storeTimeoutMs: BUDGET_MS });
      // One call answered by Redis first: from its reply the store learns how Redis' clock stands to its own.
      expect((await limiter.consume(developer(uniqueOrg('warm')))).source).toBe('store');
    }, 30_000);
    afterAll(async () => {
      await limiter?.close();
      await connected?.close();
      admin?.disconnect();
      await server?.stop();
    });

    /**
     * Five calls on one Developer bucket while `fault` runs; they settle by the policy, then Redis is left `settleMs`
     * to run whatever reaches it. Returns who answered the calls, whether their bucket exists, and how many of them the
     * store counted as expired.
     */
    async function lateCalls(
      fault: () => Promise<void>,
      settleMs: number,
    ): Promise<{ sources: string[]; charged: boolean; expired: number }> {
      const organization = uniqueOrg('late');
      const expiredBefore = store.stats().expired;
      const calls = Promise.all(Array.from({ length: 5 }, () => limiter.consume(developer(organization))));
      await fault();
      const decisions: Decision[] = await calls;
      await sleep(settleMs);
      return {
        sources: decisions.map((decision) => decision.source),
        charged: (await admin.exists(endpointKey(organization, 'POST /browsers'))) === 1,
        expired: store.stats().expired - expiredBefore,
      };
    }

    it('charges nothing for calls held in a paused server past their deadline', async () => {
      // EVALSHA is a write for CLIENT PAUSE WRITE: the calls are sent, and Redis holds them until the pause ends.
      await admin.call('CLIENT', 'PAUSE', '400', 'WRITE');
      const late = await lateCalls(async () => {}, 600);
      expect(late).toEqual({ sources: Array(5).fill('fail-closed'), charged: false, expired: 5 });
      expect((await limiter.consume(developer(uniqueOrg('after')))).source).toBe('store');
    }, 10_000);

    it('charges nothing for calls the client sends again after it reconnects', async () => {
      await admin.call('CLIENT', 'PAUSE', '600', 'WRITE');
      const late = await lateCalls(async () => {
        await sleep(2 * BUDGET_MS);
        // Drops the store's connection with the calls unanswered: ioredis writes them again once it reconnects
        // (autoResendUnfulfilledCommands), into the same pause; node-redis fails them.
        await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      }, 900);
      expect(late.sources).toEqual(Array(5).fill('fail-closed'));
      expect(late.charged).toBe(false);
      // ioredis's second sending reached the script, which refused it; node-redis never sent them again.
      expect(late.expired).toBe(clientName.startsWith('ioredis') ? 5 : 0);
      let after: Decision | undefined;
      for (let i = 0; i < 100 && after?.source !== 'store'; i++) {
        after = await limiter.consume(developer(uniqueOrg('after')));
        if (after.source !== 'store') await sleep(20);
      }
      expect(after?.source).toBe('store');
    }, 10_000);

    it('forgets nothing for a reset held in a paused server past its deadline, which the limiter rejected', async () => {
      const organization = await drainedOrganization(limiter, 'late-reset');
      await admin.call('CLIENT', 'PAUSE', '400', 'WRITE');
      expectCode(await rejection(limiter.reset({ organization, endpoint: 'POST /browsers' })), 'store_timeout');
      // The peek goes after the reset on the same connection: Redis has run the held reset when it answers.
      await sleep(600);
      expect(await stillDrained(limiter, organization)).toBe(true);
    }, 10_000);

    it('rejects with store_timeout, from the store itself, a reset that reaches Redis past its budget', async () => {
      const organization = await drainedOrganization(limiter, 'late-store-reset');
      await admin.call('CLIENT', 'PAUSE', '300', 'WRITE');
      // The store has no timer for a reset: it answers once Redis has run the script, after the pause.
      expectCode(await rejection(store.reset(organization, 'POST /browsers', minute(10), BUDGET_MS)), 'store_timeout');
      expect(await stillDrained(limiter, organization)).toBe(true);
    }, 10_000);

    it('carries out a reset that a paused server runs within its budget', async () => {
      // The same store, under a budget longer than the pause: the script is given a deadline, and runs before it.
      const patient = createLimiter({ store, onStoreError: 'deny', storeTimeoutMs: 2_000 });
      const organization = await drainedOrganization(limiter, 'reset-in-time');
      await admin.call('CLIENT', 'PAUSE', '200', 'WRITE');
      await patient.reset({ organization, endpoint: 'POST /browsers' });
      expect(await limiter.peek(developer(organization))).toMatchObject({
        allowed: true,
        remaining: 9,
        source: 'store',
      });
    }, 10_000);

    it("learns Redis' clock from a reset, so a store that only resets forgets nothing late from its second on", async () => {
      const resetting = redisStore({ client: connected.client });
      try {
        await resetting.reset(uniqueOrg('first-reset'), 'POST /browsers', minute(10), BUDGET_MS);
        const organization = await drainedOrganization(limiter, 'late-reset-only');
        await admin.call('CLIENT', 'PAUSE', '300', 'WRITE');
        const late = resetting.reset(organization, 'POST /browsers', minute(10), BUDGET_MS);
        expectCode(await rejection(late), 'store_timeout');
        expect(await stillDrained(limiter, organization)).toBe(true);
      } finally {
        resetting.close();
      }
    }, 10_000);
  });
}

/**
 * In a cluster a reset goes by key, to whichever master serves it: the store gives it the deadline in the clock of the
 * master furthest ahead that it knows of (from consume replies), and learns nothing from the reset's own reply.
 */
const canSpawnCluster = CLUSTER_NODES !== null && canStartRedis('@ratecard/redis late-run cluster tests');

describe.skipIf(!canSpawnCluster)('a reset that reaches a paused cluster master after its deadline', () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  for (const clientName of FAULT_CLIENTS) {
    it(`forgets nothing, ${clientName}`, async () => {
      const connected = await clientKind(clientName).cluster(cluster.nodes);
      const limiter = createLimiter({
        store: redisStore({ client: connected.client }),
        onStoreError: 'deny',
        storeTimeoutMs: BUDGET_MS,
      });
      try {
        // The drain's reply tells the store how its master's clock stands to this process's.
        const organization = await drainedOrganization(limiter, 'cluster-late-reset');
        await Promise.all(cluster.masters.map((master) => redisCommand(master, ['CLIENT', 'PAUSE', '400', 'WRITE'])));
        expectCode(await rejection(limiter.reset({ organization, endpoint: 'POST /browsers' })), 'store_timeout');
        await sleep(600);
        expect(await stillDrained(limiter, organization)).toBe(true);
      } finally {
        await limiter.close();
        await connected.close();
      }
    }, 20_000);
  }
});
