import {
  type BucketShape,
  inPeriod,
  type Limit,
  msUntilFull,
  type Outcome,
  perDay,
  perMinute,
  perSecond,
  quota,
  sameShape,
  take,
  tokenBucket,
  unitsAt,
} from '@ratecard/core';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEndpointLeases, decodeEndpointValue, endpointKey, MAX_KEPT_ENTRIES, redisStore } from '../src/index.js';
import { consumeRpm, minute, peekRpm, rpmValue, U } from './support/limits.js';
import { connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

const T0 = 1_700_000_000_000;
const DAY = 86_400_000;

/** perMinute(10): a token is 6 000 units, the bucket refills 1 unit per ms. */
const TEN = minute(10)[0] as Limit;
/** A Developer bucket holding 9 tokens at T0, as the store writes it. */
const NINE = `1m 54000 ${T0} 10/1/6000`;

/**
 * Values that hold no bucket named '1m' the store would read, each of which it must read as a full bucket: the text
 * with something wrong in it, numbers out of range, and the layouts of earlier builds.
 */
const FOREIGN: readonly (readonly [string, string | Buffer])[] = [
  ['an empty string', ''],
  ['a word', 'full'],
  ['a shape of two numbers', '1m 54000 1700000000000 10/1'],
  ['a shape of four numbers', '1m 54000 1700000000000 10/1/6000/1'],
  ['a trailing space', `${NINE} `],
  ['a trailing separator', `${NINE}, `],
  ['a separator without its space', `${NINE},1s 0 1700000000000 1/1/1`],
  ['two spaces', '1m 54000  1700000000000 10/1/6000'],
  ['a tab', '1m 54000\t1700000000000 10/1/6000'],
  ['a trailing newline', `${NINE}\n`],
  ['a space in the shape', '1m 54000 1700000000000 10/1/ 6000'],
  ['a space in the name', '1 m 54000 1700000000000 10/1/6000'],
  ['a sign', '1m +54000 1700000000000 10/1/6000'],
  ['a debt past minus a full bucket', '1m -60001 1700000000000 10/1/6000'],
  ['a negative updatedAt', '1m 54000 -1 10/1/6000'],
  ['a lease that holds nothing', '1m 54000 1700000000000 10/1/6000, @a 1700000001000'],
  ['a lease not after the buckets', '@a 1700000001000 1m=1, 1m 54000 1700000000000 10/1/6000'],
  ['a lease amount with a sign', '1m 54000 1700000000000 10/1/6000, @a 1700000001000 1m=-1'],
  ['leases without their header', '1m 54000 1700000000000 10/1/6000, @a 1700000001000 1m=1'],
  ['a header without leases', '1m 54000 1700000000000 10/1/6000, @ 1700000001000 1700000001000 1m=1'],
  ['a fraction', '1m 54000.5 1700000000000 10/1/6000'],
  ['an exponent', '1m 5.4e4 1700000000000 10/1/6000'],
  ['hexadecimal', '1m 0x10 1700000000000 10/1/6000'],
  ['a sign in the shape', '1m 54000 1700000000000 +10/1/6000'],
  ['a capacity of 0', '1m 0 1700000000000 0/1/6000'],
  ['a refill of 0 units per ms', '1m 0 1700000000000 10/0/6000'],
  ['0 units per token', '1m 0 1700000000000 10/1/0'],
  ['more units per token than a day has ms', '1m 0 1700000000000 1/1/86400001'],
  ['a capacity × units per token past 2^52', '1m 0 1700000000000 4503599627370497/1/1'],
  ['a capacity × units per token just past 2^52', '1m 0 1700000000000 52124996/1/86400000'],
  ['more units than the capacity holds', '1m 60001 1700000000000 10/1/6000'],
  ['more units than a padded capacity holds', '1m 60001 1700000000000 010/1/6000'],
  ['an updatedAt past 2^48 - 1', '1m 54000 281474976710656 10/1/6000'],
  ['twenty-digit units', '1m 99999999999999999999 1700000000000 10/1/6000'],
  ['a first 1m entry out of range before a good one', `1m 60001 1700000000000 10/1/6000, ${NINE}`],
  ['only full buckets of other names', '1s 1 1700000000000 1/1/1, 1h 3600000 1700000000000 1/1/3600000'],
  ['the one-bucket text of the previous build', '54000 1700000000000 10/1/6000'],
  ['the five-number text of an earlier build', '54000 1700000000000 10 1 6000'],
  ['the three-number text of an earlier one', '540000 1700000000000 10'],
  ['the old compact integer', '351969551003878'],
  ['the old 12-byte packed value', oldPackedValue()],
];

/** Values with leading zeros, which the script and decodeEndpointValue read as the numbers they pad. */
const PADDED: readonly (readonly [string, string])[] = [
  ['a zero before the units', '1m 054000 1700000000000 10/1/6000'],
  ['zeros before every number', '1m 0054000 01700000000000 010/01/006000'],
  ['sixty zeros before the units', `1m ${'0'.repeat(60)}54000 1700000000000 10/1/6000`],
];

/** What earlier builds wrote for limits from 256 to 65 535: units u32, updatedAt u48, limit u16, little-endian. */
function oldPackedValue(): Buffer {
  const value = Buffer.alloc(12);
  value.writeUIntLE(59_940_000, 0, 4);
  value.writeUIntLE(T0, 4, 6);
  value.writeUIntLE(1_000, 10, 2);
  return value;
}

const NINE_DECODED = { name: '1m', units: 54_000, updatedAt: T0, capacity: 10, unitsPerMs: 1, unitsPerToken: 6_000 };

/** The bucket named '1m' a value holds, as the scripts read it; undefined for a full one. */
function minuteBucket(value: string | Buffer) {
  return decodeEndpointValue(value)?.find((bucket) => bucket.name === '1m');
}

describe('decodeEndpointValue', () => {
  it('reads <name> <units> <updatedAt> <capacity>/<unitsPerMs>/<unitsPerToken>, from a string or bytes', () => {
    expect(decodeEndpointValue(NINE)).toEqual([NINE_DECODED]);
    expect(decodeEndpointValue(Buffer.from(NINE))).toEqual([NINE_DECODED]);
  });

  it("reads several buckets joined by ', ', in order, the first of a name only", () => {
    const second = { name: '1s', units: 400, updatedAt: T0 + 5, capacity: 10, unitsPerMs: 1, unitsPerToken: 200 };
    expect(decodeEndpointValue(`1s 400 ${T0 + 5} 10/1/200, ${NINE}`)).toEqual([second, NINE_DECODED]);
    expect(decodeEndpointValue(`${NINE}, 1m 0 ${T0} 10/1/6000, 1s 400 ${T0 + 5} 10/1/200`)).toEqual([
      NINE_DECODED,
      second,
    ]);
    // An entry out of range is a full bucket: it is left out, and the next is still read.
    expect(decodeEndpointValue(`1s 4000 ${T0} 10/1/200, ${NINE}`)).toEqual([NINE_DECODED]);
  });

  it('reads the ends of every range', () => {
    expect(decodeEndpointValue('a 0 0 1/1/1')).toEqual([
      { name: 'a', units: 0, updatedAt: 0, capacity: 1, unitsPerMs: 1, unitsPerToken: 1 },
    ]);
    const longest = 'A-z.0_'.repeat(10).slice(0, 64);
    expect(decodeEndpointValue(`${longest} 4503599627370496 281474976710655 4503599627370496/1000000000000/1`)).toEqual(
      [
        {
          name: longest,
          units: 2 ** 52,
          updatedAt: 2 ** 48 - 1,
          capacity: 2 ** 52,
          unitsPerMs: 1e12,
          unitsPerToken: 1,
        },
      ],
    );
    // A day's worth of units per token, and as many tokens as 2^52 units hold.
    expect(decodeEndpointValue('1d 4503599568000000 0 52124995/1/86400000')?.[0]?.capacity).toBe(52_124_995);
  });

  it('reads a bucket in debt, down to minus a full bucket, and the leases after the buckets', () => {
    const value = `1m -60000 ${T0} 10/1/6000, @ ${T0 + 5} ${T0 + 1_000} 1m=2 c=2, @b-2 ${T0 + 5} c=1, @a ${T0 + 1_000} 1m=2 c=1`;
    expect(decodeEndpointValue(value)).toEqual([{ ...NINE_DECODED, units: -60_000 }]);
    expect(decodeEndpointLeases(value)).toEqual([
      { id: 'b-2', expiresAt: T0 + 5, holds: { c: 1 } },
      { id: 'a', expiresAt: T0 + 1_000, holds: { '1m': 2, c: 1 } },
    ]);
    expect(decodeEndpointValue(`@ ${T0} ${T0} c=1, @a ${T0} c=1`)).toEqual([]);
    expect(decodeEndpointLeases(NINE)).toEqual([]);
  });

  it.each(FOREIGN)('holds no 1m bucket in %s', (_label, value) => {
    expect(minuteBucket(value)).toBeUndefined();
  });

  it.each(PADDED)('reads %s as the numbers', (_label, value) => {
    expect(decodeEndpointValue(value)).toEqual([NINE_DECODED]);
  });
});

/**
 * Core's arithmetic over a request's buckets, all or nothing, as the Store contract states it: the model the Redis
 * store must agree with, outcome for outcome.
 */
class BucketsModel {
  readonly buckets = new Map<string, { units: number; at: number; shape: BucketShape }>();
  /** Whether the last call wrote the key: then Redis set its expiry, the instant the last bucket is full again. */
  wrote = false;

  /** When the last of the buckets is full again: the key's expiry, by the clock of the call that wrote it. */
  fullAt(): number {
    let last = Number.NEGATIVE_INFINITY;
    for (const bucket of this.buckets.values())
      last = Math.max(last, bucket.at + msUntilFull(bucket.units, bucket.shape));
    return last;
  }

  call(limits: readonly Limit[], cost: number, now: number, charge: boolean): Outcome[] {
    const held = limits.map((limit) => {
      const bucket = this.buckets.get(limit.name);
      const full = limit.capacity * limit.unitsPerToken;
      return bucket === undefined ? full : unitsAt(bucket.units, bucket.at, bucket.shape, now, limit);
    });
    const outcomes = limits.map((limit, i) => take(held[i] as number, cost, limit));
    const admitted = outcomes.every((outcome) => outcome >= 0);
    const moved = limits.some((limit) => {
      const bucket = this.buckets.get(limit.name);
      return bucket !== undefined && !sameShape(bucket.shape, limit);
    });
    this.wrote = charge && (admitted || moved);
    if (this.wrote) {
      // The key is written: the buckets of other names go with it only while they are not full again.
      for (const [name, bucket] of this.buckets) {
        const other = !limits.some((limit) => limit.name === name);
        if (other && bucket.at + msUntilFull(bucket.units, bucket.shape) <= now) this.buckets.delete(name);
      }
      for (const [i, limit] of limits.entries()) {
        const bucket = this.buckets.get(limit.name);
        // Refused, a bucket is written only when it was under another shape: converted, charged nothing.
        if (!admitted && (bucket === undefined || sameShape(bucket.shape, limit))) continue;
        const units = admitted ? (outcomes[i] as number) : (held[i] as number);
        this.buckets.set(limit.name, { units, at: Math.max(now, bucket?.at ?? now), shape: limit });
      }
    }
    return admitted ? outcomes : held.map((units) => -1 - units);
  }
}

/** Limits sharing a name, so that a bucket may change shape from one call to the next, as a plan change does. */
function shapesNamed(name: string): Limit[] {
  // Each takes at least 200 ms to refill a token, so a key a step writes (its TTL: until the bucket is full) lives at
  // least 200 ms of real time (Redis expires keys by its own clock, not the test's): a slow step cannot see a key
  // expire that the model still holds.
  return [
    perMinute(10, { name }),
    perMinute(300, { name }),
    perSecond(5, { burst: 10, name }),
    perSecond(3, { burst: 2, name }),
    tokenBucket({ capacity: 7, refill: 3, intervalMs: 700, name }),
    tokenBucket({ capacity: 40, refill: 9, intervalMs: 86_400_000, name }),
  ];
}

describe.skipIf(REDIS_URL === null)('the endpoint value in Redis', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  it('is <name> <units> <updatedAt> <capacity>/<unitsPerMs>/<unitsPerToken> in decimal, for every shape', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('text');
    const limits = [
      perMinute(10),
      perMinute(1_000_000_000),
      perSecond(5, { burst: 10 }),
      perDay(10_000),
      // 52 124 995 tokens of 86 400 000 units, just below 2^52: units past 1e14, which Lua's tostring would print
      // in exponent form.
      tokenBucket({ capacity: 52_124_995, refill: 1, intervalMs: 86_400_000 }),
    ];
    // Half of each bucket, so its TTL (the time until full) is long enough to read the key back.
    const half = (limit: Limit) => Math.floor(limit.capacity / 2);
    for (const [i, limit] of limits.entries()) await store.consume(org, String(i), [limit], half(limit));
    for (const [i, limit] of limits.entries()) {
      const key = endpointKey(org, String(i));
      const units = (limit.capacity - half(limit)) * limit.unitsPerToken;
      const { capacity, unitsPerMs, unitsPerToken } = limit;
      expect(await client.get(key)).toBe(`${limit.name} ${units} ${T0} ${capacity}/${unitsPerMs}/${unitsPerToken}`);
      expect(decodeEndpointValue((await client.getBuffer(key)) as Buffer)).toEqual([
        { name: limit.name, units, updatedAt: T0, capacity, unitsPerMs, unitsPerToken },
      ]);
      expect(await store.peek(org, String(i), [limit], 1)).toEqual([units - unitsPerToken]);
    }
    // A spec plan's value fits Redis' smallest string object.
    expect(await client.object('ENCODING', endpointKey(org, '0'))).toBe('embstr');
  });

  it("is a quota's count for the period ending at its updatedAt, shape <capacity>/0/1, read back as written", async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('quota-text');
    const key = endpointKey(org, 'e');
    const today = inPeriod([quota(3, { per: 'day', name: 'daily' })], T0)[0] as Limit;
    const end = today.periodEnd as number;
    expect(await store.consume(org, 'e', [TEN, today], 1)).toEqual([54_000, 2]);
    expect(await client.get(key)).toBe(`1m 54000 ${T0} 10/1/6000, daily 2 ${end} 3/0/1`);
    expect(decodeEndpointValue((await client.get(key)) as string)?.[1]).toEqual({
      name: 'daily',
      units: 2,
      updatedAt: end,
      capacity: 3,
      unitsPerMs: 0,
      unitsPerToken: 1,
    });
    // Kept beside a call that does not name it until its period ends; a bucket named in its place reads it converted.
    expect(await store.consume(org, 'e', [TEN], 1)).toEqual([48_000]);
    expect(await client.get(key)).toBe(`1m 48000 ${T0} 10/1/6000, daily 2 ${end} 3/0/1`);
    expect(await store.peek(org, 'e', [perSecond(3, { name: 'daily' })], 2)).toEqual([0]);
  });

  it('holds every bucket of an admitted call in one key, and is not written for a refused one', async () => {
    let now = T0;
    const store = redisStore({ client, clock: 'client', now: () => now });
    const org = uniqueOrg('two');
    const second = perSecond(5, { burst: 10 });
    const minuteLimit = perMinute(30);
    const key = endpointKey(org, 'e');
    expect(await store.consume(org, 'e', [second, minuteLimit], 8)).toEqual([2 * 200, 22 * 2_000]);
    expect(await client.get(key)).toBe(`1s 400 ${T0} 10/1/200, 1m 44000 ${T0} 30/1/2000`);
    now = T0 + 100;
    // '1s' holds 2.5 tokens, '1m' 22.05: a cost of 3 is refused by '1s' alone, and nothing is written.
    expect(await store.consume(org, 'e', [second, minuteLimit], 3)).toEqual([-1 - 500, -1 - 44_100]);
    expect(await client.get(key)).toBe(`1s 400 ${T0} 10/1/200, 1m 44000 ${T0} 30/1/2000`);
    expect(await store.consume(org, 'e', [second, minuteLimit], 2)).toEqual([100, 40_100]);
    expect(await client.get(key)).toBe(`1s 100 ${T0 + 100} 10/1/200, 1m 40100 ${T0 + 100} 30/1/2000`);
    // A call naming one of them keeps the other's bucket after its own, and the key lives until both are full.
    expect(await store.consume(org, 'e', [minuteLimit], 1)).toEqual([38_100]);
    expect(await client.get(key)).toBe(`1m 38100 ${T0 + 100} 30/1/2000, 1s 100 ${T0 + 100} 10/1/200`);
    expect(await client.pttl(key)).toBeGreaterThan(21_900 - 1_000);
    expect(await store.peek(org, 'e', [second], 1)).toEqual([-1 - 100]);
    // A reset forgets the buckets it names and keeps the rest.
    await store.reset(org, 'e', [minuteLimit]);
    expect(await client.get(key)).toBe(`1s 100 ${T0 + 100} 10/1/200`);
    await store.reset(org, 'e', [second]);
    expect(await client.exists(key)).toBe(0);
  });

  it('keeps the buckets of limits a call does not name until they are full, at most MAX_KEPT_ENTRIES', async () => {
    let now = T0;
    const store = redisStore({ client, clock: 'client', now: () => now });
    const org = uniqueOrg('kept');
    const key = endpointKey(org, 'e');
    // 20 limits of 1 per second, each charged alone: each call's bucket first, then the others written before it.
    const limits = Array.from({ length: 20 }, (_, i) => perSecond(1, { name: `n${i}` }));
    for (const limit of limits) expect(await store.consume(org, 'e', [limit], 1)).toEqual([0]);
    const names = decodeEndpointValue((await client.get(key)) as string)?.map((bucket) => bucket.name);
    expect(names).toEqual(['n19', ...Array.from({ length: MAX_KEPT_ENTRIES }, (_, i) => `n${18 - i}`)]);
    // Past the bound, the oldest are full buckets again; the kept ones are still empty.
    expect(await store.peek(org, 'e', [limits[0] as Limit], 1)).toEqual([0]);
    expect(await store.peek(org, 'e', [limits[19 - MAX_KEPT_ENTRIES] as Limit], 1)).toEqual([-1]);
    // A second later every bucket is full again, and the next write keeps none of the others.
    now = T0 + 1_000;
    expect(await store.consume(org, 'e', [limits[5] as Limit], 1)).toEqual([0]);
    expect(await client.get(key)).toBe(`n5 0 ${T0 + 1_000} 1/1/1000`);
  });

  it('is read as written by hand: a bucket set with redis-cli is the bucket the store sees', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 + 1_500 });
    const org = uniqueOrg('by-hand');
    // 2 tokens at T0 on a limit of 10 per minute: 2.25 tokens 1.5 s later.
    await client.set(endpointKey(org, 'e'), `1m 12000 ${T0} 10/1/6000`, 'PX', 60_000);
    expect(await peekRpm(store, org, 'e', 10, 1)).toBe(2 * U + 15_000 - U);
    expect(await consumeRpm(store, org, 'e', 10, 3)).toBe(-1 - (2 * U + 15_000));
    expect(await consumeRpm(store, org, 'e', 10, 2)).toBe(15_000);
    expect(await client.get(endpointKey(org, 'e'))).toBe(`1m 1500 ${T0 + 1_500} 10/1/6000`);
  });

  it('answers as core does with clocks stepping any distance back and forth, and limits changing shape', async () => {
    const a = shapesNamed('a');
    const b = shapesNamed('b');
    const step = fc.record({
      // Small moves most of the time (refills and boundaries crossed a ms at a time), and jumps of up to ten years
      // now and then: an updatedAt is kept whole, so no distance between clocks is too far.
      offset: fc.oneof(
        { weight: 4, arbitrary: fc.integer({ min: -3_000, max: 3_000 }) },
        { weight: 1, arbitrary: fc.integer({ min: -3_650 * DAY, max: 3_650 * DAY }) },
      ),
      // One bucket or two, each in any of its shapes.
      limits: fc.oneof(
        fc.tuple(fc.constantFrom(...a)),
        fc.tuple(fc.constantFrom(...b)),
        fc.tuple(fc.constantFrom(...a), fc.constantFrom(...b)),
      ),
      cost: fc.integer({ min: 1, max: 10 }),
      peek: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
        let now = T0;
        const clock = () => now;
        const redis = redisStore({ client, clock: 'client', now: clock });
        const model = new BucketsModel();
        const org = uniqueOrg('steps');
        const seen: [Outcome[], Outcome[]][] = [];
        for (const { offset, limits, cost, peek } of steps) {
          // Each offset moves the clock from where it is, so a run wanders and comes back across its own writes.
          now = Math.max(0, now + offset);
          const expected = model.call(limits, cost, now, !peek);
          const actual = peek ? await redis.peek(org, 'e', limits, cost) : await redis.consume(org, 'e', limits, cost);
          seen.push([actual, expected]);
          // Redis expires a key once its buckets are full by Redis' clock, not the test's: a key written close to
          // that (a refusal converts a bucket, charged nothing; the test's clock steps anywhere) is forgotten on both
          // sides, and every other is kept for the run, so that no real time passing between steps can tell the two
          // apart.
          const key = endpointKey(org, 'e');
          if (model.wrote && model.fullAt() - now < 200) {
            model.buckets.clear();
            await client.del(key);
          } else {
            await client.persist(key);
          }
        }
        expect(seen.map(([actual]) => actual)).toEqual(seen.map(([, expected]) => expected));
      }),
      { numRuns: 150 },
    );
  });

  it('neither refills nor admits when the client clock steps back a day, and counts on from the stored time', async () => {
    let now = T0;
    const store = redisStore({ client, clock: 'client', now: () => now });
    const org = uniqueOrg('day-back');
    expect(await consumeRpm(store, org, 'e', 10, 10)).toBe(0);
    now = T0 - DAY;
    expect(await peekRpm(store, org, 'e', 10, 1)).toBe(-1);
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(-1);
    // Back to the stored time and on: one token 6 s after the drain, not a ms sooner.
    now = T0 + 5_999;
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(-1 - 59_990);
    now = T0 + 6_000;
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(0);
    expect(await client.get(endpointKey(org, 'e'))).toBe(rpmValue(0, T0 + 6_000, 10));
  });

  it('neither refills nor admits two limits when the clock steps back, and writes both at their stored times', async () => {
    // 10 per minute (6 000 units a token) and 20 per hour (180 000), each key holding both entries in the call's order.
    const hourly = tokenBucket({ capacity: 20, refill: 20, intervalMs: 3_600_000, name: '1h' });
    const both = [TEN, hourly];
    let now = T0;
    const store = redisStore({ client, clock: 'client', now: () => now });
    const org = uniqueOrg('two-back');
    const key = endpointKey(org, 'e');
    expect(await store.consume(org, 'e', both, 10)).toEqual([0, 10 * 180_000]);
    now = T0 - 1_000;
    // Refused by the minute bucket: counted from T0, neither refilled; a refusal writes nothing.
    expect(await store.consume(org, 'e', both, 1)).toEqual([-1, -1 - 10 * 180_000]);
    now = T0 + 6_000 - 1_000;
    expect(await store.consume(org, 'e', both, 1)).toEqual([-1 - 5_000, -1 - (10 * 180_000 + 5_000)]);
    // Admitted with the clock behind the hour bucket's time: each entry keeps its own updatedAt, the later of the two.
    now = T0 + 6_000;
    await client.set(key, `1m 0 ${T0} 10/1/6000, 1h 1800000 ${T0 + 60_000} 20/1/180000`, 'PX', 600_000);
    expect(await store.consume(org, 'e', both, 1)).toEqual([0, 9 * 180_000]);
    expect(await client.get(key)).toBe(`1m 0 ${T0 + 6_000} 10/1/6000, 1h 1620000 ${T0 + 60_000} 20/1/180000`);
    now = T0 + 60_000 + 1_000;
    expect(await store.consume(org, 'e', both, 1)).toEqual([49_000, 8 * 180_000 + 1_000]);
  });

  it.each([
    ['joined by something else than a comma and a space', `1m 54000 ${T0} 10/1/6000; 1h 1800000 ${T0} 20/1/180000`],
    ['a second entry holding more than its capacity', `1m 54000 ${T0} 10/1/6000, 1h 3600001 ${T0} 20/1/180000`],
    ['a second entry deeper in debt than its capacity', `1m 54000 ${T0} 10/1/6000, 1h -3600001 ${T0} 20/1/180000`],
  ])('reads a value of two entries ratecard would not write (%s) as full buckets', async (_label, value) => {
    const hourly = tokenBucket({ capacity: 20, refill: 20, intervalMs: 3_600_000, name: '1h' });
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('foreign-two');
    await client.set(endpointKey(org, 'e'), value, 'PX', 60_000);
    // Joined wrongly, the whole value is nothing: both buckets full. An entry out of range is a full bucket; the other
    // holds its 9 tokens.
    const outcomes = value.includes(';') ? [9 * 6_000, 19 * 180_000] : [8 * 6_000, 19 * 180_000];
    expect(await store.consume(org, 'e', [TEN, hourly], 1)).toEqual(outcomes);
  });

  it('charges a bucket several times in one batch, each charge seeing the one before', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('repeat');
    const outcomes = await Promise.all(Array.from({ length: 12 }, () => consumeRpm(store, org, 'e', 10, 1)));
    expect(outcomes.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => (9 - i) * U));
    expect(outcomes.slice(10)).toEqual([-1, -1]);
    expect(await client.get(endpointKey(org, 'e'))).toBe(rpmValue(0, T0, 10));
  });

  it.each(PADDED)('reads a value with %s as the numbers', async (_label, value) => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('padded');
    await client.set(endpointKey(org, 'e'), value, 'PX', 60_000);
    // 9 tokens at T0: a full bucket would answer 9 tokens after a charge of 1, this one 8.
    expect(await peekRpm(store, org, 'e', 10, 1)).toBe(8 * U);
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(8 * U);
    expect(await client.get(endpointKey(org, 'e'))).toBe(rpmValue(8 * U, T0, 10));
  });

  it('reads any value as decodeEndpointValue does, in peek and consume', async () => {
    // Entries of a name, two numbers and a shape, some padded with zeros, some out of range; the shape often the
    // request's own text (the script then checks only the units against it), else any three numbers or a quota's; or text from
    // the characters values are made of.
    const number = (max: number) =>
      fc
        .tuple(fc.nat({ max: 3 }), fc.oneof(fc.integer({ min: 0, max }), fc.bigInt({ min: 0n, max: 10n ** 20n })))
        .map(([zeros, n]) => '0'.repeat(zeros) + String(n));
    const shape = fc.oneof(
      fc.constant(`${TEN.capacity}/${TEN.unitsPerMs}/${TEN.unitsPerToken}`),
      fc.tuple(number(30), number(20), number(100_000_000)).map((numbers) => numbers.join('/')),
      // A quota's: it never refills, and its updatedAt is its period's end.
      number(30).map((capacity) => `${capacity}/0/1`),
    );
    const entry = fc
      .tuple(fc.constantFrom('1m', '1s', 'x'), number(200_000), number(2 * T0), shape)
      .map((parts) => parts.join(' '));
    const value = fc.oneof(
      fc.array(entry, { minLength: 1, maxLength: 3 }).map((entries) => entries.join(', ')),
      fc.stringMatching(/^[0-9 /+\-.exm,]{0,40}$/),
    );
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    await fc.assert(
      fc.asyncProperty(value, async (text) => {
        const org = uniqueOrg('any');
        await client.set(endpointKey(org, 'e'), text, 'PX', 60_000);
        const bucket = minuteBucket(text);
        const held =
          bucket === undefined ? 10 * TEN.unitsPerToken : unitsAt(bucket.units, bucket.updatedAt, bucket, T0, TEN);
        expect(await store.peek(org, 'e', [TEN], 1)).toEqual([take(held, 1, TEN)]);
        expect(await store.consume(org, 'e', [TEN], 1)).toEqual([take(held, 1, TEN)]);
      }),
      { numRuns: 300 },
    );
  });

  it.each(FOREIGN)('reads a value ratecard would not write (%s) as a full bucket', async (_label, value) => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('foreign');
    const key = endpointKey(org, 'e');
    await client.set(key, value, 'PX', 60_000);
    expect(await peekRpm(store, org, 'e', 10, 1)).toBe(9 * U);
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(9 * U);
    // Charged, it holds ratecard's own value from then on.
    expect(await client.get(key)).toBe(rpmValue(9 * U, T0, 10));
  });
});
