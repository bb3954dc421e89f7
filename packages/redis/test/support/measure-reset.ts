// How long a reset made by one process takes to unblock a refused organization in another: an application process
// (test/fixtures/refused-app.ts: the README's Redis setup, perHour(2)) spends its bucket and is refused, its deny cache
// answering; this process then resets the bucket with a limiter of its own on the same Redis, and the application
// reports when it was first admitted again. Per topology and client, ROUNDS times. docs/reliability.md reads it.
//
//   pnpm --filter @ratecard/redis reset-reach [--rounds 3] [--only standalone,cluster]
import { parseArgs } from 'node:util';
import { createLimiter, perHour } from '@ratecard/core';
import { redisStore } from '@ratecard/redis';
import { startRedis, startRedisCluster } from '@ratecard/redis/testing';
import { Cluster, Redis } from 'ioredis';
import { startFixture } from './fixture-process.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    only: { type: 'string', default: 'standalone,cluster' },
    clients: { type: 'string', default: 'ioredis 6,node-redis 6 RESP3' },
  },
});
const only = new Set(values.only.split(','));
const standalone = only.has('standalone') ? await startRedis() : undefined;
const cluster = only.has('cluster') ? await startRedisCluster() : undefined;

const targets = [
  ...(standalone === undefined
    ? []
    : [{ name: 'standalone', target: standalone.url, admin: () => new Redis(standalone.url) }]),
  ...(cluster === undefined
    ? []
    : [
        {
          name: '3-master cluster',
          target: JSON.stringify(cluster.nodes.map(({ host, port }) => ({ host, port }))),
          admin: () => new Cluster(cluster.nodes.map(({ host, port }) => ({ host, port }))),
        },
      ]),
];

const worst: number[] = [];
try {
  for (const { name, target, admin } of targets) {
    const client = admin();
    await new Promise((resolve) => client.once('ready', resolve));
    const limiter = createLimiter({ store: redisStore({ client }), onStoreError: 'throw' });
    for (const kind of values.clients.split(',')) {
      for (let round = 0; round < Number(values.rounds); round++) {
        const organization = `reset-reach-${process.pid}-${Date.now()}-${round}`;
        const app = startFixture('refused-app', [kind, target, organization]);
        const refused = await app.nextLine();
        // Let the deny cache answer for a while first, as it does for a customer refused long ago.
        await new Promise((resolve) => setTimeout(resolve, 300));
        await limiter.reset({ organization, endpoint: 'POST /api', limits: perHour(2) });
        const resetAt = Date.now();
        const [, at = '0', source = ''] = (await app.nextLine()).split(' ');
        const tookMs = Number(at) - resetAt;
        worst.push(tookMs);
        console.log(
          `${name}, ${kind}: ${refused.replace('refused', 'refused with Retry-After')} s; admitted ${tookMs} ms after the reset resolved (source ${source})`,
        );
      }
    }
    await limiter.close();
    client.disconnect();
  }
} finally {
  await standalone?.stop();
  await cluster?.stop();
}
console.log(`longest: ${Math.max(...worst)} ms`);
