import {
  type BucketCall,
  describeValue,
  msUntilFull,
  type Outcome,
  RateLimitError,
  type Store,
  type StoreCapabilities,
  take,
  UNITS_PER_TOKEN,
  unitsAt,
} from '@ratecard/core';
import { turnClock } from './turn-clock.js';

export interface MemoryStoreOptions {
  /**
   * Clock in epoch milliseconds, called on every request; fractions are floored (bucket time is whole ms). Default:
   * Date.now read once per event-loop turn (see turn-clock.ts).
   */
  now?: () => number;
  /**
   * Most buckets kept at once; default 1 000 000. At the bound, buckets that have refilled to full are dropped
   * (that loses nothing); if none has, the least recently created bucket is evicted (its organization starts
   * over with a full bucket) and `stats().evicted` counts it.
   */
  maxBuckets?: number;
}

export interface MemoryStoreStats {
  /** Buckets held now. */
  buckets: number;
  /** Full buckets dropped by sweeps (lossless). */
  dropped: number;
  /** Buckets that were not yet full and were evicted at `maxBuckets` (each one a lost partial bucket). */
  evicted: number;
}

/** The memory store answers synchronously, so its methods return plain values. */
export interface MemoryStore extends Store {
  consume(organization: string, endpoint: string, limit: number, cost: number): Outcome;
  peek(organization: string, endpoint: string, limit: number, cost: number): Outcome;
  consumeBatch(calls: readonly BucketCall[]): Outcome[];
  reset(organization: string, endpoint: string): void;
  close(): void;
  /** Counters for monitoring the bound. */
  stats(): MemoryStoreStats;
}

// Per bucket, three doubles in one growable Float64Array: units held, when (ms), and the limit then in force.
const STRIDE = 3;

/**
 * A per-process store: buckets in a two-level Map (endpoint rule, then organization) pointing at slots of a
 * Float64Array, so a tracked organization costs a Map entry and 24 bytes, and a call allocates nothing. No timers:
 * full buckets are swept when the bound is reached.
 */
class InProcessStore implements MemoryStore {
  readonly capabilities: StoreCapabilities = Object.freeze({ shared: false, synchronous: true });
  private readonly now: () => number;
  private readonly maxBuckets: number;
  private readonly byEndpoint = new Map<string, Map<string, number>>();
  /** The last endpoint looked up and its map: the limiter passes the same rule-key string every time. */
  private lastEndpoint = '';
  private lastBuckets: Map<string, number> | undefined;
  private state: Float64Array = new Float64Array(STRIDE * 1024);
  private freeSlots: number[] = [];
  private nextSlot = 0;
  private size = 0;
  private dropped = 0;
  private evicted = 0;
  /** Creations since the last sweep; a sweep costs O(buckets), so it runs at most once per sweepEvery creations. */
  private createdSinceSweep: number;
  private readonly sweepEvery: number;

  constructor(options: MemoryStoreOptions) {
    this.now = options.now ?? turnClock;
    if (typeof this.now !== 'function') {
      throw new RateLimitError('invalid_option', `ratecard: now must be a function, got ${describeValue(this.now)}`);
    }
    this.maxBuckets = options.maxBuckets ?? 1_000_000;
    if (!Number.isSafeInteger(this.maxBuckets) || this.maxBuckets < 1) {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: maxBuckets must be a positive integer, got ${describeValue(options.maxBuckets)}`,
      );
    }
    this.sweepEvery = Math.ceil(this.maxBuckets / 8);
    this.createdSinceSweep = this.sweepEvery;
  }

  consume(organization: string, endpoint: string, limit: number, cost: number): Outcome {
    const now = Math.floor(this.now());
    const buckets = this.bucketsOf(endpoint);
    const slot = buckets?.get(organization);
    if (slot === undefined) {
      // A missing bucket is full, and cost never exceeds the limit, so the request is admitted.
      const outcome = take(limit * UNITS_PER_TOKEN, cost);
      this.write(this.create(endpoint, organization, buckets, now), outcome, now, limit);
      return outcome;
    }
    const base = slot * STRIDE;
    const state = this.state;
    const updatedAt = state[base + 1] as number;
    const held = unitsAt(state[base] as number, updatedAt, state[base + 2] as number, now, limit);
    const outcome = take(held, cost);
    if (outcome >= 0) {
      // Time never moves backwards in a bucket, or the same interval would refill twice.
      this.write(slot, outcome, Math.max(now, updatedAt), limit);
    }
    return outcome;
  }

  peek(organization: string, endpoint: string, limit: number, cost: number): Outcome {
    const slot = this.bucketsOf(endpoint)?.get(organization);
    if (slot === undefined) return take(limit * UNITS_PER_TOKEN, cost);
    const base = slot * STRIDE;
    const state = this.state;
    const now = Math.floor(this.now());
    return take(unitsAt(state[base] as number, state[base + 1] as number, state[base + 2] as number, now, limit), cost);
  }

  consumeBatch(calls: readonly BucketCall[]): Outcome[] {
    return calls.map((call) => this.consume(call.organization, call.endpoint, call.limit, call.cost));
  }

  reset(organization: string, endpoint: string): void {
    const buckets = this.byEndpoint.get(endpoint);
    const slot = buckets?.get(organization);
    if (buckets === undefined || slot === undefined) return;
    buckets.delete(organization);
    if (buckets.size === 0) this.dropEndpoint(endpoint);
    this.release(slot);
  }

  close(): void {
    this.byEndpoint.clear();
    this.lastEndpoint = '';
    this.lastBuckets = undefined;
    this.state = new Float64Array(0);
    this.freeSlots = [];
    this.nextSlot = 0;
    this.size = 0;
  }

  stats(): MemoryStoreStats {
    return { buckets: this.size, dropped: this.dropped, evicted: this.evicted };
  }

  private bucketsOf(endpoint: string): Map<string, number> | undefined {
    if (endpoint === this.lastEndpoint) return this.lastBuckets;
    const buckets = this.byEndpoint.get(endpoint);
    if (buckets !== undefined) {
      this.lastEndpoint = endpoint;
      this.lastBuckets = buckets;
    }
    return buckets;
  }

  private dropEndpoint(endpoint: string): void {
    this.byEndpoint.delete(endpoint);
    if (endpoint === this.lastEndpoint) {
      this.lastEndpoint = '';
      this.lastBuckets = undefined;
    }
  }

  private write(slot: number, units: number, at: number, limit: number): void {
    const base = slot * STRIDE;
    this.state[base] = units;
    this.state[base + 1] = at;
    this.state[base + 2] = limit;
  }

  private create(endpoint: string, organization: string, known: Map<string, number> | undefined, now: number): number {
    let buckets = known;
    if (this.size >= this.maxBuckets) {
      this.makeRoom(now);
      // Making room may have dropped this endpoint's map with its last bucket.
      buckets = this.byEndpoint.get(endpoint);
    }
    if (buckets === undefined) {
      buckets = new Map();
      this.byEndpoint.set(endpoint, buckets);
    }
    const slot = this.freeSlots.pop() ?? this.grow();
    buckets.set(organization, slot);
    this.size++;
    this.createdSinceSweep++;
    return slot;
  }

  private grow(): number {
    const slot = this.nextSlot++;
    if ((slot + 1) * STRIDE > this.state.length) {
      const bigger = new Float64Array(Math.max(this.state.length * 2, STRIDE * 1024));
      bigger.set(this.state);
      this.state = bigger;
    }
    return slot;
  }

  private release(slot: number): void {
    this.freeSlots.push(slot);
    this.size--;
  }

  /**
   * Frees one slot at the bound. Full buckets go first (lossless); a sweep for them costs O(buckets), so between
   * sweeps, and when a sweep freed nothing, the least recently created bucket is evicted instead. Under a flood of
   * new organizations that keeps creation amortised O(1).
   */
  private makeRoom(now: number): void {
    if (this.createdSinceSweep >= this.sweepEvery) {
      this.createdSinceSweep = 0;
      this.dropFullBuckets(now);
      if (this.size < this.maxBuckets) return;
    }
    this.evictOldest();
  }

  private dropFullBuckets(now: number): void {
    const state = this.state;
    for (const [endpoint, buckets] of this.byEndpoint) {
      for (const [organization, slot] of buckets) {
        const base = slot * STRIDE;
        if (now - (state[base + 1] as number) >= msUntilFull(state[base] as number, state[base + 2] as number)) {
          buckets.delete(organization);
          this.release(slot);
          this.dropped++;
        }
      }
      if (buckets.size === 0) this.dropEndpoint(endpoint);
    }
  }

  private evictOldest(): void {
    for (const [endpoint, buckets] of this.byEndpoint) {
      const oldest = buckets.entries().next();
      if (oldest.done) continue;
      const [organization, slot] = oldest.value;
      buckets.delete(organization);
      if (buckets.size === 0) this.dropEndpoint(endpoint);
      this.release(slot);
      this.evicted++;
      return;
    }
  }
}

/** A token-bucket store in this process: exact, allocation-free per call, bounded by `maxBuckets`. */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return new InProcessStore(options);
}
