import type { ChildProcess } from 'node:child_process';
import { type TokenBucketOptions, tokenBucket } from '@ratecard/core';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEndpointValue, endpointKey, type RedisStoreStats, type StoredBucket } from '../src/index.js';
import { CLIENTS, FAMILIES } from './support/clients.js';
import { startHammer as startFixtureHammer } from './support/fixture-process.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

const PROCESSES = 4;
const IN_FLIGHT = 64;
const DURATION_MS = 2_000;
/** Of the time T measured around a run, at most this much passes before the hammers start or after they stop. */
const SLACK_MS = 250;

/** A request the hammers send: its organization, its limits as tokenBucket options, its cost. */
interface HammerRequest {
  organization: string;
  limits: TokenBucketOptions[];
  cost: number;
}

function perSecondOptions(refill: number, capacity: number): TokenBucketOptions {
  return { capacity, refill, intervalMs: 1_000 };
}

function perMinuteOptions(refill: number, capacity: number): TokenBucketOptions {
  return { capacity, refill, intervalMs: 60_000 };
}

/** The default name of a limit of these options: '1s' or '1m'. */
function nameOf(options: TokenBucketOptions): string {
  return tokenBucket(options).name;
}

interface Report {
  admitted: number[];
  denied: number;
  failed: number;
  stats: RedisStoreStats;
}

/** Starts one hammer process and resolves once it has connected; `target` is a URL or a cluster's nodes as JSON. */
function startHammer(kind: string, target: string, buckets: readonly HammerRequest[]) {
  return startFixtureHammer<Report>([kind, target, JSON.stringify(buckets), String(IN_FLIGHT), String(DURATION_MS)]);
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
    clients: CLIENTS,
  },
  {
    name: 'a 3-master cluster',
    available: CLUSTER_NODES !== null,
    hammerTarget: () => JSON.stringify(CLUSTER_NODES),
    connect: connectCluster,
    clients: FAMILIES,
  },
];

for (const target of TARGETS)
  for (const kind of target.clients) {
    describe.skipIf(!target.available)(
      `${PROCESSES} processes × ${IN_FLIGHT} calls in flight on requests of two limits, ${kind.name}, ${target.name}`,
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

        it('admit on every limit at most its exact bound (T by Redis TIME), and charge nothing on a refusal', async () => {
          const base = uniqueOrg('hammer');
          // Two limits per request (most of them), each pair with its own binding limit; one one-limit request,
          // so that batches mix calls of one and two limits and the deny cache is at work.
          const requests: HammerRequest[] = [
            { organization: `${base}-a`, limits: [perSecondOptions(5, 10), perMinuteOptions(30, 30)], cost: 1 },
            { organization: `${base}-b`, limits: [perSecondOptions(10, 10), perMinuteOptions(60, 35)], cost: 1 },
            { organization: `${base}-c`, limits: [perSecondOptions(50, 50), perMinuteOptions(300, 40)], cost: 2 },
            { organization: `${base}-d`, limits: [perSecondOptions(20, 5), perMinuteOptions(600, 100)], cost: 1 },
            { organization: `${base}-e`, limits: [perMinuteOptions(1_000, 1_000)], cost: 3 },
          ];
          const hammers = await Promise.all(
            Array.from({ length: PROCESSES }, () => startHammer(kind.name, target.hammerTarget(), requests)),
          );
          children.push(...hammers.map((hammer) => hammer.child));
          const keyOf = (request: HammerRequest) => endpointKey(request.organization, 'POST /browsers');
          for (const request of requests) await client.del(keyOf(request));
          const startedAt = await redisTimeMs(client);
          for (const hammer of hammers) hammer.child.stdin?.write('go\n');
          const reports = await Promise.all(hammers.map((hammer) => hammer.report));
          const elapsedMs = (await redisTimeMs(client)) - startedAt;

          expect(reports.map((report) => report.failed)).toEqual(reports.map(() => 0));
          const admitted = requests.map((_, i) =>
            reports.reduce((sum, report) => sum + (report.admitted[i] as number), 0),
          );
          // Per request, per limit: C + r·T/I tokens, the most an exact bucket admits in T ms from full.
          const bounds = requests.map((request) =>
            request.limits.map((limit) => limit.capacity + (limit.refill * elapsedMs) / limit.intervalMs),
          );
          if (process.env.RATECARD_REPORT === '1') {
            console.log({
              target: target.name,
              elapsedMs,
              admitted,
              bounds,
              stats: reports.map((report) => report.stats),
            });
          }
          for (const [i, request] of requests.entries()) {
            // No limit over-admits...
            for (const bound of bounds[i] as number[]) expect(admitted[i]).toBeLessThanOrEqual(bound);
            // ...and the binding one admits what it refills while the hammers run (T less SLACK_MS for their start
            // and their reports), less one request's cost: had refusals charged the other limit, it would have run
            // dry long before (b's two bounds are 7 tokens apart, and thousands of requests were refused).
            const least = Math.min(
              ...request.limits.map(
                (limit) => limit.capacity + (limit.refill * (elapsedMs - SLACK_MS)) / limit.intervalMs,
              ),
            );
            expect((admitted[i] as number) + request.cost).toBeGreaterThan(least);
          }
          // a's minute bucket never refills to full within the run, so what it holds tells what it was charged:
          // 30 tokens, less the admitted ones, plus what refilled since its first charge (after startedAt).
          const buckets = decodeEndpointValue((await client.get(keyOf(requests[0] as HammerRequest))) ?? '');
          expect(buckets?.map((bucket) => bucket.name)).toEqual(['1s', '1m']);
          const minute = buckets?.[1];
          const { units, updatedAt, unitsPerMs, unitsPerToken } = minute as StoredBucket;
          const charged = (admitted[0] as number) * unitsPerToken;
          expect(units).toBeGreaterThanOrEqual(30 * unitsPerToken - charged);
          expect(units).toBeLessThanOrEqual(30 * unitsPerToken - charged + (updatedAt - startedAt) * unitsPerMs);
          // Batching was at work, and so was the deny cache (for the one-limit request).
          expect(Math.max(...reports.map((report) => report.stats.largestBatch))).toBeGreaterThan(1);
          expect(reports.every((report) => report.stats.denyCacheHits > 0)).toBe(true);
        }, 60_000);
      },
    );
  }
