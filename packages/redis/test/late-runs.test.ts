import { createLimiter, type Decision, type Limiter, type LimitRequest } from '@ratecard/core';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey, type RedisStore, redisStore } from '../src/index.js';
import { canStartRedis, type RedisServer, startRedis } from '../src/testing.js';
import { sleep } from './faults/fleet.js';
import { FAULT_CLIENTS } from './faults/scenario.js';
import { type Connected, clientKind } from './support/clients.js';
import { REDIS_EXTERNAL, REDIS_URL, uniqueOrg } from './support/redis.js';

/**
 * Calls the store sent in time, which reach Redis only after the limiter stopped waiting: held in a paused server, or
 * sent again by the client after it reconnected. The limiter has answered them by its policy, so none may charge.
 * CLIENT PAUSE would stall every other suite on a shared server, so these start their own.
 */
const canSpawn = REDIS_URL !== null && (!REDIS_EXTERNAL || canStartRedis('@ratecard/redis late-run tests'));

const BUDGET_MS = 50;

function developer(organization: string): LimitRequest {
  return { organization, endpoint: 'POST /browsers', plan: 'developer' };
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
  });
}
