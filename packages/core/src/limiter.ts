import { type Outcome, remainingTokens, resetAfterSeconds, retryAfterSeconds, UNITS_PER_TOKEN } from './bucket.js';
import { DeadlineQueue, type PendingCall } from './deadlines.js';
import { DEFAULT_ENDPOINTS, type EndpointMode, type EndpointRule, EndpointRules } from './endpoints.js';
import { describeValue, RateLimitError } from './errors.js';
import { limitFor, type Plan } from './plans.js';
import type { OutcomeReceiver, Store } from './store.js';

/** Who answered a decision. */
export type DecisionSource =
  /** the configured store */
  | 'store'
  /** the fallback store, because the store failed or was over budget */
  | 'fallback'
  /** nobody: the store failed and the policy is 'allow' */
  | 'fail-open'
  /** nobody: the store failed and the policy is 'deny' */
  | 'fail-closed'
  /** nobody needed to: the endpoint has no rule */
  | 'none';

export interface Decision {
  /** 'unlimited': the endpoint has no rule and no bucket was touched. */
  mode: EndpointMode | 'unlimited';
  /** False only when mode is 'enforce' and the request is limited. */
  allowed: boolean;
  /** The bucket lacked `cost` tokens (reported in shadow mode too). */
  limited: boolean;
  /** Bucket capacity = the limit in requests per minute (Infinity when unlimited). */
  limit: number;
  /** Whole tokens left after this request; 0 when limited (Infinity when unlimited). */
  remaining: number;
  /** Whole seconds: 0 when not limited, else ceil(seconds until `cost` tokens are there), at least 1. */
  retryAfter: number;
  /** Whole seconds until the bucket is full again. */
  resetAfter: number;
  /** Who answered. */
  source: DecisionSource;
  /** The endpoint rule key that applied, or null when none did. */
  rule: string | null;
}

export interface LimitRequest {
  organization: string;
  /** A rule key (`'POST /browsers'`) or a concrete `'<METHOD> <path>'` matched against the rules. */
  endpoint: string;
  plan: Plan;
  trial?: boolean | null;
  override?: number | null;
  /** Tokens this request takes; default 1. */
  cost?: number;
}

export interface BucketRef {
  organization: string;
  endpoint: string;
}

export type StoreErrorPolicy = 'fallback' | 'deny' | 'allow' | 'throw';

export interface LimiterOptions {
  store: Store;
  /** Replaces DEFAULT_ENDPOINTS when given; spread DEFAULT_ENDPOINTS to extend them. */
  endpoints?: Readonly<Record<string, EndpointMode>>;
  /** Called after every decision, for metrics and logs; an exception in it never breaks consume. */
  onDecision?: (decision: Decision, request: LimitRequest) => void;
  /** What a decision does when the store fails or runs over budget; default 'fallback'. */
  onStoreError?: StoreErrorPolicy;
  /** The store asked under 'fallback'; default the store's own `createFallback()` (Redis: a memory store). */
  fallback?: Store;
  /** Longest a decision waits for the store, in ms; default 100. */
  storeTimeoutMs?: number;
}

export interface Limiter {
  /** Takes `cost` tokens (default 1) from the request's bucket and says whether the request may go on. */
  consume(request: LimitRequest): Promise<Decision>;
  /** The decision consume would give, charging nothing. */
  peek(request: LimitRequest): Promise<Decision>;
  /** `consume` without a promise; only for a synchronous store (memory), else it throws `invalid_option`. */
  consumeSync(request: LimitRequest): Decision;
  /** True when the store is synchronous, so `consumeSync` is available (middleware then decides without a promise). */
  readonly synchronous: boolean;
  /** Makes the bucket full again. */
  reset(bucket: BucketRef): Promise<void>;
  /** The rule for a method and path, or undefined when the endpoint is unlimited. */
  ruleFor(method: string, path: string): EndpointRule | undefined;
  /** The rules this limiter applies. */
  readonly rules: readonly EndpointRule[];
  /** Stops the limiter: pending calls settle by the failure policy, later calls reject with `store_closed`. */
  close(): Promise<void>;
}

const MAX_NAME_LENGTH = 256;

const UNLIMITED: Decision = Object.freeze({
  mode: 'unlimited',
  allowed: true,
  limited: false,
  limit: Number.POSITIVE_INFINITY,
  remaining: Number.POSITIVE_INFINITY,
  retryAfter: 0,
  resetAfter: 0,
  source: 'none',
  rule: null,
}) as Decision;

/** Length in characters (code points), counted only when the cheap UTF-16 length could be over the bound. */
function tooLong(value: string): boolean {
  if (value.length <= MAX_NAME_LENGTH) return false;
  let count = 0;
  for (const _ of value) if (++count > MAX_NAME_LENGTH) return true;
  return false;
}

function checkName(value: unknown, field: 'organization' | 'endpoint'): void {
  if (typeof value !== 'string' || value.length === 0 || tooLong(value)) {
    throw new RateLimitError(
      'invalid_argument',
      `ratecard: ${field} must be a non-empty string of at most ${MAX_NAME_LENGTH} characters, got ${describeValue(value)}`,
    );
  }
}

function checkCost(cost: unknown, limit: number): number {
  if (cost === undefined) return 1;
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) {
    throw new RateLimitError(
      'invalid_argument',
      `ratecard: cost must be a positive integer, got ${describeValue(cost)}`,
    );
  }
  if (cost > limit) {
    throw new RateLimitError(
      'cost_exceeds_limit',
      `ratecard: cost ${cost} exceeds the limit of ${limit} requests per minute, so it could never be admitted`,
    );
  }
  return cost;
}

function decide(outcome: Outcome, rule: EndpointRule, limit: number, cost: number, source: DecisionSource): Decision {
  const limited = outcome < 0;
  return {
    mode: rule.mode,
    allowed: !limited || rule.mode === 'shadow',
    limited,
    limit,
    remaining: remainingTokens(outcome),
    retryAfter: retryAfterSeconds(outcome, limit, cost),
    resetAfter: resetAfterSeconds(outcome, limit),
    source,
    rule: rule.key,
  };
}

/** The decision when the store failed and the policy answers without it. */
function decideWithoutStore(policy: 'allow' | 'deny', rule: EndpointRule, limit: number, cost: number): Decision {
  if (policy === 'allow') {
    return decide((limit - cost) * UNITS_PER_TOKEN, rule, limit, cost, 'fail-open');
  }
  // Denying as if the bucket were empty: retry in the time one request's tokens take to refill.
  return decide(-1, rule, limit, cost, 'fail-closed');
}

const POLICIES: readonly StoreErrorPolicy[] = ['fallback', 'deny', 'allow', 'throw'];

type Operation = 'consume' | 'peek';

class TokenBucketLimiter implements Limiter {
  private readonly store: Store;
  private readonly endpointRules: EndpointRules;
  private readonly onDecision: LimiterOptions['onDecision'];
  private readonly policy: StoreErrorPolicy;
  private readonly fallback: Store | undefined;
  private readonly deadlines: DeadlineQueue;
  private readonly budgetMs: number;
  private closed = false;
  private warnedAboutHook = false;

  constructor(options: LimiterOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: createLimiter needs an options object, got ${describeValue(options)}`,
      );
    }
    const { store } = options;
    if (
      typeof store !== 'object' ||
      store === null ||
      typeof store.consume !== 'function' ||
      typeof store.peek !== 'function' ||
      typeof store.reset !== 'function' ||
      typeof store.capabilities !== 'object'
    ) {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: store must be a Store (see docs/stores.md), got ${describeValue(store)}`,
      );
    }
    this.store = store;
    this.endpointRules = new EndpointRules(options.endpoints ?? DEFAULT_ENDPOINTS);
    if (options.onDecision !== undefined && typeof options.onDecision !== 'function') {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: onDecision must be a function, got ${describeValue(options.onDecision)}`,
      );
    }
    this.onDecision = options.onDecision;
    const policy = options.onStoreError ?? 'fallback';
    if (!POLICIES.includes(policy)) {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: onStoreError must be one of ${POLICIES.join(', ')}, got ${describeValue(policy)}`,
      );
    }
    this.policy = policy;
    this.fallback = options.fallback ?? store.createFallback?.();
    if (policy === 'fallback' && this.fallback === undefined && store.capabilities.shared) {
      throw new RateLimitError(
        'invalid_option',
        "ratecard: onStoreError 'fallback' needs a fallback store for this store: pass fallback: memoryStore()",
      );
    }
    const budget = options.storeTimeoutMs ?? 100;
    if (typeof budget !== 'number' || !Number.isFinite(budget) || budget <= 0) {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: storeTimeoutMs must be a positive number of milliseconds, got ${describeValue(budget)}`,
      );
    }
    this.budgetMs = budget;
    this.deadlines = new DeadlineQueue(budget);
  }

  get synchronous(): boolean {
    return this.store.capabilities.synchronous;
  }

  get rules(): readonly EndpointRule[] {
    return this.endpointRules.rules;
  }

  ruleFor(method: string, path: string): EndpointRule | undefined {
    return this.endpointRules.forRequest(method, path);
  }

  consume(request: LimitRequest): Promise<Decision> {
    return this.run(request, 'consume');
  }

  peek(request: LimitRequest): Promise<Decision> {
    return this.run(request, 'peek');
  }

  consumeSync(request: LimitRequest): Decision {
    if (!this.store.capabilities.synchronous) {
      throw new RateLimitError(
        'invalid_option',
        'ratecard: consumeSync needs a synchronous store (memory); use consume',
      );
    }
    this.checkOpen();
    const rule = this.ruleOf(request);
    // Validated even for an unlimited endpoint, so that a caller's bug shows wherever it is.
    const limit = limitFor(request);
    const cost = checkCost(request.cost, limit);
    if (rule === undefined) return this.report(UNLIMITED, request);
    const outcome = this.store.consume(request.organization, rule.key, limit, cost) as Outcome;
    return this.report(decide(outcome, rule, limit, cost, 'store'), request);
  }

  async reset(bucket: BucketRef): Promise<void> {
    this.checkOpen();
    checkName(bucket?.organization, 'organization');
    checkName(bucket?.endpoint, 'endpoint');
    const key = this.endpointRules.forEndpoint(bucket.endpoint)?.key ?? bucket.endpoint;
    if (this.fallback !== undefined) await this.fallback.reset(bucket.organization, key);
    try {
      await this.withinBudget(this.store.reset(bucket.organization, key));
    } catch (error) {
      throw this.asStoreError(error);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.deadlines.expireAll();
    await this.store.close();
    if (this.fallback !== undefined) await this.fallback.close();
  }

  private checkOpen(): void {
    if (this.closed) throw new RateLimitError('store_closed', 'ratecard: the limiter is closed');
  }

  private ruleOf(request: LimitRequest): EndpointRule | undefined {
    if (typeof request !== 'object' || request === null) {
      throw new RateLimitError(
        'invalid_argument',
        `ratecard: a request object is needed, got ${describeValue(request)}`,
      );
    }
    checkName(request.organization, 'organization');
    checkName(request.endpoint, 'endpoint');
    return this.endpointRules.forEndpoint(request.endpoint);
  }

  private run(request: LimitRequest, operation: Operation): Promise<Decision> {
    let rule: EndpointRule | undefined;
    let limit: number;
    let cost: number;
    try {
      this.checkOpen();
      rule = this.ruleOf(request);
      // Validated even for an unlimited endpoint, so that a caller's bug shows wherever it is.
      limit = limitFor(request);
      cost = checkCost(request.cost, limit);
      if (rule === undefined) return Promise.resolve(this.report(UNLIMITED, request));
    } catch (error) {
      return Promise.reject(error);
    }
    let answer: Outcome | Promise<Outcome>;
    // Taken before the call so the store can drop it, unsent, once the limiter has answered it by policy.
    const deadline = this.store.capabilities.synchronous ? undefined : this.deadlines.deadlineFromNow();
    if (deadline !== undefined && operation === 'consume' && this.store.consumeTo !== undefined) {
      return this.consumeThrough(request, rule, limit, cost, deadline);
    }
    try {
      answer =
        operation === 'consume'
          ? this.store.consume(request.organization, rule.key, limit, cost, deadline)
          : this.store.peek(request.organization, rule.key, limit, cost);
    } catch (error) {
      return this.onStoreFailure(this.asStoreError(error), request, rule, limit, cost, operation);
    }
    if (typeof answer === 'number') {
      return Promise.resolve(this.report(decide(answer, rule, limit, cost, 'store'), request));
    }
    return this.settle(answer, request, rule, limit, cost, operation, deadline ?? this.deadlines.deadlineFromNow());
  }

  /**
   * An asynchronous consume with one promise: the pending call is at once the store's receiver and the deadline
   * queue's entry, and whichever of the two reaches it first answers the caller. A store that answers at once (a
   * deny cache's hit) costs no promise executor and no deadline entry: its answer is returned already settled.
   */
  private consumeThrough(
    request: LimitRequest,
    rule: EndpointRule,
    limit: number,
    cost: number,
    deadline: number,
  ): Promise<Decision> {
    const call = new PendingConsume(this, request, rule, limit, cost, deadline);
    try {
      (this.store.consumeTo as NonNullable<Store['consumeTo']>)(
        request.organization,
        rule.key,
        limit,
        cost,
        deadline,
        call,
      );
    } catch (error) {
      // The contract says consumeTo never throws; a store that does still gets the failure policy.
      call.fail(error);
    }
    const early = call.early;
    if (early !== undefined) return Promise.resolve(early);
    this.deadlines.watch(call);
    return new Promise<Decision>((resolve) => {
      call.resolve = resolve;
    });
  }

  /** Waits for an asynchronous store answer within the budget, else applies the failure policy. */
  private settle(
    answer: Promise<Outcome>,
    request: LimitRequest,
    rule: EndpointRule,
    limit: number,
    cost: number,
    operation: Operation,
    deadline: number,
  ): Promise<Decision> {
    return this.withinBudget(answer, deadline).then(
      (outcome) => this.report(decide(outcome, rule, limit, cost, 'store'), request),
      (error: unknown) => this.onStoreFailure(this.asStoreError(error), request, rule, limit, cost, operation),
    );
  }

  /** The answer when the store failed or ran out of time: the policy's decision, or a rejection under 'throw'. */
  async onStoreFailure(
    error: RateLimitError,
    request: LimitRequest,
    rule: EndpointRule,
    limit: number,
    cost: number,
    operation: Operation,
  ): Promise<Decision> {
    switch (this.policy) {
      case 'throw':
        throw error;
      case 'allow':
      case 'deny':
        return this.report(decideWithoutStore(this.policy, rule, limit, cost), request);
      case 'fallback': {
        const fallback = this.fallback;
        if (fallback === undefined) throw error;
        const outcome =
          operation === 'consume'
            ? await fallback.consume(request.organization, rule.key, limit, cost)
            : await fallback.peek(request.organization, rule.key, limit, cost);
        return this.report(decide(outcome, rule, limit, cost, 'fallback'), request);
      }
    }
  }

  /** Every store failure surfaces as a RateLimitError; the original error is its cause. */
  asStoreError(error: unknown): RateLimitError {
    if (error instanceof RateLimitError && (error.code === 'store_timeout' || error.code === 'store_unavailable')) {
      return error;
    }
    const detail = error instanceof Error ? error.message : describeValue(error);
    return new RateLimitError('store_unavailable', `ratecard: the store failed: ${detail}`, { cause: error });
  }

  /**
   * The store's answer, or a `store_timeout` rejection once `deadline` passes (or the limiter closes), whichever
   * comes first. One shared timer watches every pending call (see deadlines.ts).
   */
  private withinBudget<T>(work: T | Promise<T>, deadline = this.deadlines.deadlineFromNow()): Promise<T> {
    if (!(work instanceof Promise)) return Promise.resolve(work);
    return new Promise<T>((resolve, reject) => {
      const call: PendingCall = {
        deadline,
        open: true,
        expire: () => reject(this.timeoutError()),
      };
      this.deadlines.watch(call);
      work.then(
        (value) => {
          if (!call.open) return;
          call.open = false;
          resolve(value);
        },
        (error: unknown) => {
          if (!call.open) return;
          call.open = false;
          reject(error);
        },
      );
    });
  }

  timeoutError(): RateLimitError {
    return new RateLimitError('store_timeout', `ratecard: the store did not answer within ${this.budgetMs} ms`);
  }

  /** Hands a decision to the onDecision hook, if any, and returns it. */
  report(decision: Decision, request: LimitRequest): Decision {
    const hook = this.onDecision;
    if (hook !== undefined) {
      try {
        hook(decision, request);
      } catch (error) {
        if (!this.warnedAboutHook) {
          this.warnedAboutHook = true;
          globalThis.process?.emitWarning?.(
            `ratecard: onDecision threw (${error instanceof Error ? error.message : describeValue(error)}); decisions go on, later throws are not reported`,
          );
        }
      }
    }
    return decision;
  }
}

/**
 * A consume waiting for an asynchronous store that offers consumeTo: the store's receiver and the deadline queue's
 * entry in one object, so the call costs one promise (the caller's) and no closure per outcome.
 */
class PendingConsume implements PendingCall, OutcomeReceiver {
  open = true;
  /** Settles the caller's promise, once the limiter has made it (after consumeTo returned without an answer). */
  resolve: ((decision: Decision | Promise<Decision>) => void) | undefined = undefined;
  /** An answer given before the promise existed, during consumeTo itself. */
  early: Decision | Promise<Decision> | undefined = undefined;

  constructor(
    private readonly limiter: TokenBucketLimiter,
    private readonly request: LimitRequest,
    private readonly rule: EndpointRule,
    private readonly limit: number,
    private readonly cost: number,
    readonly deadline: number,
  ) {}

  settle(outcome: Outcome): void {
    if (!this.open) return;
    this.open = false;
    const decision = decide(outcome, this.rule, this.limit, this.cost, 'store');
    this.answer(this.limiter.report(decision, this.request));
  }

  fail(error: unknown): void {
    if (!this.open) return;
    this.open = false;
    this.answerByPolicy(this.limiter.asStoreError(error));
  }

  /** Called by the deadline queue, which has already closed the call. */
  expire(): void {
    this.answerByPolicy(this.limiter.timeoutError());
  }

  private answerByPolicy(error: RateLimitError): void {
    // A promise: the fallback store may be asynchronous, and under 'throw' it rejects, which rejects the caller's.
    this.answer(this.limiter.onStoreFailure(error, this.request, this.rule, this.limit, this.cost, 'consume'));
  }

  private answer(decision: Decision | Promise<Decision>): void {
    if (this.resolve === undefined) this.early = decision;
    else this.resolve(decision);
  }
}

/** A limiter over a store: one token bucket per (organization, endpoint rule). */
export function createLimiter(options: LimiterOptions): Limiter {
  return new TokenBucketLimiter(options);
}
