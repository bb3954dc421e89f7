import {
  createLimiter,
  type Decision,
  type EndpointMode,
  EVERY_ENDPOINT,
  type Limit,
  type Limiter,
  limitFor,
  limitStates,
  type Outcome,
  PLANS,
  type Plan,
  perMinute,
  tokenBucket,
  unitsAfter,
  unitsAt,
} from '@ratecard/core';
import { ExactBucketModel } from '@ratecard/core/testing';
import FakeTimers from '@sinonjs/fake-timers';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { memoryStore } from '../src/index.js';

const T0 = 1_700_000_000_000;
const PLAN_NAMES = Object.keys(PLANS) as Plan[];
const RUNS = { numRuns: 150 };

let clock: ReturnType<typeof FakeTimers.install>;

beforeEach(() => {
  clock = FakeTimers.install({ now: T0, toFake: ['Date'] });
});

afterEach(() => {
  clock.uninstall();
});

/** A memory store on the faked Date.now. */
const fakedStore = () => memoryStore({ now: () => Date.now() });

/** A limiter on such a store, with one rule in the given mode. */
function limiterFor(mode: EndpointMode = 'enforce'): Limiter {
  return createLimiter({ store: fakedStore(), endpoints: { 'POST /browsers': mode } });
}

const plan = fc.constantFrom(...PLAN_NAMES);
/** Gaps between requests: mostly short, sometimes long, over a schedule of up to 10 minutes. */
const gap = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 2_000 }), fc.integer({ min: 2_000, max: 30_000 }));

function request(p: Plan, cost = 1) {
  return { organization: 'org', endpoint: 'POST /browsers', plan: p, cost };
}

describe('token bucket properties (memory store, fake timers)', () => {
  it('1. bound: the cost admitted in any interval [a, b] is at most C + C·(b−a)/60 s', async () => {
    await fc.assert(
      fc.asyncProperty(
        plan,
        fc.array(fc.record({ gap, cost: fc.integer({ min: 1, max: 10 }) }), { maxLength: 120 }),
        async (p, schedule) => {
          clock.setSystemTime(T0);
          const limiter = limiterFor();
          const capacity = PLANS[p];
          const admitted: { at: number; cost: number }[] = [];
          let elapsed = 0;
          for (const { gap: wait, cost } of schedule) {
            if (elapsed + wait > 600_000) break;
            elapsed += wait;
            clock.tick(wait);
            const decision = await limiter.consume(request(p, Math.min(cost, capacity)));
            if (decision.allowed) admitted.push({ at: Date.now(), cost: Math.min(cost, capacity) });
          }
          for (let i = 0; i < admitted.length; i++) {
            let sum = 0;
            for (let j = i; j < admitted.length; j++) {
              sum += (admitted[j] as { cost: number }).cost;
              const span = (admitted[j] as { at: number }).at - (admitted[i] as { at: number }).at;
              // Times 60 000 ms: sum·60 000 ≤ C·60 000 + C·span(ms), all integers.
              expect(sum * 60_000).toBeLessThanOrEqual(capacity * 60_000 + capacity * span);
            }
          }
        },
      ),
      RUNS,
    );
  });

  it('2. exactness: every decision equals the exact rational model, step by step', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            gap,
            plan,
            trial: fc.boolean(),
            override: fc.option(fc.integer({ min: 1, max: 500 }), { nil: undefined }),
            cost: fc.integer({ min: 1, max: 12 }),
            peek: fc.boolean(),
          }),
          { maxLength: 80 },
        ),
        async (schedule) => {
          clock.setSystemTime(T0);
          const limiter = limiterFor();
          const store = fakedStore();
          const model = new ExactBucketModel();
          for (const step of schedule) {
            clock.tick(step.gap);
            const org = { plan: step.plan, trial: step.trial, override: step.override };
            const limit = limitFor(org);
            const cost = Math.min(step.cost, limit);
            const ask = { ...request(step.plan, cost), trial: step.trial, override: step.override };
            const decision = step.peek ? await limiter.peek(ask) : await limiter.consume(ask);
            const expected = step.peek
              ? model.peek('b', Date.now(), limit, cost)
              : model.consume('b', Date.now(), limit, cost);
            const { units, ...coarse } = expected;
            expect(pick(decision)).toEqual({ ...coarse, allowed: !expected.limited, limit });
            // The store's outcome carries the exact units, which a decision rounds away.
            const limits = [perMinute(limit)];
            const [outcome] = step.peek
              ? store.peek('org', 'e', limits, cost)
              : store.consume('org', 'e', limits, cost);
            expect(unitsAfter(outcome as Outcome)).toBe(units);
          }
        },
      ),
      RUNS,
    );
  });

  it('3. Retry-After is honest and tight', async () => {
    await fc.assert(
      fc.asyncProperty(
        plan,
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 3_000 }), cost: fc.integer({ min: 1, max: 10 }) }), {
          minLength: 1,
          maxLength: 40,
        }),
        fc.integer({ min: 1, max: 250 }),
        async (p, schedule, finalCost) => {
          clock.setSystemTime(T0);
          const limiter = limiterFor();
          const capacity = PLANS[p];
          for (const { gap: wait, cost } of schedule) {
            clock.tick(wait);
            await limiter.consume(request(p, Math.min(cost, capacity)));
          }
          const cost = Math.min(finalCost, capacity);
          const limited = await limiter.consume(request(p, cost));
          if (!limited.limited) return;
          expect(limited.retryAfter).toBeGreaterThanOrEqual(1);
          if (limited.retryAfter >= 2) {
            clock.tick((limited.retryAfter - 1) * 1_000);
            expect((await limiter.consume(request(p, cost))).limited).toBe(true);
            clock.tick(1_000);
          } else {
            clock.tick(limited.retryAfter * 1_000);
          }
          expect((await limiter.consume(request(p, cost))).allowed).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it('4. refilling in many small clock steps equals one large step', () => {
    // The arithmetic: composing refills over a partition of [t0, tn] gives the refill over [t0, tn].
    fc.assert(
      fc.property(
        fc.constantFrom(...Object.values(PLANS), 7, 1_000),
        fc.integer({ min: 0, max: 100 }),
        fc.array(fc.integer({ min: 0, max: 5_000 }), { maxLength: 50 }),
        (rpm, startPercent, steps) => {
          const limit = perMinute(rpm);
          const start = Math.floor((limit.capacity * limit.unitsPerToken * startPercent) / 100);
          let units = start;
          let at = T0;
          for (const step of steps) {
            units = unitsAt(units, at, limit, at + step, limit);
            at += step;
          }
          expect(units).toBe(unitsAt(start, T0, limit, at, limit));
        },
      ),
      RUNS,
    );
    // The store: one bucket watched at every small step, one left alone, then both asked the same thing.
    fc.assert(
      fc.property(plan, fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 60 }), (p, steps) => {
        clock.setSystemTime(T0);
        const store = fakedStore();
        const capacity = PLANS[p];
        const limits = [perMinute(capacity)];
        store.consume('watched', 'e', limits, capacity);
        store.consume('idle', 'e', limits, capacity);
        for (const step of steps) {
          clock.tick(step);
          store.peek('watched', 'e', limits, 1);
        }
        expect(store.consume('watched', 'e', limits, 1)).toEqual(store.consume('idle', 'e', limits, 1));
      }),
      RUNS,
    );
  });

  it('5. after 60 s idle, C unit requests in a row are admitted and the next is limited', async () => {
    await fc.assert(
      fc.asyncProperty(
        plan,
        fc.array(fc.record({ gap, cost: fc.integer({ min: 1, max: 25 }) }), { maxLength: 30 }),
        async (p, schedule) => {
          clock.setSystemTime(T0);
          const limiter = limiterFor();
          const capacity = PLANS[p];
          for (const { gap: wait, cost } of schedule) {
            clock.tick(wait);
            await limiter.consume(request(p, Math.min(cost, capacity)));
          }
          clock.tick(60_000);
          for (let i = 0; i < capacity; i++) expect((await limiter.consume(request(p))).allowed).toBe(true);
          expect((await limiter.consume(request(p))).limited).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it('6. trial means Start-Up, override wins, and a plan change never admits above the new capacity', async () => {
    fc.assert(
      fc.property(plan, fc.integer({ min: 1, max: 100_000 }), (p, override) => {
        expect(limitFor({ plan: p, trial: true })).toBe(PLANS.startup);
        expect(limitFor({ plan: p, trial: true, override })).toBe(override);
        expect(limitFor({ plan: p })).toBe(PLANS[p]);
      }),
    );
    await fc.assert(
      fc.asyncProperty(
        plan,
        plan,
        fc.array(fc.record({ gap, cost: fc.integer({ min: 1, max: 10 }) }), { maxLength: 40 }),
        fc.array(fc.record({ gap, cost: fc.integer({ min: 1, max: 10 }) }), { maxLength: 60 }),
        async (before, after, first, second) => {
          clock.setSystemTime(T0);
          const limiter = limiterFor();
          for (const { gap: wait, cost } of first) {
            clock.tick(wait);
            await limiter.consume(request(before, Math.min(cost, PLANS[before])));
          }
          const capacity = PLANS[after];
          const admitted: { at: number; cost: number }[] = [];
          for (const { gap: wait, cost } of second) {
            clock.tick(wait);
            const c = Math.min(cost, capacity);
            if ((await limiter.consume(request(after, c))).allowed) admitted.push({ at: Date.now(), cost: c });
          }
          for (let i = 0; i < admitted.length; i++) {
            let sum = 0;
            for (let j = i; j < admitted.length; j++) {
              sum += (admitted[j] as { cost: number }).cost;
              const span = (admitted[j] as { at: number }).at - (admitted[i] as { at: number }).at;
              expect(sum * 60_000).toBeLessThanOrEqual(capacity * 60_000 + capacity * span);
            }
          }
        },
      ),
      RUNS,
    );
  });

  it('7. shadow mode accounts exactly like enforce, and never blocks', async () => {
    await fc.assert(
      fc.asyncProperty(
        plan,
        fc.array(fc.record({ gap, cost: fc.integer({ min: 1, max: 10 }) }), { maxLength: 80 }),
        async (p, schedule) => {
          clock.setSystemTime(T0);
          const enforce = limiterFor('enforce');
          const shadow = limiterFor('shadow');
          for (const { gap: wait, cost } of schedule) {
            clock.tick(wait);
            const c = Math.min(cost, PLANS[p]);
            const e = await enforce.consume(request(p, c));
            const s = await shadow.consume(request(p, c));
            expect(s.allowed).toBe(true);
            expect(s.mode).toBe('shadow');
            expect({ ...s, allowed: e.allowed, mode: e.mode }).toEqual(e);
          }
        },
      ),
      RUNS,
    );
  });

  it('the four plans at a glance: Retry-After after a full burst is 6, 3, 1 and 1 s', async () => {
    const seen: Record<string, number> = {};
    for (const p of PLAN_NAMES) {
      const limiter = limiterFor();
      for (let i = 0; i < PLANS[p]; i++) await limiter.consume(request(p));
      const next = await limiter.consume(request(p));
      expect(next.allowed).toBe(false);
      seen[p] = next.retryAfter;
    }
    expect(seen).toEqual({ developer: 6, hobbyist: 3, startup: 1, enterprise: 1 });
  });
});

/** Any interval from a millisecond to a day, the named periods more often. */
const intervalMs = fc.oneof(
  fc.constantFrom(1_000, 60_000, 3_600_000, 86_400_000),
  fc.integer({ min: 1, max: 86_400_000 }),
);

/** The shape of a limit: any interval, a refill, and a burst from a tenth to three times the refill. */
const shape = fc
  .record({ intervalMs, refill: fc.integer({ min: 1, max: 200 }), burstPercent: fc.integer({ min: 10, max: 300 }) })
  .map(({ intervalMs, refill, burstPercent }) => ({
    capacity: Math.max(1, Math.floor((refill * burstPercent) / 100)),
    refill,
    intervalMs,
  }));

/** Waits in thousandths of a token's refill time: none, part of a token, a few tokens, or a long idle stretch. */
const permille = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 1, max: 1_000 }),
  fc.integer({ min: 1_000, max: 5_000 }),
  fc.integer({ min: 5_000, max: 300_000 }),
);

/** A wait of `tokens` thousandths of a token of `limit`, in whole ms. */
const waitFor = (limit: Limit, tokens: number) => Math.floor((limit.intervalMs * tokens) / (limit.refill * 1_000));

/** A limiter on the faked clock that takes each request's own limits. */
const ownLimiter = () => createLimiter({ store: fakedStore(), endpoints: EVERY_ENDPOINT });
function ask(limits: Limit | Limit[], cost: number) {
  return { organization: 'org', endpoint: 'POST /api', limits, cost };
}

/** Every window [a, b] of admitted requests holds at most capacity + refill × (b − a) / intervalMs tokens. */
function expectWithinBound(limit: Limit, admitted: readonly { at: number; cost: number }[]): void {
  for (let i = 0; i < admitted.length; i++) {
    let sum = 0;
    for (let j = i; j < admitted.length; j++) {
      const step = admitted[j] as { at: number; cost: number };
      sum += step.cost;
      const span = step.at - (admitted[i] as { at: number }).at;
      // Times intervalMs, in integers: sum·I ≤ C·I + r·span.
      expect(sum * limit.intervalMs).toBeLessThanOrEqual(limit.capacity * limit.intervalMs + limit.refill * span);
    }
  }
}

describe('any limit: seconds to days, bursts above and below the rate, costs (memory store, fake timers)', () => {
  it('8. bound: the cost admitted in any interval [a, b] is at most capacity + refill·(b−a)/intervalMs', async () => {
    await fc.assert(
      fc.asyncProperty(
        shape,
        fc.array(fc.record({ wait: permille, cost: fc.integer({ min: 1, max: 5 }) }), { maxLength: 80 }),
        async (stated, schedule) => {
          clock.setSystemTime(T0);
          const limiter = ownLimiter();
          const limit = tokenBucket(stated);
          const admitted: { at: number; cost: number }[] = [];
          for (const { wait, cost } of schedule) {
            clock.tick(waitFor(limit, wait));
            const c = Math.min(cost, limit.capacity);
            if ((await limiter.consume(ask(limit, c))).allowed) admitted.push({ at: Date.now(), cost: c });
          }
          expectWithinBound(limit, admitted);
        },
      ),
      RUNS,
    );
  });

  it('9. exactness: every decision equals the exact model, through limit changes under one name', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(shape, { minLength: 1, maxLength: 3 }),
        fc.array(
          fc.record({ which: fc.nat(), wait: permille, cost: fc.integer({ min: 1, max: 8 }), peek: fc.boolean() }),
          { maxLength: 60 },
        ),
        async (shapes, schedule) => {
          clock.setSystemTime(T0);
          const limiter = ownLimiter();
          const store = fakedStore();
          const model = new ExactBucketModel();
          // One name for every shape: each switch is a limit changed under its name.
          const limits = shapes.map((stated) => tokenBucket({ ...stated, name: 'l' }));
          for (const step of schedule) {
            const limit = limits[step.which % limits.length] as Limit;
            clock.tick(waitFor(limit, step.wait));
            const cost = Math.min(step.cost, limit.capacity);
            const decision = step.peek ? await limiter.peek(ask(limit, cost)) : await limiter.consume(ask(limit, cost));
            const expected = step.peek
              ? model.peek('b', Date.now(), limit, cost)
              : model.consume('b', Date.now(), limit, cost);
            const { units, ...coarse } = expected;
            expect(pick(decision)).toEqual({ ...coarse, allowed: !expected.limited, limit: limit.capacity });
            const [outcome] = step.peek ? store.peek('b', 'e', [limit], cost) : store.consume('b', 'e', [limit], cost);
            expect(unitsAfter(outcome as Outcome)).toBe(units);
          }
        },
      ),
      RUNS,
    );
  });

  it('10. Retry-After is honest and tight, for one limit or two', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(shape, { minLength: 1, maxLength: 2 }),
        fc.array(fc.record({ wait: permille, cost: fc.integer({ min: 1, max: 5 }) }), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 300 }),
        async (shapes, schedule, finalCost) => {
          clock.setSystemTime(T0);
          const limiter = ownLimiter();
          const limits = shapes.map((stated, i) => tokenBucket({ ...stated, name: `l${i}` }));
          const most = Math.min(...limits.map((limit) => limit.capacity));
          for (const { wait, cost } of schedule) {
            clock.tick(waitFor(limits[0] as Limit, wait));
            await limiter.consume(ask(limits, Math.min(cost, most)));
          }
          const cost = Math.min(finalCost, most);
          const limited = await limiter.consume(ask(limits, cost));
          if (!limited.limited) return;
          expect(limited.retryAfter).toBeGreaterThanOrEqual(1);
          if (limited.retryAfter >= 2) {
            clock.tick((limited.retryAfter - 1) * 1_000);
            expect((await limiter.consume(ask(limits, cost))).limited).toBe(true);
            clock.tick(1_000);
          } else {
            clock.tick(limited.retryAfter * 1_000);
          }
          expect((await limiter.consume(ask(limits, cost))).allowed).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it('11. two limits on one request: no limit over-admits, a refused request charges nothing, the model agrees', async () => {
    await fc.assert(
      fc.asyncProperty(
        shape,
        shape,
        fc.array(fc.record({ wait: permille, cost: fc.integer({ min: 1, max: 5 }), first: fc.boolean() }), {
          maxLength: 60,
        }),
        async (a, b, schedule) => {
          clock.setSystemTime(T0);
          const limiter = ownLimiter();
          const store = fakedStore();
          const model = new ExactBucketModel();
          const limits = [tokenBucket({ ...a, name: 'a' }), tokenBucket({ ...b, name: 'b' })];
          const most = Math.min(a.capacity, b.capacity);
          const admitted: { at: number; cost: number }[] = [];
          for (const step of schedule) {
            clock.tick(waitFor(limits[step.first ? 0 : 1] as Limit, step.wait));
            const cost = Math.min(step.cost, most);
            const decision = await limiter.consume(ask(limits, cost));
            const expected = model.consumeAll('b', Date.now(), limits, cost);
            expect(pick(decision)).toEqual({
              limited: expected.limited,
              allowed: !expected.limited,
              remaining: expected.remaining,
              retryAfter: expected.retryAfter,
              resetAfter: expected.resetAfter,
              limit: expected.limit,
            });
            expect(limitStates(decision).map(({ limit, ...figures }) => figures)).toEqual(
              expected.limits.map(({ units, ...figures }) => figures),
            );
            const outcomes = store.consume('b', 'e', limits, cost);
            expect(outcomes.map(unitsAfter)).toEqual(expected.limits.map((figures) => figures.units));
            if (decision.allowed) {
              admitted.push({ at: Date.now(), cost });
              expect(outcomes.every((outcome) => outcome >= 0)).toBe(true);
            } else {
              // Each bucket, asked alone, still holds what the refused call found in it.
              limits.forEach((limit, i) => {
                const [alone] = store.peek('b', 'e', [limit], 1) as [Outcome];
                const held = alone >= 0 ? alone + limit.unitsPerToken : -1 - alone;
                expect(held).toBe(-1 - (outcomes[i] as Outcome));
              });
            }
          }
          for (const limit of limits) expectWithinBound(limit, admitted);
        },
      ),
      RUNS,
    );
  });
});

function pick(decision: Decision) {
  const { limited, remaining, retryAfter, resetAfter, allowed, limit } = decision;
  return { limited, remaining, retryAfter, resetAfter, allowed, limit };
}
