import {
  createLimiter,
  type Limit,
  type LimitRequest,
  MAX_BUCKET_UNITS,
  MAX_INTERVAL_MS,
  MAX_LIMIT,
  MAX_LIMITS_PER_REQUEST,
  MAX_REFILL,
  type Plan,
  perSecond,
  RateLimitError,
  tokenBucket,
} from '@ratecard/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { memoryStore } from '../src/index.js';

const T0 = 1_700_000_000_000;

/** Strings that stress key schemes: separators, braces, NUL, percent signs, astral characters, the length bound. */
const hostileString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.constantFrom('', 'a}b', '{x}', 'a:b', '%7B', '\u0000', 'a\u0000b', ' ', '::', '{}', '%', '\u{1F600}'),
  fc.constantFrom(256, 257).chain((n) => fc.constantFrom('x'.repeat(n), '\u{1F600}'.repeat(n), 'é'.repeat(n))),
);

/** Numbers a caller might pass as cost or override by mistake. */
const hostileNumber = fc.oneof(
  fc.constantFrom(
    0,
    -1,
    1.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    2 ** 53,
    -0,
    MAX_LIMIT + 1,
  ),
  fc.double(),
  fc.integer({ min: -1_000, max: 2_000 }),
);

function codePoints(value: string): number {
  return [...value].length;
}

/** What the limiter must say about a request: the error code it must throw, or null when it is valid. */
function expectedError(request: LimitRequest): string | null {
  const nameOk = (v: string) => v.length > 0 && codePoints(v) <= 256;
  if (!nameOk(request.organization) || !nameOk(request.endpoint)) return 'invalid_argument';
  // Neither the rule key nor '<METHOD> <path>': it could match no rule.
  const space = request.endpoint.indexOf(' ');
  if (request.endpoint !== 'POST /browsers' && (space <= 0 || request.endpoint[space + 1] !== '/')) {
    return 'invalid_argument';
  }
  const override = request.override;
  if (
    override !== undefined &&
    (!Number.isSafeInteger(override) || (override as number) < 1 || (override as number) > MAX_LIMIT)
  ) {
    return 'invalid_argument';
  }
  const limit = override ?? 10;
  const cost = request.cost as number | undefined;
  if (cost !== undefined && (!Number.isSafeInteger(cost) || cost < 1)) return 'invalid_argument';
  if ((cost ?? 1) > limit) return 'cost_exceeds_limit';
  return null;
}

describe('hostile input (fast-check)', () => {
  it('answers every request either with a decision or a RateLimitError that charged nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        hostileString,
        fc.oneof(fc.constant('POST /browsers'), hostileString),
        fc.option(hostileNumber, { nil: undefined }),
        fc.option(hostileNumber, { nil: undefined }),
        async (organization, endpoint, cost, override) => {
          const store = memoryStore({ now: () => T0 });
          const limiter = createLimiter({ store, endpoints: { 'POST /browsers': 'enforce' } });
          const request: LimitRequest = { organization, endpoint, plan: 'developer', cost, override };
          const expected = expectedError(request);
          const outcome = await limiter.consume(request).then(
            (decision) => ({ decision, error: undefined }),
            (error: unknown) => ({ decision: undefined, error }),
          );
          if (expected === null) {
            expect(outcome.error).toBeUndefined();
          } else {
            expect(outcome.error).toBeInstanceOf(RateLimitError);
            expect((outcome.error as RateLimitError).code).toBe(expected);
            expect((outcome.error as RateLimitError).message).toMatch(/^ratecard: /);
            expect(store.stats().buckets).toBe(0);
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('rejects plans that are not plans, including prototype keys, charging nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string(), fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf')),
        async (plan) => {
          fc.pre(!['developer', 'hobbyist', 'startup', 'enterprise'].includes(plan));
          const store = memoryStore({ now: () => T0 });
          const limiter = createLimiter({ store });
          const request = { organization: 'o', endpoint: 'POST /browsers', plan: plan as Plan };
          await expect(limiter.consume(request)).rejects.toMatchObject({ code: 'unknown_plan' });
          expect(store.stats().buckets).toBe(0);
        },
      ),
    );
  });

  it('keeps every distinct hostile organization in its own bucket', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(
          hostileString.filter((s) => s.length > 0 && codePoints(s) <= 256),
          { minLength: 2, maxLength: 30 },
        ),
        async (names) => {
          const limiter = createLimiter({ store: memoryStore({ now: () => T0 }) });
          for (const organization of names) {
            const request = { organization, endpoint: 'POST /browsers', plan: 'developer', cost: 10 } as const;
            expect((await limiter.consume(request)).allowed).toBe(true);
          }
        },
      ),
    );
  });

  it('makes a limit of whole numbers within the bounds, and throws invalid_option for anything else', () => {
    const field = fc.oneof(
      hostileNumber,
      fc.integer({ min: 1, max: 100_000 }),
      fc.maxSafeNat(),
      fc.constantFrom(MAX_INTERVAL_MS, MAX_INTERVAL_MS + 1, MAX_REFILL, MAX_REFILL + 1, MAX_BUCKET_UNITS, 2 ** 52 + 1),
    );
    const name = fc.option(fc.oneof(hostileString, fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/)), { nil: undefined });
    fc.assert(
      fc.property(field, field, field, name, (capacity, refill, intervalMs, limitName) => {
        const whole = (v: number, max: number) => Number.isSafeInteger(v) && v >= 1 && v <= max;
        let valid =
          whole(capacity, MAX_BUCKET_UNITS) &&
          whole(refill, MAX_REFILL) &&
          whole(intervalMs, MAX_INTERVAL_MS) &&
          (limitName === undefined || /^[A-Za-z0-9._-]{1,64}$/.test(limitName));
        if (valid) {
          let [a, b] = [BigInt(refill), BigInt(intervalMs)];
          while (b !== 0n) [a, b] = [b, a % b];
          valid = BigInt(capacity) * (BigInt(intervalMs) / a) <= BigInt(MAX_BUCKET_UNITS);
        }
        let made: Limit | undefined;
        let error: unknown;
        try {
          made = tokenBucket({ capacity, refill, intervalMs, name: limitName });
        } catch (caught) {
          error = caught;
        }
        if (valid) {
          expect(made).toMatchObject({ capacity, refill, intervalMs });
          expect(Object.isFrozen(made)).toBe(true);
        } else {
          expect(error).toBeInstanceOf(RateLimitError);
          expect((error as RateLimitError).code).toBe('invalid_option');
          expect((error as RateLimitError).message).toMatch(/^ratecard: /);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses request limits that are not a list of 1 to 16 limits of distinct names, charging nothing', async () => {
    const many = Array.from({ length: MAX_LIMITS_PER_REQUEST + 1 }, (_, i) => perSecond(1, { name: `l${i}` }));
    const junk = fc.oneof(
      fc.anything(),
      fc.constant([]),
      fc.constant(many),
      fc.constant([perSecond(1), perSecond(2)]),
      fc.constant({ ...perSecond(1) }),
      fc.constant([perSecond(1), { ...perSecond(1), name: 'x' }]),
    );
    await fc.assert(
      fc.asyncProperty(junk, async (limits) => {
        fc.pre(limits !== undefined);
        const store = memoryStore({ now: () => T0 });
        const limiter = createLimiter({ store });
        const request = { organization: 'o', endpoint: 'POST /browsers', plan: 'developer', limits: limits as Limit };
        await expect(limiter.consume(request)).rejects.toMatchObject({ code: 'invalid_argument' });
        expect(store.stats().buckets).toBe(0);
      }),
      { numRuns: 500 },
    );
  });
});
