import type { Outcome } from './bucket.js';

/** One bucket charge, as the batch form takes it. */
export interface BucketCall {
  /** The organization that owns the bucket. */
  organization: string;
  /** The endpoint rule the bucket belongs to (a rule key such as `'POST /browsers'`). */
  endpoint: string;
  /** Capacity of the bucket in tokens (= requests per minute); the refill is limit/60 tokens per second. */
  limit: number;
  /** Tokens to take; a positive integer no larger than `limit`. */
  cost: number;
}

/** What a store can do, declared by the store rather than sniffed by the limiter. */
export interface StoreCapabilities {
  /** Buckets are shared between processes (Redis), not private to this one (memory). */
  readonly shared: boolean;
  /** `consume`, `peek` and `reset` return plain values, never promises, so `consumeSync` can be offered. */
  readonly synchronous: boolean;
}

/**
 * Takes the outcome of one asynchronous consume. The limiter's pending calls are receivers, so a store that offers
 * `consumeTo` settles a call without a promise of its own: per call, one promise (the caller's) instead of three,
 * and one promise job instead of three.
 */
export interface OutcomeReceiver {
  /** The store's answer. */
  settle(outcome: Outcome): void;
  /** The store could not answer this call (Redis down, a reply it could not read, its deadline passed unsent). */
  fail(error: unknown): void;
}

/**
 * Where buckets live. A store keeps per bucket what docs/algorithm.md describes and moves it with core's bucket
 * arithmetic (or an exact mirror of it); each bucket is updated atomically. Capacity and refill come with every call,
 * so a per-organization plan needs no store setup, and a missing bucket is a full one. Arguments arrive validated by
 * the limiter. A store returns an `Outcome` (see bucket.ts). Run `storeContractSuite` from `@ratecard/core/testing`
 * against any new store.
 */
export interface Store {
  /** Declared abilities of this store. */
  readonly capabilities: StoreCapabilities;
  /**
   * Takes `cost` tokens from the bucket if it holds them, atomically; the outcome says which happened. `deadline`, a
   * `performance.now()` instant, is when the caller stops waiting: a store that queues calls may reject one still
   * unsent by then rather than charge a bucket for an answer nobody will read.
   */
  consume(
    organization: string,
    endpoint: string,
    limit: number,
    cost: number,
    deadline?: number,
  ): Outcome | Promise<Outcome>;
  /**
   * Optional: `consume`, answering through `receiver` (at once or later) instead of a return value. Exactly one of
   * the receiver's methods is called, once; this method itself never throws. The limiter uses it when present.
   */
  consumeTo?(
    organization: string,
    endpoint: string,
    limit: number,
    cost: number,
    deadline: number,
    receiver: OutcomeReceiver,
  ): void;
  /** The outcome `consume` would give now, charging nothing and writing nothing. */
  peek(organization: string, endpoint: string, limit: number, cost: number): Outcome | Promise<Outcome>;
  /** Several charges in one go, outcomes in the same order; each bucket atomic, the batch not all-or-nothing. */
  consumeBatch(calls: readonly BucketCall[]): Outcome[] | Promise<Outcome[]>;
  /** Makes the bucket full again (forgets it). */
  reset(organization: string, endpoint: string): void | Promise<void>;
  /** Releases what the store holds (timers, caches); the store's own client connections are the caller's. */
  close(): void | Promise<void>;
  /** A store for the limiter to ask while this one is unreachable; shared stores offer a per-process one. */
  createFallback?(): Store;
}
