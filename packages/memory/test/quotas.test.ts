import {
  createLimiter,
  inPeriod,
  type Limit,
  limitStates,
  periodAt,
  perMinute,
  quota,
  RateLimitError,
} from '@ratecard/core';
import { ExactBucketModel } from '@ratecard/core/testing';
import FakeTimers from '@sinonjs/fake-timers';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryStore } from '../src/index.js';

let clock: ReturnType<typeof FakeTimers.install> | undefined;

afterEach(() => {
  clock?.uninstall();
  clock = undefined;
});

/** Fakes Date at an ISO instant. */
function at(iso: string): void {
  clock?.uninstall();
  clock = FakeTimers.install({ now: Date.parse(iso), toFake: ['Date'] });
}

function limiterOf(limits: Limit | Limit[]) {
  return createLimiter({ store: memoryStore({ now: () => Date.now() }), plans: { p: limits } });
}

const ask = { organization: 'user_1', endpoint: 'GET /api', plan: 'p' };

describe('quota', () => {
  it('counts per calendar day in UTC: 3 a day, refused until midnight, full again then', async () => {
    at('2026-11-27T23:59:50.000Z');
    const limiter = limiterOf(quota(3, { per: 'day' }));
    for (let i = 2; i >= 0; i--) expect(await limiter.consume(ask)).toMatchObject({ allowed: true, remaining: i });
    const refused = await limiter.consume(ask);
    expect(refused).toMatchObject({ allowed: false, retryAfter: 10, resetAfter: 10, limit: 3, remaining: 0 });
    clock?.tick(9_999);
    expect((await limiter.consume(ask)).retryAfter).toBe(1);
    clock?.tick(1);
    expect(await limiter.consume(ask)).toMatchObject({ allowed: true, remaining: 2 });
  });

  it('starts a billing month on the anchor day in the customer time zone, the last day of a shorter month', async () => {
    // Signed up on January 31 in New York: months start Jan 31, Feb 28, Mar 31 at midnight there.
    const monthly = quota(2, { per: 'month', anchorDay: 31, timeZone: 'America/New_York' });
    at('2027-02-27T12:00:00-05:00');
    const limiter = limiterOf(monthly);
    await limiter.consume(ask);
    await limiter.consume(ask);
    const refused = await limiter.consume(ask);
    expect(refused.allowed).toBe(false);
    // Until 2027-02-28T00:00-05:00: 12 hours.
    expect(refused.retryAfter).toBe(12 * 3_600);
    at('2027-02-28T00:00:00-05:00');
    expect((await limiter.consume(ask)).allowed).toBe(true);
    const period = (inPeriod([monthly], Date.now())[0] as Limit).periodEnd;
    // The next period starts on March 31 (the anchor), in daylight time: -04:00.
    expect(new Date(period as number).toISOString()).toBe('2027-03-31T04:00:00.000Z');
  });

  it('has a 23-hour day when clocks go forward', async () => {
    at('2026-03-29T00:30:00+00:00');
    const daily = quota(5, { per: 'day', timeZone: 'Europe/London' });
    const limiter = limiterOf([perMinute(60), daily]);
    const decision = await limiter.consume(ask);
    const state = limitStates(decision).find((each) => each.limit.name === 'day');
    // Midnight to midnight in London on 2026-03-29 is 23 hours.
    expect(state?.resetAfter).toBe(23 * 3_600 - 30 * 60);
    const limit = state?.limit as Limit;
    expect((limit.periodEnd as number) - (limit.periodStart as number)).toBe(23 * 3_600_000);
  });

  it('stands beside a token bucket, all or nothing', async () => {
    at('2026-06-01T10:00:00Z');
    const limiter = limiterOf([perMinute(2), quota(3, { per: 'week' })]);
    await limiter.consume(ask);
    await limiter.consume(ask);
    // The minute refuses: the quota is not charged.
    expect((await limiter.consume(ask)).allowed).toBe(false);
    clock?.tick(60_000);
    expect((await limiter.consume(ask)).allowed).toBe(true);
    const refused = await limiter.consume(ask);
    expect(refused.allowed).toBe(false);
    // A week from Monday 2026-06-01 00:00 UTC: until Monday 2026-06-08.
    expect(refused.retryAfter).toBe(7 * 86_400 - 10 * 3_600 - 60);
  });

  it('refuses bad options clearly', () => {
    const bad = (options: unknown) => {
      try {
        quota(10, options as never);
      } catch (error) {
        expect(error).toBeInstanceOf(RateLimitError);
        return (error as RateLimitError).message;
      }
      throw new Error('expected an error');
    };
    expect(bad({ per: 'year' })).toMatch(/per must be 'day', 'week' or 'month'/);
    expect(bad({ per: 'day', timeZone: 'Mars/Olympus' })).toMatch(/time zone/);
    expect(bad({ per: 'week', anchorDay: 3 })).toMatch(/anchorDay is for months only/);
    expect(bad({ per: 'month', anchorDay: 32 })).toMatch(/anchorDay must be a whole number from 1 to 31/);
    expect(bad(undefined)).toMatch(/quota needs/);
  });
});

describe('quota properties (memory store, fake timers)', () => {
  it('14. every decision equals the exact model, across DST changes and anchor days', async () => {
    const zones = ['UTC', 'Europe/London', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kathmandu'];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...zones),
        fc.constantFrom<'day' | 'week' | 'month'>('day', 'week', 'month'),
        fc.integer({ min: 1, max: 31 }),
        // Around the 2026 DST changes and month ends.
        fc.constantFrom('2026-03-07T00:00:00Z', '2026-03-28T00:00:00Z', '2026-10-24T00:00:00Z', '2026-01-30T00:00:00Z'),
        fc.array(
          fc.record({
            gap: fc.oneof(fc.integer({ min: 0, max: 3_600_000 }), fc.integer({ min: 3_600_000, max: 30 * 3_600_000 })),
            cost: fc.integer({ min: 1, max: 4 }),
          }),
          { maxLength: 60 },
        ),
        async (timeZone, per, anchorDay, start, schedule) => {
          at(start);
          const q = quota(8, per === 'month' ? { per, timeZone, anchorDay } : { per, timeZone });
          const limiter = limiterOf(q);
          const model = new ExactBucketModel();
          for (const step of schedule) {
            clock?.tick(step.gap);
            const now = Date.now();
            const { end } = periodAt(now, q.period as NonNullable<Limit['period']>);
            const decision = await limiter.consume({ ...ask, cost: step.cost });
            const expected = model.consumeAll('k', now, [{ ...q, periodEnd: end }], step.cost);
            expect(decision.allowed).toBe(!expected.limited);
            expect(decision.remaining).toBe(expected.remaining);
            expect(decision.retryAfter).toBe(expected.retryAfter);
          }
        },
      ),
      { numRuns: 80 },
    );
  });
});
