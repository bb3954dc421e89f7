import { afterEach, describe, expect, it } from 'vitest';
import {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  type LimitRequest,
  limitFor,
  MAX_LIMIT,
  PLANS,
  type Plan,
  perHour,
  perMinute,
  perSecond,
  RateLimitError,
  SPEC_PLANS,
} from '../src/index.js';
import { ScriptedStore } from './scripted-store.js';

describe('plans', () => {
  it('gives the spec requests per minute for each plan', () => {
    expect(PLANS).toEqual({ developer: 10, hobbyist: 25, startup: 100, enterprise: 250 });
  });

  it('gives a trial organization the Start-Up limit whatever its plan', () => {
    for (const plan of Object.keys(PLANS) as Plan[]) expect(limitFor({ plan, trial: true })).toBe(100);
  });

  it('lets an override win over plan and trial', () => {
    expect(limitFor({ plan: 'developer', trial: true, override: 1_000 })).toBe(1_000);
    expect(limitFor({ plan: 'enterprise', override: 1 })).toBe(1);
  });

  it('treats a null override or trial as absent', () => {
    expect(limitFor({ plan: 'hobbyist', trial: null, override: null })).toBe(25);
  });

  it.each(['free', 'toString', '__proto__', 'constructor', '', 'Developer'])(
    'rejects the plan %j as unknown_plan',
    (plan) => {
      expect(() => limitFor({ plan: plan as Plan })).toThrowError(
        expect.objectContaining({ code: 'unknown_plan', name: 'RateLimitError' }),
      );
    },
  );

  it('says a request with no plan needs a plan or limits of its own (a trial or an override alone is not one)', () => {
    for (const request of [{ trial: true }, { override: 100 }, {}]) {
      expect(() => limitFor(request as Parameters<typeof limitFor>[0])).toThrowError(
        expect.objectContaining({
          code: 'unknown_plan',
          message:
            'ratecard: a request needs a plan (one of developer, hobbyist, startup, enterprise) or limits of its own, got neither',
        }),
      );
    }
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, MAX_LIMIT + 1, '100'])(
    'rejects the override %s as invalid_argument, naming it',
    (override) => {
      let error: unknown;
      try {
        limitFor({ plan: 'developer', override: override as number });
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(RateLimitError);
      expect((error as RateLimitError).code).toBe('invalid_argument');
      expect((error as RateLimitError).message).toMatch(/^ratecard: override must be/);
    },
  );
});

describe('spec plans as limits', () => {
  it('are perMinute(rpm) of each plan, named 1m', () => {
    for (const [plan, rpm] of Object.entries(PLANS)) {
      expect(SPEC_PLANS[plan as Plan]).toMatchObject({ name: '1m', capacity: rpm, refill: rpm, intervalMs: 60_000 });
    }
  });
});

describe('own plans', () => {
  const free = perMinute(3);
  const pro = [perSecond(2, { burst: 4 }), perHour(100)];
  const plans = { free, pro };
  let limiter: Limiter | undefined;
  afterEach(async () => {
    await limiter?.close();
    limiter = undefined;
  });
  const make = (options: Partial<LimiterOptions> = {}) => {
    const store = new ScriptedStore();
    limiter = createLimiter({ store, fallback: new ScriptedStore(), plans, ...options });
    return { store, limiter };
  };
  const ask = (plan: string, extra: Partial<LimitRequest> = {}): LimitRequest => ({
    organization: 'o',
    endpoint: 'POST /api/upload',
    plan,
    ...extra,
  });

  it("limit every request when no endpoints are given, under the rule 'ALL /*'", async () => {
    const { limiter } = make();
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await limiter.consume(ask('free')));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(decisions[3]).toMatchObject({ rule: 'ALL /*', limit: 3, retryAfter: 20, limits: [free] });
    expect((await limiter.consume(ask('free', { endpoint: 'GET /anything/else' }))).rule).toBe('ALL /*');
  });

  it('are read when the limiter is made: changing the arrays given afterwards changes no plan or rule', async () => {
    const gold = [perMinute(2)];
    const rule = [perMinute(1, { name: 'export' })];
    const { limiter } = make({ plans: { gold }, endpoints: { 'ALL /*': 'enforce', 'POST /export': rule } });
    gold[0] = perMinute(1_000);
    rule[0] = perMinute(1_000, { name: 'export' });
    const uploads = [];
    for (let i = 0; i < 3; i++) uploads.push((await limiter.consume(ask('gold'))).allowed);
    expect(uploads).toEqual([true, true, false]);
    const exportAsk = ask('gold', { endpoint: 'POST /export' });
    const exports = [];
    for (let i = 0; i < 2; i++) exports.push((await limiter.consume(exportAsk)).allowed);
    expect(exports).toEqual([true, false]);
  });

  it('give a plan of several limits all of them', async () => {
    const { limiter } = make();
    const decision = await limiter.consume(ask('pro'));
    expect(decision).toMatchObject({ limits: pro, limit: 4, remaining: 3 });
  });

  it('replace the spec plans: a spec plan name is unknown_plan, naming the known plans', async () => {
    const { store, limiter } = make();
    for (const plan of ['developer', 'gold', '__proto__']) {
      await expect(limiter.consume(ask(plan))).rejects.toMatchObject({
        code: 'unknown_plan',
        message: expect.stringMatching(/^ratecard: plan must be one of free, pro, got /),
      });
    }
    await expect(limiter.consume(ask(undefined as unknown as string))).rejects.toMatchObject({
      code: 'unknown_plan',
      message: 'ratecard: a request needs a plan (one of free, pro) or limits of its own, got neither',
    });
    expect(store.calls).toBe(0);
  });

  it('refuse a trial request unless trialPlan says which plan a trial is limited as', async () => {
    const { store, limiter } = make();
    await expect(limiter.consume(ask('free', { trial: true }))).rejects.toMatchObject({
      code: 'invalid_argument',
      message: expect.stringMatching(/trialPlan/),
    });
    expect(store.calls).toBe(0);
    await limiter.close();
    const withTrial = make({ trialPlan: 'pro' });
    expect((await withTrial.limiter.consume(ask('free', { trial: true }))).limits).toEqual(pro);
    expect((await withTrial.limiter.consume(ask('free'))).limits).toEqual([free]);
  });

  it('refuse a trialPlan that is not a plan, at construction', () => {
    expect(() =>
      createLimiter({ store: new ScriptedStore(), onStoreError: 'allow', plans, trialPlan: 'startup' }),
    ).toThrowError(expect.objectContaining({ code: 'unknown_plan', message: expect.stringMatching(/free, pro/) }));
  });

  it('keep override meaning requests per minute, under the same 1m bucket name', async () => {
    const { limiter } = make();
    expect(await limiter.consume(ask('pro', { override: 50 }))).toMatchObject({ limit: 50, limits: [perMinute(50)] });
  });

  it('are checked at construction: empty, not an object, or not limits', () => {
    const store = new ScriptedStore();
    const bad: unknown[] = [
      {},
      [],
      null,
      'free',
      { free: 10 },
      { free: { capacity: 3, refill: 3, intervalMs: 60_000 } },
    ];
    for (const value of bad) {
      expect(
        () => createLimiter({ store, onStoreError: 'allow', plans: value as LimiterOptions['plans'] }),
        JSON.stringify(value),
      ).toThrowError(expect.objectContaining({ code: 'invalid_option' }));
    }
    expect(() =>
      createLimiter({ store, onStoreError: 'allow', plans: { a: [perSecond(1), perSecond(9)] } }),
    ).toThrowError(/two limits named "1s"/);
  });
});
