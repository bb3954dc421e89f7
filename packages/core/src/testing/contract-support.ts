import type { Store } from '../store.js';

/** The test functions a suite needs: vitest's, jest's or node:test's `describe` and `it`. */
export interface TestApi {
  /** Declares a group of tests; `body` declares them, at once. */
  describe(name: string, body: () => void): void;
  /** Declares one test; `body` returns a promise, `timeout` is in ms (node:test takes no timeout there, and has none). */
  it(name: string, body: () => Promise<void>, timeout?: number): void;
}

/** How the contract suite makes and disposes of the stores it tests. */
export interface StoreHarness {
  /** A store whose clock reads `now()` (epoch ms). Buckets may be shared with earlier stores: names are unique. */
  create(now: () => number): Store | Promise<Store>;
  /** Disposes of a store made by `create` (close clients and the like); default store.close(). */
  destroy?(store: Store): void | Promise<void>;
  /** Per-test timeout in ms handed to `it`. */
  timeout?: number;
}

/** A manual clock, in epoch ms, that a test moves. */
export interface Clock {
  now: number;
}

/** A contract test's body: a fresh store, its clock, and a maker of organization names unique to this test. */
export type ContractBody = (store: Store, clock: Clock, org: (label: string) => string) => Promise<void>;

/** Declares one contract test. */
export type ContractTest = (title: string, body: ContractBody) => void;

/** Where every contract test's clock starts. */
export const START = 1_700_000_000_000;
