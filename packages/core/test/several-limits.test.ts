import { afterEach, describe, expect, it } from 'vitest';
import {
  createLimiter,
  type Limit,
  type Limiter,
  type LimiterOptions,
  type LimitRequest,
  limitStates,
  perHour,
  perMinute,
  perSecond,
  SPEC_PLANS,
} from '../src/index.js';
import { ScriptedStore } from './scripted-store.js';

let limiters: Limiter[] = [];
afterEach(async () => {
  for (const limiter of limiters) await limiter.close();
  limiters = [];
});

function make(options: Partial<LimiterOptions> = {}) {
  const store = new ScriptedStore();
  const fallback = new ScriptedStore();
  const limiter = createLimiter({ store, fallback, log: () => {}, ...options });
  limiters.push(limiter);
  return { store, fallback, limiter };
}

const perSecond10 = perSecond(10); // a token is 100 units
const perHour5 = perHour(5); // a token is 720 000 units, 720 s
const both = [perSecond10, perHour5];
const request = (extra: Partial<LimitRequest> = {}): LimitRequest => ({
  organization: 'o',
  endpoint: 'POST /browsers',
  plan: 'developer',
  limits: both,
  ...extra,
});

describe('a decision over several limits', () => {
  it('reports the limit with the fewest whole tokens left when admitted', async () => {
    const { limiter } = make();
    expect(await limiter.consume(request())).toMatchObject({
      allowed: true,
      limit: 5,
      remaining: 4,
      resetAfter: 720,
      retryAfter: 0,
      limits: both,
      outcomes: [900, 4 * 720_000],
      cost: 1,
    });
  });

  it('reports the limit that waits longest when limited, and retryAfter when every limit admits', async () => {
    const { limiter } = make();
    await limiter.consume(request({ cost: 5 }));
    const limited = await limiter.consume(request());
    expect(limited).toMatchObject({
      allowed: false,
      limited: true,
      limit: 5,
      remaining: 0,
      retryAfter: 720,
      resetAfter: 3_600,
      outcomes: [-1 - 500, -1],
    });
  });

  it('gives each limit its own figures through limitStates', async () => {
    const { limiter } = make();
    await limiter.consume(request({ cost: 5 }));
    expect(limitStates(await limiter.consume(request()))).toEqual([
      // The per-second bucket was not charged: it still holds its 5 tokens.
      { limit: perSecond10, limited: false, remaining: 5, retryAfter: 0, resetAfter: 1 },
      { limit: perHour5, limited: true, remaining: 0, retryAfter: 720, resetAfter: 3_600 },
    ]);
    expect(limitStates(await limiter.consume({ ...request(), endpoint: 'GET /x', limits: undefined }))).toEqual([]);
  });

  it('waits for the slower limit when both lack the tokens', async () => {
    const { store, limiter } = make();
    const perSecond1 = perSecond(1); // 1 000 units a token, 1 a ms
    const perMinute2 = perMinute(2); // 30 000 units a token, 1 a ms
    const ask = request({ limits: [perSecond1, perMinute2] });
    expect(await limiter.consume(ask)).toMatchObject({ allowed: true, outcomes: [0, 30_000] });
    // Only the per-second limit lacks a token: 1 s.
    expect(await limiter.consume(ask)).toMatchObject({ allowed: false, retryAfter: 1, limit: 1 });
    store.now += 1_000;
    expect(await limiter.consume(ask)).toMatchObject({ allowed: true, outcomes: [0, 1_000] });
    // Both lack one: 1 s for the per-second limit, 29 s for the per-minute one.
    const limited = await limiter.consume(ask);
    expect(limited).toMatchObject({ allowed: false, retryAfter: 29, limit: 2, resetAfter: 59 });
    expect(limitStates(limited).map((state) => state.retryAfter)).toEqual([1, 29]);
  });

  it('breaks a tie for the most restrictive limit in favour of the first', async () => {
    const { limiter } = make();
    const burst = perSecond(5, { burst: 10 }); // 9 left: full again in 1 s
    const minute = perMinute(10); // 9 left: full again in 6 s
    expect(await limiter.consume(request({ limits: [burst, minute] }))).toMatchObject({ remaining: 9, resetAfter: 1 });
    expect(await limiter.consume(request({ organization: 'p', limits: [minute, burst] }))).toMatchObject({
      remaining: 9,
      resetAfter: 6,
    });
  });

  it('charges nothing when one limit refuses: the other keeps every token', async () => {
    const { store, limiter } = make();
    expect((await limiter.consume(request({ limits: perHour5, cost: 5 }))).allowed).toBe(true);
    expect(await limiter.consume(request())).toMatchObject({ allowed: false, outcomes: [-1 - 1_000, -1] });
    expect(await limiter.peek(request({ limits: perSecond10, cost: 10 }))).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    expect(store.calls).toBe(3);
  });

  it('refuses a cost above any limit capacity as cost_exceeds_limit, naming that limit, charging nothing', async () => {
    const { store, limiter } = make();
    await expect(limiter.consume(request({ cost: 6 }))).rejects.toMatchObject({
      code: 'cost_exceeds_limit',
      message: 'ratecard: cost 6 exceeds the capacity 5 of limit 1h, so it could never be admitted',
    });
    expect(store.calls).toBe(0);
  });

  it("answers by the policy with every limit when the store fails: 'deny' waits for the slowest", async () => {
    const { store, limiter } = make({ onStoreError: 'deny' });
    store.behaviour = 'reject';
    expect(await limiter.consume(request())).toMatchObject({
      source: 'fail-closed',
      allowed: false,
      retryAfter: 720,
      limit: 5,
    });
    const open = make({ onStoreError: 'allow' });
    open.store.behaviour = 'reject';
    expect(await open.limiter.consume(request())).toMatchObject({ source: 'fail-open', allowed: true, remaining: 4 });
  });
});

describe("a request's own limits", () => {
  it('win over the plan, the override and the rule', async () => {
    const { store, limiter } = make({ endpoints: { 'POST /export': perMinute(2) } });
    const own = perSecond(3);
    const decision = await limiter.consume(request({ endpoint: 'POST /export', override: 500, limits: own }));
    expect(decision).toMatchObject({ rule: 'POST /export', limits: [own], limit: 3 });
    expect(store.keys).toEqual(['POST /export 1s']);
  });

  it("are limited where no rule matches, under the rule 'ALL /*', each limit's bucket named by its numbers too", async () => {
    const { store, limiter } = make();
    const ask = request({ endpoint: 'GET /unruled', limits: perSecond(2) });
    const decisions = [await limiter.consume(ask), await limiter.consume(ask), await limiter.consume(ask)];
    expect(decisions.map((d) => [d.allowed, d.rule])).toEqual([
      [true, 'ALL /*'],
      [true, 'ALL /*'],
      [false, 'ALL /*'],
    ]);
    expect(store.keys).toEqual(['ALL /* 1s.2.2.1000', 'ALL /* 1s.2.2.1000', 'ALL /* 1s.2.2.1000']);
    // The decision names the limit as it was given: headers and metrics show '1s'.
    expect(decisions[0]?.limits).toEqual([perSecond(2)]);
  });

  it("are limited under the catch-all when the endpoint is 'ALL /*' itself, even beside a rule ALL /:name", async () => {
    const { store, limiter } = make({ endpoints: { 'ALL /:tenant': 'shadow' } });
    const ask = request({ endpoint: 'ALL /*', limits: perSecond(1) });
    const decisions = [await limiter.consume(ask), await limiter.consume(ask)];
    expect(decisions.map((d) => [d.allowed, d.rule, d.mode])).toEqual([
      [true, 'ALL /*', 'enforce'],
      [false, 'ALL /*', 'enforce'],
    ]);
    expect(store.keys).toEqual(['ALL /* 1s.1.1.1000', 'ALL /* 1s.1.1.1000']);
  });

  it('keep a bucket per limit where no rule matches: limits of one name for different endpoints never mix', async () => {
    const { limiter } = make();
    const call = (endpoint: string, limits: Limit) => limiter.consume(request({ endpoint, limits }));
    for (let i = 0; i < 30; i++) expect((await call('POST /search', perMinute(30))).allowed).toBe(true);
    expect((await call('POST /search', perMinute(30))).allowed).toBe(false);
    const exports = [];
    for (let i = 0; i < 3; i++) exports.push((await call('POST /export', perMinute(2))).allowed);
    expect(exports).toEqual([true, true, false]);
    const items = [];
    for (let i = 0; i < 5; i++) items.push(await call('GET /items', perMinute(100)));
    expect(items.map((decision) => decision.allowed)).toEqual([true, true, true, true, true]);
    expect(items[4]).toMatchObject({ limit: 100, remaining: 95 });
    // The search bucket kept its shape and its count: still empty.
    expect(await limiter.peek(request({ endpoint: 'POST /search', limits: perMinute(30) }))).toMatchObject({
      allowed: false,
      limit: 30,
    });
  });

  it('share one bucket per limit across every path no rule matches, ids and query strings making none', async () => {
    const { store, limiter } = make();
    const perIp = perSecond(5, { burst: 10 });
    const decisions = [];
    for (let i = 0; i < 11; i++) {
      const endpoint = `${i % 2 === 0 ? 'GET' : 'POST'} /items/${i}?q=${'x'.repeat(i)}`;
      decisions.push(await limiter.consume(request({ organization: '10.0.0.1', endpoint, limits: perIp })));
    }
    expect(decisions.map((decision) => decision.allowed).lastIndexOf(true)).toBe(9);
    expect(decisions[10]).toMatchObject({ allowed: false, retryAfter: 1 });
    expect(new Set(store.keys)).toEqual(new Set(['ALL /* 1s.10.5.1000']));
  });

  it('give every limit of a list its own bucket by its numbers, and the fallback the same buckets', async () => {
    const { store, fallback, limiter } = make();
    const ask = request({ endpoint: 'GET /unruled', limits: [perSecond(2), perHour(5, { name: 'hourly' })] });
    await limiter.consume(ask);
    expect(store.keys).toEqual(['ALL /* 1s.2.2.1000', 'ALL /* hourly.5.5.3600000']);
    store.behaviour = 'reject';
    expect(await limiter.consume(ask)).toMatchObject({ source: 'fallback', allowed: true });
    expect(fallback.keys).toEqual(['ALL /* 1s.2.2.1000', 'ALL /* hourly.5.5.3600000']);
  });

  it('are read once, when the call is made: an array the caller reuses or changes afterwards changes nothing', async () => {
    const { store, limiter } = make();
    const user = perSecond(1);
    const reused: Limit[] = [user, perHour5];
    // The store reads the limits a microtask later, as the Redis store does when it flushes its batch.
    const pending = limiter.consume(request({ limits: reused }));
    reused[0] = perMinute(600);
    reused.length = 1;
    const decision = await pending;
    expect(store.lastLimits).toEqual([user, perHour5]);
    expect(decision.limits).toEqual([user, perHour5]);
    expect(decision.limits).not.toBe(reused);
    // The user limit was charged: its one token is gone.
    expect(await limiter.consume(request({ limits: user }))).toMatchObject({ allowed: false, limit: 1 });
  });

  it('never hand the store an object swapped in after the check, even from a frozen array', async () => {
    const { store, limiter } = make();
    const forged = { name: '1s', capacity: 1e300, refill: 1, intervalMs: 1, unitsPerToken: -1, unitsPerMs: 0 };
    const checked = perSecond(1);
    let reads = 0;
    const sly: Limit[] = [];
    Object.defineProperty(sly, 0, { enumerable: true, get: () => (++reads === 1 ? checked : forged) });
    Object.freeze(sly);
    const decision = await limiter.consume(request({ limits: sly }));
    expect(reads).toBe(1);
    expect(store.lastLimits).toEqual([checked]);
    expect(decision).toMatchObject({ allowed: true, limits: [checked] });
  });

  it("are enforced on the spec's shadow rules, which stay shadow for a request without limits of its own", async () => {
    const { limiter } = make();
    for (const endpoint of ['POST /invocations', 'PUT /browser-pools/pool_1', 'POST /browser-pools']) {
      const ask = request({ organization: endpoint, endpoint, limits: perSecond(1) });
      expect(await limiter.consume(ask)).toMatchObject({ mode: 'enforce', allowed: true, limited: false });
      expect(await limiter.consume(ask)).toMatchObject({ mode: 'enforce', allowed: false, limited: true });
      const byPlan = request({ organization: `${endpoint} by plan`, endpoint, limits: undefined });
      for (let i = 0; i < 10; i++) await limiter.consume(byPlan);
      expect(await limiter.consume(byPlan)).toMatchObject({ mode: 'shadow', allowed: true, limited: true });
    }
  });

  it('are enforced 30 times out of 30 past their limit on a shadow rule, as under the failure policy', async () => {
    const { store, limiter } = make({ onStoreError: 'deny' });
    const ask = request({ endpoint: 'POST /invocations', limits: perSecond(1) });
    await limiter.consume(ask);
    const refused = [];
    for (let i = 0; i < 30; i++) refused.push(!(await limiter.consume(ask)).allowed);
    expect(refused.filter(Boolean)).toHaveLength(30);
    store.behaviour = 'reject';
    expect(await limiter.consume(ask)).toMatchObject({ source: 'fail-closed', mode: 'enforce', allowed: false });
  });
});

describe('limits per endpoint rule', () => {
  const endpoints: LimiterOptions['endpoints'] = {
    'POST /browsers': 'enforce',
    'POST /export': perMinute(2),
    'POST /search': { limits: { developer: perMinute(30) } },
  };

  it("apply a rule's own limit to every plan, in a bucket of that rule", async () => {
    const { store, limiter } = make({ endpoints });
    for (const plan of ['developer', 'enterprise']) {
      const ask = { organization: plan, endpoint: 'POST /export', plan };
      const decisions = [await limiter.consume(ask), await limiter.consume(ask), await limiter.consume(ask)];
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, false]);
      expect(decisions[2]).toMatchObject({ limit: 2, retryAfter: 30 });
    }
    expect(new Set(store.keys)).toEqual(new Set(['POST /export 1m']));
  });

  it('still check the plan of a request on a rule with its own limits', async () => {
    const { limiter } = make({ endpoints });
    await expect(limiter.consume({ organization: 'o', endpoint: 'POST /export', plan: 'gold' })).rejects.toMatchObject({
      code: 'unknown_plan',
    });
  });

  it("apply a rule's limits for a plan to that plan only, before its override", async () => {
    const { limiter } = make({ endpoints });
    const search = (plan: string, override?: number) =>
      limiter.consume({ organization: `${plan}-${override}`, endpoint: 'POST /search', plan, override });
    expect((await search('developer')).limits).toEqual([perMinute(30)]);
    expect((await search('developer', 50)).limits).toEqual([perMinute(30)]);
    expect((await search('enterprise')).limits).toEqual([SPEC_PLANS.enterprise]);
    expect((await search('enterprise', 50)).limits).toEqual([perMinute(50)]);
    expect(
      (await limiter.consume({ organization: 'o', endpoint: 'POST /browsers', plan: 'developer' })).limits,
    ).toEqual([SPEC_PLANS.developer]);
  });
});

describe('Limiter.reset', () => {
  const pro = [perSecond(2, { burst: 4 }), perHour(100)];
  const ask = { organization: 'o', endpoint: 'POST /api/upload', plan: 'pro' };

  it("forgets every limit's bucket of the rule by default", async () => {
    const { limiter } = make({ plans: { pro } });
    await limiter.consume({ ...ask, cost: 4 });
    await limiter.reset({ organization: 'o', endpoint: 'POST /api/upload' });
    expect(limitStates(await limiter.consume(ask)).map((state) => state.remaining)).toEqual([3, 99]);
  });

  it('refuses, forgetting nothing, a reset without limits of an endpoint no rule matches', async () => {
    const { store, fallback, limiter } = make();
    const search = { organization: 'o', endpoint: 'GET /search?q=1', limits: perSecond(1) };
    await limiter.consume(search);
    const calls = store.calls;
    const error = await limiter.reset({ organization: 'o', endpoint: 'GET /search' }).catch((caught) => caught);
    expect(error).toMatchObject({
      code: 'invalid_argument',
      message:
        'ratecard: reset needs the limits the requests carried for "GET /search" (11 characters), which no endpoint rule matches: only they name its buckets; pass { organization, endpoint, limits }',
    });
    expect(store.calls).toBe(calls);
    expect(fallback.calls).toBe(0);
    expect((await limiter.consume(search)).allowed).toBe(false);
  });

  it('reaches, with the limits given, the buckets requests carrying them were charged in where no rule matches', async () => {
    const { limiter } = make();
    const perIp = perSecond(1);
    const other = perMinute(1, { name: 'other' });
    await limiter.consume({ organization: 'o', endpoint: 'GET /search?q=1', limits: [perIp, other] });
    await limiter.consume({ organization: 'o', endpoint: 'POST /items/42', limits: perIp });
    await limiter.reset({ organization: 'o', endpoint: 'GET /search', limits: perIp });
    const after = await limiter.consume({ organization: 'o', endpoint: 'DELETE /items/7', limits: perIp });
    expect(after).toMatchObject({ allowed: true, remaining: 0 });
    // The limit not given keeps its count.
    expect((await limiter.consume({ organization: 'o', endpoint: 'GET /search', limits: other })).allowed).toBe(false);
  });

  it('forgets only the buckets of the limits given', async () => {
    const { limiter } = make({ plans: { pro } });
    await limiter.consume({ ...ask, cost: 4 });
    await limiter.reset({ organization: 'o', endpoint: 'POST /api/upload', limits: pro[0] });
    expect(limitStates(await limiter.consume(ask)).map((state) => state.remaining)).toEqual([3, 95]);
  });
});
