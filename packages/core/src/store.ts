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
