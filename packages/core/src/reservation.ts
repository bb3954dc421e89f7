import type { Outcome } from './bucket.js';
import type { Decision, DecisionSource } from './decision.js';
import type { EndpointMode } from './endpoints.js';
import { describeValue, RateLimitError } from './errors.js';
import type { Limit } from './limits.js';
import { type LeaseChange, MAX_LEASE_MS, type Store } from './store.js';

/** How long a lease is held when the request does not say (`leaseMs`): a minute, longer than most HTTP requests. */
export const DEFAULT_LEASE_MS = 60_000;

/** What became of a held lease, for `onLease`: 'expired' when the store no longer held it when asked. */
export type LeaseEvent = 'settled' | 'cancelled' | 'extended' | 'expired';

/** Where a held lease lives: the store that admitted it, the key, the buckets as the store was given them. */
export interface Held {
  readonly store: Store;
  readonly organization: string;
  readonly endpoint: string;
  readonly buckets: readonly Limit[];
  readonly id: string;
}

/** The limiter, as a reservation asks it to change its lease (one store call, raced against the budget). */
export interface LeaseKeeper {
  changeLease(held: Held, change: LeaseChange, event: LeaseEvent, reservation: Reservation): boolean | Promise<boolean>;
}

/**
 * A request's cost per limit (LimitRequest.cost): undefined is 1 of every limit (one slot of a concurrency limit); a
 * number is that many of every token bucket, and one slot of a concurrency limit, so with one among the limits it
 * comes back as one number per limit; an object keyed by limit name gives one number per limit, 1 where unnamed.
 * Each must be a whole number from 1 to its limit's capacity.
 */
export function checkCost(cost: unknown, limits: readonly Limit[]): number | number[] {
  if (cost === undefined) return 1;
  if (typeof cost !== 'number') return costByName(cost, limits);
  if (!Number.isSafeInteger(cost) || cost < 1) throw badCost(cost);
  let slots = false;
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i] as Limit;
    if (limit.kind === 'concurrency') slots = true;
    else if (cost > limit.capacity) throw costOverLimit(cost, limit);
  }
  return slots && cost !== 1 ? limits.map((limit) => (limit.kind === 'concurrency' ? 1 : cost)) : cost;
}

function costByName(cost: unknown, limits: readonly Limit[]): number[] {
  if (typeof cost !== 'object' || cost === null || Array.isArray(cost)) throw badCost(cost);
  const costs = limits.map(() => 1);
  for (const name of Object.keys(cost)) {
    const i = limits.findIndex((limit) => limit.name === name);
    if (i === -1) throw notALimitName(name, limits, 'cost');
    const n = (cost as Record<string, unknown>)[name];
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) throw badCost(n, name);
    const limit = limits[i] as Limit;
    if (n > limit.capacity) throw costOverLimit(n, limit);
    costs[i] = n;
  }
  return costs;
}

/** `limiter.consume` of a request holding a concurrency limit: nothing would free its slot. */
export function consumeHoldsNoLease(limits: readonly Limit[]): void {
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i] as Limit;
    if (limit.kind === 'concurrency') throw consumeOfSlots(limit);
  }
}

function consumeOfSlots(limit: Limit): RateLimitError {
  return new RateLimitError(
    'invalid_argument',
    `ratecard: the request carries the concurrency limit ${limit.name}, which consume cannot take: nothing would free its slot. Use limiter.reserve(request) and settle the reservation when the request is done`,
  );
}

/** A lease's duration in ms: a whole number from 1 to MAX_LEASE_MS. */
export function checkLeaseMs(ms: unknown, what: string): number {
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 1 || ms > MAX_LEASE_MS) {
    throw new RateLimitError(
      'invalid_argument',
      `ratecard: ${what} must be a whole number of milliseconds from 1 to ${MAX_LEASE_MS}, got ${describeValue(ms)}`,
    );
  }
  return ms;
}

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** This process's part of every lease id: 16 random characters (96 bits), drawn once. */
let processPart: string | undefined;
/** Leases this process has made: the rest of each id. */
let leasesMade = 0;

/**
 * A lease id no other lease of a key has: this process's random part and a count, `<16 random>-<count in base 36>`.
 * Drawing random bytes per lease took 38% of a reserve and its settle on the memory store (a CPU profile); a count
 * needs none, and the random part keeps processes sharing a store apart.
 */
export function newLeaseId(): string {
  if (processPart === undefined) {
    const bytes = new Uint8Array(16);
    globalThis.crypto.getRandomValues(bytes);
    processPart = '';
    for (const byte of bytes) processPart += ID_ALPHABET[byte & 63];
  }
  return `${processPart}-${(leasesMade++).toString(36)}`;
}

/**
 * The actual cost of a settle per limit: `actual` as a request's cost (a number for every token bucket, an object by
 * name), where it is silent what was reserved; 0 is allowed (nothing used). A concurrency limit's is what it holds,
 * which the store frees whatever the number. Past twice its capacity a cost only meets the debt floor, so it is sent
 * as that: the arithmetic stays far below 2^53.
 */
function settledCosts(
  actual: unknown,
  reserved: number | readonly number[],
  limits: readonly Limit[],
): number | readonly number[] {
  if (actual === undefined) return reserved;
  const costs = limits.map((_, i) => (typeof reserved === 'number' ? reserved : (reserved[i] as number)));
  const check = (n: unknown, name?: string): number => {
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw badActual(n, name);
    return n;
  };
  if (typeof actual === 'number') {
    const n = check(actual);
    limits.forEach((limit, i) => {
      if (limit.kind !== 'concurrency') costs[i] = n;
    });
  } else if (typeof actual === 'object' && actual !== null && !Array.isArray(actual)) {
    for (const name of Object.keys(actual)) {
      const i = limits.findIndex((limit) => limit.name === name);
      if (i === -1) throw notALimitName(name, limits, 'settle');
      costs[i] = check((actual as Record<string, unknown>)[name], name);
    }
  } else {
    throw badActual(actual);
  }
  return costs.map((n, i) => Math.min(n, 2 * (limits[i] as Limit).capacity));
}

/**
 * A decision of `limiter.reserve`, with its lease. Admitted (`allowed` and not `limited`), it holds `cost` of every
 * token bucket and a slot of every concurrency limit until `settle`, `cancel`, or `expiresAt`; refused, or answered
 * without a store (the failure policy 'allow'), it holds nothing and its methods answer false.
 */
export class Reservation implements Decision {
  readonly mode: EndpointMode | 'unlimited';
  readonly allowed: boolean;
  readonly limited: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly retryAfter: number;
  readonly resetAfter: number;
  readonly limits: readonly Limit[];
  readonly outcomes: readonly Outcome[];
  readonly cost: number | readonly number[];
  readonly source: DecisionSource;
  readonly rule: string | null;
  /**
   * When the lease expires unless settled or extended first, in epoch ms on this process's clock (the store's may
   * stand apart); 0 when nothing is held.
   */
  expiresAt: number;
  readonly #held: Held | undefined;
  readonly #keeper: LeaseKeeper;
  #state: 'held' | 'ending' | 'ended';

  constructor(decision: Decision, held: Held | undefined, ms: number, keeper: LeaseKeeper) {
    this.mode = decision.mode;
    this.allowed = decision.allowed;
    this.limited = decision.limited;
    this.limit = decision.limit;
    this.remaining = decision.remaining;
    this.retryAfter = decision.retryAfter;
    this.resetAfter = decision.resetAfter;
    this.limits = decision.limits;
    this.outcomes = decision.outcomes;
    this.cost = decision.cost;
    this.source = decision.source;
    this.rule = decision.rule;
    this.#held = held;
    this.#keeper = keeper;
    this.#state = held === undefined ? 'ended' : 'held';
    this.expiresAt = held === undefined ? 0 : Date.now() + ms;
  }

  /** True while the lease is held as far as this process knows: admitted, not yet settled, cancelled or found expired. */
  get held(): boolean {
    return this.#state !== 'ended';
  }

  /**
   * Ends the lease, charging `actual` in place of the reserved cost: a number for every token bucket or an object by
   * limit name (unnamed limits keep what was reserved); default what was reserved. What was reserved and not used goes
   * back (never above capacity); what was used beyond it is taken even below empty, down to minus the capacity. The
   * slots are freed. True when the store held the lease; false, changing nothing, when it did not (settled, cancelled
   * or expired before, or never held). Rejects with the store's error when the store fails: the lease then expires
   * at its time, keeping the reserved charge.
   */
  settle(actual?: number | Readonly<Record<string, number>>): Promise<boolean> {
    let costs: number | readonly number[];
    try {
      costs = settledCosts(actual, this.cost, this.limits);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.end(costs, 'settled');
  }

  /** Ends the lease giving back every token reserved and freeing the slots, as if the request had not been admitted. */
  cancel(): Promise<boolean> {
    return this.end(0, 'cancelled');
  }

  /**
   * Holds the lease `ms` from now (1 to MAX_LEASE_MS) instead of until `expiresAt`: a long job (a browser session)
   * calls it before the lease runs out. True when the store held the lease; false when it had ended.
   */
  async extend(ms: number): Promise<boolean> {
    checkLeaseMs(ms, 'extend(ms)');
    const held = this.#held;
    if (held === undefined || this.#state !== 'held') return false;
    const kept = await this.#keeper.changeLease(held, { id: held.id, holdMs: ms }, 'extended', this);
    if (kept) this.expiresAt = Date.now() + ms;
    else this.#state = 'ended';
    return kept;
  }

  private end(actual: number | readonly number[], event: LeaseEvent): Promise<boolean> {
    const held = this.#held;
    if (held === undefined || this.#state !== 'held') return Promise.resolve(false);
    this.#state = 'ending';
    let answer: boolean | Promise<boolean>;
    try {
      answer = this.#keeper.changeLease(held, { id: held.id, actual }, event, this);
    } catch (error) {
      // Not known to have ended: a later settle may try again.
      this.#state = 'held';
      return Promise.reject(error);
    }
    if (typeof answer === 'boolean') {
      this.#state = 'ended';
      return Promise.resolve(answer);
    }
    return answer.then(
      (ended) => {
        this.#state = 'ended';
        return ended;
      },
      (error: unknown) => {
        this.#state = 'held';
        throw error;
      },
    );
  }
}

function badCost(cost: unknown, name?: string): RateLimitError {
  return new RateLimitError(
    'invalid_argument',
    name === undefined
      ? `ratecard: cost must be a positive integer or an object of positive integers by limit name, got ${describeValue(cost)}`
      : `ratecard: the cost of limit ${name} must be a positive integer, got ${describeValue(cost)}`,
  );
}

function badActual(actual: unknown, name?: string): RateLimitError {
  return new RateLimitError(
    'invalid_argument',
    `ratecard: settle takes a whole number of tokens from 0 up, or an object of them by limit name${name === undefined ? '' : ` (limit ${name})`}, got ${describeValue(actual)}`,
  );
}

function costOverLimit(cost: number, limit: Limit): RateLimitError {
  return new RateLimitError(
    'cost_exceeds_limit',
    `ratecard: cost ${cost} exceeds the capacity ${limit.capacity} of limit ${limit.name}, so it could never be admitted`,
  );
}

function notALimitName(name: string, limits: readonly Limit[], what: string): RateLimitError {
  return new RateLimitError(
    'invalid_argument',
    `ratecard: ${what} names ${JSON.stringify(name)}, which is not one of the request's limits: ${limits.map((limit) => limit.name).join(', ')}`,
  );
}
