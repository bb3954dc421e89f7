import { createLimiter, type Decision, type Limit, perMinute } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisStore } from '../src/index.js';
import { canStartRedis, type RedisServer, startRedis } from '../src/testing.js';
import { CLIENTS } from './support/clients.js';
import { REDIS_EXTERNAL, REDIS_URL, uniqueOrg } from './support/redis.js';

const canSpawn = REDIS_URL !== null && (!REDIS_EXTERNAL || canStartRedis('@ratecard/redis outage-bound tests'));

const LIMITS: readonly Limit[] = Object.freeze([perMinute(10)]);
const PROCESSES = 2;

/**
 * The bound docs/reliability.md states for a real outage under the default policy: beyond what Redis admitted, each
 * process admits at most one fallback bucket per key, its capacity plus what it refills over the outage. Two limiters
 * (two processes: a client, a store and a fallback each) on one Redis that is killed; the fallbacks' clock is the
 * test's, so what refills is exact.
 */
describe.skipIf(!canSpawn).each(CLIENTS)('a real outage under the default policy, $name', (kind) => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(() => server.stop());

  it('admits at most one fallback bucket per process and key: capacity, plus its refill over the outage', async () => {
    const clock = { now: 1_800_000_000_000 };
    const processes = await Promise.all(
      Array.from({ length: PROCESSES }, async () => {
        const connected = await kind.standalone(server.url);
        // The kill below makes every client report its reconnect attempts; unheard, each would be printed.
        (connected.client as unknown as { on(event: 'error', listener: () => void): void }).on('error', () => {});
        const limiter = createLimiter({
          store: redisStore({ client: connected.client }),
          fallback: memoryStore({ now: () => clock.now }),
          log: () => {},
        });
        return { connected, limiter };
      }),
    );
    const organization = uniqueOrg('outage-bound');
    const request = { organization, endpoint: 'POST /browsers', limits: LIMITS };
    const burst = async (calls = 30): Promise<Decision[]> =>
      (
        await Promise.all(
          processes.map(({ limiter }) => Promise.all(Array.from({ length: calls }, () => limiter.consume(request)))),
        )
      ).flat();
    try {
      // Redis admits 3 calls of each process (6 of its 10): no refusal, so no deny cache answers for the key later.
      const before = await burst(3);
      expect(before.filter((decision) => decision.allowed)).toHaveLength(PROCESSES * 3);
      expect(new Set(before.map((decision) => decision.source))).toEqual(new Set(['store']));
      await server.kill();
      const during = await burst();
      expect(new Set(during.map((decision) => decision.source))).toEqual(new Set(['fallback']));
      // Each process's fallback bucket starts full: 10 each, whatever Redis held.
      expect(during.filter((decision) => decision.allowed)).toHaveLength(PROCESSES * 10);
      // A minute of outage refills each fallback bucket by 10 more, and no more.
      clock.now += 60_000;
      const later = await burst();
      expect(later.filter((decision) => decision.allowed)).toHaveLength(PROCESSES * 10);
      expect(await burst()).toSatisfy((decisions: Decision[]) => decisions.every((decision) => !decision.allowed));
    } finally {
      for (const { connected, limiter } of processes) {
        await limiter.close();
        await connected.close();
      }
      await server.restart();
    }
  }, 30_000);
});
