import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canStartRedis, type RedisServer, redisCommand, startRedis } from '../../src/testing.js';
import { REDIS_EXTERNAL, REDIS_URL, ready } from '../support/redis.js';
import { sleep } from './fleet.js';
import { FAULT_CLIENTS, runFault } from './scenario.js';

/** These tests break their own server, so they need redis-server even when REDIS_URL names a shared one. */
const canSpawn = REDIS_URL !== null && (!REDIS_EXTERNAL || canStartRedis('@ratecard/redis fault tests'));

/** Long enough to be many budgets, short enough to keep the suite quick. */
const HANG_MS = 1_500;

/** The fault tests run on ioredis and on node-redis, the two clients whose reconnection logic differs most. */
for (const clientName of FAULT_CLIENTS) {
  describe.skipIf(!canSpawn)(
    `a standalone Redis breaks under steady traffic, one process per policy, ${clientName}`,
    () => {
      let server: RedisServer;
      let client: Redis;
      beforeAll(async () => {
        server = await startRedis();
        client = new Redis(server.url);
        client.on('error', () => {});
        await ready(client);
      });
      afterAll(async () => {
        client?.disconnect();
        await server?.stop();
      });

      const target = (): { url: string } => ({ url: server.url });

      it('kill -9 and restart: answers by policy within the budget, then from Redis, and the saved bucket survives', async () => {
        const { summaries } = await runFault(
          target(),
          client,
          {
            name: 'kill -9, restart 800 ms later',
            during: 'away',
            // The restarted server loads this snapshot, as one with persistence would; the drained bucket is in it.
            afterDrain: async () => {
              await client.save();
            },
            inflict: () => server.kill(),
            holdMs: 800,
            repair: async () => {
              await server.restart();
              await ready(client);
            },
          },
          undefined,
          clientName,
        );
        expect(summaries).toHaveLength(4);
      }, 60_000);

      it(`SIGSTOP for ${HANG_MS} ms, then SIGCONT: every call settles within the budget while Redis hangs`, async () => {
        await runFault(
          target(),
          client,
          {
            name: `SIGSTOP ${HANG_MS} ms`,
            during: 'away',
            inflict: async () => {
              process.kill(server.pid as number, 'SIGSTOP');
            },
            holdMs: HANG_MS,
            repair: async () => {
              process.kill(server.pid as number, 'SIGCONT');
            },
          },
          undefined,
          clientName,
        );
      }, 60_000);

      for (const mode of ['ALL', 'WRITE'] as const) {
        it(`CLIENT PAUSE ${mode} for ${HANG_MS} ms: scripts wait, so every call is answered by the policy in time`, async () => {
          let pausedAt = 0;
          await runFault(
            target(),
            client,
            {
              name: `CLIENT PAUSE ${mode} ${HANG_MS} ms`,
              during: 'away',
              // Timed: under ALL, Redis 7.0 holds a CLIENT UNPAUSE from any client until the pause ends by itself.
              inflict: async () => {
                await redisCommand(server, ['CLIENT', 'PAUSE', String(HANG_MS), mode]);
                pausedAt = performance.now();
              },
              holdMs: HANG_MS - 100,
              repair: () => sleep(pausedAt + HANG_MS - performance.now()),
            },
            undefined,
            clientName,
          );
        }, 60_000);
      }

      it('SCRIPT FLUSH twice under traffic: every call is answered by Redis, for every policy', async () => {
        const { summaries } = await runFault(
          target(),
          client,
          {
            name: 'SCRIPT FLUSH',
            during: 'unaffected',
            budgetMs: 2_000,
            inflict: async () => {
              await redisCommand(server, ['SCRIPT', 'FLUSH']);
            },
            holdMs: 300,
            repair: async () => {
              await redisCommand(server, ['SCRIPT', 'FLUSH']);
            },
          },
          undefined,
          clientName,
        );
        expect(summaries.map((summary) => summary.lateSends)).toEqual([0, 0, 0, 0]);
        // The script is loaded server-wide, so after each flush the first child to get NOSCRIPT loads it for all.
        expect(summaries.reduce((sum, summary) => sum + summary.scriptReloads, 0)).toBeGreaterThanOrEqual(2);
      }, 60_000);
    },
  );
}
