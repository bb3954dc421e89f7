import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketKey, type RedisStoreStats } from '../src/index.js';
import { CLIENTS } from './support/clients.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

const PROCESSES = 4;
const IN_FLIGHT = 64;
const DURATION_MS = 3_000;

interface Report {
  admitted: number[];
  denied: number;
  failed: number;
  stats: RedisStoreStats;
}

/** Starts one hammer process and resolves once it has connected; `target` is a URL or a cluster's nodes as JSON. */
function startHammer(
  kind: string,
  target: string,
  buckets: unknown,
): Promise<{ child: ChildProcess; report: Promise<Report> }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      fileURLToPath(new URL('./fixtures/hammer.ts', import.meta.url)),
      kind,
      target,
      JSON.stringify(buckets),
      String(IN_FLIGHT),
      String(DURATION_MS),
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const iterator = lines[Symbol.asyncIterator]();
  const nextLine = async (): Promise<string> => {
    const { value, done } = await iterator.next();
    if (done) throw new Error(`hammer process ${child.pid} exited early (code ${child.exitCode})`);
    return value;
  };
  return nextLine().then((line) => {
    if (line !== 'ready') throw new Error(`hammer process said ${JSON.stringify(line)}`);
    return { child, report: nextLine().then((json) => JSON.parse(json) as Report) };
  });
}

async function redisTimeMs(client: Redis | Cluster): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

const TARGETS = [
  {
    name: 'standalone',
    available: REDIS_URL !== null,
    hammerTarget: () => REDIS_URL as string,
    connect: connectStandalone,
  },
  {
    name: 'a 3-master cluster',
    available: CLUSTER_NODES !== null,
    hammerTarget: () => JSON.stringify(CLUSTER_NODES),
    connect: connectCluster,
  },
];

for (const target of TARGETS)
  for (const kind of CLIENTS) {
    describe.skipIf(!target.available)(
      `${PROCESSES} processes × ${IN_FLIGHT} calls in flight on 5 buckets, ${kind.name}, ${target.name}`,
      () => {
        let client: Redis | Cluster;
        const children: ChildProcess[] = [];
        beforeAll(async () => {
          client = await target.connect();
        });
        afterAll(() => {
          for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
          client.disconnect();
        });

        it('admit per bucket at most C + C·T/60 tokens (T by Redis TIME), and at least 99% of it', async () => {
          const base = uniqueOrg('hammer');
          const buckets = [
            { organization: `${base}-a`, limit: 1_000, cost: 1 },
            { organization: `${base}-b`, limit: 1_500, cost: 1 },
            { organization: `${base}-c`, limit: 2_500, cost: 1 },
            { organization: `${base}-d`, limit: 4_000, cost: 2 },
            { organization: `${base}-e`, limit: 6_000, cost: 3 },
          ];
          const hammers = await Promise.all(
            Array.from({ length: PROCESSES }, () => startHammer(kind.name, target.hammerTarget(), buckets)),
          );
          children.push(...hammers.map((hammer) => hammer.child));
          // One key per call: in a cluster the buckets live in different slots.
          for (const bucket of buckets) await client.del(bucketKey(bucket.organization, 'POST /browsers'));
          const startedAt = await redisTimeMs(client);
          for (const hammer of hammers) hammer.child.stdin?.write('go\n');
          const reports = await Promise.all(hammers.map((hammer) => hammer.report));
          const elapsedMs = (await redisTimeMs(client)) - startedAt;

          expect(reports.map((report) => report.failed)).toEqual(reports.map(() => 0));
          const admitted = buckets.map((_, i) =>
            reports.reduce((sum, report) => sum + (report.admitted[i] as number), 0),
          );
          const bounds = buckets.map((bucket) => bucket.limit + (bucket.limit * elapsedMs) / 60_000);
          if (process.env.RATECARD_REPORT === '1') {
            console.log({
              target: target.name,
              elapsedMs,
              admitted,
              bounds,
              stats: reports.map((report) => report.stats),
            });
          }
          for (const [i, bound] of bounds.entries()) {
            expect(admitted[i]).toBeLessThanOrEqual(bound);
            expect(admitted[i]).toBeGreaterThanOrEqual(0.99 * bound);
          }
          // Batching was at work, and so was the deny cache.
          expect(Math.max(...reports.map((report) => report.stats.largestBatch))).toBeGreaterThan(1);
          expect(reports.every((report) => report.stats.denyCacheHits > 0)).toBe(true);
        }, 60_000);
      },
    );
  }
