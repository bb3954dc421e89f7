import type { Outcome } from './bucket.js';
import { describeValue, RateLimitError } from './errors.js';
import type { Limit } from './limits.js';

/**
 * Where buckets live. A request's buckets are (organization, endpoint, limit.name) for each of its limits; a store
 * keeps per bucket what docs/algorithm.md describes and moves it with core's bucket arithmetic (or an exact mirror of
 * it). The limits come with every call, so a per-organization plan needs no store setup, and a missing bucket is a
 * full one. Arguments arrive validated by the limiter. A method returns a value or a promise of one; a store never
 * calls back into its caller. Run `storeContractSuite` from `@ratecard/core/testing` against any new store
 * (docs/stores.md).
 */
export interface Store {
  /** True when processes share the buckets (Redis); false when they are private to this process (memory). */
  readonly shared: boolean;
  /**
   * True when the store tells a queue from an outage itself, so that a consume's `budgetMs` bounds how long the
   * backend may keep a call unanswered, not how long the call waits in all. The store waits for a call queued behind
   * calls the backend keeps answering (a burst, a busy machine) up to QUEUE_WAIT_FACTOR budgets from the call, and
   * never charges a call after that; where it can tell an outage sooner (Redis: a call it sent left unanswered for
   * `budgetMs`), it rejects with `store_timeout` then. The caller waits up to QUEUE_WAIT_FACTOR budgets. Default
   * false: the caller stops waiting after `budgetMs`.
   */
  readonly tellsQueueFromOutage?: boolean;
  /**
   * Takes `cost` tokens from the bucket of every limit if each holds them, else from none, atomically; one outcome
   * (bucket.ts) per limit, in order. `cost`: one number for every limit, or one per limit (costAt). `budgetMs`: how
   * long from this call the caller waits (for a store that `tellsQueueFromOutage`, see there); a call still unsent then
   * is dropped, never charged.
   *
   * With `lease`, the call reserves (docs/stores.md, "Leases"): admitted, it sets its cost aside in each bucket and
   * takes its slots of each concurrency limit, held under `lease.id` until `lease.ms` from now on the store's clock,
   * when the lease expires keeping its charge. A bucket's outcome counts what leases have set aside as taken. Without
   * `lease`, the limits hold no concurrency limit (the limiter sees to it).
   */
  consume(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    budgetMs?: number,
    lease?: Lease,
  ): Outcome[] | Promise<Outcome[]>;
  /**
   * Ends or extends the lease `change.id` that a `consume` of these limits took, atomically: with `actual`, each bucket
   * is charged that many tokens in place of what the lease set aside (below empty down to its debtFloor at most) and
   * the slots are freed; with `holdMs`, the lease is held until `holdMs` from now instead. True when the lease was held
   * and the change made; false, changing nothing, when it was not (expired, settled, or never taken). `budgetMs` as for
   * `reset`.
   */
  settle(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    change: LeaseChange,
    budgetMs?: number,
  ): boolean | Promise<boolean>;
  /** The outcomes `consume` would give now, charging nothing and writing nothing. */
  peek(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
  ): Outcome[] | Promise<Outcome[]>;
  /**
   * Makes the bucket of each limit full again (forgets it). `budgetMs`: how long from this call the caller waits, as
   * for `consume`; a reset that would take effect only after it (still unsent, or reaching the backend late) forgets
   * nothing and rejects with `store_timeout`.
   */
  reset(organization: string, endpoint: string, limits: readonly Limit[], budgetMs?: number): void | Promise<void>;
  /**
   * What the store keeps under (organization, endpoint), as it keeps it, at its now: every bucket with the shape it was
   * written under, every lease held; for operators (`limiter.inspect`, the `ratecard` command line). Writes nothing.
   */
  inspect(organization: string, endpoint: string): KeptState | Promise<KeptState>;
  /**
   * The blocks in force (ending after the store's now), after making `change` when given: an organization refused on
   * one endpoint, or every endpoint ('*'), until `ms` from the store's now (`ms` 0 lifts the block). The limiter
   * reads them at most a second apart (docs/operations.md).
   */
  blocks(change?: BlockChange): KeptBlocks | Promise<KeptBlocks>;
  /** Releases what the store holds (timers, caches) and sends nothing more; client connections stay the caller's. */
  close(): void | Promise<void>;
}

/** A lease a reserving `consume` takes: its id, unique among the leases of the key, and how long it is held. */
export interface Lease {
  /** 1 to 64 of A-Z a-z 0-9 _ - (the limiter makes 16 random characters, a dash and a count). */
  readonly id: string;
  /** Milliseconds from the store's now until the lease expires, 1 to MAX_LEASE_MS. */
  readonly ms: number;
}

/**
 * What `settle` does to a lease: `{ id, actual }` settles it, each bucket charged `actual` tokens (one number for
 * every limit, or one per limit, as a consume's cost; 0 gives back all that was set aside: a cancel), its slots freed;
 * `{ id, holdMs }` holds it `holdMs` more from now, charging nothing.
 */
export type LeaseChange =
  | {
      /** The lease's id. */
      readonly id: string;
      /** Tokens used, one number for every limit or one per limit; 0 gives back all that was set aside. */
      readonly actual: number | readonly number[];
      /** Not given when settling. */
      readonly holdMs?: undefined;
    }
  | {
      /** The lease's id. */
      readonly id: string;
      /** Milliseconds from the store's now to hold the lease. */
      readonly holdMs: number;
      /** Not given when extending. */
      readonly actual?: undefined;
    };

/** A bucket as a store keeps it (`inspect`): its units at `updatedAt` under the shape then in force. */
export interface KeptBucket {
  /** The limit's name: which bucket of the key this is. */
  readonly name: string;
  /** Units held at `updatedAt` (negative in debt). */
  readonly units: number;
  /** Epoch ms the units were counted at; a quota's (unitsPerMs 0): the end of the period they count for. */
  readonly updatedAt: number;
  /** Most tokens the bucket held under the limit it was written with. */
  readonly capacity: number;
  /** Units in one token of that limit. */
  readonly unitsPerToken: number;
  /** Units that limit refilled per ms; 0 for a quota. */
  readonly unitsPerMs: number;
}

/** A held lease as a store keeps it (`inspect`): per limit name, the tokens it set aside or the slots it takes. */
export interface KeptLease {
  /** The lease's id, as the reserving call gave it. */
  readonly id: string;
  /** Epoch ms on the store's clock. */
  readonly expiresAt: number;
  /** Per limit name, the tokens set aside or the slots taken. */
  readonly holds: readonly {
    /** The limit's name. */
    readonly name: string;
    /** Tokens of a bucket or quota, slots of a concurrency limit. */
    readonly amount: number;
  }[];
}

/** What `inspect` answers: the store's now, and what it keeps under a key. */
export interface KeptState {
  /** The store's clock when it read the key, epoch ms. */
  readonly now: number;
  /** Every bucket the key holds, as written. */
  readonly buckets: readonly KeptBucket[];
  /** Every lease held on the key. */
  readonly leases: readonly KeptLease[];
}

/** A block in force: the organization's requests to `endpoint` ('*': every endpoint) are refused until `until`. */
export interface KeptBlock {
  /** Whose requests are refused. */
  readonly organization: string;
  /** The endpoint key refused, or '*' for every endpoint. */
  readonly endpoint: string;
  /** Epoch ms on the store's clock. */
  readonly until: number;
  /** Why, as the operator said ('' when not). */
  readonly reason: string;
}

/** What `blocks` answers: the store's now, and the blocks in force. */
export interface KeptBlocks {
  /** The store's clock when it answered, epoch ms. */
  readonly now: number;
  /** The blocks whose end is after `now`. */
  readonly blocks: readonly KeptBlock[];
}

/** A change `blocks` makes: block `organization` on `endpoint` ('*' for every endpoint) for `ms`, or lift it (`ms` 0). */
export interface BlockChange {
  /** Whose requests to refuse. */
  readonly organization: string;
  /** The endpoint key, or '*' for every endpoint. */
  readonly endpoint: string;
  /** How long from the store's now, in ms; 0 lifts the block. */
  readonly ms: number;
  /** Why ('' when not said). */
  readonly reason: string;
}

/** The longest a lease is held at once: a day; `extend` holds it longer. */
export const MAX_LEASE_MS = 86_400_000;

/**
 * How many budgets a store that `tellsQueueFromOutage` lets a call wait behind others while the backend answers them:
 * 4, so 2 s under the default budget of 500 ms. Past it (an overload the backend cannot keep up with) the call goes
 * to the failure policy, as in an outage.
 */
export const QUEUE_WAIT_FACTOR = 4;

/**
 * The clock a shared store reads, from its `clock` and `now` options, checked where the store is made: with `clock:
 * 'client'`, `now` (default `Date.now`, read per call so that a fake clock installed later is seen); with the store's
 * own clock, `own` (its default: 'redis', 'object'), undefined, time coming from `source`. Anything else throws
 * `invalid_option`.
 */
export function clientClock(
  options: { clock?: unknown; now?: unknown },
  own: string,
  source: string,
): (() => number) | undefined {
  const invalid = (message: string) => new RateLimitError('invalid_option', `ratecard: ${message}`);
  const clock = options.clock ?? own;
  if (clock !== own && clock !== 'client') {
    throw invalid(`clock must be '${own}' or 'client', got ${describeValue(clock)}`);
  }
  const now = options.now;
  if (now !== undefined && typeof now !== 'function') {
    throw invalid(`now must be a function returning epoch milliseconds, got ${describeValue(now)}`);
  }
  if (now !== undefined && clock === own) {
    throw invalid(`now is read only with clock 'client'; with the default clock '${own}' time comes from ${source}`);
  }
  if (clock === own) return undefined;
  return (now as (() => number) | undefined) ?? (() => Date.now());
}
