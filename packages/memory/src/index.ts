import {
  describeValue,
  msUntilFull,
  type Outcome,
  RateLimitError,
  type Store,
  take,
  UNITS_PER_TOKEN,
  unitsAt,
} from '@ratecard/core';

export interface MemoryStoreOptions {
  /**
   * Clock in epoch milliseconds, called on every request; fractions are floored (bucket time is whole ms). Default:
   * Date.now, which every runtime has (Node, Bun, Deno, Workers), where a per-turn cache would need setImmediate.
   */
  now?: () => number;
  /**
   * Most buckets kept at once; default 1 000 000. Full buckets are dropped as new ones are created (that loses
   * nothing); at the bound every full bucket is swept out, and if none is full, the bucket looked at longest ago is
   * evicted (its organization starts over with a full bucket) and `stats().evicted` counts it.
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
  reset(organization: string, endpoint: string): void;
  close(): void;
  /** Counters for monitoring the bound. */
  stats(): MemoryStoreStats;
}

// Per bucket, three doubles in one growable Float64Array: units held, when (ms), and the limit then in force.
const STRIDE = 3;

/** The buckets of one endpoint: organization → slot. */
interface EndpointBuckets {
  readonly endpoint: string;
  readonly slots: Map<string, number>;
}

/**
 * A per-process store: buckets in a two-level Map (endpoint rule, then organization) pointing at slots of a
 * Float64Array, so a call allocates nothing. Each slot also records its owner, so that sweeping and evicting walk
 * slot numbers and never iterate a Map (whose deleted entries would make that slow). No timers.
 */
class InProcessStore implements MemoryStore {
  readonly shared = false;
  private readonly now: () => number;
  private readonly maxBuckets: number;
  private readonly byEndpoint = new Map<string, EndpointBuckets>();
  /** The last endpoint looked up and its buckets: the limiter passes the same rule-key string every time. */
  private lastEndpoint = '';
  private lastBuckets: EndpointBuckets | undefined;
  private state: Float64Array = new Float64Array(STRIDE * 1024);
  /** Per slot, the organization that owns it (undefined: free) and its endpoint's buckets. */
  private owners: (string | undefined)[] = [];
  private ownerBuckets: (EndpointBuckets | undefined)[] = [];
  private freeSlots: number[] = [];
  private nextSlot = 0;
  /** The clock hand: the next slot the incremental sweep looks at. */
  private hand = 0;
  private size = 0;
  private dropped = 0;
  private evicted = 0;
  /** Creations since the last full sweep; a full sweep costs O(slots), so it runs at most once per sweepEvery. */
  private createdSinceSweep: number;
  private readonly sweepEvery: number;

  constructor(options: MemoryStoreOptions) {
    // Read per call, not captured, so that a fake clock installed after creation is seen.
    this.now = options.now ?? (() => Date.now());
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
    const slot = this.bucketsOf(endpoint)?.slots.get(organization);
    if (slot === undefined) {
      // A missing bucket is full, and cost never exceeds the limit, so the request is admitted.
      const outcome = take(limit * UNITS_PER_TOKEN, cost);
      this.write(this.create(endpoint, organization, now), outcome, now, limit);
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
    const slot = this.bucketsOf(endpoint)?.slots.get(organization);
    if (slot === undefined) return take(limit * UNITS_PER_TOKEN, cost);
    const base = slot * STRIDE;
    const state = this.state;
    const now = Math.floor(this.now());
    return take(unitsAt(state[base] as number, state[base + 1] as number, state[base + 2] as number, now, limit), cost);
  }

  reset(organization: string, endpoint: string): void {
    const slot = this.bucketsOf(endpoint)?.slots.get(organization);
    if (slot !== undefined) this.forget(slot);
  }

  close(): void {
    this.byEndpoint.clear();
    this.lastEndpoint = '';
    this.lastBuckets = undefined;
    this.state = new Float64Array(0);
    this.owners = [];
    this.ownerBuckets = [];
    this.freeSlots = [];
    this.nextSlot = 0;
    this.hand = 0;
    this.size = 0;
  }

  stats(): MemoryStoreStats {
    return { buckets: this.size, dropped: this.dropped, evicted: this.evicted };
  }

  private bucketsOf(endpoint: string): EndpointBuckets | undefined {
    if (endpoint === this.lastEndpoint) return this.lastBuckets;
    const buckets = this.byEndpoint.get(endpoint);
    if (buckets !== undefined) {
      this.lastEndpoint = endpoint;
      this.lastBuckets = buckets;
    }
    return buckets;
  }

  private write(slot: number, units: number, at: number, limit: number): void {
    const base = slot * STRIDE;
    this.state[base] = units;
    this.state[base + 1] = at;
    this.state[base + 2] = limit;
  }

  private isFull(slot: number, now: number): boolean {
    const base = slot * STRIDE;
    const state = this.state;
    return now - (state[base + 1] as number) >= msUntilFull(state[base] as number, state[base + 2] as number);
  }

  private create(endpoint: string, organization: string, now: number): number {
    if (this.size >= this.maxBuckets) this.makeRoom(now);
    else this.sweepStep(now);
    let buckets = this.byEndpoint.get(endpoint);
    if (buckets === undefined) {
      buckets = { endpoint, slots: new Map() };
      this.byEndpoint.set(endpoint, buckets);
    }
    const slot = this.freeSlots.pop() ?? this.grow();
    buckets.slots.set(organization, slot);
    this.owners[slot] = organization;
    this.ownerBuckets[slot] = buckets;
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
    this.owners.push(undefined);
    this.ownerBuckets.push(undefined);
    return slot;
  }

  /** Removes a bucket, freeing its slot (and its endpoint's map when that was the last bucket). */
  private forget(slot: number): void {
    const organization = this.owners[slot] as string;
    const buckets = this.ownerBuckets[slot] as EndpointBuckets;
    buckets.slots.delete(organization);
    if (buckets.slots.size === 0) {
      this.byEndpoint.delete(buckets.endpoint);
      if (buckets === this.lastBuckets) {
        this.lastEndpoint = '';
        this.lastBuckets = undefined;
      }
    }
    this.owners[slot] = undefined;
    this.ownerBuckets[slot] = undefined;
    this.freeSlots.push(slot);
    this.size--;
  }

  /** The next slot in use at or after the clock hand, moving the hand past it. */
  private nextOwnedSlot(): number {
    for (;;) {
      if (this.hand >= this.nextSlot) this.hand = 0;
      const slot = this.hand++;
      if (this.owners[slot] !== undefined) return slot;
    }
  }

  /**
   * The incremental half of forgetting full buckets: every new bucket pays for a look at the next two buckets under
   * the clock hand, and a full one is dropped (that loses nothing). A whole turn of the hand takes half as many
   * creations as there are slots, so memory follows the number of buckets that are not full, without a timer.
   */
  private sweepStep(now: number): void {
    for (let look = 0; look < 2 && this.size > 0; look++) {
      const slot = this.nextOwnedSlot();
      if (this.isFull(slot, now)) {
        this.forget(slot);
        this.dropped++;
      }
    }
  }

  /**
   * Frees a slot at the bound. Full buckets go first (lossless); a full sweep costs O(slots), so it runs at most
   * once per sweepEvery creations. When it frees nothing, or between sweeps, the bucket under the clock hand (the
   * one looked at longest ago) is evicted instead, so a flood of new organizations stays amortised O(1).
   */
  private makeRoom(now: number): void {
    if (this.createdSinceSweep >= this.sweepEvery) {
      this.createdSinceSweep = 0;
      for (let slot = 0; slot < this.nextSlot; slot++) {
        if (this.owners[slot] !== undefined && this.isFull(slot, now)) {
          this.forget(slot);
          this.dropped++;
        }
      }
      if (this.size < this.maxBuckets) return;
    }
    this.forget(this.nextOwnedSlot());
    this.evicted++;
  }
}

/** A token-bucket store in this process: exact, allocation-free per call, bounded by `maxBuckets`. */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return new InProcessStore(options);
}
