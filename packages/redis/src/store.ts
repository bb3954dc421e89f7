import {
  type BlockChange,
  checkOptionKeys,
  clientClock,
  costAt,
  describeValue,
  type KeptBlock,
  type KeptBlocks,
  type KeptState,
  type Lease,
  type LeaseChange,
  type Limit,
  msUntilAvailable,
  type Outcome,
  QUEUE_WAIT_FACTOR,
  RateLimitError,
  type Store,
  unitsAfter,
} from '@ratecard/core';
import calculateSlot from 'cluster-key-slot';
import { AutoBatcher, CallBatch, type Receiver } from './batching.js';
import {
  type ClientState,
  type Connection,
  connectionTo,
  NoDirectRoute,
  type RedisClient,
  runScript,
  runScriptOnMaster,
} from './client.js';
import { DenyCache } from './deny-cache.js';
import { blockField, blockOf, KeyEncoder } from './keys.js';
import { BLOCKS } from './scripts/blocks.js';
import { CONSUME, CONSUME_ON_MASTER, HEADER_SIZE, Op, packCall, packedSize, packHeader } from './scripts/consume.js';
import { INSPECT } from './scripts/inspect.js';
import type { LuaScript } from './scripts/lua-script.js';
import { RESET } from './scripts/reset.js';
import { keptState, MAX_UPDATED_AT } from './value.js';

/** Options of `redisStore`: the client, and how keys and time are kept. */
export interface RedisStoreOptions {
  /** An ioredis `Redis` (standalone or Sentinel-managed) or `Cluster`, or anything with the same few members. */
  client: RedisClient;
  /** Start of every key; default 'ratecard:'. Braces are refused: the organization must be the key's hash tag. */
  prefix?: string;
  /** Where time comes from: 'redis' (default), Redis TIME inside the script; 'client', `now()` in this process. */
  clock?: 'redis' | 'client';
  /** Epoch ms, read when clock is 'client'; default Date.now. Fractions are floored. */
  now?: () => number;
  /** Most buckets the deny cache remembers; default 10 000, 0 turns it off. */
  denyCacheSize?: number;
}

/** Every key of RedisStoreOptions: redisStore refuses any other. */
const REDIS_STORE_OPTIONS = {
  client: true,
  prefix: true,
  clock: true,
  now: true,
  denyCacheSize: true,
} satisfies Record<keyof RedisStoreOptions, true>;

/**
 * The Redis store's counters, from `stats()`: of consume calls (and resets where said); an operator's inspect and the
 * limiter's reads of the blocks count in none.
 */
export interface RedisStoreStats {
  /** Consume calls sent to Redis. */
  sent: number;
  /** Consume script calls made; `sent / batches` is the mean batch size. */
  batches: number;
  /** The most consume calls one script call carried. */
  largestBatch: number;
  /** Consume calls answered by the deny cache, each one a Redis call saved. */
  denyCacheHits: number;
  /** Buckets the deny cache remembers now. */
  denyCacheSize: number;
  /** Times a node did not hold a script (NOSCRIPT) and got it whole with EVAL. */
  scriptReloads: number;
  /**
   * Calls refused at once: the client had lost its connection, had not connected since it was made (its first attempt
   * failed), or was closed; or Redis (in a cluster, the call's master) had left a call it was sent unanswered past its
   * budget. Each is answered by the limiter's failure policy.
   */
  unavailable: number;
  /**
   * Consume calls that charged nothing because the limiter's policy answered them: dropped unsent (queued
   * QUEUE_WAIT_FACTOR budgets behind a slow Redis, queued for a route where Redis left a call it was sent unanswered
   * for its budget, or waiting a whole budget for the client's first connection); or refused by the script, which
   * they reached too late (held in a paused or hung server, or sent again by the client after it reconnected).
   */
  expired: number;
  /**
   * Of `expired`: calls that reached Redis after their caller had stopped waiting (held in a hung or paused server,
   * or sent again by the client after it reconnected), refused by the script, so they charged nothing. A reset that
   * reached Redis too late, and forgot nothing, is counted in neither: these count the decisions a policy answered.
   */
  late: number;
  /**
   * Cluster calls sent again one by one, by key, because the master they were grouped for no longer served their
   * slot (a migration or failover the client's slot map had not caught up with); the first try ran nothing.
   */
  rerouted: number;
  /** Calls waiting to be sent now. */
  queued: number;
}

/** A Store on Redis, with counters. */
export interface RedisStore extends Store {
  consume(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    budgetMs?: number,
    lease?: Lease,
  ): Promise<Outcome[]>;
  settle(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    change: LeaseChange,
    budgetMs?: number,
  ): Promise<boolean>;
  peek(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
  ): Promise<Outcome[]>;
  reset(organization: string, endpoint: string, limits: readonly Limit[], budgetMs?: number): Promise<void>;
  /** One script call to the key's server (in a cluster, its master): Redis TIME and the key's value together. */
  inspect(organization: string, endpoint: string): Promise<KeptState>;
  /** One script call to the one hash every block is kept in (`<prefix>blocks`), however many blocks there are. */
  blocks(change?: BlockChange): Promise<KeptBlocks>;
  close(): void;
  /** Counters since the store was made. */
  stats(): RedisStoreStats;
}

/** How often an operator's call looks again while the client makes its first connection (as AutoBatcher's flush). */
const READY_POLL_MS = 2;
/**
 * How long an operator's call (inspect, blocks) waits for the client's first connection: four default budgets. It has
 * no budget of its own; the limiter stops waiting for it after the budget, and this bounds the looking.
 */
const OPERATION_CONNECT_WAIT_MS = 2_000;

/** Calls per script call: enough to amortise a round trip, few enough that a run stays well under a millisecond. */
const MAX_PER_SCRIPT_CALL = 256;
/**
 * Consume flushes outstanding at once on a standalone client (see AutoBatcher): two, so that Redis runs one batch
 * while this process settles the other. In a cluster the bound is one script call per master instead, so that one slow
 * master holds back only its own calls.
 */
const MAX_FLUSHES_IN_FLIGHT = 2;
const DEFAULT_DENY_CACHE_SIZE = 10_000;
/**
 * The longest a denial is remembered: a bucket another process resets (or changes for everyone) is asked of Redis
 * again within it. One Redis call a second per refused bucket and process is what it costs.
 */
const DENY_HORIZON_MS = 1_000;

function invalid(message: string): RateLimitError {
  return new RateLimitError('invalid_option', `ratecard: ${message}`);
}

/**
 * An empty organization would make the key's hash tag `{}`, which Redis ignores (it hashes the whole key) while
 * cluster-key-slot does not: the limiter never sends one, and the store refuses one from any other caller.
 */
function emptyOrganization(): RateLimitError {
  return new RateLimitError('invalid_argument', 'ratecard: organization must be a non-empty string, got ""');
}

function failure(error: unknown): RateLimitError {
  if (error instanceof RateLimitError) return error;
  const detail = error instanceof Error ? error.message : describeValue(error);
  return new RateLimitError('store_unavailable', `ratecard: Redis failed: ${detail}`, { cause: error });
}

class RedisBucketStore implements RedisStore {
  readonly shared = true;
  readonly tellsQueueFromOutage = true;
  private readonly connection: Connection;
  private readonly keys: KeyEncoder;
  private readonly clientClock: boolean;
  private readonly now: () => number;
  private readonly denies: DenyCache;
  private readonly batcher: AutoBatcher;
  /**
   * One error per client state: an outage may refuse thousands of calls a second, and a stack each costs more. The
   * limiter gives each of its callers an error of its own (see sharedError).
   */
  private readonly notReadyErrors = new Map<ClientState, RateLimitError>();
  private readonly overdue = new Outstanding((flight) => this.giveUp(flight));
  /** Cluster masters being probed while down (see probe). */
  private readonly probing = new Set<string>();
  private closed = false;
  private sent = 0;
  private batches = 0;
  private largestBatch = 0;
  private scriptReloads = 0;
  private unavailable = 0;
  private expired = 0;
  private late = 0;
  private rerouted = 0;
  /** Resets so far: a denial sent before the latest one must not go back into the deny cache. */
  private resets = 0;
  /**
   * Per server (a cluster master's address; '' standalone): Redis TIME in the latest consume reply (standalone, or
   * reset reply) minus performance.now() when that script call was sent. The script ran after it was sent, so this is
   * never less than how far Redis' clock is ahead of this process's; a deadline moved by it into Redis' frame is never
   * earlier than the true one, and the script refuses only runs that are surely late.
   */
  private readonly redisAhead = new Map<string, number>();
  /** One error for every expired call: nobody reads it (the caller has stopped waiting), so it needs no stack each. */
  private readonly expiredError = sharedError(
    'store_timeout',
    'ratecard: the call reached Redis past its deadline, or waited to be sent until then',
  );
  private readonly silentError = sharedError(
    'store_timeout',
    'ratecard: Redis left the call unanswered for its budget; it goes to the failure policy, and is refused by the script if it runs later',
  );
  private readonly overdueError = sharedError(
    'store_timeout',
    'ratecard: Redis has not answered a call within its budget; calls are refused at once until it answers',
  );
  /** For calls that waited their whole budget for the client's first connection; made on first need. */
  private notConnectedError: RateLimitError | undefined;

  constructor(options: RedisStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw invalid(`redisStore needs an options object, got ${describeValue(options)}`);
    }
    checkOptionKeys(options, REDIS_STORE_OPTIONS, 'redisStore');
    const connection = connectionTo(options.client);
    if (connection === undefined) {
      throw invalid(
        `client must be an ioredis or iovalkey Redis or Cluster, or a node-redis client, cluster or sentinel, got ${describeValue(options.client)}`,
      );
    }
    // An ioredis Cluster prefixes the keys of a command sent by key (peek, reset, a rerouted call) but not those a
    // script call to one master carries among its arguments: one bucket would have two keys, each charged apart.
    const keyPrefix = (options.client as { options?: { keyPrefix?: unknown } }).options?.keyPrefix;
    if (connection.kind === 'ioredis' && connection.cluster && keyPrefix) {
      throw invalid(
        `an ioredis or iovalkey Cluster with a keyPrefix is not supported (calls sent to a master carry their keys as arguments, which the client does not prefix); give redisStore the prefix instead, got keyPrefix ${describeValue(keyPrefix)}`,
      );
    }
    const prefix = options.prefix ?? 'ratecard:';
    if (typeof prefix !== 'string' || prefix.includes('{') || prefix.includes('}')) {
      throw invalid(
        `prefix must be a string without braces (the organization is the key's hash tag), got ${describeValue(prefix)}`,
      );
    }
    const now = clientClock(options, 'redis', 'Redis TIME');
    const denyCacheSize = options.denyCacheSize ?? DEFAULT_DENY_CACHE_SIZE;
    if (!Number.isSafeInteger(denyCacheSize) || denyCacheSize < 0) {
      throw invalid(`denyCacheSize must be a non-negative integer, got ${describeValue(options.denyCacheSize)}`);
    }
    this.connection = connection;
    this.keys = new KeyEncoder(prefix);
    this.clientClock = now !== undefined;
    this.now = now ?? (() => Date.now());
    this.denies = new DenyCache(denyCacheSize);
    this.batcher = new AutoBatcher(
      this.sendConsume,
      connection,
      MAX_PER_SCRIPT_CALL,
      MAX_FLUSHES_IN_FLIGHT,
      this.onExpired,
    );
  }

  consume(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    budgetMs?: number,
    lease?: Lease,
  ): Promise<Outcome[]> {
    if (this.closed) return Promise.reject(this.closedError());
    if (organization.length === 0) return Promise.reject(emptyOrganization());
    const key = this.keys.key(organization, endpoint);
    // Only a call of one limit is answered from the deny cache, and only such calls fill it: a call of several limits
    // is refused by whichever bucket is short, and what one bucket's denial says of a call that also names others
    // would need every one of them remembered; those calls go to Redis. A reserve is refused as a consume is.
    if (limits.length === 1 && this.denies.size !== 0) {
      const cached = this.denies.answer(key, limits[0] as Limit, costAt(cost, 0), this.cacheTime());
      if (cached !== undefined) return Promise.resolve([cached]);
    }
    // The key's hash tag is the organization.
    const slot = this.connection.cluster ? calculateSlot(key) : 0;
    const deadline = this.admitCall(slot, budgetMs, QUEUE_WAIT_FACTOR);
    if (typeof deadline !== 'number') return Promise.reject(deadline);
    const budget = budgetMs ?? Number.POSITIVE_INFINITY;
    return new Promise<Outcome[]>((resolve, reject) => {
      const receiver = { resolve, reject };
      if (lease === undefined) this.batcher.add(key, slot, limits, cost, deadline, budget, receiver);
      else this.batcher.add(key, slot, limits, cost, deadline, budget, receiver, Op.reserve, lease.id, lease.ms);
    });
  }

  settle(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    change: LeaseChange,
    budgetMs?: number,
  ): Promise<boolean> {
    if (this.closed) return Promise.reject(this.closedError());
    if (organization.length === 0) return Promise.reject(emptyOrganization());
    const key = this.keys.key(organization, endpoint);
    // The caller waits one budget for a settle, as for a reset (Store.settle): a settle still queued then is dropped.
    const slot = this.connection.cluster ? calculateSlot(key) : 0;
    const deadline = this.admitCall(slot, budgetMs, 1);
    if (typeof deadline !== 'number') return Promise.reject(deadline);
    const budget = budgetMs ?? Number.POSITIVE_INFINITY;
    // A settle may take a bucket below what a denial remembered for it says it holds.
    this.denies.forget(key);
    return new Promise<boolean>((resolve, reject) => {
      const receiver = { resolve: (answer: Outcome[]) => resolve(answer[0] === 1), reject };
      if (change.holdMs === undefined) {
        this.batcher.add(key, slot, limits, change.actual, deadline, budget, receiver, Op.settle, change.id);
      } else {
        this.batcher.add(key, slot, limits, 0, deadline, budget, receiver, Op.extend, change.id, change.holdMs);
      }
    });
  }

  /**
   * The deadline of a call to a key of `slot` made now, `factor` budgets from now; or the error it is refused with at once: a
   * client that lost its connection or never made one, or a Redis that keeps a call past its deadline, gets no more
   * calls (each would wait out its budget). Both checks are a comparison while Redis is well.
   */
  private admitCall(slot: number, budgetMs: number | undefined, factor: number): number | RateLimitError {
    const state = this.connection.state();
    if (state !== 'ready' && state !== 'waiting') return this.notReady(state);
    const now = performance.now();
    if (now > this.overdue.earliest && this.overdue.unanswered(this.routeOf(slot))) {
      this.unavailable++;
      return this.overdueError;
    }
    // Counted from now, before the caller starts its own count: the store gives up on the call first. The budget
    // bounds how long Redis may leave the call unanswered once it is sent (see tellsQueueFromOutage); queued behind
    // calls Redis answers, a consume waits up to QUEUE_WAIT_FACTOR budgets.
    return now + (budgetMs ?? Number.POSITIVE_INFINITY) * factor;
  }

  async peek(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
  ): Promise<Outcome[]> {
    const key = this.checkedKey(organization, endpoint);
    const numbers = Buffer.allocUnsafe(HEADER_SIZE + packedSize(limits));
    packCall(
      numbers,
      packHeader(numbers, this.clientClock ? this.readClock() : undefined, undefined, false),
      limits,
      cost,
      Op.peek,
    );
    const reply = await this.run(CONSUME, [key], [numbers]);
    // Redis TIME, then an outcome per limit (and flags, unread), little-endian doubles (see scripts/consume.ts).
    if (!Buffer.isBuffer(reply) || reply.length < 8 * (limits.length + 1) || reply.length % 8 !== 0) {
      throw failure(new Error(`unexpected peek reply ${describeValue(reply)}`));
    }
    const outcomes = new Array<Outcome>(limits.length);
    for (let j = 0; j < limits.length; j++) outcomes[j] = reply.readDoubleLE(8 * (j + 1));
    return outcomes;
  }

  async reset(organization: string, endpoint: string, limits: readonly Limit[], budgetMs?: number): Promise<void> {
    const key = this.checkedKey(organization, endpoint);
    // Counted from now, before the caller starts its own count, as a consume's deadline is.
    const sentAt = performance.now();
    this.resets++;
    this.denies.forget(key);
    // Sent by key: standalone the server is known; in a cluster it may land on any master (see sendConsume).
    const server = this.connection.cluster ? undefined : '';
    // The caller's deadline in Redis' frame: a run later than that forgets nothing (see scripts/reset.ts).
    const lastWaited = budgetMs === undefined ? undefined : this.inRedisFrame(server, sentAt + budgetMs);
    const reply = await this.run(RESET, [key], [String(lastWaited ?? ''), ...limits.map((limit) => limit.name)]);
    // Redis TIME, then how many buckets were forgotten; the time alone when the run came too late.
    if (
      !Array.isArray(reply) ||
      (reply.length !== 1 && reply.length !== 2) ||
      !reply.every((n) => typeof n === 'number')
    ) {
      throw failure(new Error(`unexpected reset reply ${describeValue(reply)}`));
    }
    // A process that only resets learns Redis' clock from its resets (standalone: in a cluster the master is unknown).
    if (server !== undefined) this.redisAhead.set(server, (reply[0] as number) - sentAt);
    if (reply.length === 1) {
      // Not counted in expired or late, which count consume calls (see RedisStoreStats).
      throw new RateLimitError(
        'store_timeout',
        `ratecard: the reset reached Redis after its budget of ${budgetMs} ms, so it forgot nothing`,
      );
    }
  }

  async inspect(organization: string, endpoint: string): Promise<KeptState> {
    const key = this.checkedKey(organization, endpoint);
    const reply = await this.operation(INSPECT, key, [this.clockArgument()]);
    // The now, then the value when the key exists (see scripts/inspect.ts).
    if (!Array.isArray(reply) || reply.length < 1 || reply.length > 2 || typeof reply[0] !== 'number') {
      throw failure(new Error(`unexpected inspect reply ${describeValue(reply)}`));
    }
    const value = reply[1] as unknown;
    if (value !== undefined && !Buffer.isBuffer(value) && typeof value !== 'string') {
      throw failure(new Error(`unexpected inspect reply ${describeValue(reply)}`));
    }
    return keptState(value, reply[0]);
  }

  async blocks(change?: BlockChange): Promise<KeptBlocks> {
    if (this.closed) throw this.closedError();
    if (change !== undefined && change.organization.length === 0) throw emptyOrganization();
    const args =
      change === undefined
        ? [this.clockArgument(), '', '0', '']
        : [
            this.clockArgument(),
            blockField(change.organization, change.endpoint),
            String(change.ms),
            Buffer.from(change.reason, 'utf8'),
          ];
    const reply = await this.operation(BLOCKS, this.keys.blocks, args);
    // The now, then each block in force as its field and value (see scripts/blocks.ts).
    if (!Array.isArray(reply) || reply.length % 2 !== 1 || typeof reply[0] !== 'number') {
      throw failure(new Error(`unexpected blocks reply ${describeValue(reply)}`));
    }
    const blocks: KeptBlock[] = [];
    for (let i = 1; i < reply.length; i += 2) {
      const block = blockOf(String(reply[i]));
      const value = String(reply[i + 1]);
      const cut = value.indexOf(' ');
      if (block === undefined || cut < 1) continue;
      blocks.push({ ...block, until: Number(value.slice(0, cut)), reason: value.slice(cut + 1) });
    }
    return { now: reply[0], blocks };
  }

  close(): void {
    this.closed = true;
    this.connection.release();
    this.overdue.close();
    this.denies.clear();
    this.batcher.dropQueued(this.closedError());
  }

  stats(): RedisStoreStats {
    return {
      sent: this.sent,
      batches: this.batches,
      largestBatch: this.largestBatch,
      denyCacheHits: this.denies.hits,
      denyCacheSize: this.denies.size,
      scriptReloads: this.scriptReloads,
      unavailable: this.unavailable,
      expired: this.expired,
      late: this.late,
      rerouted: this.rerouted,
      queued: this.batcher.queued,
    };
  }

  private checkedKey(organization: string, endpoint: string): string {
    if (this.closed) throw this.closedError();
    if (organization.length === 0) throw emptyOrganization();
    return this.keys.key(organization, endpoint);
  }

  /**
   * Runs an operator's script on one key, refused at once as a consume is: while the client cannot send, or while
   * Redis (the key's master) leaves a call unanswered past its budget.
   */
  private operation(
    script: LuaScript,
    key: string,
    args: (string | Buffer)[],
    since = performance.now(),
  ): Promise<unknown> {
    if (this.closed) return Promise.reject(this.closedError());
    // Not counted in the stats, which count consume calls (see RedisStoreStats).
    const state = this.connection.state();
    if (state === 'waiting') {
      // The client's first connection is under way: the call waits here, as a consume does (see AutoBatcher), rather
      // than in the client's offline queue, until the attempt succeeds or fails; at most OPERATION_CONNECT_WAIT_MS.
      if (performance.now() - since > OPERATION_CONNECT_WAIT_MS) {
        return Promise.reject(
          sharedError('store_timeout', `ratecard: the ${this.connection.kind} client has not connected to Redis yet`),
        );
      }
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, READY_POLL_MS);
        (timer as { unref?: () => void }).unref?.();
      }).then(() => this.operation(script, key, args, since));
    }
    if (state !== 'ready') return Promise.reject(this.notReady(state, 0));
    const slot = this.connection.cluster ? calculateSlot(key) : 0;
    if (performance.now() > this.overdue.earliest && this.overdue.unanswered(this.routeOf(slot))) {
      return Promise.reject(this.overdueError);
    }
    return this.run(script, [key], args);
  }

  /** Runs a script on one call's keys, refusing at once when the client could only queue it in its offline queue. */
  private run(script: LuaScript, keys: readonly string[], args: (string | Buffer)[]): Promise<unknown> {
    const state = this.connection.state();
    if (state !== 'ready') return Promise.reject(this.notReady(state));
    return runScript(this.connection, script, keys, args, this.onReload).then(undefined, (error: unknown) => {
      throw failure(error);
    });
  }

  private readonly onReload = (): void => {
    this.scriptReloads++;
  };

  private readonly onExpired = (count: number, connecting = false): RateLimitError => {
    this.expired += count;
    if (!connecting) return this.expiredError;
    // A first connection that outlasts a whole budget is as good as failed: a Sentinel-managed ioredis client that
    // finds no sentinel, or a host that drops packets, shows nothing else.
    this.connection.waitedOut();
    this.notConnectedError ??= sharedError(
      'store_timeout',
      `ratecard: the ${this.connection.kind} client has not connected to Redis within a call's budget since it was made; calls are refused at once until it connects`,
    );
    return this.notConnectedError;
  };

  /** Sends calls `from`..`to` of a batch as one consume script call and settles each from the reply. */
  private readonly sendConsume = (batch: CallBatch, from: number, to: number): Promise<void> => {
    // A half held for the client's next turn (see AutoBatcher) may find the store closed since, and a flush may find
    // the connection lost since its calls were queued.
    const state = this.connection.state();
    if (this.closed || (state !== 'ready' && state !== 'waiting')) {
      batch.rejectAll(this.closed ? this.closedError() : this.notReady(state, to - from), from, to);
      return Promise.resolve();
    }
    let now: number | undefined;
    try {
      now = this.clientClock ? this.readClock() : undefined;
    } catch (error) {
      batch.rejectAll(error, from, to);
      return Promise.resolve();
    }
    const n = to - from;
    const limits = batch.limits;
    const costs = batch.costs;
    const deadlines = batch.deadlines;
    const budgets = batch.budgets;
    let uniform = true;
    let firstDeadline = Number.POSITIVE_INFINITY;
    let budget = Number.POSITIVE_INFINITY;
    const shared = limits[from] as readonly Limit[];
    const ops = batch.ops;
    for (let i = from; i < to; i++) {
      if (ops[i] !== Op.consume || costs[i] !== costs[from] || !sameLimits(limits[i] as readonly Limit[], shared)) {
        uniform = false;
      }
      firstDeadline = Math.min(firstDeadline, deadlines[i] as number);
      budget = Math.min(budget, budgets[i] as number);
    }
    const sentAt = performance.now();
    // Redis must answer within the budget from now, or the calls go to their callers' policy (see Outstanding): the
    // last instant a caller waits for this script call, and after which it must charge nothing.
    const answerBy = Math.min(firstDeadline, sentAt + budget);
    // The server the script runs on, for its clock. A cluster call sent by key may land on any master (the client
    // follows MOVED and ASK, and retries through a failover), so it takes the master furthest ahead.
    const server = batch.master ?? (this.connection.cluster ? undefined : '');
    // The script's one argument: see scripts/consume.ts. The limits and cost once when the whole batch shares them, as
    // a batch of consumes from one plan and endpoint does, else once per run of calls that name the same ones (a
    // batch of reserves or settles of one plan: each call then carries its op and lease alone).
    const keys = batch.keys.slice(from, to);
    // In Redis' frame: a run later than that finds some caller gone, and charges nothing.
    const lastWaited = this.inRedisFrame(server, answerBy);
    const repeats = n > 1 && hasRepeats(keys);
    let numbers: Buffer;
    if (uniform) {
      numbers = Buffer.allocUnsafe(HEADER_SIZE + packedSize(shared));
      packCall(
        numbers,
        packHeader(numbers, now, lastWaited, repeats),
        shared,
        costs[from] as number | readonly number[],
      );
    } else {
      let size = HEADER_SIZE;
      for (let i = from; i < to; i++) size += packedCallSize(batch, i, i > from && repeatsCallBefore(batch, i));
      numbers = Buffer.allocUnsafe(size);
      let offset = packHeader(numbers, now, lastWaited, repeats);
      for (let i = from; i < to; i++) {
        offset = packBatchCall(numbers, offset, batch, i, i > from && repeatsCallBefore(batch, i));
      }
    }
    const args = [numbers];
    this.sent += n;
    this.batches++;
    if (n > this.largestBatch) this.largestBatch = n;
    const resets = this.resets;
    const master = batch.master;
    const route = master ?? this.routeOf(batch.slots[from] as number);
    const flight: Flight = { route, answerBy, batch, from, to, given: false };
    this.overdue.add(flight);
    const settle = (reply: unknown): void => {
      this.overdue.remove(flight);
      this.settleConsume(batch, from, to, reply, now, sentAt, resets === this.resets, server);
    };
    if (master === undefined) {
      return runScript(this.connection, CONSUME, keys, args, this.onReload).then(settle, (error) => {
        this.overdue.remove(flight);
        batch.rejectAll(failure(error), from, to);
      });
    }
    return runScriptOnMaster(this.connection, master, CONSUME_ON_MASTER, [...args, ...keys], this.onReload).then(
      settle,
      (error: unknown) => {
        this.overdue.remove(flight);
        const unsent = error instanceof NoDirectRoute;
        if (!unsent && !notRunBecauseMoved(error)) return batch.rejectAll(failure(error), from, to);
        this.sent -= n;
        this.batches--;
        if (unsent && error.why === 'connecting') {
          // The client connects to that master now (a fresh client does so on its first call to each): the calls
          // wait for it, expired ones dropped, and leave batched rather than one by one.
          this.batcher.retryLater(batch, from, to);
          return;
        }
        if (unsent && error.why === 'down') {
          // By key they would wait in the client's retries past their deadlines.
          this.unavailable += n;
          batch.rejectAll(new RateLimitError('store_unavailable', error.message), from, to);
          return this.probe(route, batch, from);
        }
        // The slot map was out of date (or names a master the client has no connection to): nothing ran (the script
        // reads every key before it writes one), so each call goes again by key, alone, and the client follows MOVED
        // or ASK for it.
        this.rerouted += n;
        return this.sendByKey(batch, from, to);
      },
    );
  };

  /**
   * While a cluster master is down, one call's buckets are peeked by key (charging nothing), one probe at a time: an
   * ioredis Cluster connects again to a node it dropped only when a command is routed there, and follows MOVED to a
   * promoted replica. Once the client has a ready connection to the slot's master again, calls go there directly.
   */
  private probe(route: string, batch: CallBatch, i: number): void {
    if (this.probing.has(route)) return;
    this.probing.add(route);
    const limits = batch.limits[i] as readonly Limit[];
    const keys = [batch.keys[i] as string];
    const done = (): void => {
      this.probing.delete(route);
    };
    // The time as consume would read it: a Redis that refuses TIME in scripts is run with clock 'client'.
    const now = this.clientClock ? Math.max(0, Math.floor(this.now())) : undefined;
    const numbers = Buffer.allocUnsafe(HEADER_SIZE + packedSize(limits));
    const offset = packHeader(numbers, now, undefined, false);
    packCall(numbers, offset, limits, batch.costs[i] as number | readonly number[], Op.peek);
    runScript(this.connection, CONSUME, keys, [numbers], this.onReload).then(done, done);
  }

  /**
   * Redis left a script call unanswered for its budget (see Outstanding): its calls, and those queued for the same
   * route, go to their callers' policy now. A call of the script call that Redis runs later is refused by the script
   * (it is past `lastWaited`), so nothing the policy answered is charged.
   */
  private giveUp(flight: Flight): void {
    flight.batch.rejectAll(this.silentError, flight.from, flight.to);
    // Dropped unsent (see RedisStoreStats.expired).
    this.expired += this.batcher.dropRoute(flight.route, this.routeOfSlot, this.overdueError);
  }

  private readonly routeOfSlot = (slot: number): string => this.routeOf(slot);

  /** Where a slot's calls go, for telling which are overdue: its master in a cluster ('' if unknown), '' standalone. */
  private routeOf(slot: number): string {
    return this.connection.masterOf?.(slot) ?? '';
  }

  /** Sends calls one by one, each routed by its key; those past their deadline are dropped unsent. */
  private sendByKey(batch: CallBatch, from: number, to: number): Promise<void> {
    const now = performance.now();
    const sent: Promise<void>[] = [];
    for (let i = from; i < to; i++) {
      if ((batch.deadlines[i] as number) <= now) {
        (batch.receivers[i] as Receiver).reject(this.onExpired(1));
        continue;
      }
      const single = new CallBatch();
      single.takeFrom(batch, i);
      sent.push(this.sendConsume(single, 0, 1));
    }
    return Promise.all(sent).then(() => undefined);
  }

  private settleConsume(
    batch: CallBatch,
    from: number,
    to: number,
    reply: unknown,
    now: number | undefined,
    sentAt: number,
    cacheDenials: boolean,
    server: string | undefined,
  ): void {
    const n = to - from;
    let outcomeCount = 0;
    for (let i = from; i < to; i++) outcomeCount += answerCount(batch, i);
    // Redis TIME, then an outcome per limit of each call, then a flag per limited one, each a little-endian double
    // (see scripts/consume.ts); the time alone when the run came too late for the batch.
    if (
      !Buffer.isBuffer(reply) ||
      (reply.length !== 8 && reply.length < 8 * (outcomeCount + 1)) ||
      reply.length % 8 !== 0
    ) {
      batch.rejectAll(failure(new Error(`unexpected consume reply ${describeValue(reply)}`)), from, to);
      return;
    }
    if (server !== undefined) this.redisAhead.set(server, reply.readDoubleLE(0) - sentAt);
    if (reply.length === 8) {
      this.late += n;
      batch.rejectAll(this.onExpired(n), from, to);
      return;
    }
    const receivedAt = performance.now();
    let at = 8;
    let flag = 8 * (outcomeCount + 1);
    for (let i = from; i < to; i++) {
      const k = answerCount(batch, i);
      const outcomes = new Array<Outcome>(k);
      for (let j = 0; j < k; j++, at += 8) outcomes[j] = reply.readDoubleLE(at);
      const key = batch.keys[i] as string;
      const op = batch.ops[i] as Op;
      if (op === Op.settle || op === Op.extend) {
        // 1 when the lease was held (see scripts/consume.ts).
      } else if (outcomes[0] === DUPLICATE_LEASE) {
        (batch.receivers[i] as Receiver).reject(
          new RateLimitError('invalid_argument', `ratecard: the lease id ${batch.leaseIds[i]} is held already`),
        );
        continue;
      } else if ((outcomes[0] as Outcome) >= 0) {
        // Charged, the bucket holds less than a denial remembered for it said.
        this.denies.forget(key);
      } else if (k > 1) {
        // Refused, it may have converted a bucket a denial was remembered for to another shape, which a later call
        // under the remembered one must convert back: that call goes to Redis.
        this.denies.forget(key);
        flag += 8 * k;
      } else {
        // A call of one limit: its denial may fill the deny cache (see consume).
        const outcome = outcomes[0] as Outcome;
        const steady = flag < reply.length && reply.readDoubleLE(flag) === 1;
        flag += 8;
        if (steady && cacheDenials) {
          const limit = (batch.limits[i] as readonly Limit[])[0] as Limit;
          const cost = costAt(batch.costs[i] as number | readonly number[], 0);
          // A quota refills nothing: short until its period ends (by the clock the limiter stated the period in).
          const wait =
            limit.periodEnd === undefined
              ? msUntilAvailable(outcome, limit, cost)
              : limit.periodEnd - Math.floor(this.now());
          // Client clock: exact in that clock. Redis clock: the script ran after `sentAt` and before `receivedAt`,
          // so `sentAt + wait` is never later than the exact instant, and units counted from `receivedAt` never more.
          // At most DENY_HORIZON_MS, so that a reset by another process (which this one cannot see) reaches it then.
          const horizon = wait < DENY_HORIZON_MS ? wait : DENY_HORIZON_MS;
          const held = unitsAfter(outcome);
          if (now !== undefined) this.denies.remember(key, limit, cost, held, now, now + horizon);
          else this.denies.remember(key, limit, cost, held, receivedAt, sentAt + horizon);
        }
      }
      (batch.receivers[i] as Receiver).resolve(outcomes);
    }
  }

  /**
   * A deadline in performance.now() as the last ms by Redis TIME on `server` (undefined: whichever cluster master a
   * call sent by key lands on, so the one furthest ahead), the scripts' `lastWaited` argument: '' while no reply has
   * told the store that server's clock, or for no deadline at all.
   */
  private inRedisFrame(server: string | undefined, deadline: number): number | undefined {
    const ahead = server === undefined ? this.furthestAhead() : this.redisAhead.get(server);
    return ahead === undefined || deadline === Number.POSITIVE_INFINITY ? undefined : Math.ceil(deadline + ahead);
  }

  /** The most any master's clock has been seen ahead of this process's, or undefined before any reply. */
  private furthestAhead(): number | undefined {
    let furthest: number | undefined;
    for (const ahead of this.redisAhead.values()) if (furthest === undefined || ahead > furthest) furthest = ahead;
    return furthest;
  }

  /** The deny cache's time frame: the client clock, or this process's monotonic clock. */
  private cacheTime(): number {
    return this.clientClock ? Math.floor(this.now()) : performance.now();
  }

  private clockArgument(): string {
    return this.clientClock ? String(this.readClock()) : '';
  }

  private readClock(): number {
    const now = Math.floor(this.now());
    if (!(now >= 0 && now <= MAX_UPDATED_AT)) {
      throw invalid(`now() must return epoch milliseconds, got ${describeValue(now)}`);
    }
    return now;
  }

  private notReady(state: ClientState, calls = 1): RateLimitError {
    this.unavailable += calls;
    let error = this.notReadyErrors.get(state);
    if (error === undefined) {
      // node-redis reports a client never connected as it does a closed one, and a forgotten connect() is the likelier.
      // A cluster whose connect() found no root node is closed again, and makes no attempt of its own; so is a RedisSentinel
      // whose connect() found no master.
      const kind = this.connection.kind;
      const closed =
        kind === 'node-redis cluster'
          ? 'is not open: connect it with `await client.connect()` (a cluster whose connect() failed stays closed until it is called again), or it was closed'
          : kind === 'node-redis'
            ? 'is not open: connect it with `await client.connect()`, or it was closed'
            : kind === 'node-redis sentinel'
              ? 'is not open: connect it with `await client.connect()` (one whose connect() gave up finding a master is closed again), or it was closed'
              : 'is closed';
      const what =
        state === 'closed'
          ? closed
          : state === 'down'
            ? 'lost its connection to Redis and is reconnecting; calls are refused at once until it is ready'
            : state === 'unreached'
              ? "has not connected to Redis since it was made (its first attempt failed, or outlasted a call's budget); calls are refused at once until it connects"
              : 'is not ready (connecting)';
      error = sharedError('store_unavailable', `ratecard: the ${kind} client ${what}`);
      this.notReadyErrors.set(state, error);
    }
    return error;
  }

  private closedError(): RateLimitError {
    return new RateLimitError('store_closed', 'ratecard: this Redis store is closed');
  }
}

/**
 * An error handed to many calls: made once, without a stack (one made where the store was would point there, not at
 * any call). The limiter gives each of its callers an error of its own, with this one as its cause.
 */
function sharedError(code: 'store_unavailable' | 'store_timeout', message: string): RateLimitError {
  const error = new RateLimitError(code, message);
  error.stack = `RateLimitError: ${message}`;
  return error;
}

/** A consume script call sent and not answered yet: calls `from`..`to` of `batch`, on `route`. */
interface Flight {
  /** A cluster master's address, '' standalone (or where the slot map names none). */
  readonly route: string;
  /** performance.now() by which Redis must answer: the budget from the send, or a call's deadline if earlier. */
  readonly answerBy: number;
  readonly batch: CallBatch;
  readonly from: number;
  readonly to: number;
  /** True once its calls were handed to their callers' policy, unanswered at `answerBy`. */
  given: boolean;
}

/**
 * Script calls sent and not answered yet, by route (a cluster master's address, '' standalone). One still out past
 * its `answerBy` means Redis has left a call unanswered for a whole budget (a hang, a pause, a slow script, a master
 * gone without a word): that is an outage, where a queue is not. Its calls, and the calls queued for its route, go to
 * their callers' policy (`giveUp`), and further calls for that route are refused at once until Redis answers it.
 *
 * Past `answerBy` counts only once this process has since read what its sockets hold: after this process itself
 * stalls (a long synchronous task, a garbage collection, a starved CPU), timers run before the replies that came
 * meanwhile are read, and those calls must not be given up for a Redis that did answer. So deadlines are compared
 * with the time of a look taken after the event loop's poll phase (setImmediate): when a timer set for the earliest
 * `answerBy` fires, and whenever a call finds one passed.
 */
class Outstanding {
  private readonly byRoute = new Map<string, Flight[]>();
  /** The earliest `answerBy` out anywhere; Infinity when none. A consume looks further only once it has passed. */
  earliest = Number.POSITIVE_INFINITY;
  /** performance.now() of the latest look after a poll phase; deadlines before it were not answered by then. */
  private lookedAt = Number.NEGATIVE_INFINITY;
  private lookPending = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Number.POSITIVE_INFINITY;

  constructor(private readonly giveUp: (flight: Flight) => void) {}

  add(flight: Flight): void {
    if (flight.answerBy === Number.POSITIVE_INFINITY) return;
    const flights = this.byRoute.get(flight.route);
    if (flights === undefined) this.byRoute.set(flight.route, [flight]);
    else flights.push(flight);
    if (flight.answerBy < this.earliest) this.earliest = flight.answerBy;
    this.armFor(flight.answerBy);
  }

  remove(flight: Flight): void {
    if (flight.answerBy === Number.POSITIVE_INFINITY) return;
    const flights = this.byRoute.get(flight.route) as Flight[];
    flights.splice(flights.indexOf(flight), 1);
    if (flights.length === 0) this.byRoute.delete(flight.route);
    if (flight.answerBy > this.earliest) return;
    let earliest = Number.POSITIVE_INFINITY;
    for (const out of this.byRoute.values()) for (const f of out) if (f.answerBy < earliest) earliest = f.answerBy;
    this.earliest = earliest;
  }

  /** Whether a call out on `route` was still unanswered past its `answerBy` at the latest look (see the class). */
  unanswered(route: string): boolean {
    this.lookSoon();
    const flights = this.byRoute.get(route);
    if (flights === undefined) return false;
    for (const flight of flights) if (flight.answerBy < this.lookedAt) return true;
    return false;
  }

  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  private armFor(at: number): void {
    if (this.timer !== undefined && this.timerAt <= at) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = at;
    // +1 ms: timers may fire a fraction early.
    this.timer = setTimeout(this.due, Math.max(0, Math.ceil(at - performance.now())) + 1);
    // Nothing here should keep a process alive: the limiter's own timer answers every waiting caller.
    (this.timer as { unref?: () => void }).unref?.();
  }

  private readonly due = (): void => {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    this.lookSoon();
  };

  private lookSoon(): void {
    if (this.lookPending) return;
    this.lookPending = true;
    setImmediate(this.look);
  }

  private readonly look = (): void => {
    this.lookPending = false;
    const now = performance.now();
    this.lookedAt = now;
    let next = Number.POSITIVE_INFINITY;
    for (const flights of this.byRoute.values()) {
      for (const flight of flights) {
        if (flight.given) continue;
        if (flight.answerBy < now) {
          flight.given = true;
          this.giveUp(flight);
        } else if (flight.answerBy < next) {
          next = flight.answerBy;
        }
      }
    }
    if (next !== Number.POSITIVE_INFINITY) this.armFor(next);
  };
}

/**
 * Whether a script meant for one master did not run because it was moved, and its calls may go by key: the master no
 * longer serves one of the keys (a slot moved or is moving: the script stops at its first read of such a key, before
 * any write), or the reply is a redirection.
 */
function notRunBecauseMoved(error: unknown): boolean {
  if (!(error instanceof Error) || error instanceof NoDirectRoute) return false;
  const message = error.message;
  return message.includes('non local key') || /^(MOVED|ASK|TRYAGAIN) /.test(message);
}

/** Whether a key appears more than once among `keys`: the script then tracks what it wrote. */
function hasRepeats(keys: readonly string[]): boolean {
  const seen = new Set<string>();
  for (const key of keys) {
    if (seen.has(key)) return true;
    seen.add(key);
  }
  return false;
}

/** The outcome of each limit of a reserve whose lease id is held already: 2^53, which no outcome is. */
const DUPLICATE_LEASE = 2 ** 53;

/** How many numbers the consume script answers call `i` of a batch with: one per limit, one for a settle or extend. */
function answerCount(batch: CallBatch, i: number): number {
  const op = batch.ops[i] as Op;
  return op === Op.settle || op === Op.extend ? 1 : (batch.limits[i] as readonly Limit[]).length;
}

/** Whether call `i` of a batch names the limits and costs of the call before it: then they are not packed again. */
function repeatsCallBefore(batch: CallBatch, i: number): boolean {
  return (
    batch.costs[i] === batch.costs[i - 1] &&
    sameLimits(batch.limits[i] as readonly Limit[], batch.limits[i - 1] as readonly Limit[])
  );
}

/** The bytes call `i` of a batch takes packed (see packCall). */
function packedCallSize(batch: CallBatch, i: number, repeated: boolean): number {
  const op = batch.ops[i] as Op;
  const limits = batch.limits[i] as readonly Limit[];
  return packedSize(limits, op === Op.consume ? undefined : batch.leaseIds[i], repeated);
}

/** Packs call `i` of a batch at `offset`; returns the offset after it. */
function packBatchCall(buffer: Buffer, offset: number, batch: CallBatch, i: number, repeated: boolean): number {
  const op = batch.ops[i] as Op;
  const limits = batch.limits[i] as readonly Limit[];
  const cost = batch.costs[i] as number | readonly number[];
  if (op === Op.consume) return packCall(buffer, offset, limits, cost, op, undefined, undefined, repeated);
  const ms = op === Op.settle ? undefined : batch.leaseMs[i];
  return packCall(buffer, offset, limits, cost, op, batch.leaseIds[i], ms, repeated);
}

/** Whether two calls name the same limits, in order: a batch whose calls all do sends them once. */
function sameLimits(a: readonly Limit[], b: readonly Limit[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * A token-bucket store on Redis or Redis Cluster: one key per organization and endpoint holds its buckets (one per
 * limit), and one atomic Lua script charges a call's buckets all or nothing, calls of the same tick batched into one
 * script call (per master in a cluster), and a local cache of buckets known to be empty.
 */
export function redisStore(options: RedisStoreOptions): RedisStore {
  return new RedisBucketStore(options);
}
