// Whether the README's Redis setup stays exact on a busy machine: two processes, each with its own client and the
// README's limiter (a memoryStore fallback, the default policy and budget), keep 32 consume calls in flight on one
// organization whose requests carry two limits, `[perSecond(5, { burst: 10 }), perMinute(100)]`, while busy loops
// (one per core by default) keep the CPU saturated. Per topology and client: tokens admitted across both processes
// against the exact bound (each limit's capacity plus its refill over the run, T by Redis TIME: the most an exact
// bucket admits from full), and how many decisions came from the fallback. docs/reliability.md says how to read it.
//
//   pnpm --filter @ratecard/redis busy [--duration-ms 8000] [--busy 2] [--in-flight 32] [--rounds 1]
//                                      [--only standalone,cluster] [--clients 'ioredis 6,node-redis 6 RESP3']
//                                      [--budget <storeTimeoutMs; default the limiter's>]
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { type TokenBucketOptions, tokenBucket } from '@ratecard/core';
import { endpointKey, type RedisStoreStats } from '@ratecard/redis';
import { type RedisAddress, redisCommand, startRedis, startRedisCluster } from '@ratecard/redis/testing';
import { startHammer as startFixtureHammer } from './fixture-process.js';

const { values } = parseArgs({
  options: {
    'duration-ms': { type: 'string', default: '8000' },
    busy: { type: 'string', default: String(availableParallelism()) },
    'in-flight': { type: 'string', default: '32' },
    rounds: { type: 'string', default: '1' },
    only: { type: 'string', default: 'standalone,cluster' },
    clients: { type: 'string', default: 'ioredis 6,node-redis 6 RESP3' },
    /** storeTimeoutMs; default the limiter's. */
    budget: { type: 'string', default: '' },
  },
});
const DURATION_MS = Number(values['duration-ms']);
const BUSY = Number(values.busy);
const IN_FLIGHT = Number(values['in-flight']);
const ROUNDS = Number(values.rounds);
const PROCESSES = 2;

/** The README's two limits: perSecond(5, { burst: 10 }) and perMinute(100), as tokenBucket options. */
const LIMITS: TokenBucketOptions[] = [
  { capacity: 10, refill: 5, intervalMs: 1_000 },
  { capacity: 100, refill: 100, intervalMs: 60_000 },
];

interface Report {
  admitted: number[];
  denied: number;
  failed: number;
  sources: Record<string, number>;
  maxLoopDelayMs: number;
  stats: RedisStoreStats;
}

function startHammer(kind: string, target: string, organization: string) {
  const requests = JSON.stringify([{ organization, limits: LIMITS, cost: 1 }]);
  return startFixtureHammer<Report>([
    kind,
    target,
    requests,
    String(IN_FLIGHT),
    String(DURATION_MS),
    'readme',
    values.budget,
  ]);
}

async function redisTimeMs(address: RedisAddress): Promise<number> {
  const [seconds = '0', micros = '0'] = (await redisCommand(address, ['TIME'])).split(/[\s,]+/);
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** Busy loops, each a process spinning on one core until killed. */
function startBusyLoops(count: number): ChildProcess[] {
  return Array.from({ length: count }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
}

const only = new Set(values.only.split(','));
const clients = values.clients.split(',');
const standalone = only.has('standalone') ? await startRedis() : undefined;
const cluster = only.has('cluster') ? await startRedisCluster() : undefined;
const targets = [
  ...(standalone === undefined ? [] : [{ name: 'standalone', target: standalone.url, time: standalone }]),
  ...(cluster === undefined
    ? []
    : [
        {
          name: '3-master cluster',
          target: JSON.stringify(cluster.nodes.map(({ host, port }) => ({ host, port }))),
          time: cluster.nodes[0] as RedisAddress,
        },
      ]),
];

console.log(
  `${PROCESSES} processes x ${IN_FLIGHT} in flight, ${DURATION_MS} ms, ${BUSY} busy loops, README setup (storeTimeoutMs ${values.budget || 'default'}), limits 1s(10, 5/s) + 1m(100)`,
);
let over = 0;
try {
  for (const { name, target, time } of targets) {
    for (const kind of clients) {
      for (let round = 0; round < ROUNDS; round++) {
        const organization = `busy-${process.pid}-${name.length}-${kind.length}-${round}-${Date.now()}`;
        const hammers = await Promise.all(
          Array.from({ length: PROCESSES }, () => startHammer(kind, target, organization)),
        );
        const busy = startBusyLoops(BUSY);
        // The loops take the cores before the traffic starts.
        await new Promise((resolve) => setTimeout(resolve, 200));
        const startedAt = await redisTimeMs(time);
        for (const hammer of hammers) hammer.child.stdin?.write('go\n');
        const reports = await Promise.all(hammers.map((hammer) => hammer.report));
        const elapsedMs = (await redisTimeMs(time)) - startedAt;
        for (const loop of busy) loop.kill('SIGKILL');
        await Promise.all(hammers.map((hammer) => (hammer.child.exitCode === null ? once(hammer.child, 'exit') : 0)));
        const admitted = reports.reduce((sum, report) => sum + (report.admitted[0] as number), 0);
        const bound = Math.min(
          ...LIMITS.map((limit) => limit.capacity + (limit.refill * elapsedMs) / limit.intervalMs),
        );
        const fallback = reports.reduce((sum, report) => sum + (report.sources.fallback ?? 0), 0);
        const decisions = reports.reduce(
          (sum, report) => sum + Object.values(report.sources).reduce((a, b) => a + b, 0),
          0,
        );
        const failed = reports.reduce((sum, report) => sum + report.failed, 0);
        const verdict = admitted <= bound ? 'within' : 'OVER';
        if (admitted > bound) over++;
        console.log(
          `${name}, ${kind}: admitted ${admitted} of bound ${bound.toFixed(2)} (${verdict}), T ${elapsedMs} ms; ${decisions} decisions, ${fallback} by the fallback, ${failed} failed; longest stall of a process's event loop ${Math.max(...reports.map((report) => report.maxLoopDelayMs))} ms; key ${endpointKey(organization, 'POST /browsers')}`,
          ...(fallback > 0 ? [JSON.stringify(reports.map((report) => report.stats))] : []),
        );
      }
    }
  }
} finally {
  await standalone?.stop();
  await cluster?.stop();
}
// Names of the limits, for reading the key with redis-cli: '1s' and '1m'.
console.log(`limits: ${LIMITS.map((limit) => tokenBucket(limit).name).join(', ')}; runs over the bound: ${over}`);
process.exitCode = over === 0 ? 0 : 1;
