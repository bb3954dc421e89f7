import type { Outcome } from './bucket.js';

/**
 * Where buckets live. A store keeps per bucket what docs/algorithm.md describes and moves it with core's bucket
 * arithmetic (or an exact mirror of it); each bucket is updated atomically. Capacity and refill come with every call,
 * so a per-organization plan needs no store setup, and a missing bucket is a full one. Arguments arrive validated by
 * the limiter. A method returns a value or a promise of one; a store never calls back into its caller. Run
 * `storeContractSuite` from `@ratecard/core/testing` against any new store (docs/stores.md).
 */
export interface Store {
  /** True when processes share the buckets (Redis); false when they are private to this process (memory). */
  readonly shared: boolean;
  /**
   * Takes `cost` tokens from the bucket if it holds them, atomically; the outcome (bucket.ts) says which happened.
   * `budgetMs`: how long from this call the caller waits (no longer than that); a call still unsent then is dropped, never charged.
   */
  consume(
    organization: string,
    endpoint: string,
    limit: number,
    cost: number,
    budgetMs?: number,
  ): Outcome | Promise<Outcome>;
  /** The outcome `consume` would give now, charging nothing and writing nothing. */
  peek(organization: string, endpoint: string, limit: number, cost: number): Outcome | Promise<Outcome>;
  /** Makes the bucket full again (forgets it). */
  reset(organization: string, endpoint: string): void | Promise<void>;
  /** Releases what the store holds (timers, caches) and sends nothing more; client connections stay the caller's. */
  close(): void | Promise<void>;
}
