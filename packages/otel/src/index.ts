/**
 * OpenTelemetry metrics for ratecard through `@opentelemetry/api`: `limiterMetrics()` counts decisions, times store
 * calls and observes the stores' counters.
 *
 * @module @ratecard/otel
 */
import {
  type Attributes,
  type BatchObservableResult,
  type Histogram,
  type Meter,
  type MeterProvider,
  metrics,
  type Observable,
  type ObservableResult,
} from '@opentelemetry/api';
import {
  type BlockChange,
  checkOptionKeys,
  costAt,
  type Decision,
  type DecisionSource,
  describeValue,
  type KeptBlocks,
  type KeptState,
  type Lease,
  type LeaseChange,
  type LeaseEvent,
  type Limit,
  type LimitRequest,
  type Outcome,
  PLANS,
  type Plans,
  QUEUE_WAIT_FACTOR,
  RateLimitError,
  type Reservation,
  retryAfterSeconds,
  type Store,
  unitsAfter,
} from '@ratecard/core';
import packageJson from '../package.json' with { type: 'json' };

/** The instrumentation scope every instrument is created under; Prometheus shows it as `otel_scope_name`. */
export const SCOPE_NAME = '@ratecard/otel';
/** This package's version, reported as the scope version (`otel_scope_version`); set by changesets on release. */
export const SCOPE_VERSION: string = packageJson.version;

/** Options of `limiterMetrics`; both have defaults. */
export interface LimiterMetricsOptions {
  /** Where the instruments come from; default the global provider that `@opentelemetry/api` holds. */
  meterProvider?: MeterProvider;
  /**
   * The limiter's plans (the `plans` given to `createLimiter`, or their names): the values `ratecard.plan` may take.
   * Default the spec's four. A decision on any other plan is counted with `ratecard.plan` = `_OTHER`.
   */
  plans?: Plans | readonly string[];
}

/** Every key of LimiterMetricsOptions: limiterMetrics refuses any other. */
const LIMITER_METRICS_OPTIONS = { meterProvider: true, plans: true } satisfies Record<
  keyof LimiterMetricsOptions,
  true
>;

/** What `memoryStore()` of `@ratecard/memory` is: a store with its counters. */
export interface MemoryStoreWithStats extends Store {
  /** The store's counters now. */
  stats(): {
    /** Buckets held now. */
    buckets: number;
    /** Full buckets dropped by sweeps. */
    dropped: number;
    /** Buckets not yet full evicted at `maxBuckets`. */
    evicted: number;
  };
}

/** What `redisStore()` of `@ratecard/redis` is: a store with its counters. */
export interface RedisStoreWithStats extends Store {
  /** The store's counters now (`RedisStoreStats` of `@ratecard/redis` says more of each). */
  stats(): {
    /** Consume calls sent to Redis. */
    sent: number;
    /** Consume script calls made. */
    batches: number;
    /** The most consume calls one script call carried, since the store was made. */
    largestBatch: number;
    /** Consume calls answered by the deny cache. */
    denyCacheHits: number;
    /** Buckets the deny cache remembers now. */
    denyCacheSize: number;
    /** Times a node lacked a script and got it whole with EVAL. */
    scriptReloads: number;
    /** Calls refused at once because the client was not ready. */
    unavailable: number;
    /** Calls that charged nothing because their caller had stopped waiting. */
    expired: number;
    /** Of `expired`: calls that reached Redis after their caller had stopped waiting, refused by the script. */
    late: number;
    /** Cluster calls sent again one by one, by key, because their master no longer served their slot. */
    rerouted: number;
    /** Calls waiting to be sent now. */
    queued: number;
  };
}

/** Options of `limiterMetrics().memory` and `.redis`. */
export interface StoreMetricsOptions {
  /**
   * Time the store's calls on `ratecard.store.duration_seconds`; default true. A memory store answers in well under a
   * microsecond, less than recording the time costs: false keeps only its counters.
   */
  time?: boolean;
}

/** Every key of StoreMetricsOptions: `memory` and `redis` refuse any other. */
const STORE_METRICS_OPTIONS = { time: true } satisfies Record<keyof StoreMetricsOptions, true>;

/** The instruments of one meter, and the hooks that feed them (docs/observability.md lists every instrument). */
export interface LimiterMetrics {
  /**
   * Counts a decision on `ratecard.decisions`, and records the share of each quota it left on
   * `ratecard.quota.remaining_ratio`: pass it as `createLimiter`'s `onDecision`, or call it from yours. Attributes:
   * rule, mode, outcome, source, plan and, on a limited decision, the limit that refused it; never the organization or
   * anything else per key.
   */
  readonly onDecision: (decision: Decision, request: LimitRequest) => void;
  /**
   * Counts the end of a lease on `ratecard.leases.ended` and takes it off `ratecard.leases.held`: pass it as
   * `createLimiter`'s `onLease`, beside `onDecision` (which counts the leases `reserve` takes).
   */
  readonly onLease: (event: LeaseEvent, reservation: Reservation) => void;
  /**
   * The memory store, its calls timed as `ratecard.store="memory"`, and its `stats()` observed from now on. With
   * `{ time: false }` the store itself is returned, observed but not timed.
   */
  memory(store: MemoryStoreWithStats, options?: StoreMetricsOptions): Store;
  /** The Redis store, its calls timed as `ratecard.store="redis"`, and its `stats()` observed from now on. */
  redis(store: RedisStoreWithStats, options?: StoreMetricsOptions): Store;
  /** Any other store, its calls timed under `ratecard.store` = `name` (a fixed word such as 'dynamodb'). */
  store(store: Store, name: string): Store;
}

/**
 * Bucket bounds for store call durations, in seconds: 10 µs (a memory store answers within it, a loopback Redis round
 * trip takes ~100 µs) to 1 s, with the limiter's default budget of 500 ms as one of them (and 100 and 250 ms, for a
 * budget set lower), so that a histogram shows how close calls run to it. A consume queued at a store that tells a
 * queue from an outage may wait up to QUEUE_WAIT_FACTOR budgets (2 s by default); one over 1 s counts only in `+Inf`.
 */
export const STORE_DURATION_BUCKETS: readonly number[] = Object.freeze([
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
]);

/**
 * Bucket bounds for the share of a quota left, 0 to 1: `le="0"` counts the decisions that found it spent, `le="0.1"`
 * those within its last tenth. Finer near 0, where a customer is about to be refused.
 */
export const QUOTA_REMAINING_BUCKETS: readonly number[] = Object.freeze([0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75]);

const MODES: readonly Decision['mode'][] = ['enforce', 'shadow', 'unlimited'];
const SOURCES: readonly DecisionSource[] = ['store', 'fallback', 'fail-open', 'fail-closed', 'none', 'block'];
/** The value of a bounded attribute whose value is not one of those counted one by one. */
const OTHER = '_OTHER';
/**
 * Limit names counted one by one under `ratecard.limit`; past them, `_OTHER`. Names come from the configuration or
 * from the limits a caller computes per request, which are few too, unless a caller writes a key into a name.
 */
const MAX_LIMIT_NAMES = 64;
/** Plan names counted one by one; the limiter refuses a plan it does not know, so only a made-up decision passes it. */
const MAX_PLANS = 256;
/**
 * Rules come from the limiter's configuration, so there are few; the bound only keeps a caller who feeds onDecision
 * made-up rules from growing the tallies without end. Past it, and for a mode or source this version does not know,
 * decisions are counted under the overflow set, as the OpenTelemetry SDK does past its cardinality limit.
 */
const MAX_RULES = 1_000;
const OVERFLOW: Attributes = Object.freeze({ 'otel.metric.overflow': true });

/** The decisions counted so far under one attribute set. */
interface Tally {
  readonly attributes: Attributes;
  count: number;
}
/** How a lease ended, as `ratecard.lease.end` says. */
type LeaseEnd = 'settled' | 'cancelled' | 'expired';

/** The leases counted under one attribute set (rule, plan, concurrency limit). */
interface LeaseTally {
  /** The set for `ratecard.leases.held`. */
  readonly attributes: Attributes;
  /** The set for `ratecard.leases.ended`, one per way a lease ends. */
  readonly ended: Readonly<Record<LeaseEnd, Attributes>>;
  /** Leases held now; counted afresh at each collection. */
  held: number;
  settled: number;
  cancelled: number;
  expired: number;
}

function leaseTally(attributes: Attributes): LeaseTally {
  const ended = (end: LeaseEnd): Attributes => Object.freeze({ ...attributes, 'ratecard.lease.end': end });
  return {
    attributes: Object.freeze({ ...attributes }),
    ended: { settled: ended('settled'), cancelled: ended('cancelled'), expired: ended('expired') },
    held: 0,
    settled: 0,
    cancelled: 0,
    expired: 0,
  };
}

/** Leases held are swept for those past their expiry when their map reaches this size, then twice what it keeps. */
const LEASE_SWEEP_SIZE = 1_024;

/** error.type values are error codes or class names, a handful; past this bound a new one is reported as '_OTHER'. */
const MAX_ERROR_TYPES = 32;

/**
 * The limit that refused a limited decision: the one that waits longest (ties to the first), as the
 * limiter chooses the limit it reports; undefined when the decision was not limited, or an operator's block refused it
 * (no limit did: its outcomes are made up, as if every bucket were empty).
 */
function refusingLimit(decision: Decision): Limit | undefined {
  if (!decision.limited || decision.source === 'block') return undefined;
  const { limits, outcomes, cost } = decision;
  let most = limits[0];
  if (limits.length > 1) {
    let wait = retryAfterSeconds(outcomes[0] as Outcome, most as Limit, costAt(cost, 0));
    for (let i = 1; i < limits.length; i++) {
      const next = retryAfterSeconds(outcomes[i] as Outcome, limits[i] as Limit, costAt(cost, i));
      if (next > wait) {
        wait = next;
        most = limits[i];
      }
    }
  }
  return most;
}

function decisionAttributes(decision: Decision, plan: string | undefined, limit: string | undefined): Attributes {
  const attributes: Attributes = {};
  // An unlimited decision has no rule; its endpoint is the request's own path, unbounded, so it is never recorded.
  if (decision.rule !== null) attributes['ratecard.rule'] = decision.rule;
  attributes['ratecard.mode'] = decision.mode;
  attributes['ratecard.outcome'] = decision.limited ? 'limited' : 'allowed';
  attributes['ratecard.source'] = decision.source;
  // A request limited only by its own limits may name no plan.
  if (plan !== undefined) attributes['ratecard.plan'] = plan;
  if (limit !== undefined) attributes['ratecard.limit'] = limit;
  return Object.freeze(attributes);
}

/** The plan names `ratecard.plan` may take, from the `plans` option. */
function planNames(plans: LimiterMetricsOptions['plans']): string[] {
  if (plans === undefined) return Object.keys(PLANS);
  const names = Array.isArray(plans)
    ? plans
    : typeof plans === 'object' && plans !== null
      ? Object.keys(plans)
      : undefined;
  if (names === undefined || names.length > MAX_PLANS || names.some((name) => typeof name !== 'string')) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: limiterMetrics' plans must be the limiter's plans or up to ${MAX_PLANS} plan names, got ${describeValue(plans)}`,
    );
  }
  return [...names];
}

/** A low-cardinality name for what went wrong: ratecard's error code, else the error's class name. */
function errorType(error: unknown): string {
  if (error instanceof RateLimitError) return error.code;
  if (error instanceof Error && error.name.length > 0) return error.name;
  return '_OTHER';
}

/**
 * Times a store's consume, settle and peek calls; reset, inspect, blocks and close pass through. The wrapper adds no promise of its own to the decision: outcomes come back
 * as they are, and a promise is returned unchanged, the timing riding on a side branch of it.
 */
class TimedStore implements Store {
  readonly shared: boolean;
  readonly tellsQueueFromOutage: boolean;
  private readonly ok: Attributes;
  private readonly failed = new Map<string, Attributes>();

  constructor(
    private readonly inner: Store,
    private readonly duration: Histogram,
    private readonly name: string,
  ) {
    this.shared = inner.shared;
    this.tellsQueueFromOutage = inner.tellsQueueFromOutage === true;
    this.ok = Object.freeze({ 'ratecard.store': name });
    // A store written before leases has no settle, and the limiter's reserve refuses it before charging anything; one
    // written before operations has no inspect or blocks, and the limiter reads no blocks from it: the wrapper must not
    // seem to have them.
    for (const member of ['settle', 'inspect', 'blocks'] as const) {
      if (typeof inner[member] !== 'function') Object.defineProperty(this, member, { value: undefined });
    }
  }

  consume(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    budgetMs?: number,
    lease?: Lease,
  ): Outcome[] | Promise<Outcome[]> {
    const start = performance.now();
    try {
      // The caller waits for a queue at a store that tells one from an outage (see Store.tellsQueueFromOutage).
      const waited = budgetMs !== undefined && this.tellsQueueFromOutage ? budgetMs * QUEUE_WAIT_FACTOR : budgetMs;
      return this.timed(this.inner.consume(organization, endpoint, limits, cost, budgetMs, lease), start, waited);
    } catch (error) {
      this.record(start, error);
      throw error;
    }
  }

  settle(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    change: LeaseChange,
    budgetMs?: number,
  ): boolean | Promise<boolean> {
    const start = performance.now();
    try {
      return this.timed(this.inner.settle(organization, endpoint, limits, change, budgetMs), start, budgetMs);
    } catch (error) {
      this.record(start, error);
      throw error;
    }
  }

  peek(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
  ): Outcome[] | Promise<Outcome[]> {
    const start = performance.now();
    try {
      return this.timed(this.inner.peek(organization, endpoint, limits, cost), start, undefined);
    } catch (error) {
      this.record(start, error);
      throw error;
    }
  }

  reset(organization: string, endpoint: string, limits: readonly Limit[], budgetMs?: number): void | Promise<void> {
    return this.inner.reset(organization, endpoint, limits, budgetMs);
  }

  inspect(organization: string, endpoint: string): KeptState | Promise<KeptState> {
    return this.inner.inspect(organization, endpoint);
  }

  blocks(change?: BlockChange): KeptBlocks | Promise<KeptBlocks> {
    return this.inner.blocks(change);
  }

  close(): void | Promise<void> {
    return this.inner.close();
  }

  private timed<Answer extends Outcome[] | boolean>(
    answer: Answer | Promise<Answer>,
    start: number,
    budgetMs: number | undefined,
  ): Answer | Promise<Answer> {
    if (Array.isArray(answer) || typeof answer === 'boolean') {
      this.settled(start, budgetMs);
    } else {
      (answer as Promise<Answer>).then(
        () => this.settled(start, budgetMs),
        (error: unknown) => this.record(start, error),
      );
    }
    return answer;
  }

  /**
   * An answer after the caller's budget came too late to count: the limiter's failure policy had answered. The budget
   * is counted from this wrapper's start, microseconds before the limiter starts its own count, so an answer within
   * those microseconds of the end reads as late though the limiter took it.
   */
  private settled(start: number, budgetMs: number | undefined): void {
    const end = performance.now();
    const attributes =
      budgetMs !== undefined && end - start > budgetMs ? this.errorAttributes('store_timeout') : this.ok;
    this.duration.record((end - start) / 1000, attributes);
  }

  private record(start: number, error: unknown): void {
    this.duration.record((performance.now() - start) / 1000, this.errorAttributes(errorType(error)));
  }

  private errorAttributes(type: string): Attributes {
    let attributes = this.failed.get(type);
    if (attributes === undefined) {
      if (this.failed.size >= MAX_ERROR_TYPES && type !== '_OTHER') return this.errorAttributes('_OTHER');
      attributes = Object.freeze({ 'ratecard.store': this.name, 'error.type': type });
      this.failed.set(type, attributes);
    }
    return attributes;
  }
}

function checkStore(store: unknown, method: string, needsStats: boolean): void {
  const candidate = store as Partial<MemoryStoreWithStats> | null;
  const isStore =
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.shared === 'boolean' &&
    typeof candidate.consume === 'function' &&
    typeof candidate.peek === 'function' &&
    typeof candidate.reset === 'function' &&
    typeof candidate.close === 'function';
  if (!isStore || (needsStats && typeof candidate.stats !== 'function')) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: metrics.${method} needs a store${needsStats ? ' with stats()' : ''}, got ${describeValue(store)}`,
    );
  }
}

function checkTime(options: StoreMetricsOptions, method: string): boolean {
  if (typeof options === 'object' && options !== null) {
    checkOptionKeys(options, STORE_METRICS_OPTIONS, `metrics.${method}`);
  }
  const time = (options as StoreMetricsOptions | null)?.time ?? true;
  if (typeof time !== 'boolean') {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: metrics.${method}'s time must be a boolean, got ${describeValue(time)}`,
    );
  }
  return time;
}

class OtelLimiterMetrics implements LimiterMetrics {
  private readonly meter: Meter;
  private readonly duration: Histogram;
  /** rule ('' for none) → tallies, keyed by the index of (mode, outcome, source, plan, limit). */
  private readonly tallies = new Map<string, Map<number, Tally>>();
  /** Plan name → index; 0 stands for no plan, 1 for `_OTHER`. */
  private readonly plans = new Map<string, number>();
  /** Limit name → index, learnt as decisions name them up to MAX_LIMIT_NAMES; 0 stands for none, 1 for `_OTHER`. */
  private readonly limitNames = new Map<string, number>();
  private readonly overflow: Tally = { attributes: OVERFLOW, count: 0 };
  private readonly memoryStores: MemoryStoreWithStats[] = [];
  private readonly redisStores: RedisStoreWithStats[] = [];
  /** rule, plan index and limit index → the lease tally of that set. */
  private readonly leaseTallies = new Map<string, LeaseTally>();
  /** The leases this process took and holds as far as it knows, each with its tally. */
  private readonly heldLeases = new Map<Reservation, LeaseTally>();
  /** Leases a sweep counted as expired: the store's 'expired', when a late settle asks, is not counted again. */
  private readonly sweptLeases = new WeakSet<Reservation>();
  private sweepAt = LEASE_SWEEP_SIZE;
  /** Leases past MAX_RULES attribute sets, counted under the overflow set. */
  private readonly leaseOverflow: LeaseTally = leaseTally(OVERFLOW);
  private readonly quotaRemaining: Histogram;
  /** rule, plan index and quota limit index → the attribute set of `ratecard.quota.remaining_ratio`. */
  private readonly quotaAttributes = new Map<string, Attributes>();

  constructor(options: LimiterMetricsOptions) {
    const provider = options.meterProvider ?? metrics.getMeterProvider();
    if (typeof provider !== 'object' || provider === null || typeof provider.getMeter !== 'function') {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: meterProvider must be an OpenTelemetry MeterProvider, got ${describeValue(provider)}`,
      );
    }
    for (const name of planNames(options.plans)) this.plans.set(name, this.plans.size + 2);
    this.meter = provider.getMeter(SCOPE_NAME, SCOPE_VERSION);
    // An asynchronous counter over tallies kept here: a synchronous Counter's add() makes the SDK hash the attribute
    // set again on every call (its keys sorted and JSON-stringified), which measured several times the cost of the
    // decision itself (packages/otel/bench/limiter-overhead.mjs); a tally costs one increment.
    this.meter
      .createObservableCounter('ratecard.decisions', {
        description: 'Rate-limit decisions, by rule, mode, outcome, source, plan and the limit that refused.',
        unit: '{decision}',
      })
      .addCallback(this.observeDecisions);
    this.duration = this.meter.createHistogram('ratecard.store.duration_seconds', {
      description:
        'Duration of store calls (consume, settle and peek), with error.type when the call failed or ran over budget.',
      unit: 's',
      advice: { explicitBucketBoundaries: [...STORE_DURATION_BUCKETS] },
    });
    this.quotaRemaining = this.meter.createHistogram('ratecard.quota.remaining_ratio', {
      description:
        "The share of a quota left after each decision the store made on it (on a refusal, what it holds), by rule, plan and the quota's name.",
      unit: '1',
      advice: { explicitBucketBoundaries: [...QUOTA_REMAINING_BUCKETS] },
    });
    const held = this.meter.createObservableUpDownCounter('ratecard.leases.held', {
      description:
        'Leases this process took (limiter.reserve) and holds now: not settled, cancelled or past their expiry.',
      unit: '{lease}',
    });
    const ended = this.meter.createObservableCounter('ratecard.leases.ended', {
      description: 'Leases ended, by ratecard.lease.end: settled, cancelled, or expired (never settled in time).',
      unit: '{lease}',
    });
    this.meter.addBatchObservableCallback(
      (result: BatchObservableResult) => {
        this.sweepLeases();
        const observe = (tally: LeaseTally): void => {
          result.observe(held, tally.held, tally.attributes);
          for (const end of ['settled', 'cancelled', 'expired'] as const) {
            if (tally[end] > 0) result.observe(ended, tally[end], tally.ended[end]);
          }
        };
        for (const tally of this.leaseTallies.values()) observe(tally);
        const overflow = this.leaseOverflow;
        if (overflow.held + overflow.settled + overflow.cancelled + overflow.expired > 0) observe(overflow);
      },
      [held, ended],
    );
  }

  readonly onDecision = (decision: Decision, request: LimitRequest): void => {
    this.tallyFor(decision, request.plan).count++;
    // Only the store's figures: a fallback counts a quota afresh from each outage, the policies and blocks make theirs up.
    if (decision.source === 'store') {
      const { limits } = decision;
      for (let i = 0; i < limits.length; i++) {
        if ((limits[i] as Limit).kind === 'quota') this.recordQuota(decision, i, request.plan);
      }
    }
    // A reservation the store admitted holds a lease until onLease says it ended.
    if ((decision as Partial<Reservation>).held === true) {
      const reservation = decision as Reservation;
      if (this.heldLeases.size >= this.sweepAt) this.sweepLeases();
      this.heldLeases.set(reservation, this.leaseTallyFor(reservation, request.plan));
    }
  };

  readonly onLease = (event: LeaseEvent, reservation: Reservation): void => {
    if (event === 'extended') return;
    let tally = this.heldLeases.get(reservation);
    if (tally !== undefined) this.heldLeases.delete(reservation);
    else if (event === 'expired' && this.sweptLeases.has(reservation)) return;
    // A lease reserved before this object counted decisions: its plan is not known.
    else tally = this.leaseTallyFor(reservation, undefined);
    tally[event]++;
  };

  memory(store: MemoryStoreWithStats, options: StoreMetricsOptions = {}): Store {
    checkStore(store, 'memory', true);
    const time = checkTime(options, 'memory');
    if (this.memoryStores.length === 0) this.observeMemoryStores();
    // Wrapped twice, a store is still counted once.
    if (!this.memoryStores.includes(store)) this.memoryStores.push(store);
    return time ? new TimedStore(store, this.duration, 'memory') : store;
  }

  redis(store: RedisStoreWithStats, options: StoreMetricsOptions = {}): Store {
    checkStore(store, 'redis', true);
    const time = checkTime(options, 'redis');
    if (this.redisStores.length === 0) this.observeRedisStores();
    if (!this.redisStores.includes(store)) this.redisStores.push(store);
    return time ? new TimedStore(store, this.duration, 'redis') : store;
  }

  store(store: Store, name: string): Store {
    checkStore(store, 'store', false);
    if (typeof name !== 'string' || !/^[a-z][a-z0-9_.-]{0,63}$/.test(name)) {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: a store's name must be a short lowercase word such as 'dynamodb', got ${describeValue(name)}`,
      );
    }
    return new TimedStore(store, this.duration, name);
  }

  /** The tally of a decision's attribute set, made (with its attributes, built once) on first use. */
  private tallyFor(decision: Decision, plan: string | undefined): Tally {
    const mode = MODES.indexOf(decision.mode);
    const source = SOURCES.indexOf(decision.source);
    if (mode < 0 || source < 0) return this.overflow;
    const planIndex = plan === undefined ? 0 : (this.plans.get(plan) ?? 1);
    const limit = refusingLimit(decision);
    const limitIndex = limit === undefined ? 0 : this.limitIndex(limit.name);
    const rule = decision.rule ?? '';
    let tallies = this.tallies.get(rule);
    if (tallies === undefined) {
      if (this.tallies.size >= MAX_RULES) return this.overflow;
      tallies = new Map();
      this.tallies.set(rule, tallies);
    }
    const index =
      (((mode * 2 + (decision.limited ? 1 : 0)) * SOURCES.length + source) * (MAX_PLANS + 2) + planIndex) *
        (MAX_LIMIT_NAMES + 2) +
      limitIndex;
    let tally = tallies.get(index);
    if (tally === undefined) {
      const planName = planIndex === 0 ? undefined : planIndex === 1 ? OTHER : plan;
      const limitName = limitIndex === 0 ? undefined : limitIndex === 1 ? OTHER : limit?.name;
      tally = { attributes: decisionAttributes(decision, planName, limitName), count: 0 };
      tallies.set(index, tally);
    }
    return tally;
  }

  /** Records the share of the decision's i-th limit, a quota, left after it (or held, on a refusal). */
  private recordQuota(decision: Decision, i: number, plan: string | undefined): void {
    const limit = decision.limits[i] as Limit;
    const tokens = Math.floor(unitsAfter(decision.outcomes[i] as Outcome) / limit.unitsPerToken);
    const share = Math.min(1, Math.max(0, tokens / limit.capacity));
    const planIndex = plan === undefined ? 0 : (this.plans.get(plan) ?? 1);
    const limitIndex = this.limitIndex(limit.name);
    const rule = decision.rule ?? '';
    const key = `${planIndex} ${limitIndex} ${rule}`;
    let attributes = this.quotaAttributes.get(key);
    if (attributes === undefined) {
      if (this.quotaAttributes.size >= MAX_RULES) {
        attributes = OVERFLOW;
      } else {
        const made: Attributes = {};
        if (decision.rule !== null) made['ratecard.rule'] = decision.rule;
        if (planIndex !== 0) made['ratecard.plan'] = planIndex === 1 ? OTHER : (plan as string);
        made['ratecard.limit'] = limitIndex === 1 ? OTHER : limit.name;
        attributes = Object.freeze(made);
        this.quotaAttributes.set(key, attributes);
      }
    }
    this.quotaRemaining.record(share, attributes);
  }

  /**
   * The lease tally of a reservation: by its rule, the request's plan and the name of the first concurrency limit it
   * holds (none for a lease of token buckets only), each bounded as for decisions.
   */
  private leaseTallyFor(reservation: Reservation, plan: string | undefined): LeaseTally {
    const planIndex = plan === undefined ? 0 : (this.plans.get(plan) ?? 1);
    const limit = reservation.limits.find((each) => each.kind === 'concurrency');
    const limitIndex = limit === undefined ? 0 : this.limitIndex(limit.name);
    const rule = reservation.rule ?? '';
    const key = `${planIndex} ${limitIndex} ${rule}`;
    let tally = this.leaseTallies.get(key);
    if (tally === undefined) {
      if (this.leaseTallies.size >= MAX_RULES) return this.leaseOverflow;
      const attributes: Attributes = {};
      if (reservation.rule !== null) attributes['ratecard.rule'] = reservation.rule;
      if (planIndex !== 0) attributes['ratecard.plan'] = planIndex === 1 ? OTHER : (plan as string);
      if (limitIndex !== 0) attributes['ratecard.limit'] = limitIndex === 1 ? OTHER : (limit as Limit).name;
      tally = leaseTally(attributes);
      this.leaseTallies.set(key, tally);
    }
    return tally;
  }

  /**
   * Counts the leases held now, and counts as expired those past their expiry that nothing settled: the store frees
   * them then without a word to this process (a handler that forgot to settle; the slot was not lost, the charge kept).
   * Their map is swept at each collection, and as it grows, so that it stays bounded without a reader too.
   */
  private sweepLeases(): void {
    const now = Date.now();
    for (const tally of this.leaseTallies.values()) tally.held = 0;
    this.leaseOverflow.held = 0;
    for (const [reservation, tally] of this.heldLeases) {
      if (!reservation.held) {
        this.heldLeases.delete(reservation);
      } else if (reservation.expiresAt <= now) {
        this.heldLeases.delete(reservation);
        this.sweptLeases.add(reservation);
        tally.expired++;
      } else {
        tally.held++;
      }
    }
    this.sweepAt = Math.max(LEASE_SWEEP_SIZE, 2 * this.heldLeases.size);
  }

  private limitIndex(name: string): number {
    let index = this.limitNames.get(name);
    if (index === undefined) {
      if (this.limitNames.size >= MAX_LIMIT_NAMES) return 1;
      index = this.limitNames.size + 2;
      this.limitNames.set(name, index);
    }
    return index;
  }

  private readonly observeDecisions = (result: ObservableResult): void => {
    for (const tallies of this.tallies.values()) {
      for (const tally of tallies.values()) result.observe(tally.count, tally.attributes);
    }
    if (this.overflow.count > 0) result.observe(this.overflow.count, this.overflow.attributes);
  };

  private observeMemoryStores(): void {
    const meter = this.meter;
    const held = meter.createObservableUpDownCounter('ratecard.memory.buckets.held', {
      description: 'Buckets the memory stores hold now.',
      unit: '{bucket}',
    });
    const dropped = meter.createObservableCounter('ratecard.memory.buckets.dropped', {
      description: 'Full buckets the memory stores dropped (lossless: a full bucket is a missing one).',
      unit: '{bucket}',
    });
    const evicted = meter.createObservableCounter('ratecard.memory.buckets.evicted', {
      description:
        'Buckets not yet full that the memory stores evicted at maxBuckets (each one a lost partial bucket).',
      unit: '{bucket}',
    });
    meter.addBatchObservableCallback(
      (result: BatchObservableResult) => {
        let buckets = 0;
        let drops = 0;
        let evictions = 0;
        for (const store of this.memoryStores) {
          const stats = store.stats();
          buckets += stats.buckets;
          drops += stats.dropped;
          evictions += stats.evicted;
        }
        result.observe(held, buckets);
        result.observe(dropped, drops);
        result.observe(evicted, evictions);
      },
      [held, dropped, evicted],
    );
  }

  private observeRedisStores(): void {
    const meter = this.meter;
    const counter = (name: string, description: string, unit = '{call}'): Observable =>
      meter.createObservableCounter(name, { description, unit });
    const gauge = (name: string, description: string, unit: string): Observable =>
      meter.createObservableUpDownCounter(name, { description, unit });
    const sent = counter('ratecard.redis.calls.sent', 'Consume calls sent to Redis.');
    const expired = counter(
      'ratecard.redis.calls.expired',
      "Consume calls past the limiter's deadline that charged nothing (its policy had answered them): dropped unsent, or refused by the script they reached late.",
    );
    const late = counter(
      'ratecard.redis.calls.late',
      "Of the expired calls: those that reached Redis past the limiter's deadline (held in a paused or hung server, or sent again by the client after it reconnected), refused by the script.",
    );
    const unavailable = counter(
      'ratecard.redis.calls.unavailable',
      'Calls refused at once: the Redis client had lost its connection (or was closed), or Redis kept a call past its budget.',
    );
    const rerouted = counter(
      'ratecard.redis.calls.rerouted',
      "Cluster consume calls sent again one by one, by key, because the master they were grouped for no longer served their slot (a migration or failover the client's slot map had not caught up with); the first try ran nothing.",
    );
    const queued = gauge('ratecard.redis.calls.queued', 'Consume calls waiting to be sent now.', '{call}');
    const scriptCalls = counter('ratecard.redis.script.calls', 'Consume script calls made (each carries a batch).');
    // A gauge though it only grows: a high-water mark, not a count of events, so neither its rate nor a sum over
    // stores means anything; several stores report their largest.
    const largestBatch = meter.createObservableGauge('ratecard.redis.script.largest_batch', {
      description:
        'The most consume calls one script call has carried since the store was made (the largest of the stores).',
      unit: '{call}',
    });
    const reloads = counter(
      'ratecard.redis.script.reloads',
      'Times a Redis node lacked the script (NOSCRIPT) and got it whole with EVAL.',
      '{reload}',
    );
    const hits = counter('ratecard.redis.deny_cache.hits', 'Consume calls the deny cache answered without Redis.');
    const remembered = gauge(
      'ratecard.redis.deny_cache.buckets',
      'Empty buckets the deny cache remembers now.',
      '{bucket}',
    );
    meter.addBatchObservableCallback(
      (result: BatchObservableResult) => {
        const total = {
          sent: 0,
          expired: 0,
          late: 0,
          rerouted: 0,
          unavailable: 0,
          queued: 0,
          batches: 0,
          largestBatch: 0,
          reloads: 0,
          hits: 0,
          size: 0,
        };
        for (const store of this.redisStores) {
          const stats = store.stats();
          total.sent += stats.sent;
          total.expired += stats.expired;
          total.late += stats.late;
          total.rerouted += stats.rerouted;
          total.unavailable += stats.unavailable;
          total.queued += stats.queued;
          total.batches += stats.batches;
          total.largestBatch = Math.max(total.largestBatch, stats.largestBatch);
          total.reloads += stats.scriptReloads;
          total.hits += stats.denyCacheHits;
          total.size += stats.denyCacheSize;
        }
        result.observe(sent, total.sent);
        result.observe(expired, total.expired);
        result.observe(late, total.late);
        result.observe(rerouted, total.rerouted);
        result.observe(unavailable, total.unavailable);
        result.observe(queued, total.queued);
        result.observe(scriptCalls, total.batches);
        result.observe(largestBatch, total.largestBatch);
        result.observe(reloads, total.reloads);
        result.observe(hits, total.hits);
        result.observe(remembered, total.size);
      },
      [sent, expired, late, rerouted, unavailable, queued, scriptCalls, largestBatch, reloads, hits, remembered],
    );
  }
}

/**
 * OpenTelemetry metrics for ratecard, recorded through `@opentelemetry/api` only (your SDK and exporter do the rest):
 *
 * ```ts
 * const metrics = limiterMetrics({ meterProvider });
 * const limiter = createLimiter({
 *   store: metrics.redis(redisStore({ client })),
 *   fallback: metrics.memory(memoryStore()),
 *   onDecision: metrics.onDecision,
 * });
 * ```
 */
export function limiterMetrics(options: LimiterMetricsOptions = {}): LimiterMetrics {
  if (typeof options !== 'object' || options === null) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: limiterMetrics takes an options object, got ${describeValue(options)}`,
    );
  }
  checkOptionKeys(options, LIMITER_METRICS_OPTIONS, 'limiterMetrics');
  return new OtelLimiterMetrics(options);
}
