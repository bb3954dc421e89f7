import { type Outcome, UNITS_PER_TOKEN as U } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketKey, COMPACT_TIME_WRAP, decodeBucketValue, redisStore } from '../src/index.js';
import { connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

// The compact value keeps updatedAt modulo COMPACT_TIME_WRAP and writes most charges with INCRBY. Whatever the
// layout, every outcome must be the one core's arithmetic gives, which the memory store computes in TypeScript.

/** A wrap boundary: time digits roll over from 9 999 999 to 0 here. */
const BOUNDARY = 811_000 * COMPACT_TIME_WRAP;
/** Steps stay within this of BOUNDARY, so any two instants of a run are less than half a wrap apart. */
const SPAN = 500_000;

const step = fc.record({
  offset: fc.integer({ min: -SPAN, max: SPAN }),
  // Compact limits, packed ones just above them, and plan changes between the two. Limits stay low enough that a
  // written key lives at least 200 ms of real time (Redis expires keys by its own clock, not the test's), so a slow
  // step cannot see a key expire that the model still holds.
  limit: fc.constantFrom(10, 25, 100, 250, 255, 256, 300),
  cost: fc.integer({ min: 1, max: 10 }),
  peek: fc.boolean(),
});

/** Small moves most of the time (refills, boundaries crossed one ms at a time), and jumps now and then. */
const schedule = fc.array(
  fc.oneof(
    { weight: 4, arbitrary: step.map((s) => ({ ...s, offset: Math.sign(s.offset) * (Math.abs(s.offset) % 3_000) })) },
    { weight: 1, arbitrary: step },
  ),
  { minLength: 1, maxLength: 25 },
);

describe.skipIf(REDIS_URL === null)('the compact value', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  it('answers as core does across a wrap of its time digits, clocks going back and plan changes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: -5_000, max: 5_000 }), schedule, async (start, steps) => {
        let now = BOUNDARY + start;
        const clock = () => now;
        const redis = redisStore({ client, clock: 'client', now: clock });
        const memory = memoryStore({ now: clock });
        const org = uniqueOrg('compact');
        const seen: [Outcome, Outcome][] = [];
        for (const { offset, limit, cost, peek } of steps) {
          now = BOUNDARY + offset;
          const expected = peek ? memory.peek(org, 'e', limit, cost) : memory.consume(org, 'e', limit, cost);
          const actual = peek ? await redis.peek(org, 'e', limit, cost) : await redis.consume(org, 'e', limit, cost);
          seen.push([actual, expected as Outcome]);
        }
        expect(seen.map(([actual]) => actual)).toEqual(seen.map(([, expected]) => expected));
      }),
      { numRuns: 150 },
    );
  });

  it('charges a bucket several times in one batch, INCRBY after INCRBY', async () => {
    const now = BOUNDARY - 1;
    const store = redisStore({ client, clock: 'client', now: () => now });
    const org = uniqueOrg('repeat');
    const calls = Array.from({ length: 12 }, () => ({ organization: org, endpoint: 'e', limit: 10, cost: 1 }));
    const outcomes = await store.consumeBatch(calls);
    expect(outcomes.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => (9 - i) * U));
    expect(outcomes.slice(10)).toEqual([-1, -1]);
  });

  it.each([
    ['a limit of 0', '12345678901234'],
    ['a limit of 256 or more', '9999999999999999'],
    ['a negative number', '-1234567890123'],
    ['a fraction', '123456789012.45'],
    ['more missing units than the limit holds', String((10 * 2 ** 24 + 600_001) * COMPACT_TIME_WRAP)],
  ])('reads an integer ratecard would not write (%s) as a full bucket', async (_label, value) => {
    const store = redisStore({ client, clock: 'client', now: () => BOUNDARY });
    const org = uniqueOrg('foreign');
    const key = bucketKey(org, 'e');
    await client.set(key, value, 'PX', 60_000);
    expect(decodeBucketValue(Buffer.from(value), BOUNDARY)).toBeUndefined();
    expect(await store.peek(org, 'e', 10, 1)).toBe(9 * U);
    expect(await store.consume(org, 'e', 10, 1)).toBe(9 * U);
    // Charged, it holds ratecard's own compact value from then on.
    expect(decodeBucketValue((await client.getBuffer(key)) as Buffer, BOUNDARY)).toMatchObject({ units: 9 * U });
  });
});
