import { describe, expect, it } from 'vitest';
import {
  isLimit,
  type Limit,
  MAX_BUCKET_UNITS,
  MAX_INTERVAL_MS,
  MAX_REFILL,
  type PeriodOptions,
  perDay,
  perHour,
  perMinute,
  perSecond,
  RateLimitError,
  type TokenBucketOptions,
  tokenBucket,
} from '../src/index.js';
import { limitList } from '../src/limits.js';

/** The error `make` throws, which must be invalid_option. */
function optionError(make: () => unknown): RateLimitError {
  let error: unknown;
  try {
    make();
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(RateLimitError);
  expect((error as RateLimitError).code).toBe('invalid_option');
  return error as RateLimitError;
}

describe('tokenBucket', () => {
  it('counts a token in intervalMs / gcd(refill, intervalMs) units, refilling refill / gcd units per ms', () => {
    expect(tokenBucket({ capacity: 10, refill: 5, intervalMs: 1_000 })).toEqual({
      kind: 'bucket',
      name: '1s',
      capacity: 10,
      refill: 5,
      intervalMs: 1_000,
      unitsPerToken: 200,
      unitsPerMs: 1,
    });
    expect(tokenBucket({ capacity: 7, refill: 7, intervalMs: 1_000 })).toMatchObject({
      unitsPerToken: 1_000,
      unitsPerMs: 7,
    });
    expect(tokenBucket({ capacity: 1, refill: 3, intervalMs: 7 })).toMatchObject({ unitsPerToken: 7, unitsPerMs: 3 });
  });

  it('is frozen and recognised as a limit; a look-alike object is not', () => {
    const limit = perSecond(5);
    expect(Object.isFrozen(limit)).toBe(true);
    expect(isLimit(limit)).toBe(true);
    expect(isLimit({ ...limit })).toBe(false);
  });

  it("takes a frozen limit of another copy of the module (the other build's) when its numbers are tokenBucket's", () => {
    // What the ESM build's perSecond(5, { burst: 10 }) is to the CommonJS build: a frozen object this copy never made.
    const other = Object.freeze({ ...perSecond(5, { burst: 10 }) });
    expect(isLimit(other)).toBe(true);
    expect(limitList(other, 'limits', 'invalid_argument')).toEqual([other]);
    expect(limitList([other, perHour(100)], 'limits', 'invalid_argument')[0]).toBe(other);
  });

  it.each([
    ['a unit count that does not follow', { unitsPerToken: 100 }],
    ['a rate over its bound', { refill: MAX_REFILL + 1 }],
    ['a name of characters no limit has', { name: 'a b' }],
    ['no name', { name: undefined }],
  ])('refuses a frozen look-alike with %s', (_label, change) => {
    const lookAlike = Object.freeze({ ...perSecond(5), ...change });
    expect(isLimit(lookAlike)).toBe(false);
    expect(() => limitList(lookAlike, 'limits', 'invalid_argument')).toThrow(RateLimitError);
  });

  it('names a limit by its interval in the largest whole unit, or as given', () => {
    const names = [1_000, 10_000, 60_000, 90_000, 3_600_000, 86_400_000, 250].map(
      (intervalMs) => tokenBucket({ capacity: 1, refill: 1, intervalMs }).name,
    );
    expect(names).toEqual(['1s', '10s', '1m', '90s', '1h', '1d', '250ms']);
    expect(tokenBucket({ capacity: 1, refill: 1, intervalMs: 1_000, name: 'per-ip.v2_x' }).name).toBe('per-ip.v2_x');
  });

  it.each([
    ['capacity', 0],
    ['capacity', -1],
    ['capacity', 1.5],
    ['capacity', Number.NaN],
    ['capacity', '10'],
    ['capacity', MAX_BUCKET_UNITS + 1],
    ['refill', 0],
    ['refill', -5],
    ['refill', 2.5],
    ['refill', Number.POSITIVE_INFINITY],
    ['refill', MAX_REFILL + 1],
    ['intervalMs', 0],
    ['intervalMs', -1_000],
    ['intervalMs', 0.5],
    ['intervalMs', MAX_INTERVAL_MS + 1],
  ])('throws invalid_option for %s %s, stating the bound', (field, value) => {
    const options = { capacity: 10, refill: 10, intervalMs: 1_000, [field]: value } as Parameters<
      typeof tokenBucket
    >[0];
    const max = { capacity: MAX_BUCKET_UNITS, refill: MAX_REFILL, intervalMs: MAX_INTERVAL_MS }[field];
    expect(optionError(() => tokenBucket(options)).message).toBe(
      `ratecard: ${field} must be a whole number from 1 to ${max}, got ${typeof value === 'string' ? `"${value}" (2 characters)` : value}`,
    );
  });

  it('throws invalid_option when capacity × units per token would pass 2^52', () => {
    // A token of 1/day is 86 400 000 units: 52 124 995 tokens fit under 2^52, one more does not.
    expect(tokenBucket({ capacity: 52_124_995, refill: 1, intervalMs: 86_400_000 }).capacity).toBe(52_124_995);
    const error = optionError(() => tokenBucket({ capacity: 52_124_996, refill: 1, intervalMs: 86_400_000 }));
    expect(error.message).toMatch(/capacity 52124996 .* must be at most 2\^52/);
    expect(optionError(() => perDay(1, { burst: 52_124_996 })).message).toMatch(/at most 2\^52/);
  });

  it.each(['', 'a b', 'a:b', '{x}', 'x'.repeat(65), 'é', 5])('throws invalid_option for the name %j', (name) => {
    expect(
      optionError(() => tokenBucket({ capacity: 1, refill: 1, intervalMs: 1_000, name: name as string })).message,
    ).toMatch(/^ratecard: a limit's name must be 1 to 64 of A-Z a-z 0-9 \. _ -/);
  });

  it('throws invalid_option for options that are not an object', () => {
    expect(optionError(() => tokenBucket(null as unknown as Parameters<typeof tokenBucket>[0])).message).toMatch(
      /tokenBucket needs \{ capacity, refill, intervalMs \}/,
    );
  });

  it('takes every option of TokenBucketOptions', () => {
    const every: Required<TokenBucketOptions> = { capacity: 10, refill: 5, intervalMs: 1_000, name: 'api' };
    expect(tokenBucket(every)).toMatchObject(every);
  });

  it('throws invalid_option for an unknown option, suggesting the one meant', () => {
    const options = { capacity: 10, refill: 5, interval: 1_000 } as unknown as TokenBucketOptions;
    expect(optionError(() => tokenBucket(options)).message).toBe(
      'ratecard: tokenBucket got an unknown option "interval"; did you mean "intervalMs"? It takes capacity, refill, intervalMs, name',
    );
    const periodOption = { capacity: 10, refill: 5, intervalMs: 1_000, burst: 20 } as TokenBucketOptions;
    expect(optionError(() => tokenBucket(periodOption)).message).toBe(
      'ratecard: tokenBucket got an unknown option "burst"; it takes capacity, refill, intervalMs, name',
    );
    const misspelt = { capacity: 10, refill: 5, intervalMs: 1_000, nmae: 'api' } as TokenBucketOptions;
    expect(optionError(() => tokenBucket(misspelt)).message).toBe(
      'ratecard: tokenBucket got an unknown option "nmae"; did you mean "name"? It takes capacity, refill, intervalMs, name',
    );
  });
});

describe('perSecond, perMinute, perHour, perDay', () => {
  it('refill n per period, with capacity the burst, default n', () => {
    expect(perSecond(5, { burst: 10 })).toMatchObject({ name: '1s', capacity: 10, refill: 5, intervalMs: 1_000 });
    expect(perSecond(5, { burst: 2 })).toMatchObject({ capacity: 2, refill: 5 });
    expect(perMinute(10)).toMatchObject({
      name: '1m',
      capacity: 10,
      refill: 10,
      intervalMs: 60_000,
      unitsPerToken: 6_000,
    });
    expect(perHour(1_000)).toMatchObject({ name: '1h', capacity: 1_000, intervalMs: 3_600_000, unitsPerToken: 3_600 });
    expect(perDay(10_000, { name: 'quota' })).toMatchObject({
      name: 'quota',
      intervalMs: 86_400_000,
      unitsPerToken: 8_640,
    });
  });

  const helpers: [string, (n: number, options?: { burst?: number }) => Limit][] = [
    ['perSecond', perSecond],
    ['perMinute', perMinute],
    ['perHour', perHour],
    ['perDay', perDay],
  ];

  it.each(helpers)('%s throws invalid_option for bad n, naming the helper and the bound', (what, helper) => {
    for (const n of [0, -1, 1.5, Number.NaN, MAX_REFILL + 1]) {
      expect(optionError(() => helper(n)).message).toBe(
        `ratecard: ${what} must be a whole number from 1 to ${MAX_REFILL}, got ${n}`,
      );
    }
  });

  it.each(helpers)('%s throws invalid_option for a bad burst or options', (_what, helper) => {
    for (const burst of [0, -1, 1.5, Number.NaN]) {
      expect(optionError(() => helper(10, { burst })).message).toBe(
        `ratecard: burst must be a whole number from 1 to ${MAX_BUCKET_UNITS}, got ${burst}`,
      );
    }
    expect(optionError(() => helper(10, 5 as unknown as { burst: number })).message).toMatch(
      /takes \{ burst\?, name\? \}/,
    );
  });

  it.each(helpers)('%s takes every option of PeriodOptions', (_what, helper) => {
    const every: Required<PeriodOptions> = { burst: 20, name: 'api' };
    expect(helper(10, every)).toMatchObject({ capacity: 20, refill: 10, name: 'api' });
  });

  it.each(helpers)(
    '%s throws invalid_option for an unknown option, even undefined, suggesting the one meant',
    (what, helper) => {
      for (const options of [{ brust: 20 }, { brust: undefined }]) {
        expect(optionError(() => helper(10, options as PeriodOptions)).message).toBe(
          `ratecard: ${what} got an unknown option "brust"; did you mean "burst"? It takes burst, name`,
        );
      }
    },
  );
});
