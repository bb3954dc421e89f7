import {
  type BucketCall,
  describeValue,
  msUntilAvailable,
  type Outcome,
  type OutcomeReceiver,
  RateLimitError,
  type Store,
  type StoreCapabilities,
} from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { AutoBatcher, type CallBatch } from './batching.js';
import { type RedisClient, runScript } from './client.js';
import { DenyCache } from './deny-cache.js';
import { KeyEncoder, slotOfKey, slotOfTag } from './keys.js';
import { CONSUME } from './scripts/consume.js';
import type { LuaScript } from './scripts/lua-script.js';
import { PEEK } from './scripts/peek.js';
import { RESET } from './scripts/reset.js';

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
  /** Calls refused at once because the client was not ready (connecting, reconnecting, closed). */
  unavailable: number;
  /**
   * Calls dropped unsent because their caller had stopped waiting: queued behind a slow or hung Redis past the
   * limiter's budget, they were answered by its policy, and sending them would have charged buckets for nothing.
   */
  expired: number;
  /** Calls waiting to be sent now. */
  queued: number;
}

/** A Store on Redis, with counters. */
export interface RedisStore extends Store {
  /** Always offered: the limiter's one-promise path (see Store.consumeTo). */
  consumeTo: NonNullable<Store['consumeTo']>;
  peek(organization: string, endpoint: string, limit: number, cost: number): Promise<Outcome>;
  consumeBatch(calls: readonly BucketCall[]): Promise<Outcome[]>;
  reset(organization: string, endpoint: string): Promise<void>;
  close(): void;
  /** A per-process memory store (on the same clock), for the limiter's 'fallback' policy. */
  createFallback(): Store;
  /** Counters since the store was made. */
  stats(): RedisStoreStats;
}

/** Calls per script call: enough to amortise a round trip, few enough that a run stays well under a millisecond. */
const MAX_PER_SCRIPT_CALL = 256;
/**
 * Consume flushes outstanding at once on a standalone client (see AutoBatcher): two, so that Redis runs one batch
 * while this process settles the other. In a cluster flushes are not held back: one slow node must not delay calls
 * bound for the others.
 */
const MAX_FLUSHES_IN_FLIGHT = 2;
/** The bucket value keeps updatedAt in 6 bytes. */
const MAX_TIME = 2 ** 48 - 1;
const DEFAULT_DENY_CACHE_SIZE = 10_000;

function invalid(message: string): RateLimitError {
  return new RateLimitError('invalid_option', `ratecard: ${message}`);
}

function failure(error: unknown): RateLimitError {
  if (error instanceof RateLimitError) return error;
  const detail = error instanceof Error ? error.message : describeValue(error);
  return new RateLimitError('store_unavailable', `ratecard: Redis failed: ${detail}`, { cause: error });
}

class RedisBucketStore implements RedisStore {
  readonly capabilities: StoreCapabilities = Object.freeze({ shared: true, synchronous: false });
  private readonly client: RedisClient;
  private readonly keys: KeyEncoder;
  private readonly clientClock: boolean;
  private readonly now: () => number;
  private readonly cluster: boolean;
  private readonly denies: DenyCache;
  private readonly batcher: AutoBatcher;
  /** One error per client status: an outage may refuse thousands of calls a second, and a stack each costs more. */
  private readonly notReadyErrors = new Map<string, RateLimitError>();
  private connectRequested = false;
  private closed = false;
  private sent = 0;
  private batches = 0;
  private largestBatch = 0;
  private scriptReloads = 0;
  private unavailable = 0;
  private expired = 0;
  /** One error for every expired call: nobody reads it (the caller has stopped waiting), so it needs no stack each. */
  private readonly expiredError = new RateLimitError(
    'store_timeout',
    'ratecard: the call waited to be sent to Redis past its deadline',
  );

  constructor(options: RedisStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw invalid(`redisStore needs an options object, got ${describeValue(options)}`);
    }
    const { client } = options;
    if (
      typeof client !== 'object' ||
      client === null ||
      typeof client.callBuffer !== 'function' ||
      typeof client.status !== 'string'
    ) {
      throw invalid(`client must be an ioredis Redis or Cluster client, got ${describeValue(client)}`);
    }
    const prefix = options.prefix ?? 'ratecard:';
    if (typeof prefix !== 'string' || prefix.includes('{') || prefix.includes('}')) {
      throw invalid(
        `prefix must be a string without braces (the organization is the key's hash tag), got ${describeValue(prefix)}`,
      );
    }
    const clock = options.clock ?? 'redis';
    if (clock !== 'redis' && clock !== 'client') {
      throw invalid(`clock must be 'redis' or 'client', got ${describeValue(clock)}`);
    }
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw invalid(`now must be a function returning epoch milliseconds, got ${describeValue(options.now)}`);
    }
    if (options.now !== undefined && clock === 'redis') {
      throw invalid("now is read only with clock 'client'; with the default clock 'redis' time comes from Redis TIME");
    }
    const denyCacheSize = options.denyCacheSize ?? DEFAULT_DENY_CACHE_SIZE;
    if (!Number.isSafeInteger(denyCacheSize) || denyCacheSize < 0) {
      throw invalid(`denyCacheSize must be a non-negative integer, got ${describeValue(options.denyCacheSize)}`);
    }
    this.client = client;
    this.keys = new KeyEncoder(prefix);
    this.clientClock = clock === 'client';
    // Date.now is read per call (not captured) so that fake clocks installed after creation are seen.
    this.now = options.now ?? (() => Date.now());
    this.cluster = client.isCluster === true;
    this.denies = new DenyCache(denyCacheSize);
    this.batcher = new AutoBatcher(
      this.sendConsume,
      this.cluster,
      MAX_PER_SCRIPT_CALL,
      this.cluster ? Number.POSITIVE_INFINITY : MAX_FLUSHES_IN_FLIGHT,
      this.onExpired,
    );
  }

  consume(
    organization: string,
    endpoint: string,
    limit: number,
    cost: number,
    deadline = Number.POSITIVE_INFINITY,
  ): Outcome | Promise<Outcome> {
    if (this.closed) return Promise.reject(this.closedError());
    const tag = this.keys.tag(organization);
    const key = this.keys.key(tag, endpoint);
    const cached = this.cachedDenial(key, limit, cost);
    if (cached !== undefined) return cached;
    return new Promise<Outcome>((resolve, reject) => {
      this.send(tag, key, limit, cost, deadline, { settle: resolve, fail: reject });
    });
  }

  consumeTo(
    organization: string,
    endpoint: string,
    limit: number,
    cost: number,
    deadline: number,
    receiver: OutcomeReceiver,
  ): void {
    if (this.closed) return receiver.fail(this.closedError());
    const tag = this.keys.tag(organization);
    const key = this.keys.key(tag, endpoint);
    const cached = this.cachedDenial(key, limit, cost);
    if (cached !== undefined) return receiver.settle(cached);
    this.send(tag, key, limit, cost, deadline, receiver);
  }

  /** The deny cache's answer, when it has one: an exact denial that costs no Redis call. */
  private cachedDenial(key: string, limit: number, cost: number): Outcome | undefined {
    return this.denies.size === 0 ? undefined : this.denies.answer(key, limit, cost, this.cacheTime());
  }

  /** Queues a call for the next flush, or refuses it at once while the client could only queue it offline. */
  private send(tag: string, key: string, limit: number, cost: number, deadline: number, to: OutcomeReceiver): void {
    if (this.client.status !== 'ready') return to.fail(this.notReady());
    const slot = this.cluster ? (tag.length > 0 ? slotOfTag(tag) : slotOfKey(key)) : 0;
    this.batcher.add(key, slot, limit, cost, deadline, to);
  }

  async peek(organization: string, endpoint: string, limit: number, cost: number): Promise<Outcome> {
    const key = this.keyFor(organization, endpoint);
    const reply = await this.run(PEEK, [key, this.clockArgument(), limit, cost]);
    if (typeof reply !== 'number') throw failure(new Error(`unexpected peek reply ${describeValue(reply)}`));
    return reply;
  }

  consumeBatch(calls: readonly BucketCall[]): Promise<Outcome[]> {
    // Every call joins the same flush, so the batch goes out as one script call per slot.
    return Promise.all(calls.map((call) => this.consume(call.organization, call.endpoint, call.limit, call.cost)));
  }

  async reset(organization: string, endpoint: string): Promise<void> {
    const key = this.keyFor(organization, endpoint);
    this.denies.forget(key);
    await this.run(RESET, [key]);
  }

  close(): void {
    this.closed = true;
    this.denies.clear();
  }

  createFallback(): Store {
    return this.clientClock ? memoryStore({ now: this.now }) : memoryStore();
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
      queued: this.batcher.queued,
    };
  }

  private keyFor(organization: string, endpoint: string): string {
    if (this.closed) throw this.closedError();
    return this.keys.key(this.keys.tag(organization), endpoint);
  }

  /** Runs a single-key script, refusing at once when the client could only queue it. */
  private run(script: LuaScript, keyAndArgs: (string | number)[]): Promise<unknown> {
    if (this.client.status !== 'ready') return Promise.reject(this.notReady());
    return runScript(this.client, script, 1, keyAndArgs, this.onReload).then(undefined, (error: unknown) => {
      throw failure(error);
    });
  }

  private readonly onReload = (): void => {
    this.scriptReloads++;
  };

  private readonly onExpired = (count: number): RateLimitError => {
    this.expired += count;
    return this.expiredError;
  };

  /** Sends calls `from`..`to` of a batch as one consume script call and settles each from the reply. */
  private readonly sendConsume = (batch: CallBatch, from: number, to: number): Promise<void> => {
    // The status may have changed since the calls were queued; a command sent now would wait in the offline queue.
    if (this.client.status !== 'ready') {
      batch.rejectAll(this.notReady(), from, to);
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
    const keys = batch.keys;
    const limits = batch.limits;
    const costs = batch.costs;
    const args: (string | Buffer)[] = new Array(n + 3);
    let uniform = true;
    for (let i = 0; i < n; i++) {
      args[i] = keys[from + i] as string;
      if (limits[from + i] !== limits[from] || costs[from + i] !== costs[from]) uniform = false;
    }
    // The script's ARGV: see scripts/consume.ts. One (limit, cost) pair when the whole batch shares it, as a batch
    // from one plan and endpoint does, else one per call.
    const numbers = Buffer.allocUnsafe(uniform ? 16 : 16 * n);
    if (uniform) {
      numbers.writeDoubleLE(limits[from] as number, 0);
      numbers.writeDoubleLE(costs[from] as number, 8);
    } else {
      for (let i = 0; i < n; i++) {
        numbers.writeDoubleLE(limits[from + i] as number, 16 * i);
        numbers.writeDoubleLE(costs[from + i] as number, 16 * i + 8);
      }
    }
    args[n] = now === undefined ? '' : String(now);
    args[n + 1] = numbers;
    args[n + 2] = n > 1 && hasRepeats(keys, from, to) ? '1' : '';
    this.sent += n;
    this.batches++;
    if (n > this.largestBatch) this.largestBatch = n;
    const sentAt = performance.now();
    return runScript(this.client, CONSUME, n, args, this.onReload).then(
      (reply) => this.settleConsume(batch, from, to, reply, now, sentAt),
      (error: unknown) => batch.rejectAll(failure(error), from, to),
    );
  };

  private settleConsume(
    batch: CallBatch,
    from: number,
    to: number,
    reply: unknown,
    now: number | undefined,
    sentAt: number,
  ): void {
    const n = to - from;
    // n outcomes, then a flag per limited one, each a little-endian double (see scripts/consume.ts).
    if (!Buffer.isBuffer(reply) || reply.length < 8 * n || reply.length % 8 !== 0) {
      batch.rejectAll(failure(new Error(`unexpected consume reply ${describeValue(reply)}`)), from, to);
      return;
    }
    const receivedAt = performance.now();
    let flag = 8 * n;
    for (let i = 0; i < n; i++) {
      const j = from + i;
      const outcome = reply.readDoubleLE(8 * i);
      const key = batch.keys[j] as string;
      if (outcome >= 0) {
        this.denies.forget(key);
      } else {
        const steady = flag < reply.length && reply.readDoubleLE(flag) === 1;
        flag += 8;
        if (steady) {
          const limit = batch.limits[j] as number;
          const cost = batch.costs[j] as number;
          const wait = msUntilAvailable(outcome, limit, cost);
          // Client clock: exact in that clock. Redis clock: the script ran after `sentAt` and before `receivedAt`,
          // so `sentAt + wait` is never later than the exact instant, and units counted from `receivedAt` never more.
          if (now !== undefined) this.denies.remember(key, limit, cost, -1 - outcome, now, now + wait);
          else this.denies.remember(key, limit, cost, -1 - outcome, receivedAt, sentAt + wait);
        }
      }
      (batch.receivers[j] as OutcomeReceiver).settle(outcome);
    }
  }

  /** The deny cache's time frame: the client clock, or this process's monotonic clock. */
  private cacheTime(): number {
    return this.clientClock ? Math.floor(this.now()) : performance.now();
  }

  private clockArgument(): number | string {
    return this.clientClock ? this.readClock() : '';
  }

  private readClock(): number {
    const now = Math.floor(this.now());
    if (!(now >= 0 && now <= MAX_TIME)) {
      throw invalid(`now() must return epoch milliseconds, got ${describeValue(now)}`);
    }
    return now;
  }

  private notReady(): RateLimitError {
    this.unavailable++;
    const status = this.client.status;
    if (status === 'wait' && !this.connectRequested && typeof this.client.connect === 'function') {
      // A lazyConnect client connects on its first command; the store sends none while it is not ready, so ask.
      this.connectRequested = true;
      this.client.connect().then(undefined, () => undefined);
    }
    let error = this.notReadyErrors.get(status);
    if (error === undefined) {
      error = new RateLimitError('store_unavailable', `ratecard: the Redis client is not ready (status '${status}')`);
      this.notReadyErrors.set(status, error);
    }
    return error;
  }

  private closedError(): RateLimitError {
    return new RateLimitError('store_closed', 'ratecard: this Redis store is closed');
  }
}

/** Whether a key appears more than once among `keys[from..to)`: the script then tracks what it wrote. */
function hasRepeats(keys: readonly string[], from: number, to: number): boolean {
  const seen = new Set<string>();
  for (let i = from; i < to; i++) {
    const key = keys[i] as string;
    if (seen.has(key)) return true;
    seen.add(key);
  }
  return false;
}

/**
 * A token-bucket store on Redis or Redis Cluster: one atomic Lua script per bucket update, calls of the same tick
 * batched into one script call (per slot in a cluster), and a local cache of buckets known to be empty.
 */
export function redisStore(options: RedisStoreOptions): RedisStore {
  return new RedisBucketStore(options);
}
