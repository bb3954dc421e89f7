import { type Limit, type Outcome, QUEUE_WAIT_FACTOR } from '@ratecard/core';
import type { Connection } from './client.js';
import { Op } from './scripts/consume.js';

/** The two ends of a consume call's promise. */
export interface Receiver {
  resolve(outcomes: Outcome[]): void;
  reject(error: unknown): void;
}

/**
 * Consume calls waiting to be sent, in parallel arrays: queuing a call allocates nothing of its own. A call charges
 * the buckets of k limits, all held by one key (its organization's and endpoint's), or reserves, settles or extends a
 * lease on them (its op).
 */
export class CallBatch {
  /** The key of each call. */
  readonly keys: string[] = [];
  readonly slots: number[] = [];
  readonly limits: (readonly Limit[])[] = [];
  /** One cost for every limit or one per limit; for a settle, the actual tokens. */
  readonly costs: (number | readonly number[])[] = [];
  /** What each call does (scripts/consume.ts). */
  readonly ops: Op[] = [];
  /** The lease a reserve, settle or extend names, and its ms (a reserve's lease, an extend's hold); '' and 0 else. */
  readonly leaseIds: string[] = [];
  readonly leaseMs: number[] = [];
  /**
   * performance.now() instants after which nobody waits for the answer: QUEUE_WAIT_FACTOR budgets from the call
   * (Infinity: someone always does).
   */
  readonly deadlines: number[] = [];
  /** Each call's budget: how long Redis may leave it unanswered once it is sent (Infinity: no bound). */
  readonly budgets: number[] = [];
  /** Who is told each call's outcomes. */
  readonly receivers: Receiver[] = [];
  /**
   * Where the calls go: undefined, by key (standalone, or a cluster's slot the client routes and redirects); a
   * string, the address of the cluster master that serves every key of the batch, whatever their slots.
   */
  master: string | undefined = undefined;

  get length(): number {
    return this.keys.length;
  }

  add(
    key: string,
    slot: number,
    limits: readonly Limit[],
    cost: number | readonly number[],
    deadline: number,
    budget: number,
    receiver: Receiver,
    op: Op = Op.consume,
    leaseId = '',
    leaseMs = 0,
  ): void {
    this.keys.push(key);
    this.slots.push(slot);
    this.limits.push(limits);
    this.costs.push(cost);
    this.ops.push(op);
    this.leaseIds.push(leaseId);
    this.leaseMs.push(leaseMs);
    this.deadlines.push(deadline);
    this.budgets.push(budget);
    this.receivers.push(receiver);
  }

  /** Appends call `i` of another batch, receiver included. */
  takeFrom(other: CallBatch, i: number): void {
    this.keys.push(other.keys[i] as string);
    this.slots.push(other.slots[i] as number);
    this.limits.push(other.limits[i] as readonly Limit[]);
    this.costs.push(other.costs[i] as number | readonly number[]);
    this.ops.push(other.ops[i] as Op);
    this.leaseIds.push(other.leaseIds[i] as string);
    this.leaseMs.push(other.leaseMs[i] as number);
    this.deadlines.push(other.deadlines[i] as number);
    this.budgets.push(other.budgets[i] as number);
    this.receivers.push(other.receivers[i] as Receiver);
  }

  rejectAll(error: unknown, from: number, to: number): void {
    for (let i = from; i < to; i++) (this.receivers[i] as Receiver).reject(error);
  }

  /**
   * Whether call `i` is past what its caller waits for at `now`: its deadline; or, while the client connects (`connecting`),
   * its budget from the call, since a connection being made is not a Redis answering calls ahead of it.
   */
  expired(i: number, now: number, connecting: boolean): boolean {
    const deadline = this.deadlines[i] as number;
    if (!connecting) return deadline <= now;
    const budget = this.budgets[i] as number;
    return budget !== Number.POSITIVE_INFINITY && deadline - (QUEUE_WAIT_FACTOR - 1) * budget <= now;
  }

  /** Index of the first call past what its caller waits for at `now` (see expired), or -1. */
  firstExpired(now: number, connecting: boolean): number {
    for (let i = 0; i < this.keys.length; i++) if (this.expired(i, now, connecting)) return i;
    return -1;
  }
}

/**
 * Called with how many queued calls passed their deadline unsent, and whether they were waiting for the client's first
 * connection (each for its whole budget); returns the error they are rejected with.
 */
export type ExpireCalls = (count: number, connecting: boolean) => unknown;

/** The fewest calls in each half of a flush split across two free in-flight slots. */
const MIN_HALF = 64;

/** Below this many queued calls the queue is searched for expired calls only when it is flushed. */
const PRUNE_FLOOR = 1_024;

/** How often a flush looks again while the client connects: a connection takes about a millisecond here. */
const READY_POLL_MS = 2;

/**
 * Sends calls `from` (inclusive) to `to` (exclusive) of a batch as one script call and settles them; the promise
 * resolves (never rejects) once they are settled.
 */
export type SendCalls = (batch: CallBatch, from: number, to: number) => Promise<void>;

/**
 * Gathers consume calls and sends them together, with no timer while the client is ready:
 *
 * - A flush is queued with process.nextTick, which runs once the current callback and every promise continuation it
 *   set off are done: calls issued from many continuations (a loop of awaits, a burst of replies) share one trip.
 * - At most `maxInFlight` flushes are outstanding. While they are, new calls wait, and go out together as soon as one
 *   comes back. An idle store sends a lone call at once; a busy one sends what arrived during a round trip as one
 *   script call, so batches grow with load by themselves (without the bound, each reply would release a few calls
 *   that would leave as a batch of their own, and batches would stay small).
 * - A flush of at least 2 × MIN_HALF calls (and at most one script call's worth) that finds both in-flight slots free
 *   leaves as two script calls of half each, in two flights. Otherwise a reply that settles every call in flight makes
 *   the whole next batch in one go, and this process and Redis take turns, each idle while the other works; with
 *   two halves Redis runs the second while this process settles the first and sends what its callers ask next.
 *   A client that writes at the next turn (node-redis, see Connection.writesNextTurn) would put both halves in one
 *   write, which Redis answers as one: there the second half is sent at the next turn, a write of its own. (Side by
 *   side at 256 in flight, node-redis went from 0.72x ioredis' decisions per second to 1.0x; see docs/redis.md.)
 *
 * - A call whose caller stopped waiting while it was queued (its deadline passed: the limiter answered it by policy)
 *   is dropped, not sent: it would charge a bucket for an answer nobody reads. While Redis hangs, flushes stay
 *   outstanding and the queue grows, so it is also pruned whenever it has doubled since it was last pruned: it holds
 *   about one budget's worth of calls, however long the hang lasts.
 *
 * - While the client connects (before it was first ready, no attempt failed yet; in a cluster, also to a master it has
 *   not reached yet), calls wait here (not in the client's offline queue, where they would outlive their deadlines),
 *   expired ones are dropped, and a flush looks again every READY_POLL_MS. A client that lost its connection, or whose
 *   first attempt failed, gets no calls: the store refuses them when they are made (see the store's consume), and
 *   those waiting here when the attempt fails are refused at the next look.
 *
 * Standalone, a flush is one script call per `maxPerCall` calls. In a cluster, calls are grouped by the master that
 * serves their slot (a call's key is in its organization's slot), as the client's slot map has it: one script
 * call per master, whatever the slots (see the store's sendConsume for what happens when the map is out of date). A
 * call whose master is unknown goes by key.
 * There `maxInFlight` does not apply; instead each master has at most one script call out, and calls for a master
 * whose call is out wait (expired ones dropped) and go together when it comes back: the masters work side by side,
 * so one call each keeps them busy, and a slow or hung master holds back only its own calls. (Unbounded, a flush
 * left for each master with what one reply had released, some 28 calls per script call at 256 in flight; bounded,
 * about 54. Side by side on one 3-master cluster, rounds alternating, the bound gave 22% more decisions per second
 * and 4% to 6% less Redis CPU per decision; see docs/redis.md.)
 */
export class AutoBatcher {
  private batch = new CallBatch();
  private scheduled = false;
  private inFlight = 0;
  private pruneAt = PRUNE_FLOOR;
  /** In a cluster: the masters with a script call out. */
  private readonly busyMasters = new Set<string>();

  constructor(
    private readonly send: SendCalls,
    private readonly connection: Connection,
    private readonly maxPerCall: number,
    private readonly maxInFlight: number,
    private readonly expire: ExpireCalls,
  ) {}

  /** Calls waiting to be sent. */
  get queued(): number {
    return this.batch.length;
  }

  add(
    key: string,
    slot: number,
    limits: readonly Limit[],
    cost: number | readonly number[],
    deadline: number,
    budget: number,
    receiver: Receiver,
    op: Op = Op.consume,
    leaseId = '',
    leaseMs = 0,
  ): void {
    this.batch.add(key, slot, limits, cost, deadline, budget, receiver, op, leaseId, leaseMs);
    if (this.batch.length >= this.pruneAt) {
      this.batch = this.withoutExpired(this.batch, false);
      this.pruneAt = Math.max(PRUNE_FLOOR, 2 * this.batch.length);
    }
    this.schedule();
  }

  /**
   * Takes calls `from`..`to` of a batch back, to be sent again in READY_POLL_MS (their master is connecting); those
   * past their deadline by then are dropped.
   */
  retryLater(batch: CallBatch, from: number, to: number): void {
    const later = new CallBatch();
    for (let i = from; i < to; i++) later.takeFrom(batch, i);
    const timer = setTimeout(() => {
      for (let i = 0; i < later.length; i++) this.batch.takeFrom(later, i);
      this.schedule();
    }, READY_POLL_MS);
    // Nothing here should keep a process alive: the limiter's own timer answers every waiting caller.
    (timer as { unref?: () => void }).unref?.();
  }

  /** Rejects every call still waiting to be sent: none of them will be (the store is closing). */
  dropQueued(error: unknown): void {
    const batch = this.batch;
    this.batch = new CallBatch();
    batch.rejectAll(error, 0, batch.length);
  }

  /**
   * Rejects every queued call whose route `routeOf` gives as `route` with `error`: Redis has left a call on that route
   * unanswered past its budget (see the store's Outstanding), so none of them would be answered in time.
   */
  dropRoute(route: string, routeOf: (slot: number) => string, error: unknown): number {
    const batch = this.batch;
    const kept = new CallBatch();
    const dropped = new CallBatch();
    for (let i = 0; i < batch.length; i++) {
      if (routeOf(batch.slots[i] as number) === route) dropped.takeFrom(batch, i);
      else kept.takeFrom(batch, i);
    }
    if (dropped.length === 0) return 0;
    this.batch = kept;
    dropped.rejectAll(error, 0, dropped.length);
    return dropped.length;
  }

  /** The batch less the calls past what their callers wait for (see CallBatch.expired), which are rejected. */
  private withoutExpired(batch: CallBatch, connecting: boolean): CallBatch {
    const now = performance.now();
    const first = batch.firstExpired(now, connecting);
    if (first === -1) return batch;
    const kept = new CallBatch();
    const expired = new CallBatch();
    for (let i = 0; i < batch.length; i++) {
      if (i >= first && batch.expired(i, now, connecting)) expired.takeFrom(batch, i);
      else kept.takeFrom(batch, i);
    }
    expired.rejectAll(this.expire(expired.length, connecting), 0, expired.length);
    return kept;
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    process.nextTick(this.flush);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    if (this.batch.length === 0) return;
    if (this.connection.state() === 'waiting') {
      // Sent now, the calls would wait in the client's offline queue, past their deadlines. They wait here instead,
      // where expired ones are dropped unsent, until the client is ready (a closed client's calls go on to `send`,
      // which refuses them).
      this.batch = this.withoutExpired(this.batch, true);
      if (this.batch.length === 0) return;
      this.scheduled = true;
      const timer = setTimeout(this.flush, READY_POLL_MS);
      // Nothing here should keep a process alive: the limiter's own timer answers every waiting caller.
      (timer as { unref?: () => void }).unref?.();
      return;
    }
    const batch = this.withoutExpired(this.batch, false);
    this.batch = new CallBatch();
    this.pruneAt = PRUNE_FLOOR;
    // Every queued call may have expired while flushes were held back.
    if (batch.length === 0) return;
    const masterOf = this.connection.masterOf;
    if (masterOf !== undefined) {
      this.sendByMaster(batch, masterOf);
      return;
    }
    if (this.maxInFlight - this.inFlight >= 2 && batch.length >= 2 * MIN_HALF && batch.length <= this.maxPerCall) {
      // Two flights, so that this process and Redis work at once (see the class comment).
      const half = batch.length >>> 1;
      this.inFlight += 2;
      this.sendHalf(batch, 0, half);
      // Sent in this tick, the second half would reach Redis in the first one's write, and come back in its reply.
      if (this.connection.writesNextTurn) setImmediate(() => this.sendHalf(batch, half, batch.length));
      else this.sendHalf(batch, half, batch.length);
      return;
    }
    this.inFlight++;
    // Either way: a flush that never counted as done would hold every later call back.
    this.sendInChunks(batch).then(this.flushed, this.flushed);
  };

  /** One half of a two-flight flush; `inFlight` already counts it. */
  private sendHalf(batch: CallBatch, from: number, to: number): void {
    this.send(batch, from, to).then(this.flushed, this.flushed);
  }

  private readonly flushed = (): void => {
    this.inFlight--;
    // Queued from a promise continuation, the flush runs after the continuations of the calls just settled, so
    // the calls they make join it.
    if (this.batch.length !== 0) this.schedule();
  };

  /** In a cluster: one script call per master that has none out; the calls of the others wait in the queue. */
  private sendByMaster(batch: CallBatch, masterOf: (slot: number) => string | undefined): void {
    const groups = new Map<string | number, CallBatch>();
    for (let i = 0; i < batch.length; i++) {
      const slot = batch.slots[i] as number;
      const master = masterOf(slot);
      if (master !== undefined && this.busyMasters.has(master)) {
        this.batch.takeFrom(batch, i);
        continue;
      }
      const route = master ?? slot;
      let group = groups.get(route);
      if (group === undefined) {
        group = new CallBatch();
        group.master = master;
        groups.set(route, group);
      }
      group.takeFrom(batch, i);
    }
    for (const group of groups.values()) {
      const master = group.master;
      if (master !== undefined) this.busyMasters.add(master);
      // Either way: a master whose call never counted as back would hold its calls back for good.
      const back = (): void => {
        if (master !== undefined) this.busyMasters.delete(master);
        if (this.batch.length !== 0) this.schedule();
      };
      this.sendInChunks(group).then(back, back);
    }
  }

  /** A bound per script call keeps any one run short: Redis serves nobody else while a script runs. */
  private sendInChunks(batch: CallBatch): Promise<unknown> {
    const max = this.maxPerCall;
    if (batch.length <= max) return this.send(batch, 0, batch.length);
    const sent: Promise<void>[] = [];
    for (let from = 0; from < batch.length; from += max) {
      sent.push(this.send(batch, from, Math.min(from + max, batch.length)));
    }
    return Promise.all(sent);
  }
}
