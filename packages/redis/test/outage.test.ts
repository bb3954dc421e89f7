import { createLimiter } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import calculateSlot from 'cluster-key-slot';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey, redisStore } from '../src/index.js';
import {
  canStartRedis,
  type RedisCluster,
  type RedisServer,
  redisCommand,
  startRedis,
  startRedisCluster,
} from '../src/testing.js';
import { CLIENTS, type ClientKind } from './support/clients.js';
import { refusal, refusedAtOnce, request, until, watched } from './support/outage.js';
import { REDIS_EXTERNAL, REDIS_URL, uniqueOrg } from './support/redis.js';

/**
 * What each client sees when Redis goes away after it was up: the store answers every call by the policy when it is
 * made, not after the budget, with store_unavailable (the connection is known down) or store_timeout (Redis keeps a
 * call past its budget), until Redis answers again; the limiter logs one line each way. These tests kill, pause and
 * restart servers of their own.
 */
const canSpawn = REDIS_URL !== null && (!REDIS_EXTERNAL || canStartRedis('@ratecard/redis outage tests'));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!canSpawn).each(CLIENTS)('a $name client that was up, its Redis gone', (kind: ClientKind) => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(() => server.stop());

  it('is refused at once with store_unavailable while it reconnects, then answered by Redis again', async () => {
    const { client, close } = await kind.standalone(server.url);
    const watch = watched(client);
    const org = uniqueOrg('killed');
    try {
      expect((await watch.limiter.consume(request(org))).source).toBe('store');
      await server.kill();
      await refusedAtOnce(watch, org, 'store_unavailable', 'lost its connection');
      await server.restart();
      await until(
        'a decision from Redis',
        async () => (await refusal(watch.limiter.consume(request(org)))) === undefined,
      );
      // Once the store has answered for a second with no failure, the log says so.
      await sleep(1_100);
      await watch.limiter.consume(request(org));
      expect(watch.lines).toHaveLength(2);
      expect(watch.lines[0]).toMatch(/^ratecard: the store failed \(store_(unavailable|timeout): .*'throw'/);
      expect(watch.lines[1]).toMatch(/^ratecard: the store answers again since .*'throw' answered \d+ decisions/);
    } finally {
      await watch.limiter.close();
      await close();
    }
  });

  it('is refused at once with store_timeout while Redis keeps a call past its budget, until it answers', async () => {
    const { client, close } = await kind.standalone(server.url);
    const watch = watched(client);
    const org = uniqueOrg('paused');
    const pid = server.pid as number;
    try {
      expect((await watch.limiter.consume(request(org))).source).toBe('store');
      process.kill(pid, 'SIGSTOP');
      try {
        await refusedAtOnce(watch, org, 'store_timeout', 'has not answered a call within its budget');
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      await until(
        'a decision from Redis',
        async () => (await refusal(watch.limiter.consume(request(org)))) === undefined,
      );
      expect(watch.lines).toHaveLength(1);
      expect(watch.lines[0]).toContain('store_timeout');
    } finally {
      await watch.limiter.close();
      await close();
    }
  });
});

/** An organization whose bucket's slot `master` serves, by its CLUSTER SLOTS ranges. */
async function organizationOn(master: RedisServer, label: string): Promise<string> {
  const nodes = await redisCommand(master, ['CLUSTER', 'NODES']);
  const myself = nodes.split('\n').find((line) => line.includes('myself')) as string;
  const ranges = myself
    .split(' ')
    .slice(8)
    .map((range) => range.split('-').map(Number));
  const serves = (slot: number) => ranges.some(([from = -1, to = from]) => slot >= from && slot <= to);
  const base = uniqueOrg(label);
  for (let i = 0; ; i++) {
    if (serves(calculateSlot(endpointKey(`${base}-${i}`, 'POST /browsers')))) return `${base}-${i}`;
  }
}

describe.skipIf(!canSpawn)('a cluster whose master is killed and restarted', () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  }, 60_000);
  afterAll(() => cluster?.stop());

  for (const kind of CLIENTS.filter((candidate) => !candidate.name.includes('RESP2'))) {
    it(`refuses that master's calls at once with store_unavailable, answers the others, and comes back (${kind.name})`, async () => {
      const victim = cluster.masters[0] as RedisServer;
      const { client, close } = await kind.cluster(cluster.nodes);
      const watch = watched(client);
      const [onVictim, elsewhere] = [
        await organizationOn(victim, 'victim'),
        await organizationOn(cluster.masters[1] as RedisServer, 'elsewhere'),
      ];
      try {
        expect((await watch.limiter.consume(request(onVictim))).source).toBe('store');
        expect((await watch.limiter.consume(request(elsewhere))).source).toBe('store');
        await victim.kill();
        await refusedAtOnce(watch, onVictim, 'store_unavailable', 'cluster master');
        expect((await watch.limiter.consume(request(elsewhere))).source).toBe('store');
        await victim.restart();
        await until('the restarted master to see the cluster ok', async () =>
          (await redisCommand(victim, ['CLUSTER', 'INFO'])).includes('cluster_state:ok'),
        );
        await until('a decision from the restarted master', async () => {
          return (await refusal(watch.limiter.consume(request(onVictim)))) === undefined;
        });
        await sleep(1_100);
        await watch.limiter.consume(request(onVictim));
        expect(watch.lines).toHaveLength(2);
        expect(watch.lines[0]).toMatch(/^ratecard: the store failed \(store_(unavailable|timeout): /);
        expect(watch.lines[1]).toMatch(/^ratecard: the store answers again since /);
      } finally {
        await watch.limiter.close();
        await close();
      }
    }, 60_000);
  }
});

describe.skipIf(!canSpawn)('a Redis out of memory (maxmemory, noeviction)', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis({ args: ['--maxmemory', '2mb', '--maxmemory-policy', 'noeviction'] });
    // Filled until even a small write is refused: the buckets' script then fails with Redis' OOM error.
    const filler = new Redis(server.url);
    try {
      for (let i = 0; ; i++) {
        const reply = await filler.set(`filler:${i}`, 'x'.repeat(1_000)).catch(String);
        if (reply.includes('OOM')) break;
      }
    } finally {
      filler.disconnect();
    }
  });
  afterAll(() => server.stop());

  for (const kind of CLIENTS.filter((candidate) => !candidate.name.includes('RESP2'))) {
    it(`logs one line when decisions move to the policy, with Redis' error, and one when they come back (${kind.name})`, async () => {
      const { client, close } = await kind.standalone(server.url);
      const lines: string[] = [];
      const limiter = createLimiter({
        store: redisStore({ client }),
        fallback: memoryStore(),
        log: (line) => lines.push(line),
      });
      const org = uniqueOrg('oom');
      try {
        const decisions = [];
        for (let i = 0; i < 50; i++) decisions.push(await limiter.consume(request(org)));
        expect(new Set(decisions.map((decision) => decision.source))).toEqual(new Set(['fallback']));
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^ratecard: the store failed \(store_unavailable: ratecard: Redis failed: .*OOM/);
        expect(lines[0]).toContain("decisions go to the failure policy 'fallback'");
        await redisCommand(server, ['CONFIG', 'SET', 'maxmemory', '0']);
        try {
          expect((await limiter.consume(request(org))).source).toBe('store');
          await sleep(1_100);
          await limiter.consume(request(org));
        } finally {
          await redisCommand(server, ['CONFIG', 'SET', 'maxmemory', '2mb']);
        }
        expect(lines).toHaveLength(2);
        expect(lines[1]).toMatch(/^ratecard: the store answers again since .*'fallback' answered 50 decisions over/);
      } finally {
        await limiter.close();
        await close();
      }
    });
  }
});
