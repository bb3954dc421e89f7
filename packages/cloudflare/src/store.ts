import * as workers from 'cloudflare:workers';
import {
  type BlockChange,
  checkOptionKeys,
  clientClock,
  describeValue,
  type KeptBlocks,
  type KeptState,
  type Lease,
  type LeaseChange,
  type Limit,
  type Outcome,
  QUEUE_WAIT_FACTOR,
  RateLimitError,
  type Store,
} from '@ratecard/core';
import type { BucketLimit } from './object.js';

/** The calls the store makes on an organization's object: `RatecardBuckets`' methods, as a stub offers them. */
export interface BucketsStub {
  /**
   * Charges the organization's buckets of `endpoint` for `limits`, all or nothing, or with `lease` reserves; null when
   * it arrives past `deadline` (epoch ms), charging nothing; 'taken' when a lease of that id is held, charging nothing.
   * `now`: the caller's clock under clock 'client', else undefined.
   */
  consume(
    endpoint: string,
    limits: readonly BucketLimit[],
    cost: number | readonly number[],
    now: number | undefined,
    deadline: number | undefined,
    lease?: Lease,
  ): Promise<Outcome[] | null | 'taken'>;
  /**
   * Settles, cancels or extends a lease of `endpoint`; true when it was held, false when not; null when it arrives past
   * `deadline` (epoch ms), changing nothing.
   */
  settle(
    endpoint: string,
    limits: readonly BucketLimit[],
    change: LeaseChange,
    now: number | undefined,
    deadline: number | undefined,
  ): Promise<boolean | null>;
  /** The outcomes consume would give now, charging nothing. */
  peek(
    endpoint: string,
    limits: readonly BucketLimit[],
    cost: number | readonly number[],
    now: number | undefined,
  ): Promise<Outcome[]>;
  /**
   * Forgets the buckets of `endpoint` named by `names` (a forgotten bucket is a full one); false when it arrives past
   * `deadline` (epoch ms), forgetting nothing.
   */
  reset(endpoint: string, names: readonly string[], deadline: number | undefined): Promise<boolean>;
  /** The buckets and leases kept for `endpoint`, at `now` (or the object's clock), writing nothing. */
  inspect(endpoint: string, now: number | undefined): Promise<KeptState>;
  /** On the blocks object only: the blocks in force at `now` (or its clock), after making `change` when given. */
  blocks(change: BlockChange | undefined, now: number | undefined): Promise<KeptBlocks>;
}

/**
 * The name of the object that keeps the blocks (`limiter.block`), in the namespace of the organizations' objects: every
 * process reads every block with one call at most a second apart, so they cannot live in each organization's object.
 * The store names an organization's object by the organization, which the limiter allows at most 256 characters
 * (code points); this name has 300, so no organization names this object, and `idFromName` gives distinct names
 * distinct objects (test/names.test.ts), so this object holds no organization's buckets.
 */
export const BLOCKS_OBJECT: string = 'ratecard blocks: the blocks of every organization'.padEnd(300, '.');

/**
 * The two members of a Durable Object namespace binding the store uses: `env.BUCKETS` when wrangler binds
 * `RatecardBuckets` as BUCKETS.
 */
export interface BucketsNamespace<Id = unknown> {
  /** The id of the object named `name` (the store names an object by its organization). */
  idFromName(name: string): Id;
  /** A stub that sends calls to the object of that id. */
  get(id: Id): BucketsStub;
}

/** What `durableObjectStore` takes. */
export interface DurableObjectStoreOptions<Id = unknown> {
  /** The Durable Object namespace bound to the `RatecardBuckets` class (e.g. `env.BUCKETS`). */
  namespace: BucketsNamespace<Id>;
  /** Where time comes from: 'object' (default), the clock of the organization's object; 'client', `now()` here. */
  clock?: 'object' | 'client';
  /** Epoch ms, read when clock is 'client'; default Date.now. Fractions are floored. */
  now?: () => number;
}

/** Every key of DurableObjectStoreOptions: durableObjectStore refuses any other. */
const DURABLE_OBJECT_STORE_OPTIONS = { namespace: true, clock: true, now: true } satisfies Record<
  keyof DurableObjectStoreOptions,
  true
>;

function invalid(message: string): RateLimitError {
  return new RateLimitError('invalid_option', `ratecard: ${message}`);
}

function failure(error: unknown): RateLimitError {
  const detail = error instanceof Error ? error.message : describeValue(error);
  return new RateLimitError('store_unavailable', `ratecard: the Durable Object failed: ${detail}`, { cause: error });
}

/**
 * A Store whose buckets live in Durable Objects, one `RatecardBuckets` object per organization: every call goes to
 * that object, which charges all of the call's buckets at once.
 *
 * Calls on one stub reach the object in the order they were sent, and calls for one organization made in one turn
 * (calls made together) share a stub, so they are answered in the order they were made. A stub serves one turn only:
 * it belongs to the request that made it, and Workers refuse I/O through it on behalf of another request.
 */
class DurableObjectStore<Id> implements Store {
  readonly shared = true;
  /**
   * An object is never down the way a Redis connection is: a call it has not answered yet waits behind the calls it
   * is answering (a burst), and one it cannot take fails at once. So a call is waited for up to QUEUE_WAIT_FACTOR
   * budgets, and the object refuses it, charging nothing, if it gets it later.
   */
  readonly tellsQueueFromOutage = true;
  private readonly namespace: BucketsNamespace<Id>;
  private readonly now: (() => number) | undefined;
  /** The stubs made in this turn, by organization; emptied once the turn ends. */
  private readonly turn = new Map<string, BucketsStub>();
  private readonly endTurn = (): void => this.turn.clear();
  private closed = false;

  constructor(options: DurableObjectStoreOptions<Id>) {
    if (typeof options !== 'object' || options === null) {
      throw invalid(`durableObjectStore needs an options object, got ${describeValue(options)}`);
    }
    checkOptionKeys(options, DURABLE_OBJECT_STORE_OPTIONS, 'durableObjectStore');
    const { namespace } = options;
    if (typeof namespace?.idFromName !== 'function' || typeof namespace?.get !== 'function') {
      throw invalid(
        `namespace must be a Durable Object namespace bound to RatecardBuckets (env.BUCKETS), got ${describeValue(namespace)}`,
      );
    }
    const now = clientClock(options, 'object', 'the object');
    this.namespace = namespace;
    this.now = now;
  }

  async consume(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    budgetMs?: number,
    lease?: Lease,
  ): Promise<Outcome[]> {
    // Counted from now, before the caller starts its own count, and checked by the object as a call arrives: a call
    // that reaches it after its caller stopped waiting (queued behind others, or slow on the way) charges nothing.
    const deadline = budgetMs === undefined ? undefined : Date.now() + budgetMs * QUEUE_WAIT_FACTOR;
    // A reserve is the same one call, with its lease: the object sets the cost aside and holds the lease.
    const outcomes = await this.call(organization, (stub) =>
      stub.consume(endpoint, limits, cost, this.clockReading(), deadline, lease),
    );
    if (outcomes === null) {
      throw new RateLimitError(
        'store_timeout',
        `ratecard: the Durable Object got the call after ${(budgetMs as number) * QUEUE_WAIT_FACTOR} ms`,
      );
    }
    if (outcomes === 'taken') {
      throw new RateLimitError(
        'invalid_argument',
        `ratecard: a lease with id ${describeValue((lease as Lease).id)} is already held on this endpoint`,
      );
    }
    return outcomes;
  }

  async settle(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    change: LeaseChange,
    budgetMs?: number,
  ): Promise<boolean> {
    // As reset's: a settle that reaches the object after its caller stopped waiting changes nothing.
    const deadline = budgetMs === undefined ? undefined : Date.now() + budgetMs;
    const held = await this.call(organization, (stub) =>
      stub.settle(endpoint, limits, change, this.clockReading(), deadline),
    );
    if (held === null) {
      throw new RateLimitError(
        'store_timeout',
        `ratecard: the Durable Object got the settle after ${budgetMs} ms, so it changed nothing`,
      );
    }
    return held;
  }

  peek(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
  ): Promise<Outcome[]> {
    return this.call(organization, (stub) => stub.peek(endpoint, limits, cost, this.clockReading()));
  }

  async reset(organization: string, endpoint: string, limits: readonly Limit[], budgetMs?: number): Promise<void> {
    const names = limits.map((limit) => limit.name);
    // As consume's: a reset that reaches the object after its caller stopped waiting forgets nothing.
    const deadline = budgetMs === undefined ? undefined : Date.now() + budgetMs;
    const done = await this.call(organization, (stub) => stub.reset(endpoint, names, deadline));
    if (done === false) {
      throw new RateLimitError(
        'store_timeout',
        `ratecard: the Durable Object got the reset after ${budgetMs} ms, so it forgot nothing`,
      );
    }
  }

  inspect(organization: string, endpoint: string): Promise<KeptState> {
    return this.call(organization, (stub) => stub.inspect(endpoint, this.clockReading()));
  }

  /** One call to the blocks object (BLOCKS_OBJECT), which keeps every organization's blocks. */
  blocks(change?: BlockChange): Promise<KeptBlocks> {
    const answer = this.call(BLOCKS_OBJECT, (stub) => stub.blocks(change, this.clockReading()));
    // The limiter reads blocks in the background, in whichever request's decision finds them half a second old, and
    // other requests' decisions may wait for that read. A Worker's request that has answered would drop it unfinished
    // (and a request waiting for a promise of one that has ended fails), so the read keeps its request alive until
    // it is answered.
    workers.waitUntil?.(answer.catch(() => undefined));
    return answer;
  }

  close(): void {
    this.closed = true;
  }

  private clockReading(): number | undefined {
    return this.now === undefined ? undefined : Math.floor(this.now());
  }

  /**
   * Sends a call to the object named `organization` (or BLOCKS_OBJECT); a failure to send, or one thrown in the object,
   * rejects.
   */
  private async call<T>(organization: string, send: (stub: BucketsStub) => Promise<T>): Promise<T> {
    if (this.closed) throw new RateLimitError('store_closed', 'ratecard: the Durable Object store is closed');
    let stub = this.turn.get(organization);
    if (stub === undefined) {
      if (this.turn.size === 0) queueMicrotask(this.endTurn);
      stub = this.namespace.get(this.namespace.idFromName(organization));
      this.turn.set(organization, stub);
    }
    try {
      return await send(stub);
    } catch (error) {
      throw failure(error);
    }
  }
}

/** A Store on Durable Objects: exact limits shared by every isolate in every location (see the package README). */
export function durableObjectStore<Id>(options: DurableObjectStoreOptions<Id>): Store {
  return new DurableObjectStore(options);
}
