import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createLimiter } from '@ratecard/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisStore } from '../src/index.js';
import { canStartRedis, type RedisCluster, redisCommand, startRedisCluster } from '../src/testing.js';
import { clientKind } from './support/clients.js';
import { CLUSTER_NODES, uniqueOrg } from './support/redis.js';

const run = promisify(execFile);

/** Slots moved from one master to another while traffic runs: about a third of what that master serves. */
const SLOTS_MOVED = 2_000;
const IN_FLIGHT = 32;

/** This test moves slots, so it starts a cluster of its own rather than disturb the shared one. */
const canSpawn = CLUSTER_NODES !== null && canStartRedis('@ratecard/redis resharding test');

async function masterIds(address: { host: string; port: number }): Promise<string[]> {
  const text = await redisCommand(address, ['CLUSTER', 'NODES']);
  return text
    .split('\n')
    .filter((line) => line.includes('master') && !line.includes('fail'))
    .map((line) => line.split(' ')[0] as string);
}

async function redisTimeMs(address: { host: string; port: number }): Promise<number> {
  const [seconds, micros] = (await redisCommand(address, ['TIME'])).split(',');
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

for (const kindName of ['ioredis 6', 'node-redis 6 RESP3']) {
  describe.skipIf(!canSpawn)(`resharding under load, ${kindName}`, () => {
    let cluster: RedisCluster;
    beforeAll(async () => {
      cluster = await startRedisCluster({ masters: 3 });
    }, 60_000);
    afterAll(() => cluster?.stop());

    it(`moves ${SLOTS_MOVED} slots between masters with zero errors and zero over-admission`, async () => {
      const connected = await clientKind(kindName).cluster(cluster.nodes);
      // No deny cache: every call, denied ones included, goes to Redis, so the traffic keeps meeting the moving slots.
      const store = redisStore({ client: connected.client, denyCacheSize: 0 });
      // 'throw' and a long budget: a failed call shows up as an error, never hidden behind a policy answer.
      const limiter = createLimiter({ store, onStoreError: 'throw', storeTimeoutMs: 10_000 });
      const base = uniqueOrg('reshard');
      const buckets = Array.from({ length: 200 }, (_, i) => ({ organization: `${base}-${i}`, limit: 30 }));
      const admitted = buckets.map(() => 0);
      const errors: unknown[] = [];
      let denied = 0;
      let running = true;
      let next = 0;
      const first = cluster.nodes[0] as { host: string; port: number };
      const startedAt = await redisTimeMs(first);
      const loop = async (): Promise<void> => {
        while (running) {
          const index = next++ % buckets.length;
          const bucket = buckets[index] as { organization: string; limit: number };
          try {
            const decision = await limiter.consume({
              organization: bucket.organization,
              endpoint: 'POST /browsers',
              plan: 'developer',
              override: bucket.limit,
            });
            if (decision.allowed) admitted[index] = (admitted[index] as number) + 1;
            else {
              denied++;
              await new Promise((resolve) => setImmediate(resolve));
            }
          } catch (error) {
            errors.push(error);
          }
        }
      };
      const traffic = Array.from({ length: IN_FLIGHT }, loop);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const [from, to] = await masterIds(first);
      await run('redis-cli', [
        '--cluster',
        'reshard',
        `${first.host}:${first.port}`,
        '--cluster-from',
        from as string,
        '--cluster-to',
        to as string,
        '--cluster-slots',
        String(SLOTS_MOVED),
        '--cluster-yes',
        '--cluster-pipeline',
        '50',
      ]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      running = false;
      await Promise.all(traffic);
      const elapsedMs = (await redisTimeMs(first)) - startedAt;
      const stats = store.stats();
      await limiter.close();
      await connected.close();

      expect(errors.map(String)).toEqual([]);
      // The buckets ran dry, so the bound below was tested where it binds.
      expect(denied).toBeGreaterThan(0);
      for (const [i, bucket] of buckets.entries()) {
        expect(admitted[i]).toBeLessThanOrEqual(bucket.limit + (bucket.limit * elapsedMs) / 60_000);
      }
      // The traffic did meet the moving slots: some batches were sent again by key.
      expect(stats.rerouted).toBeGreaterThan(0);
    }, 120_000);
  });
}
