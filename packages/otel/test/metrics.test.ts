import { readFileSync } from 'node:fs';
import type { Attributes } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  concurrency,
  createLimiter,
  type Limiter,
  type LimitRequest,
  type Outcome,
  perHour,
  perMinute,
  perSecond,
  quota,
  RateLimitError,
  type Store,
  tokenBucket,
} from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { endpointKey, redisStore } from '@ratecard/redis';
import {
  canStartRedis,
  type RedisCluster,
  type RedisServer,
  redisCommand,
  startRedis,
  startRedisCluster,
} from '@ratecard/redis/testing';
import { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import packageJson from '../package.json' with { type: 'json' };
import {
  type LimiterMetrics,
  type LimiterMetricsOptions,
  limiterMetrics,
  type RedisStoreWithStats,
  SCOPE_NAME,
  SCOPE_VERSION,
  type StoreMetricsOptions,
} from '../src/index.js';

/** A real SDK: a meter provider whose reader exports to memory when asked (forceFlush), never on a timer. */
function sdk(): { provider: MeterProvider; collect(): Promise<Map<string, MetricData>>; shutdown(): Promise<void> } {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  return {
    provider,
    async collect() {
      exporter.reset();
      await reader.forceFlush();
      const byName = new Map<string, MetricData>();
      for (const resource of exporter.getMetrics()) {
        for (const scope of resource.scopeMetrics) {
          expect(scope.scope).toEqual({ name: SCOPE_NAME, version: SCOPE_VERSION, schemaUrl: undefined });
          for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric);
        }
      }
      return byName;
    },
    shutdown: () => provider.shutdown(),
  };
}

/** An attribute set as one comparable string: `key=value` pairs in key order. */
function label(attributes: Attributes): string {
  return Object.keys(attributes)
    .sort()
    .map((key) => `${key}=${String(attributes[key])}`)
    .join(' ');
}

/** Every data point of a metric of one type, as attribute set → value. */
function values(
  metrics: Map<string, MetricData>,
  name: string,
  type: DataPointType.SUM | DataPointType.GAUGE,
): Record<string, number> {
  const metric = metrics.get(name);
  if (metric === undefined) throw new Error(`no metric ${name}; got ${[...metrics.keys()].join(', ')}`);
  expect(metric.dataPointType).toBe(type);
  const points: Record<string, number> = {};
  for (const point of metric.dataPoints) points[label(point.attributes)] = point.value as number;
  return points;
}

/** Every data point of a counter (or up-down counter), as attribute set → value. */
function sums(metrics: Map<string, MetricData>, name: string): Record<string, number> {
  return values(metrics, name, DataPointType.SUM);
}

/** Every data point of a gauge, as attribute set → value. */
function gauges(metrics: Map<string, MetricData>, name: string): Record<string, number> {
  return values(metrics, name, DataPointType.GAUGE);
}

/** Every data point of the store duration histogram, as attribute set → count of calls. */
function histogramCounts(metrics: Map<string, MetricData>): Record<string, number> {
  const metric = metrics.get('ratecard.store.duration_seconds');
  if (metric === undefined) throw new Error('no ratecard.store.duration_seconds');
  expect(metric.dataPointType).toBe(DataPointType.HISTOGRAM);
  const points: Record<string, number> = {};
  for (const point of metric.dataPoints) {
    points[label(point.attributes)] = (point.value as { count: number }).count;
  }
  return points;
}

/** The operations members of a test store that keeps nothing to inspect and no blocks. */
const keepsNothing = {
  inspect: () => ({ now: Date.now(), buckets: [], leases: [] }),
  blocks: () => ({ now: Date.now(), blocks: [] }),
};

const developer = (organization: string, endpoint: string): LimitRequest => ({
  organization,
  endpoint,
  plan: 'developer',
});

async function times(n: number, limiter: Limiter, request: LimitRequest): Promise<void> {
  for (let i = 0; i < n; i++) await limiter.consume(request);
}

/**
 * The label of a decision's attribute set, as `label` renders it; no rule for an unlimited decision, no plan when it is
 * null, and on a limited decision the limit that refused (the spec plans' '1m' unless given).
 */
function decision(
  rule: string | null,
  mode: string,
  outcome: 'allowed' | 'limited',
  source: string,
  plan: string | null = 'developer',
  limit = '1m',
): string {
  const attributes: Attributes = {
    'ratecard.mode': mode,
    'ratecard.outcome': outcome,
    'ratecard.source': source,
  };
  if (plan !== null) attributes['ratecard.plan'] = plan;
  if (rule !== null) attributes['ratecard.rule'] = rule;
  if (outcome === 'limited') attributes['ratecard.limit'] = limit;
  return label(attributes);
}

let otel: ReturnType<typeof sdk>;
let metrics: LimiterMetrics;

beforeEach(() => {
  otel = sdk();
  metrics = limiterMetrics({ meterProvider: otel.provider });
});

afterEach(() => otel.shutdown());

describe('ratecard.decisions', () => {
  it('counts a scripted sequence exactly, per attribute set: allowed, limited, shadow, unlimited', async () => {
    const memory = memoryStore();
    const limiter = createLimiter({ store: metrics.memory(memory), onDecision: metrics.onDecision });
    await times(11, limiter, developer('org_a', 'POST /browsers'));
    await times(12, limiter, developer('org_a', 'POST /browser-pools'));
    await times(3, limiter, developer('org_a', 'GET /browsers'));
    await times(2, limiter, { organization: 'org_b', endpoint: 'POST /browsers', plan: 'enterprise' });

    const collected = await otel.collect();
    expect(sums(collected, 'ratecard.decisions')).toEqual({
      [decision('POST /browsers', 'enforce', 'allowed', 'store')]: 10,
      [decision('POST /browsers', 'enforce', 'limited', 'store')]: 1,
      [decision('POST /browsers', 'enforce', 'allowed', 'store', 'enterprise')]: 2,
      [decision('POST /browser-pools', 'shadow', 'allowed', 'store')]: 10,
      [decision('POST /browser-pools', 'shadow', 'limited', 'store')]: 2,
      // No rule attribute: the endpoint of an unlimited request is its own path, which is unbounded.
      [decision(null, 'unlimited', 'allowed', 'none')]: 3,
    });
    const descriptor = collected.get('ratecard.decisions')?.descriptor;
    expect(descriptor?.unit).toBe('{decision}');
    // The unlimited calls touched no store: 11 + 12 + 2 consume calls did.
    expect(histogramCounts(collected)).toEqual({ 'ratecard.store=memory': 25 });
    expect(sums(collected, 'ratecard.memory.buckets.held')).toEqual({ '': 3 });
    expect(sums(collected, 'ratecard.memory.buckets.evicted')).toEqual({ '': 0 });
  });

  it('never records the organization, whatever it is', async () => {
    const limiter = createLimiter({ store: metrics.memory(memoryStore()), onDecision: metrics.onDecision });
    for (let i = 0; i < 50; i++) await limiter.consume(developer(`org_${i}`, 'POST /browsers'));
    const points = sums(await otel.collect(), 'ratecard.decisions');
    expect(points).toEqual({ [decision('POST /browsers', 'enforce', 'allowed', 'store')]: 50 });
  });

  it('reports cumulative counts at every collection', async () => {
    const limiter = createLimiter({ store: memoryStore(), onDecision: metrics.onDecision });
    const allowed = decision('POST /browsers', 'enforce', 'allowed', 'store');
    await times(4, limiter, developer('org_a', 'POST /browsers'));
    expect(sums(await otel.collect(), 'ratecard.decisions')).toEqual({ [allowed]: 4 });
    await times(3, limiter, developer('org_a', 'POST /browsers'));
    expect(sums(await otel.collect(), 'ratecard.decisions')).toEqual({ [allowed]: 7 });
    expect(sums(await otel.collect(), 'ratecard.decisions')).toEqual({ [allowed]: 7 });
  });

  it('counts a decision with a value it does not know under the overflow set, bounded', async () => {
    const request = developer('org_a', 'POST /browsers');
    const made = { ...(await createLimiter({ store: memoryStore() }).consume(request)) };
    metrics.onDecision({ ...made, source: 'elsewhere' as never }, request);
    metrics.onDecision({ ...made, mode: 'sideways' as never }, request);
    for (let i = 0; i < 1_200; i++) metrics.onDecision({ ...made, rule: `GET /made-up/${i}` }, request);
    const points = sums(await otel.collect(), 'ratecard.decisions');
    // Rules are counted one by one up to 1 000 of them; past that, and for the unknown values, under overflow.
    expect(Object.keys(points)).toHaveLength(1_001);
    expect(points['otel.metric.overflow=true']).toBe(2 + 200);
  });

  it('counts a plan the limiter was not said to have as _OTHER, and a request without a plan with no plan', async () => {
    const limiter = createLimiter({ store: memoryStore(), onDecision: metrics.onDecision });
    await limiter.consume(developer('org_a', 'POST /browsers'));
    await limiter.consume({ organization: '10.0.0.1', endpoint: 'POST /upload', limits: perSecond(5) });
    const request = developer('org_a', 'POST /browsers');
    const made = await createLimiter({ store: memoryStore() }).consume(request);
    metrics.onDecision(made, { ...request, plan: 'platinum' });
    expect(sums(await otel.collect(), 'ratecard.decisions')).toEqual({
      [decision('POST /browsers', 'enforce', 'allowed', 'store')]: 1,
      [decision('POST /browsers', 'enforce', 'allowed', 'store', '_OTHER')]: 1,
      [decision('ALL /*', 'enforce', 'allowed', 'store', null)]: 1,
    });
  });

  it("names own plans by the limiter's plans, and counts the rest as _OTHER", async () => {
    const plans = { free: perMinute(60), pro: [perSecond(10), perHour(1000)] };
    const own = limiterMetrics({ meterProvider: otel.provider, plans });
    const limiter = createLimiter({ store: memoryStore(), plans, onDecision: own.onDecision });
    await limiter.consume({ organization: 'a', endpoint: 'POST /search', plan: 'free' });
    await limiter.consume({ organization: 'b', endpoint: 'POST /search', plan: 'pro' });
    const other = createLimiter({ store: memoryStore(), plans: { team: perMinute(5) }, onDecision: own.onDecision });
    await other.consume({ organization: 'c', endpoint: 'POST /search', plan: 'team' });
    expect(sums(await otel.collect(), 'ratecard.decisions')).toEqual({
      [decision('ALL /*', 'enforce', 'allowed', 'store', 'free')]: 1,
      [decision('ALL /*', 'enforce', 'allowed', 'store', 'pro')]: 1,
      [decision('ALL /*', 'enforce', 'allowed', 'store', '_OTHER')]: 1,
    });
    expect(() => limiterMetrics({ meterProvider: otel.provider, plans: ['free', 3] as never })).toThrow(
      /^ratecard: limiterMetrics' plans must be/,
    );
    expect(limiterMetrics({ meterProvider: otel.provider, plans: ['free', 'pro'] }).onDecision).toBeTypeOf('function');
  });

  it('names the limit that refused a decision with several limits: the one that waits longest', async () => {
    let now = 0;
    const limiter = createLimiter({ store: memoryStore({ now: () => now }), onDecision: metrics.onDecision });
    const request = { organization: '10.0.0.1', endpoint: 'POST /upload', limits: [perSecond(10), perHour(12)] };
    for (let i = 0; i < 11; i++) await limiter.consume(request);
    now += 1_000;
    // The second's bucket is full again and the hour holds two tokens and a bit: two more pass, then the hour refuses.
    for (let i = 0; i < 3; i++) await limiter.consume(request);
    expect(sums(await otel.collect(), 'ratecard.decisions')).toEqual({
      [decision('ALL /*', 'enforce', 'allowed', 'store', null)]: 12,
      [decision('ALL /*', 'enforce', 'limited', 'store', null, '1s')]: 1,
      [decision('ALL /*', 'enforce', 'limited', 'store', null, '1h')]: 1,
    });
  });

  it('counts limit names one by one up to 64 of them, the rest as _OTHER', async () => {
    const limiter = createLimiter({ store: memoryStore(), onDecision: metrics.onDecision });
    for (let i = 0; i < 70; i++) {
      const limits = tokenBucket({ capacity: 1, refill: 1, intervalMs: 60_000, name: `limit-${i}` });
      for (let j = 0; j < 2; j++) await limiter.consume({ organization: 'a', endpoint: 'POST /upload', limits });
    }
    const points = sums(await otel.collect(), 'ratecard.decisions');
    expect(points[decision('ALL /*', 'enforce', 'allowed', 'store', null)]).toBe(70);
    expect(points[decision('ALL /*', 'enforce', 'limited', 'store', null, 'limit-63')]).toBe(1);
    expect(points[decision('ALL /*', 'enforce', 'limited', 'store', null, '_OTHER')]).toBe(6);
    expect(Object.keys(points)).toHaveLength(1 + 64 + 1);
  });

  it("counts decisions an operator's block refused under source block, by rule, naming no limit", async () => {
    const limiter = createLimiter({ store: metrics.memory(memoryStore()), onDecision: metrics.onDecision });
    await limiter.block({ organization: 'org_a', endpoint: 'POST /browsers', forMs: 60_000, reason: 'incident 42' });
    await times(3, limiter, developer('org_a', 'POST /browsers'));
    await times(2, limiter, developer('org_a', 'GET /browsers'));
    await limiter.unblock({ organization: 'org_a', endpoint: 'POST /browsers' });
    await times(1, limiter, developer('org_a', 'POST /browsers'));
    const collected = await otel.collect();
    const blocked = label({
      'ratecard.rule': 'POST /browsers',
      'ratecard.mode': 'enforce',
      'ratecard.outcome': 'limited',
      'ratecard.source': 'block',
      'ratecard.plan': 'developer',
    });
    expect(sums(collected, 'ratecard.decisions')).toEqual({
      [blocked]: 3,
      [decision('POST /browsers', 'enforce', 'allowed', 'store')]: 1,
      [decision(null, 'unlimited', 'allowed', 'none')]: 2,
    });
    // Blocked decisions never reached the store: only the last consume was timed.
    expect(histogramCounts(collected)).toEqual({ 'ratecard.store=memory': 1 });
  });

  it('counts decisions from limiters sharing one metrics object together', async () => {
    const first = createLimiter({ store: memoryStore(), onDecision: metrics.onDecision });
    const second = createLimiter({ store: memoryStore(), onDecision: metrics.onDecision });
    await times(3, first, developer('org_a', 'POST /browsers'));
    await times(4, second, developer('org_a', 'POST /browsers'));
    expect(sums(await otel.collect(), 'ratecard.decisions')).toEqual({
      [decision('POST /browsers', 'enforce', 'allowed', 'store')]: 7,
    });
  });
});

describe('ratecard.store.duration_seconds', () => {
  it('marks a call that answered after the limiter stopped waiting with error.type store_timeout', async () => {
    // The store answers when the test says, once the limiter has stopped waiting: an answer on a 60 ms timer of its
    // own came before the deadline was judged when the event loop stalled past both (a starved CPU), and was taken.
    let answer = (): void => {};
    let answering: Promise<Outcome[]> | undefined;
    const slow: Store = {
      shared: false,
      ...keepsNothing,
      consume: () => {
        answering = new Promise<Outcome[]>((resolve) => {
          answer = () => resolve([0]);
        });
        return answering;
      },
      settle: () => false,
      peek: () => Promise.resolve([0]),
      reset: () => {},
      close: () => {},
    };
    const limiter = createLimiter({
      store: metrics.store(slow, 'slow'),
      fallback: metrics.memory(memoryStore()),
      storeTimeoutMs: 10,
      onDecision: metrics.onDecision,
    });
    const decision = await limiter.consume(developer('org_a', 'POST /browsers'));
    expect(decision.source).toBe('fallback');
    await limiter.peek(developer('org_a', 'POST /browsers'));
    // 60 ms after the call at least, so its duration reads in seconds as 0.06 or more.
    await new Promise((resolve) => setTimeout(resolve, 60));
    answer();
    await answering;

    const collected = await otel.collect();
    expect(histogramCounts(collected)).toEqual({
      'error.type=store_timeout ratecard.store=slow': 1,
      'ratecard.store=slow': 1,
      'ratecard.store=memory': 1,
    });
    const histogram = collected.get('ratecard.store.duration_seconds');
    expect(histogram?.descriptor.unit).toBe('s');
    const late = histogram?.dataPoints.find((point) => point.attributes['error.type'] === 'store_timeout');
    // Seconds, not milliseconds: the slow call took 60 ms.
    expect((late?.value as { sum: number }).sum).toBeGreaterThanOrEqual(0.055);
    expect((late?.value as { sum: number }).sum).toBeLessThan(5);
  });

  it("passes the limiter's budget on to the store it times, with consume and with reset", async () => {
    const budgets: (number | undefined)[] = [];
    const recording: Store = {
      shared: false,
      ...keepsNothing,
      consume: (_organization, _endpoint, _limits, _cost, budgetMs) => {
        budgets.push(budgetMs);
        return [0];
      },
      settle: () => false,
      peek: () => [0],
      reset: (_organization, _endpoint, _limits, budgetMs) => {
        budgets.push(budgetMs);
      },
      close: () => {},
    };
    const limiter = createLimiter({ store: metrics.store(recording, 'recording'), storeTimeoutMs: 25 });
    await limiter.consume(developer('org_a', 'POST /browsers'));
    await limiter.reset({ organization: 'org_a', endpoint: 'POST /browsers' });
    expect(budgets).toEqual([25, 25]);
  });

  it('marks a store that throws with its error code, and the decision still goes by the policy', async () => {
    const broken: Store = {
      shared: false,
      ...keepsNothing,
      consume: () => {
        throw new RateLimitError('store_unavailable', 'ratecard: down');
      },
      settle: () => false,
      peek: () => Promise.reject(new TypeError('bad reply')),
      reset: () => {},
      close: () => {},
    };
    const limiter = createLimiter({ store: metrics.store(broken, 'broken'), onStoreError: 'allow' });
    expect((await limiter.consume(developer('org_a', 'POST /browsers'))).source).toBe('fail-open');
    expect((await limiter.peek(developer('org_a', 'POST /browsers'))).source).toBe('fail-open');
    expect(histogramCounts(await otel.collect())).toEqual({
      'error.type=store_unavailable ratecard.store=broken': 1,
      'error.type=TypeError ratecard.store=broken': 1,
    });
  });

  it('leaves a store untimed with time: false, and still observes its counters', async () => {
    const memory = memoryStore();
    expect(metrics.memory(memory, { time: false })).toBe(memory);
    metrics.memory(memory);
    const limiter = createLimiter({ store: memory, onDecision: metrics.onDecision });
    await times(2, limiter, developer('org_a', 'POST /browsers'));
    const collected = await otel.collect();
    expect(collected.has('ratecard.store.duration_seconds')).toBe(false);
    expect(sums(collected, 'ratecard.memory.buckets.held')).toEqual({ '': 1 });
    expect(Object.values(sums(collected, 'ratecard.decisions'))).toEqual([2]);
  });

  it('keeps the memory store synchronous: a consume through the wrapper returns the outcomes, not a promise', () => {
    const timed = metrics.memory(memoryStore());
    expect(timed.consume('org_a', 'POST /browsers', [perMinute(10)], 1)).toEqual([9 * 6000]);
    expect(timed.shared).toBe(false);
  });
});

describe('ratecard.quota.remaining_ratio', () => {
  const plans = { starter: [quota(10, { per: 'day', name: 'daily' }), perSecond(100)] };
  const starter = (organization: string): LimitRequest => ({ organization, endpoint: 'POST /search', plan: 'starter' });

  afterEach(() => {
    vi.useRealTimers();
  });

  it('records the share of a quota left after each decision the store made, by rule, plan and quota name', async () => {
    // Midday, so that the day's period cannot end during the test.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-03-10T12:00:00Z') });
    metrics = limiterMetrics({ meterProvider: otel.provider, plans });
    const limiter = createLimiter({ store: metrics.memory(memoryStore()), plans, onDecision: metrics.onDecision });
    // 9 to 0 tokens left, then a refusal that finds none.
    await times(11, limiter, starter('org_a'));
    // Blocked decisions carry no figures of the store's: not recorded.
    await limiter.block({ organization: 'org_b', forMs: 60_000 });
    await times(2, limiter, starter('org_b'));
    const metric = (await otel.collect()).get('ratecard.quota.remaining_ratio');
    expect(metric?.descriptor.unit).toBe('1');
    expect(metric?.dataPointType).toBe(DataPointType.HISTOGRAM);
    expect(metric?.dataPoints).toHaveLength(1);
    const point = metric?.dataPoints[0];
    expect(point?.attributes).toEqual({
      'ratecard.rule': 'ALL /*',
      'ratecard.plan': 'starter',
      'ratecard.limit': 'daily',
    });
    const histogram = point?.value as {
      count: number;
      sum: number;
      buckets: { boundaries: number[]; counts: number[] };
    };
    expect(histogram.count).toBe(11);
    expect(histogram.sum).toBeCloseTo(4.5, 9);
    expect(histogram.buckets.boundaries).toEqual([0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75]);
    // Spent (0 left, twice), 0.1, 0.2, 0.3 to 0.5, 0.6 and 0.7, 0.8 and 0.9.
    expect(histogram.buckets.counts).toEqual([2, 0, 0, 1, 1, 3, 2, 2]);
  });

  it('records nothing for a decision without a quota, or one the failure policy made', async () => {
    const down: Store = {
      shared: false,
      ...keepsNothing,
      consume: () => Promise.reject(new RateLimitError('store_unavailable', 'ratecard: down')),
      settle: () => false,
      peek: () => [0],
      reset: () => {},
      close: () => {},
    };
    const failing = createLimiter({ store: down, plans, onStoreError: 'allow', onDecision: metrics.onDecision });
    await failing.consume(starter('org_a'));
    const plain = createLimiter({ store: memoryStore(), onDecision: metrics.onDecision });
    await plain.consume(developer('org_a', 'POST /browsers'));
    const collected = await otel.collect();
    expect(collected.has('ratecard.quota.remaining_ratio')).toBe(false);
    expect(Object.values(sums(collected, 'ratecard.decisions'))).toEqual([1, 1]);
  });
});

describe('ratecard.leases', () => {
  const sessions = concurrency(3, { name: 'sessions' });
  const plans = { free: [sessions, perMinute(100)] };
  const free = (organization: string): LimitRequest => ({ organization, endpoint: 'POST /sessions', plan: 'free' });
  const held = (plan = 'free'): string =>
    label({ 'ratecard.rule': 'ALL /*', 'ratecard.plan': plan, 'ratecard.limit': 'sessions' });
  const ended = (end: string): string =>
    label({
      'ratecard.rule': 'ALL /*',
      'ratecard.plan': 'free',
      'ratecard.limit': 'sessions',
      'ratecard.lease.end': end,
    });

  function leaseLimiter(): Limiter {
    metrics = limiterMetrics({ meterProvider: otel.provider, plans });
    return createLimiter({
      store: metrics.memory(memoryStore()),
      plans,
      onDecision: metrics.onDecision,
      onLease: metrics.onLease,
    });
  }

  afterEach(() => {
    vi.useRealTimers();
  });

  it('counts leases held now and ended, by rule, plan and concurrency limit, never the organization', async () => {
    const limiter = leaseLimiter();
    const leases = [];
    for (const organization of ['org_a', 'org_a', 'org_b']) leases.push(await limiter.reserve(free(organization)));
    const refused = await Promise.all([1, 2, 3].map(() => limiter.reserve(free('org_a'))));
    expect(refused.filter((reservation) => reservation.held)).toHaveLength(1);
    await leases[0]?.settle();
    await leases[1]?.cancel();
    await leases[2]?.extend(120_000);
    const collected = await otel.collect();
    expect(sums(collected, 'ratecard.leases.held')).toEqual({ [held()]: 2 });
    expect(sums(collected, 'ratecard.leases.ended')).toEqual({ [ended('settled')]: 1, [ended('cancelled')]: 1 });
    expect(JSON.stringify([...collected.values()])).not.toMatch(/org_/);
  });

  it('counts a lease nobody settled as expired once its time has passed, once, though a late settle finds it gone', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const limiter = leaseLimiter();
    const forgotten = await limiter.reserve({ ...free('org_a'), leaseMs: 1_000 });
    const late = await limiter.reserve({ ...free('org_a'), leaseMs: 1_000 });
    vi.advanceTimersByTime(1_000);
    // The second is settled after its expiry before any collection: the store says it had expired.
    expect(await late.settle()).toBe(false);
    let collected = await otel.collect();
    expect(sums(collected, 'ratecard.leases.held')).toEqual({ [held()]: 0 });
    expect(sums(collected, 'ratecard.leases.ended')).toEqual({ [ended('expired')]: 2 });
    expect(await forgotten.settle()).toBe(false);
    collected = await otel.collect();
    expect(sums(collected, 'ratecard.leases.ended')).toEqual({ [ended('expired')]: 2 });
  });

  it('times reserve and settle on the store it wraps, and passes the lease on', async () => {
    const limiter = leaseLimiter();
    const reservation = await limiter.reserve(free('org_a'));
    expect(reservation.held).toBe(true);
    expect(await reservation.settle()).toBe(true);
    expect(histogramCounts(await otel.collect())).toEqual({ 'ratecard.store=memory': 2 });
  });

  it('leaves a store without settle without one, so that reserve refuses it before charging', async () => {
    const memory = memoryStore();
    // A store of its own written before leases: consume, peek, reset and close.
    const old = {
      shared: false,
      consume: memory.consume.bind(memory),
      peek: memory.peek.bind(memory),
      reset: memory.reset.bind(memory),
      close: memory.close.bind(memory),
    } as unknown as Store;
    const limiter = createLimiter({ store: metrics.store(old, 'old'), plans });
    await expect(limiter.reserve(free('org_a'))).rejects.toMatchObject({ code: 'invalid_option' });
    // Nor inspect or blocks: the limiter reads no blocks from it and still decides.
    expect(metrics.store(old, 'old')).toMatchObject({ settle: undefined, inspect: undefined, blocks: undefined });
    expect((await limiter.consume({ organization: 'org_a', endpoint: 'GET /x', limits: perMinute(1) })).allowed).toBe(
      true,
    );
  });
});

describe('docs/observability.md', () => {
  it('lists every instrument the package makes, with its unit', async () => {
    const doc = readFileSync(new URL('../../../docs/observability.md', import.meta.url), 'utf8');
    const table = /<!-- instruments:[^>]*-->\n((?:\|.*\n)+)/.exec(doc)?.[1] ?? '';
    const documented = table
      .split('\n')
      .slice(2)
      .filter((row) => row.length > 0)
      .map((row) => {
        const [name, , unit] = row
          .split('|')
          .slice(1, 4)
          .map((cell) => cell.trim().replace(/`/g, ''));
        return `${name} ${unit}`;
      });
    // An unconnected client: the Redis store's counters are there to observe without a server.
    const client = new Redis({ lazyConnect: true });
    const limiter = createLimiter({
      store: metrics.memory(memoryStore()),
      fallback: metrics.memory(memoryStore()),
      onDecision: metrics.onDecision,
      onLease: metrics.onLease,
    });
    metrics.redis(redisStore({ client }));
    await limiter.consume(developer('org_a', 'POST /browsers'));
    await limiter.consume({ organization: 'org_a', endpoint: 'POST /search', limits: quota(10, { per: 'month' }) });
    await (await limiter.reserve(developer('org_a', 'POST /browsers'))).settle();
    const made = [...(await otel.collect()).values()].map(
      (metric) => `${metric.descriptor.name} ${metric.descriptor.unit}`,
    );
    expect(documented.sort()).toEqual(made.sort());
    client.disconnect();
  });
});

/** The message of the invalid_option RateLimitError `run` throws. */
function refusal(run: () => unknown): string {
  let error: unknown;
  try {
    run();
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(RateLimitError);
  expect((error as RateLimitError).code).toBe('invalid_option');
  return (error as RateLimitError).message;
}

/** What metrics.redis checks a store for, without a Redis: the Store members and stats(). */
function redisLike(): RedisStoreWithStats {
  const zero = { sent: 0, batches: 0, largestBatch: 0, denyCacheHits: 0, denyCacheSize: 0, scriptReloads: 0 };
  return {
    shared: true,
    ...keepsNothing,
    consume: () => Promise.resolve([]),
    settle: () => Promise.resolve(false),
    peek: () => Promise.resolve([]),
    reset: () => Promise.resolve(),
    close: () => {},
    stats: () => ({ ...zero, unavailable: 0, expired: 0, late: 0, rerouted: 0, queued: 0 }),
  };
}

describe('the unit in the name', () => {
  it('names the store histogram with its unit, and the View docs/observability.md gives renames it back', async () => {
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
    const provider = new MeterProvider({
      readers: [reader],
      views: [{ instrumentName: 'ratecard.store.duration_seconds', name: 'ratecard.store.duration' }],
    });
    const viewed = limiterMetrics({ meterProvider: provider });
    await createLimiter({ store: viewed.memory(memoryStore()) }).consume(developer('org_a', 'POST /browsers'));
    await reader.forceFlush();
    const durations = exporter
      .getMetrics()
      .flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics.map((metric) => metric.descriptor)))
      .filter((descriptor) => descriptor.name.startsWith('ratecard.store.duration'));
    expect(durations).toEqual([expect.objectContaining({ name: 'ratecard.store.duration', unit: 's' })]);
    await provider.shutdown();
    await createLimiter({ store: metrics.memory(memoryStore()) }).consume(developer('org_a', 'POST /browsers'));
    const collected = await otel.collect();
    expect(collected.get('ratecard.store.duration_seconds')?.descriptor.unit).toBe('s');
  });
});

describe('options', () => {
  it('refuses what is not a meter provider, a store, or a store name', () => {
    const invalid = (run: () => unknown, message: RegExp): void => {
      expect(run).toThrow(RateLimitError);
      expect(run).toThrow(message);
      try {
        run();
      } catch (error) {
        expect((error as RateLimitError).code).toBe('invalid_option');
      }
    };
    invalid(
      () => limiterMetrics({ meterProvider: {} as never }),
      /^ratecard: meterProvider must be an OpenTelemetry MeterProvider, got an object$/,
    );
    invalid(() => limiterMetrics(null as never), /^ratecard: limiterMetrics takes an options object, got null$/);
    const { stats: _, ...withoutStats } = memoryStore();
    invalid(() => metrics.redis(withoutStats as never), /^ratecard: metrics.redis needs a store with stats\(\)/);
    invalid(() => metrics.memory({ stats: () => ({}) } as never), /^ratecard: metrics.memory needs a store/);
    invalid(() => metrics.store(memoryStore(), 'Bad Name'), /^ratecard: a store's name must be a short lowercase word/);
    invalid(
      () => metrics.memory(memoryStore(), { time: 'no' as never }),
      /^ratecard: metrics.memory's time must be a boolean/,
    );
  });

  it('takes every option of LimiterMetricsOptions and StoreMetricsOptions', () => {
    const every: Required<LimiterMetricsOptions> = { meterProvider: otel.provider, plans: ['free', 'pro'] };
    const own = limiterMetrics(every);
    const untimed: Required<StoreMetricsOptions> = { time: false };
    const memory = memoryStore();
    expect(own.memory(memory, untimed)).toBe(memory);
    const redis = redisLike();
    expect(own.redis(redis, untimed)).toBe(redis);
  });

  it('refuses an unknown option, even one set to undefined, naming the option it most likely meant', () => {
    for (const value of [otel.provider, undefined]) {
      const options = { meterprovider: value } as LimiterMetricsOptions;
      expect(refusal(() => limiterMetrics(options))).toBe(
        'ratecard: limiterMetrics got an unknown option "meterprovider"; did you mean "meterProvider"? It takes meterProvider, plans',
      );
    }
    for (const value of [false, undefined]) {
      const options = { timed: value } as StoreMetricsOptions;
      expect(refusal(() => metrics.memory(memoryStore(), options))).toBe(
        'ratecard: metrics.memory got an unknown option "timed"; did you mean "time"? It takes time',
      );
      expect(refusal(() => metrics.redis(redisLike(), options))).toBe(
        'ratecard: metrics.redis got an unknown option "timed"; did you mean "time"? It takes time',
      );
    }
  });

  it("reports this package's own version as the scope version", () => {
    expect(SCOPE_VERSION).toBe(packageJson.version);
  });

  it('uses the global meter provider when none is given', async () => {
    const { metrics: api } = await import('@opentelemetry/api');
    expect(api.setGlobalMeterProvider(otel.provider)).toBe(true);
    try {
      const global = limiterMetrics();
      const limiter = createLimiter({ store: memoryStore(), onDecision: global.onDecision });
      await limiter.consume(developer('org_a', 'POST /browsers'));
      expect(Object.values(sums(await otel.collect(), 'ratecard.decisions'))).toEqual([1]);
    } finally {
      api.disable();
    }
  });
});

// Under CI=true canStartRedis throws when redis-server is missing, so this suite fails instead of passing by skipping.
describe.skipIf(!canStartRedis('@ratecard/otel'))('on Redis', () => {
  let server: RedisServer;
  let client: Redis;

  beforeEach(async () => {
    server = await startRedis();
    client = new Redis(server.url, { lazyConnect: true });
    // ioredis prints every error event it cannot hand to a listener; the kill below makes a few.
    client.on('error', () => {});
    await client.connect();
  });

  afterEach(async () => {
    client.disconnect();
    await server.stop();
  });

  it('counts store and fallback decisions exactly across a killed Redis, and observes the stores', async () => {
    const redis = redisStore({ client });
    const fallback = memoryStore();
    const limiter = createLimiter({
      store: metrics.redis(redis),
      fallback: metrics.memory(fallback),
      onDecision: metrics.onDecision,
    });
    const denying = createLimiter({
      store: metrics.redis(redisStore({ client })),
      onStoreError: 'deny',
      onDecision: metrics.onDecision,
    });
    await times(12, limiter, developer('org_a', 'POST /browsers'));
    await times(1, denying, developer('org_b', 'POST /browsers'));
    // The eleventh call was denied by Redis, and the deny cache answered the twelfth without it.
    const up = await otel.collect();
    expect(sums(up, 'ratecard.redis.calls.sent')).toEqual({ '': 12 });
    expect(sums(up, 'ratecard.redis.script.calls')).toEqual({ '': 12 });
    expect(sums(up, 'ratecard.redis.deny_cache.hits')).toEqual({ '': 1 });

    await server.kill();
    while (client.status === 'ready') await new Promise((resolve) => setTimeout(resolve, 5));
    await times(3, limiter, developer('org_a', 'POST /invocations'));
    await times(2, denying, developer('org_b', 'POST /browsers'));
    // The deny cache still knows org_a's empty bucket on POST /browsers: it answers without Redis.
    await times(1, limiter, developer('org_a', 'POST /browsers'));
    // The five calls made while the client reconnects were refused by the store when they were made, and answered
    // by the policy at once.

    const collected = await otel.collect();
    expect(sums(collected, 'ratecard.decisions')).toEqual({
      [decision('POST /browsers', 'enforce', 'allowed', 'store')]: 11,
      [decision('POST /browsers', 'enforce', 'limited', 'store')]: 3,
      [decision('POST /invocations', 'shadow', 'allowed', 'fallback')]: 3,
      [decision('POST /browsers', 'enforce', 'limited', 'fail-closed')]: 2,
    });
    expect(histogramCounts(collected)).toEqual({
      'ratecard.store=redis': 14,
      'error.type=store_unavailable ratecard.store=redis': 5,
      'ratecard.store=memory': 3,
    });
    expect(sums(collected, 'ratecard.redis.calls.sent')).toEqual({ '': 12 });
    expect(sums(collected, 'ratecard.redis.script.calls')).toEqual({ '': 12 });
    expect(sums(collected, 'ratecard.redis.calls.unavailable')).toEqual({ '': 5 });
    expect(sums(collected, 'ratecard.redis.deny_cache.hits')).toEqual({ '': 2 });
    expect(sums(collected, 'ratecard.redis.deny_cache.buckets')).toEqual({ '': 1 });
    expect(sums(collected, 'ratecard.redis.calls.expired')).toEqual({ '': 0 });
    expect(sums(collected, 'ratecard.redis.calls.late')).toEqual({ '': 0 });
    expect(sums(collected, 'ratecard.redis.calls.rerouted')).toEqual({ '': 0 });
    expect(sums(collected, 'ratecard.redis.calls.queued')).toEqual({ '': 0 });
    // Each call was awaited before the next was made: every script call carried one.
    expect(gauges(collected, 'ratecard.redis.script.largest_batch')).toEqual({ '': 1 });
    // A fresh server had no script: the first call of each got NOSCRIPT and sent it whole, the consume script's and the
    // blocks script's (the limiter reads the blocks with it).
    expect(sums(collected, 'ratecard.redis.script.reloads')).toEqual({ '': 2 });
    expect(sums(collected, 'ratecard.memory.buckets.held')).toEqual({ '': 1 });
    expect(fallback.stats().buckets).toBe(1);
  });

  it('counts calls that reached a paused Redis past their deadline as late, among the expired', async () => {
    const store = redisStore({ client });
    const limiter = createLimiter({
      store: metrics.redis(store),
      onStoreError: 'deny',
      // Long enough that all three rounds below are made before the first deadline, even on a loaded machine.
      storeTimeoutMs: 200,
      onDecision: metrics.onDecision,
    });
    // One call answered by Redis first: from its reply the store learns how Redis' clock stands to its own.
    await times(1, limiter, developer('org_a', 'POST /browsers'));
    const admin = new Redis(server.url);
    // EVALSHA is a write for CLIENT PAUSE WRITE: the calls are sent, and Redis holds them 800 ms, past their 200 ms.
    await admin.call('CLIENT', 'PAUSE', '800', 'WRITE');
    // Three rounds of five, a flush each: two are sent (the most a standalone store keeps out), the third waits in the
    // store, and is dropped unsent when the first comes back: expired, not late.
    const calls: Promise<unknown>[] = [];
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 5; i++) calls.push(limiter.consume(developer('org_b', 'POST /browsers')));
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(calls);
    // The limiter answered all fifteen at their deadline; the store counts them as their replies come back.
    await vi.waitFor(() => expect(store.stats().expired).toBe(15), { timeout: 5_000 });
    admin.disconnect();

    const collected = await otel.collect();
    expect(sums(collected, 'ratecard.decisions')).toEqual({
      [decision('POST /browsers', 'enforce', 'allowed', 'store')]: 1,
      [decision('POST /browsers', 'enforce', 'limited', 'fail-closed')]: 15,
    });
    expect(sums(collected, 'ratecard.redis.calls.sent')).toEqual({ '': 11 });
    expect(sums(collected, 'ratecard.redis.calls.expired')).toEqual({ '': 15 });
    expect(sums(collected, 'ratecard.redis.calls.late')).toEqual({ '': 10 });
    expect(await client.exists(endpointKey('org_b', 'POST /browsers'))).toBe(0);
  });

  it('reports the largest batch any observed store sent in one script call: not a sum, not the latest', async () => {
    const first = redisStore({ client });
    const second = redisStore({ client });
    const limiter = createLimiter({ store: metrics.redis(first), onStoreError: 'throw' });
    const other = createLimiter({ store: metrics.redis(second), onStoreError: 'throw' });
    const round = (on: Limiter, n: number) =>
      Promise.all(Array.from({ length: n }, (_, i) => on.consume(developer(`org_${i}`, 'POST /browsers'))));
    // Calls made in one turn leave in one script call: five then two through the first store, three through the second.
    await round(limiter, 5);
    await round(limiter, 2);
    await round(other, 3);
    expect(first.stats()).toMatchObject({ sent: 7, batches: 2, largestBatch: 5 });
    expect(second.stats()).toMatchObject({ sent: 3, batches: 1, largestBatch: 3 });

    const collected = await otel.collect();
    expect(gauges(collected, 'ratecard.redis.script.largest_batch')).toEqual({ '': 5 });
    expect(sums(collected, 'ratecard.redis.script.calls')).toEqual({ '': 3 });
    expect(sums(collected, 'ratecard.redis.calls.sent')).toEqual({ '': 10 });
  });
});

describe.skipIf(!canStartRedis('@ratecard/otel'))('on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  const address = (server: RedisServer): string => `${server.host}:${server.port}`;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  }, 60_000);

  afterAll(() => cluster?.stop());

  beforeEach(async () => {
    client = new Cluster(cluster.nodes);
    await client.ping();
    // Connected to every master, as a client under traffic is: the store sends each master its calls directly.
    await Promise.all(client.nodes('master').map((node) => node.ping()));
  });

  afterEach(() => client.disconnect());

  it("counts the calls sent again by key after their slot moved to another master behind the client's back", async () => {
    const key = endpointKey('org_a', 'POST /browsers');
    const slot = await redisCommand(cluster.masters[0] as RedisServer, ['CLUSTER', 'KEYSLOT', key]);
    const from = cluster.masters.find((server) => address(server) === client.slots[Number(slot)]?.[0]);
    const [to, ...others] = cluster.masters.filter((server) => server !== from);
    if (from === undefined || to === undefined) throw new Error(`no master for slot ${slot}`);
    const fromId = await redisCommand(from, ['CLUSTER', 'MYID']);
    const toId = await redisCommand(to, ['CLUSTER', 'MYID']);
    // The slot, empty, moves to another master as redis-cli --cluster reshard moves one; the client is not told.
    await redisCommand(to, ['CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId]);
    await redisCommand(from, ['CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId]);
    for (const server of [to, from, ...others]) await redisCommand(server, ['CLUSTER', 'SETSLOT', slot, 'NODE', toId]);
    expect(client.slots[Number(slot)]?.[0]).toBe(address(from));

    const store = redisStore({ client });
    const limiter = createLimiter({
      store: metrics.redis(store),
      onStoreError: 'throw',
      // A reroute takes a few round trips more; on a loaded machine they must not turn into a timeout.
      storeTimeoutMs: 5_000,
      onDecision: metrics.onDecision,
    });
    // Three calls in one turn leave in one script call to the old master, which refuses the key it no longer serves
    // before writing anything; each call then goes again alone, by key, and the client follows MOVED.
    const request = developer('org_a', 'POST /browsers');
    const decisions = await Promise.all([1, 2, 3].map(() => limiter.consume(request)));
    expect(decisions.map((decision) => [decision.source, decision.allowed])).toEqual([
      ['store', true],
      ['store', true],
      ['store', true],
    ]);
    expect(store.stats()).toMatchObject({ sent: 3, batches: 3, rerouted: 3 });
    // MOVED put the slot's new master in the client's map: two more calls leave together, straight to it.
    expect(client.slots[Number(slot)]?.[0]).toBe(address(to));
    await Promise.all([1, 2].map(() => limiter.consume(request)));
    expect(store.stats()).toMatchObject({ sent: 5, batches: 4, rerouted: 3 });

    const collected = await otel.collect();
    expect(sums(collected, 'ratecard.redis.calls.rerouted')).toEqual({ '': 3 });
    expect(sums(collected, 'ratecard.redis.calls.sent')).toEqual({ '': 5 });
    expect(sums(collected, 'ratecard.redis.script.calls')).toEqual({ '': 4 });
    expect(sums(collected, 'ratecard.decisions')).toEqual({
      [decision('POST /browsers', 'enforce', 'allowed', 'store')]: 5,
    });
    expect(await redisCommand(to, ['EXISTS', key])).toBe('1');
  });
});
