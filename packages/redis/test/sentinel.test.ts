import { createLimiter, type Decision } from '@ratecard/core';
import { storeContractSuite } from '@ratecard/core/testing';
import { memoryStore } from '@ratecard/memory';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey, redisStore } from '../src/index.js';
import { type RedisServer, redisCommand, startRedis } from '../src/testing.js';
import { request as checked, refusal, refusedAtOnce, watched } from './support/outage.js';
import { uniqueOrg } from './support/redis.js';
import {
  canStartSentinel,
  freePort,
  HOST,
  MASTER_NAME,
  type Sentinel,
  type SentinelSetup,
  startSentinel,
  startSentinelSetup,
  until,
} from './support/sentinel.js';

/**
 * An ioredis `Redis` that finds its master through Sentinel is passed to the store as it is. The store runs the
 * contract on it, then keeps answering through a Sentinel failover: by policy while the client switches, then from the
 * promoted replica. This suite starts its own master, replica and sentinel.
 */
const canSpawn = canStartSentinel('@ratecard/redis Sentinel tests');

describe.skipIf(!canSpawn)('an ioredis client that finds its master through Sentinel', () => {
  let setup: SentinelSetup;
  let master: RedisServer;
  let replica: RedisServer;
  let sentinel: Sentinel;
  let client: Redis;
  beforeAll(async () => {
    setup = await startSentinelSetup();
    ({ master, replica, sentinel } = setup);
    // failoverDetector: the client hears Sentinel's +switch-master and reconnects to the promoted replica.
    client = new Redis({ sentinels: [{ host: HOST, port: sentinel.port }], name: MASTER_NAME, failoverDetector: true });
    client.on('error', () => {});
    await until('the client to be ready', async () => client.status === 'ready');
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await setup?.stop();
  });

  storeContractSuite(
    'redis, ioredis via Sentinel',
    { create: (now) => redisStore({ client, clock: 'client', now }) },
    { describe, it },
  );

  it('answers by policy while Sentinel fails over, then from the promoted replica', async () => {
    const limiter = createLimiter({ store: redisStore({ client }), onStoreError: 'deny', storeTimeoutMs: 100 });
    // One request per minute: the charged bucket is full again (and its key gone) only a minute later.
    const request = { organization: uniqueOrg('sentinel'), endpoint: 'POST /browsers', plan: 'developer' as const };
    const once = { ...request, override: 1 };
    expect((await limiter.consume(once)).source).toBe('store');
    const failover = await redisCommand({ host: HOST, port: sentinel.port }, ['SENTINEL', 'FAILOVER', MASTER_NAME]);
    const started = performance.now();
    expect(failover).toBe('OK');
    const sources = new Set<Decision['source']>();
    let last: Decision | undefined;
    await until(
      'a decision from the promoted replica',
      async () => {
        last = await limiter.consume({ ...request, organization: uniqueOrg('after') });
        sources.add(last.source);
        return (
          last.source === 'store' &&
          (await redisCommand(replica, ['INFO', 'replication'])).includes('role:master') &&
          (client as unknown as { stream?: { remotePort?: number } }).stream?.remotePort === replica.port
        );
      },
      30_000,
    );
    if (process.env.RATECARD_REPORT === '1') {
      console.log(
        `Sentinel failover: first decision from the promoted replica after ${(performance.now() - started).toFixed(0)} ms`,
      );
    }
    // Only Redis or the policy ever answered.
    expect([...sources].filter((source) => source !== 'store' && source !== 'fail-closed')).toEqual([]);
    // The bucket charged before the failover was replicated: the promoted replica holds it.
    expect(await redisCommand(replica, ['EXISTS', endpointKey(request.organization, 'POST /browsers')])).toBe('1');
    await limiter.close();
  }, 60_000);

  it('is refused at once with store_unavailable while its master is killed, until Sentinel promotes the replica', async () => {
    const watch = watched(client);
    const org = uniqueOrg('sentinel-kill');
    try {
      expect((await watch.limiter.consume(checked(org))).source).toBe('store');
      const [, port] = (
        await redisCommand({ host: HOST, port: sentinel.port }, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME])
      ).split(',');
      const current = [master, replica].find((server) => server.port === Number(port)) as RedisServer;
      await current.kill();
      await refusedAtOnce(watch, org, 'store_unavailable', 'lost its connection');
      await until(
        'a decision from the promoted replica',
        async () => (await refusal(watch.limiter.consume(checked(org)))) === undefined,
        30_000,
      );
      expect(watch.lines[0]).toMatch(/^ratecard: the store failed \(store_(unavailable|timeout): /);
    } finally {
      await watch.limiter.close();
    }
  }, 60_000);
});

describe.skipIf(!canSpawn)(
  'an ioredis client whose master, as Sentinel names it, has not answered since it was made',
  () => {
    it('is refused at once after its first failed attempt, and answers from the master once it is up', async () => {
      const port = await freePort();
      const sentinel = await startSentinel({ port });
      const client = new Redis({
        sentinels: [{ host: HOST, port: sentinel.port }],
        name: MASTER_NAME,
        retryStrategy: () => 20,
      });
      client.on('error', () => {});
      const lines: string[] = [];
      const store = redisStore({ client });
      // A budget no call here can wait out: a policy answer is a refusal.
      const limiter = createLimiter({
        store,
        fallback: memoryStore(),
        storeTimeoutMs: 60_000,
        log: (line) => lines.push(line),
      });
      const request = checked(uniqueOrg('sentinel-never'));
      let master: RedisServer | undefined;
      try {
        expect((await limiter.consume(request)).source).toBe('fallback');
        const before = store.stats();
        const pending = Array.from({ length: 20 }, () => limiter.consume(request));
        expect(store.stats()).toMatchObject({ unavailable: before.unavailable + 20, queued: 0, sent: 0 });
        expect(new Set((await Promise.all(pending)).map((decision) => decision.source))).toEqual(new Set(['fallback']));
        master = await startRedis({ port });
        await until('a decision from the master', async () => (await limiter.consume(request)).source === 'store');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toContain('the ioredis client has not connected to Redis since it was made');
      } finally {
        await limiter.close();
        client.disconnect();
        await sentinel.stop();
        await master?.stop();
      }
    }, 60_000);
  },
);
