import { type Outcome, take, UNITS_PER_TOKEN as U, unitsAt } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketKey, decodeBucketValue, redisStore } from '../src/index.js';
import { connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

const T0 = 1_700_000_000_000;
const DAY = 86_400_000;

/**
 * Values ratecard would not write, each of which the store must read as a full bucket: the text with something
 * wrong in it, numbers out of range, and the layouts of earlier builds.
 */
const FOREIGN: readonly (readonly [string, string | Buffer])[] = [
  ['an empty string', ''],
  ['a word', 'full'],
  ['two numbers', '540000 1700000000000'],
  ['four numbers', '540000 1700000000000 10 1'],
  ['a trailing space', '540000 1700000000000 10 '],
  ['two spaces', '540000  1700000000000 10'],
  ['a tab', '540000\t1700000000000 10'],
  ['a trailing newline', '540000 1700000000000 10\n'],
  ['a sign', '+540000 1700000000000 10'],
  ['a negative number', '-1 1700000000000 10'],
  ['a fraction', '540000.5 1700000000000 10'],
  ['an exponent', '5.4e5 1700000000000 10'],
  ['hexadecimal', '0x10 1700000000000 10'],
  ['a limit of 0', '0 1700000000000 0'],
  ['a limit above MAX_LIMIT', '1 1700000000000 1000000001'],
  ['more units than the limit holds', '600001 1700000000000 10'],
  ['an updatedAt past 2^48 - 1', '540000 281474976710656 10'],
  ['twenty-digit units', '99999999999999999999 1700000000000 10'],
  ['the old compact integer', '351969551003878'],
  ['the old 12-byte packed value', oldPackedValue()],
];

/** Values with leading zeros, which the script and decodeBucketValue read as the numbers they pad. */
const PADDED: readonly (readonly [string, string])[] = [
  ['a zero before the units', '0540000 1700000000000 10'],
  ['zeros before every number', '00540000 01700000000000 010'],
  ['sixty zeros before the units', `${'0'.repeat(60)}540000 1700000000000 10`],
];

/** What earlier builds wrote for limits from 256 to 65 535: units u32, updatedAt u48, limit u16, little-endian. */
function oldPackedValue(): Buffer {
  const value = Buffer.alloc(12);
  value.writeUIntLE(59_940_000, 0, 4);
  value.writeUIntLE(T0, 4, 6);
  value.writeUIntLE(1_000, 10, 2);
  return value;
}

describe('decodeBucketValue', () => {
  it('reads <units> <updatedAt> <limit>, from a string or bytes', () => {
    const bucket = { units: 540_000, updatedAt: T0, limit: 10 };
    expect(decodeBucketValue('540000 1700000000000 10')).toEqual(bucket);
    expect(decodeBucketValue(Buffer.from('540000 1700000000000 10'))).toEqual(bucket);
  });

  it('reads the ends of every range', () => {
    expect(decodeBucketValue('0 0 1')).toEqual({ units: 0, updatedAt: 0, limit: 1 });
    expect(decodeBucketValue('60000000000000 281474976710655 1000000000')).toEqual({
      units: 60_000_000_000_000,
      updatedAt: 2 ** 48 - 1,
      limit: 1_000_000_000,
    });
  });

  it.each(FOREIGN)('turns away %s', (_label, value) => {
    expect(decodeBucketValue(value)).toBeUndefined();
  });

  it.each(PADDED)('reads %s as the numbers', (_label, value) => {
    expect(decodeBucketValue(value)).toEqual({ units: 540_000, updatedAt: T0, limit: 10 });
  });
});

describe.skipIf(REDIS_URL === null)('the bucket value in Redis', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  it('is <units> <updatedAt> <limit> in decimal, for every limit', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('text');
    // Half of each bucket, so its TTL (the time until full) is 30 s: long enough to read the key back.
    const limits = [10, 255, 256, 65_535, 65_536, 1_000_000_000];
    const half = (limit: number) => Math.floor(limit / 2);
    for (const limit of limits) await store.consume(org, String(limit), limit, half(limit));
    for (const limit of limits) {
      const key = bucketKey(org, String(limit));
      const units = (limit - half(limit)) * U;
      expect(await client.get(key)).toBe(`${units} ${T0} ${limit}`);
      expect(await client.object('ENCODING', key)).toBe('embstr');
      expect(decodeBucketValue((await client.getBuffer(key)) as Buffer)).toEqual({ units, updatedAt: T0, limit });
      expect(await store.peek(org, String(limit), limit, 1)).toBe(units - U);
    }
  });

  it('is read as written by hand: a bucket set with redis-cli is the bucket the store sees', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 + 1_500 });
    const org = uniqueOrg('by-hand');
    // 2 tokens at T0 on a limit of 10, refilling 10 units per ms: 2.25 tokens 1.5 s later.
    await client.set(bucketKey(org, 'e'), `${2 * U} ${T0} 10`, 'PX', 60_000);
    expect(await store.peek(org, 'e', 10, 1)).toBe(2 * U + 15_000 - U);
    expect(await store.consume(org, 'e', 10, 3)).toBe(-1 - (2 * U + 15_000));
    expect(await store.consume(org, 'e', 10, 2)).toBe(15_000);
    expect(await client.get(bucketKey(org, 'e'))).toBe(`15000 ${T0 + 1_500} 10`);
  });

  it('answers as core does with clocks stepping any distance back and forth, and plans changing', async () => {
    const step = fc.record({
      // Small moves most of the time (refills and boundaries crossed a ms at a time), and jumps of up to ten years
      // now and then: an updatedAt is kept whole, so no distance between clocks is too far.
      offset: fc.oneof(
        { weight: 4, arbitrary: fc.integer({ min: -3_000, max: 3_000 }) },
        { weight: 1, arbitrary: fc.integer({ min: -3_650 * DAY, max: 3_650 * DAY }) },
      ),
      // Limits stay low enough that a written key lives at least 200 ms of real time (Redis expires keys by its own
      // clock, not the test's), so a slow step cannot see a key expire that the model still holds.
      limit: fc.constantFrom(10, 25, 100, 250, 300),
      cost: fc.integer({ min: 1, max: 10 }),
      peek: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
        let now = T0;
        const clock = () => now;
        const redis = redisStore({ client, clock: 'client', now: clock });
        const memory = memoryStore({ now: clock });
        const org = uniqueOrg('steps');
        const seen: [Outcome, Outcome][] = [];
        for (const { offset, limit, cost, peek } of steps) {
          // Each offset moves the clock from where it is, so a run wanders and comes back across its own writes.
          now = Math.max(0, now + offset);
          const expected = peek ? memory.peek(org, 'e', limit, cost) : memory.consume(org, 'e', limit, cost);
          const actual = peek ? await redis.peek(org, 'e', limit, cost) : await redis.consume(org, 'e', limit, cost);
          seen.push([actual, expected as Outcome]);
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
    expect(await store.consume(org, 'e', 10, 10)).toBe(0);
    now = T0 - DAY;
    expect(await store.peek(org, 'e', 10, 1)).toBe(-1);
    expect(await store.consume(org, 'e', 10, 1)).toBe(-1);
    // Back to the stored time and on: one token 6 s after the drain, not a ms sooner.
    now = T0 + 5_999;
    expect(await store.consume(org, 'e', 10, 1)).toBe(-1 - 59_990);
    now = T0 + 6_000;
    expect(await store.consume(org, 'e', 10, 1)).toBe(0);
    expect(await client.get(bucketKey(org, 'e'))).toBe(`0 ${T0 + 6_000} 10`);
  });

  it('charges a bucket several times in one batch, each charge seeing the one before', async () => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('repeat');
    const outcomes = await Promise.all(Array.from({ length: 12 }, () => store.consume(org, 'e', 10, 1)));
    expect(outcomes.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => (9 - i) * U));
    expect(outcomes.slice(10)).toEqual([-1, -1]);
    expect(await client.get(bucketKey(org, 'e'))).toBe(`0 ${T0} 10`);
  });

  it.each(PADDED)('reads a value with %s as the numbers', async (_label, value) => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('padded');
    await client.set(bucketKey(org, 'e'), value, 'PX', 60_000);
    // 9 tokens at T0: a full bucket would answer 9 tokens after a charge of 1, this one 8.
    expect(await store.peek(org, 'e', 10, 1)).toBe(8 * U);
    expect(await store.consume(org, 'e', 10, 1)).toBe(8 * U);
    expect(await client.get(bucketKey(org, 'e'))).toBe(`${8 * U} ${T0} 10`);
  });

  it('reads any value as decodeBucketValue does', async () => {
    // Three numbers, some padded with zeros, some out of range; or text from the characters numbers are made of.
    const number = (max: number) =>
      fc
        .tuple(fc.nat({ max: 3 }), fc.oneof(fc.integer({ min: 0, max }), fc.bigInt({ min: 0n, max: 10n ** 20n })))
        .map(([zeros, n]) => '0'.repeat(zeros) + String(n));
    const value = fc.oneof(
      fc.tuple(number(20 * U), number(2 * T0), number(300)).map((numbers) => numbers.join(' ')),
      fc.stringMatching(/^[0-9 +\-.ex]{0,30}$/),
    );
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    await fc.assert(
      fc.asyncProperty(value, async (text) => {
        const org = uniqueOrg('any');
        await client.set(bucketKey(org, 'e'), text, 'PX', 60_000);
        const bucket = decodeBucketValue(text);
        const held = bucket === undefined ? 10 * U : unitsAt(bucket.units, bucket.updatedAt, bucket.limit, T0, 10);
        expect(await store.peek(org, 'e', 10, 1)).toBe(take(held, 1));
      }),
      { numRuns: 300 },
    );
  });

  it.each(FOREIGN)('reads a value ratecard would not write (%s) as a full bucket', async (_label, value) => {
    const store = redisStore({ client, clock: 'client', now: () => T0 });
    const org = uniqueOrg('foreign');
    const key = bucketKey(org, 'e');
    await client.set(key, value, 'PX', 60_000);
    expect(await store.peek(org, 'e', 10, 1)).toBe(9 * U);
    expect(await store.consume(org, 'e', 10, 1)).toBe(9 * U);
    // Charged, it holds ratecard's own value from then on.
    expect(await client.get(key)).toBe(`${9 * U} ${T0} 10`);
  });
});
