import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createLimiter,
  type Decision,
  type Limit,
  type Limiter,
  type LimiterOptions,
  type LimitRequest,
  limitStates,
  perHour,
  perSecond,
  QUEUE_WAIT_FACTOR,
  RateLimitError,
  SPEC_PLANS,
} from '../src/index.js';
import { ScriptedStore } from './scripted-store.js';

const developer: LimitRequest = { organization: 'org_a', endpoint: 'POST /browsers', plan: 'developer' };

let limiter: Limiter | undefined;
afterEach(async () => {
  await limiter?.close();
  limiter = undefined;
});

function make(options: Partial<Parameters<typeof createLimiter>[0]> = {}) {
  const store = new ScriptedStore();
  const fallback = new ScriptedStore();
  const lines: string[] = [];
  limiter = createLimiter({ store, fallback, storeTimeoutMs: 50, log: (line) => lines.push(line), ...options });
  return { store, fallback, limiter, lines };
}

async function rejection(promise: Promise<unknown>): Promise<RateLimitError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(RateLimitError);
  return error as RateLimitError;
}

describe('createLimiter', () => {
  it('decides from the store and reports every field', async () => {
    const { limiter } = make();
    expect(await limiter.consume(developer)).toEqual({
      mode: 'enforce',
      allowed: true,
      limited: false,
      limit: 10,
      remaining: 9,
      retryAfter: 0,
      resetAfter: 6,
      limits: [SPEC_PLANS.developer],
      outcomes: [9 * 6_000],
      cost: 1,
      source: 'store',
      rule: 'POST /browsers',
    });
  });

  it("keeps the spec's default: developer gets 10 a minute, the 11th waits 6 s", async () => {
    const { limiter } = make();
    for (let i = 0; i < 10; i++) expect((await limiter.consume(developer)).allowed).toBe(true);
    expect(await limiter.consume(developer)).toMatchObject({ allowed: false, limit: 10, remaining: 0, retryAfter: 6 });
  });

  it('answers unlimited for an endpoint without a rule, touching no bucket', async () => {
    const { store, limiter } = make();
    const decision = await limiter.consume({ ...developer, endpoint: 'GET /browsers' });
    expect(decision).toMatchObject({ mode: 'unlimited', allowed: true, limit: Infinity, remaining: Infinity });
    expect(store.calls).toBe(0);
  });

  it('charges the rule bucket for a concrete path', async () => {
    const { limiter } = make();
    await limiter.consume({ ...developer, endpoint: 'PUT /browser-pools/a' });
    const decision = await limiter.consume({ ...developer, endpoint: 'PUT /browser_pools/b' });
    expect(decision).toMatchObject({ mode: 'shadow', rule: 'PUT /browser-pools/:id', remaining: 8 });
  });

  it("peeks the decision consume would give: remaining is what the charge would leave, the bucket's count less cost", async () => {
    const { limiter } = make();
    const peek = () => limiter.peek(developer);
    expect(await peek()).toMatchObject({ allowed: true, limited: false, remaining: 9 });
    expect(await limiter.peek({ ...developer, cost: 4 })).toMatchObject({ allowed: true, remaining: 6 });
    for (let i = 0; i < 9; i++) await limiter.consume(developer);
    // One token left: consume would take it and leave none.
    expect(await peek()).toMatchObject({ allowed: true, limited: false, remaining: 0 });
    const refused = await limiter.peek({ ...developer, cost: 2 });
    expect(refused).toMatchObject({ allowed: false, limited: true, remaining: 0 });
    expect(limitStates(refused).map((state) => state.remaining)).toEqual([1]);
    await limiter.consume(developer);
    expect(await peek()).toMatchObject({ allowed: false, remaining: 0, retryAfter: 6 });
  });

  it('replaces the default rules when endpoints are given', async () => {
    const { limiter } = make({ endpoints: { 'POST /invocations': 'enforce' } });
    expect((await limiter.consume(developer)).mode).toBe('unlimited');
    expect((await limiter.consume({ ...developer, endpoint: 'POST /invocations' })).mode).toBe('enforce');
  });

  it('keeps a shadow decision allowed when the bucket is empty', async () => {
    const { limiter } = make({ endpoints: { 'POST /browsers': 'shadow' } });
    for (let i = 0; i < 10; i++) await limiter.consume(developer);
    expect(await limiter.consume(developer)).toMatchObject({
      allowed: true,
      limited: true,
      remaining: 0,
      retryAfter: 6,
    });
  });

  describe('rejects bad input with a RateLimitError and charges nothing', () => {
    const cases: [string, Partial<LimitRequest> | null, string][] = [
      ['a missing request', null, 'invalid_argument'],
      ['an empty organization', { organization: '' }, 'invalid_argument'],
      ['a non-string organization', { organization: 42 as unknown as string }, 'invalid_argument'],
      ['a 257-character organization', { organization: 'x'.repeat(257) }, 'invalid_argument'],
      ['an empty endpoint', { endpoint: '' }, 'invalid_argument'],
      ['an endpoint without a method', { endpoint: '/browsers' }, 'invalid_argument'],
      ['an endpoint without a path', { endpoint: 'POST' }, 'invalid_argument'],
      ['an unknown plan', { plan: 'gold' as 'developer' }, 'unknown_plan'],
      ['a zero cost', { cost: 0 }, 'invalid_argument'],
      ['a negative cost', { cost: -1 }, 'invalid_argument'],
      ['a fractional cost', { cost: 1.5 }, 'invalid_argument'],
      ['a NaN cost', { cost: Number.NaN }, 'invalid_argument'],
      ['an infinite cost', { cost: Number.POSITIVE_INFINITY }, 'invalid_argument'],
      ['a cost above the limit', { cost: 11 }, 'cost_exceeds_limit'],
      ['an invalid override', { override: 0 }, 'invalid_argument'],
      [
        'limits that are not made by a limit helper',
        { limits: { capacity: 5 } as unknown as Limit },
        'invalid_argument',
      ],
      ['no limits at all', { limits: [] }, 'invalid_argument'],
      ['two limits of one name', { limits: [perSecond(5), perSecond(50)] }, 'invalid_argument'],
      ['a cost above one of its limits', { limits: [perSecond(10), perHour(5)], cost: 6 }, 'cost_exceeds_limit'],
      ['an unknown plan beside its own limits', { plan: 'gold', limits: perSecond(1) }, 'unknown_plan'],
      ['a key a request lacks', { limit: perSecond(1) } as Partial<LimitRequest>, 'invalid_argument'],
      ['a key a request lacks, set to undefined', { plans: undefined } as Partial<LimitRequest>, 'invalid_argument'],
    ];
    it.each(cases)('%s', async (_label, change, code) => {
      const { store, limiter } = make();
      const request = change === null ? (null as unknown as LimitRequest) : { ...developer, ...change };
      expect((await rejection(limiter.consume(request))).code).toBe(code);
      expect((await rejection(limiter.peek(request))).code).toBe(code);
      expect(store.calls).toBe(0);
    });
  });

  it('refuses a key a request lacks, naming the key it most likely meant, where it would have gone unlimited', async () => {
    const { store, limiter } = make();
    const takes = 'It takes organization, endpoint, plan, trial, override, limits, cost, leaseMs';
    const typo = { organization: '10.0.0.1', endpoint: 'POST /api/upload', limit: perSecond(1) } as LimitRequest;
    const error = await rejection(limiter.consume(typo));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(`ratecard: the request has an unknown key "limit"; did you mean "limits"? ${takes}`);
    const two = { ...developer, Cost: 2, priority: 'high' } as LimitRequest;
    expect((await rejection(limiter.peek(two))).message).toBe(
      'ratecard: the request has unknown keys "Cost" (did you mean "cost"?), "priority"; it takes organization, endpoint, plan, trial, override, limits, cost, leaseMs',
    );
    expect(store.calls).toBe(0);
  });

  it('takes every key of LimitRequest, and keys a request inherits', async () => {
    const { limiter } = make({ plans: { free: perSecond(2) }, trialPlan: 'free' });
    const every: Required<LimitRequest> = {
      organization: 'org_a',
      endpoint: 'POST /x',
      plan: 'free',
      trial: false,
      override: 5,
      limits: perSecond(3),
      cost: 1,
      leaseMs: 1_000,
    };
    expect(await limiter.consume(every)).toMatchObject({ allowed: true, limit: 3 });
    const inheriting = Object.assign(Object.create({ plan: 'free', note: 'from a prototype' }), developer, {
      plan: 'free',
    }) as LimitRequest;
    expect(await limiter.consume(inheriting)).toMatchObject({ allowed: true, limit: 2 });
  });

  it('refuses a key a reset lacks, rather than resetting every limit of the endpoint', async () => {
    const { store, limiter } = make();
    const bucket = { organization: 'org_a', endpoint: 'POST /browsers', limit: SPEC_PLANS.developer };
    const error = await rejection(limiter.reset(bucket as Parameters<Limiter['reset']>[0]));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(
      'ratecard: the bucket given to reset has an unknown key "limit"; did you mean "limits"? It takes organization, endpoint, limits',
    );
    expect(store.calls).toBe(0);
  });

  it('accepts 256 characters, counted as characters rather than UTF-16 units', async () => {
    const { limiter } = make();
    await expect(limiter.consume({ ...developer, organization: '\u{1F600}'.repeat(256) })).resolves.toMatchObject({
      allowed: true,
    });
  });

  it('calls onDecision after every decision and survives it throwing', async () => {
    const seen: Decision[] = [];
    const { limiter } = make({
      onDecision: (decision) => {
        seen.push(decision);
        throw new Error('metrics backend down');
      },
    });
    await limiter.consume(developer);
    await limiter.consume({ ...developer, endpoint: 'GET /x' });
    expect(seen.map((d) => d.mode)).toEqual(['enforce', 'unlimited']);
  });

  it('decides at once from a store that answers with plain values', async () => {
    // perMinute(10) counts a token as 6 000 units.
    const full = 10 * 6_000;
    let calls = 0;
    const inProcess = createLimiter({
      store: {
        shared: false,
        consume: (_o, _e, _l, cost) => [full - ++calls * (cost as number) * 6_000],
        settle: () => true,
        peek: () => [full],
        reset: () => undefined,
        close: () => undefined,
      },
    });
    expect((await inProcess.consume(developer)).remaining).toBe(9);
    expect((await inProcess.consume(developer)).remaining).toBe(8);
    await inProcess.close();
  });

  it('rejects options it cannot use', () => {
    const store = new ScriptedStore();
    expect(() => createLimiter({ store, onStoreError: 'maybe' as 'allow' })).toThrowError(/onStoreError must be/);
    expect(() => createLimiter({ store, storeTimeoutMs: 0, onStoreError: 'allow' })).toThrowError(/storeTimeoutMs/);
    expect(() => createLimiter({ store })).toThrowError(/needs a fallback store/);
    expect(() => createLimiter({ store: {} as ScriptedStore })).toThrowError(/store must be a Store/);
    expect(() => createLimiter({ store, fallback: {} as ScriptedStore })).toThrowError(/fallback must be a Store/);
  });

  it('takes every option of LimiterOptions', async () => {
    const every: Required<LimiterOptions> = {
      store: new ScriptedStore(),
      plans: { free: perSecond(2) },
      trialPlan: 'free',
      endpoints: { 'POST /browsers': 'enforce' },
      onDecision: () => {},
      onStoreError: 'fallback',
      fallback: new ScriptedStore(),
      storeTimeoutMs: 50,
      log: () => {},
      onLease: () => {},
    };
    limiter = createLimiter(every);
    expect(await limiter.consume({ organization: 'org_a', endpoint: 'POST /browsers', plan: 'free' })).toMatchObject({
      allowed: true,
      limit: 2,
    });
  });

  it('refuses an unknown option, even one set to undefined, naming the option it most likely meant', () => {
    const store = new ScriptedStore();
    const takes =
      'It takes store, plans, trialPlan, endpoints, onDecision, onStoreError, fallback, storeTimeoutMs, log, onLease';
    for (const [key, meant] of [
      ['plan', 'plans'],
      ['storeTimeout', 'storeTimeoutMs'],
      ['onstoreerror', 'onStoreError'],
    ]) {
      for (const value of [{ free: perSecond(2) }, undefined]) {
        const options = { store, onStoreError: 'allow', [key as string]: value } as LimiterOptions;
        let error: unknown;
        try {
          createLimiter(options);
        } catch (caught) {
          error = caught;
        }
        expect(error).toBeInstanceOf(RateLimitError);
        expect((error as RateLimitError).code).toBe('invalid_option');
        expect((error as RateLimitError).message).toBe(
          `ratecard: createLimiter got an unknown option "${key}"; did you mean "${meant}"? ${takes}`,
        );
      }
    }
  });
});

describe('failure policy', () => {
  it("'fallback' answers from the fallback store when the store fails", async () => {
    const { store, limiter } = make({ onStoreError: 'fallback' });
    store.behaviour = 'reject';
    expect(await limiter.consume(developer)).toMatchObject({ source: 'fallback', allowed: true, remaining: 9 });
  });

  it("'allow' fails open and 'deny' fails closed", async () => {
    const open = make({ onStoreError: 'allow' });
    open.store.behaviour = 'reject';
    expect(await open.limiter.consume(developer)).toMatchObject({ source: 'fail-open', allowed: true, remaining: 9 });
    await open.limiter.close();
    const closed = make({ onStoreError: 'deny' });
    closed.store.behaviour = 'reject';
    expect(await closed.limiter.consume(developer)).toMatchObject({
      source: 'fail-closed',
      allowed: false,
      remaining: 0,
      retryAfter: 6,
    });
  });

  it("'throw' rejects with store_unavailable, keeping the cause", async () => {
    const { store, limiter } = make({ onStoreError: 'throw' });
    store.behaviour = 'reject';
    const error = await rejection(limiter.consume(developer));
    expect(error.code).toBe('store_unavailable');
    expect((error.cause as Error).message).toBe('connection refused');
  });

  it.each(['fallback', 'allow', 'deny', 'throw'] as const)(
    "settles within the budget when the store hangs ('%s')",
    async (policy) => {
      // The deadline's timers and clock are the test's: on a loaded machine a real timer runs late by any amount.
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance'] });
      const answered: { results?: PromiseSettledResult<Decision>[] } = {};
      try {
        const { store, limiter } = make({ onStoreError: policy });
        store.behaviour = 'hang';
        Promise.allSettled(Array.from({ length: 100 }, () => limiter.consume(developer))).then((results) => {
          answered.results = results;
        });
        // Budget 50 ms: nothing is answered before it is spent, and everything just after (the queue's timer waits 1 ms
        // more, never to expire a call early, and the deadline is judged after the next poll phase).
        await vi.advanceTimersByTimeAsync(50);
        expect(answered.results).toBeUndefined();
        await vi.advanceTimersByTimeAsync(2);
        expect(answered.results).toHaveLength(100);
      } finally {
        vi.useRealTimers();
      }
      const results = answered.results ?? [];
      if (policy === 'throw') {
        expect(results.every((r) => r.status === 'rejected' && r.reason.code === 'store_timeout')).toBe(true);
      } else {
        const expected = { fallback: 'fallback', allow: 'fail-open', deny: 'fail-closed' }[policy];
        expect(results.every((r) => r.status === 'fulfilled' && r.value.source === expected)).toBe(true);
      }
    },
  );

  it('waits QUEUE_WAIT_FACTOR budgets for a consume on a store that tells a queue from an outage, one for a peek', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance'] });
    try {
      const store = Object.assign(new ScriptedStore(), { tellsQueueFromOutage: true });
      const { limiter } = make({ store });
      store.behaviour = 'hang';
      const consumed: { source?: string } = {};
      const peeked: { source?: string } = {};
      limiter.consume(developer).then((decision) => {
        consumed.source = decision.source;
      });
      limiter.peek(developer).then((decision) => {
        peeked.source = decision.source;
      });
      // The store is told the budget (50 ms), and bounds a consume by it itself; the limiter only backstops at 4.
      expect(store.lastBudgetMs).toBe(50);
      await vi.advanceTimersByTimeAsync(52);
      expect(peeked.source).toBe('fallback');
      expect(consumed.source).toBeUndefined();
      await vi.advanceTimersByTimeAsync(50 * QUEUE_WAIT_FACTOR - 52);
      expect(consumed.source).toBeUndefined();
      await vi.advanceTimersByTimeAsync(2);
      expect(consumed.source).toBe('fallback');
    } finally {
      vi.useRealTimers();
    }
  });

  it('goes back to the store once it answers again', async () => {
    const { store, limiter } = make();
    store.behaviour = 'reject';
    expect((await limiter.consume(developer)).source).toBe('fallback');
    store.behaviour = 'answer';
    expect((await limiter.consume(developer)).source).toBe('store');
  });

  it('tells an asynchronous store how long it waits, so a store can drop a call it has not sent by then', async () => {
    const { store, limiter } = make();
    await limiter.consume(developer);
    expect(store.lastBudgetMs).toBe(50);
  });

  it('tells the store how long it waits for a reset, so a store can drop a reset that would come too late', async () => {
    const { store, limiter } = make();
    await limiter.reset({ organization: 'org_a', endpoint: 'POST /browsers' });
    expect(store.lastResetBudgetMs).toBe(50);
  });

  it('settles pending calls by the policy on close, then refuses new ones', async () => {
    const { store, limiter } = make({ onStoreError: 'allow', storeTimeoutMs: 60_000 });
    store.behaviour = 'hang';
    const pending = limiter.consume(developer);
    await limiter.close();
    expect((await pending).source).toBe('fail-open');
    expect(store.closed).toBe(true);
    expect((await rejection(limiter.consume(developer))).code).toBe('store_closed');
  });

  it("'throw' on a timeout rejects with an error whose stack shows the call, not the limiter's timer", async () => {
    const { store, limiter } = make({ onStoreError: 'throw' });
    store.behaviour = 'hang';
    const error = await rejection(limiter.consume(developer));
    expect(error.code).toBe('store_timeout');
    expect(error.cause).toBeUndefined();
    expect(error.stack).toContain('limiter.test.ts');
    expect(error.stack).not.toMatch(/deadlines|listOnTimeout|processTimers/);
  });

  it("'throw' gives each call an error of its own, the store's error as its cause, even when the store reuses one", async () => {
    const shared = new RateLimitError('store_unavailable', 'ratecard: the test client lost its connection');
    const { store, limiter } = make({ onStoreError: 'throw' });
    store.consume = () => Promise.reject(shared);
    const [first, second] = [await rejection(limiter.consume(developer)), await rejection(limiter.consume(developer))];
    expect(first).not.toBe(second);
    expect(first).toMatchObject({ code: 'store_unavailable', message: shared.message, cause: shared });
    expect(first.stack).toContain('limiter.test.ts');
  });

  it('logs one line when decisions move to the policy and one when the store has answered for a second', async () => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    try {
      const { store, limiter, lines } = make({ onStoreError: 'deny' });
      store.behaviour = 'reject';
      for (let i = 0; i < 5; i++) await limiter.consume(developer);
      expect(lines).toEqual([
        "ratecard: the store failed (store_unavailable: ratecard: the store failed: connection refused); decisions go to the failure policy 'deny' until it answers again",
      ]);
      vi.advanceTimersByTime(500);
      // Answers among failures, as with one master of a cluster down, are no way back yet.
      store.behaviour = 'answer';
      await limiter.consume(developer);
      store.behaviour = 'reject';
      await limiter.consume(developer);
      store.behaviour = 'answer';
      const backAt = new Date().toISOString();
      await limiter.consume(developer);
      vi.advanceTimersByTime(999);
      await limiter.consume(developer);
      expect(lines).toHaveLength(1);
      vi.advanceTimersByTime(1);
      await limiter.consume(developer);
      expect(lines.slice(1)).toEqual([
        `ratecard: the store answers again since ${backAt}; the failure policy 'deny' answered 6 decisions over 0.5 s`,
      ]);
      // After a quiet second with no traffic, the first answer ends the outage at once.
      store.behaviour = 'reject';
      await limiter.consume(developer);
      vi.advanceTimersByTime(3_000);
      store.behaviour = 'answer';
      await limiter.consume(developer);
      expect(lines).toHaveLength(4);
      expect(lines[3]).toMatch(/answered 1 decision over 3\.0 s$/);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps deciding when the log throws', async () => {
    const { store, limiter } = make({
      log: () => {
        throw new Error('the log is broken');
      },
    });
    store.behaviour = 'reject';
    expect((await limiter.consume(developer)).source).toBe('fallback');
  });

  it('resets the store and the fallback', async () => {
    const { store, fallback, limiter } = make();
    store.behaviour = 'reject';
    for (let i = 0; i < 10; i++) await limiter.consume(developer);
    expect((await limiter.consume(developer)).allowed).toBe(false);
    store.behaviour = 'answer';
    await limiter.reset({ organization: 'org_a', endpoint: 'POST /browsers' });
    store.behaviour = 'reject';
    expect(await limiter.consume(developer)).toMatchObject({ source: 'fallback', remaining: 9 });
    expect(fallback.calls).toBeGreaterThan(10);
  });
});

describe('failure policy, in the corners', () => {
  it('answers by the policy when the store throws instead of rejecting, against its contract', async () => {
    const { store, limiter } = make({ onStoreError: 'deny' });
    store.behaviour = 'throw';
    expect(await limiter.consume(developer)).toMatchObject({ source: 'fail-closed', allowed: false });
  });

  it('keeps the policy answer when the store settles after the budget, and counts a late failure nowhere', async () => {
    const { store, limiter } = make({ onStoreError: 'allow' });
    store.behaviour = 'hold';
    const seen: Decision[] = [];
    const decided = [limiter.consume(developer), limiter.consume(developer)].map((made) =>
      made.then((decision) => seen.push(decision)),
    );
    // Awaited rather than slept on: the deadline is judged after a poll phase, so after a stall of the event loop a
    // fixed 80 ms wait could end before it, and find nothing decided.
    await Promise.all(decided);
    expect(seen.map((d) => d.source)).toEqual(['fail-open', 'fail-open']);
    store.held[0]?.([0]);
    store.held[1]?.(new Error('late'));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(seen).toHaveLength(2);
  });

  it('decides from the store when it answers within the budget', async () => {
    const { store, limiter } = make({ onStoreError: 'throw' });
    store.behaviour = 'hold';
    const pending = limiter.consume(developer);
    // Half a token held (3 000 of 6 000 units): the other half takes 3 s at 10 per minute.
    store.held[0]?.([-1 - 3_000]);
    expect(await pending).toMatchObject({ allowed: false, retryAfter: 3, source: 'store' });
  });

  it('peeks through the fallback when the store fails, charging nothing', async () => {
    const { store, limiter } = make();
    store.behaviour = 'reject';
    expect(await limiter.peek(developer)).toMatchObject({ source: 'fallback', remaining: 9 });
    expect(await limiter.peek(developer)).toMatchObject({ source: 'fallback', remaining: 9 });
  });
});
