import { concurrency, type Limit, tokenBucket } from '@ratecard/core';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEndpointLeases, decodeEndpointValue, endpointKey, redisStore } from '../src/index.js';
import { startFixture } from './support/fixture-process.js';
import { connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

// Several processes, on ioredis and node-redis, reserve slots of one concurrency(3) key (and tokens of a bucket beside
// it) with random holds and settles. Each records when it held a slot: no instant may have more than 3 held. The
// bucket refills a token a day (1 unit a ms, 86 400 000 units a token), so after a first charge it never reaches
// full in the run, and its units at the end are exactly the start's, less the tokens settled, plus 1 a ms between
// the first and the last write, whatever the machine's speed.

const N = 3;
const KINDS = ['ioredis 6', 'node-redis 6 RESP3', 'iovalkey', 'node-redis 5 RESP2'];

interface Report {
  held: [number, number][];
  tokens: number;
  lost: number;
  refused: number;
}

/** The most intervals that overlap at any instant. */
function mostAtOnce(intervals: readonly [number, number][]): number {
  const events: [number, number][] = [];
  for (const [from, to] of intervals) events.push([from, 1], [to, -1]);
  // At one instant, an end before a start: a slot freed and taken in the same ms is not two at once.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, step] of events) {
    now += step;
    if (now > most) most = now;
  }
  return most;
}

describe.skipIf(REDIS_URL === null)('leases across processes', () => {
  let admin: Redis;
  beforeAll(async () => {
    admin = await connectStandalone();
  });
  afterAll(() => admin.disconnect());

  it('never holds more than n slots, and leaves the bucket at exactly the tokens settled', async () => {
    const org = uniqueOrg('lease-procs');
    const tokens = tokenBucket({ capacity: 1_000_000, refill: 1, intervalMs: 86_400_000, name: 'tokens' });
    const limits = [concurrency(N, { name: 'slots' }), tokens];
    // A first token, so the bucket is below full from a known instant on.
    await redisStore({ client: admin }).consume(org, 'e', [tokens], 1);
    const key = endpointKey(org, 'e');
    const start = decodeEndpointValue((await admin.get(key)) as string)?.[0];
    const processes = KINDS.map((kind) =>
      startFixture('lease-hammer', [kind, REDIS_URL as string, org, String(N), '8', '2000']),
    );
    for (const process of processes) expect(await process.nextLine()).toBe('ready');
    for (const process of processes) process.child.stdin?.write('go\n');
    const reports = (await Promise.all(processes.map((process) => process.nextLine()))).map(
      (line) => JSON.parse(line) as Report,
    );
    const held = reports.flatMap((report) => report.held);
    expect(held.length).toBeGreaterThan(100);
    expect(mostAtOnce(held)).toBeLessThanOrEqual(N);
    expect(reports.map((report) => report.lost)).toEqual(KINDS.map(() => 0));
    const value = (await admin.get(key)) as string;
    expect(decodeEndpointLeases(value)).toEqual([]);
    const end = decodeEndpointValue(value)?.[0];
    const settled = reports.reduce((sum, report) => sum + report.tokens, 0);
    const u = tokens.unitsPerToken;
    expect(end?.units).toBe(
      (start?.units as number) - settled * u + ((end?.updatedAt as number) - (start?.updatedAt as number)),
    );
    // Every slot free again.
    expect(await redisStore({ client: admin }).peek(org, 'e', [limits[0] as Limit], 1)).toEqual([N - 1]);
  }, 30_000);
});
