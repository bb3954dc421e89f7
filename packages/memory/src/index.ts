/**
 * ratecard's in-process store, `memoryStore()`: exact, bounded by `maxBuckets`, answering with plain values.
 *
 * @module @ratecard/memory
 */
import {
  type BlockChange,
  type BucketShape,
  checkOptionKeys,
  costAt,
  debtFloor,
  describeValue,
  type KeptBlock,
  type KeptBlocks,
  type KeptState,
  type Lease,
  type LeaseChange,
  type Limit,
  msUntilFull,
  type Outcome,
  RateLimitError,
  refusal,
  type Store,
  sameShape,
  take,
  unitsAt,
  writtenAt,
} from '@ratecard/core';

/** Options of `memoryStore`; both have defaults. */
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

/** Every key of MemoryStoreOptions: memoryStore refuses any other. */
const MEMORY_STORE_OPTIONS = { now: true, maxBuckets: true } satisfies Record<keyof MemoryStoreOptions, true>;

/** The memory store's counters, from `stats()`. */
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
  consume(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    budgetMs?: number,
    lease?: Lease,
  ): Outcome[];
  settle(organization: string, endpoint: string, limits: readonly Limit[], change: LeaseChange): boolean;
  peek(organization: string, endpoint: string, limits: readonly Limit[], cost: number | readonly number[]): Outcome[];
  reset(organization: string, endpoint: string, limits: readonly Limit[]): void;
  inspect(organization: string, endpoint: string): KeptState;
  blocks(change?: BlockChange): KeptBlocks;
  close(): void;
  /** Counters for monitoring the bound. */
  stats(): MemoryStoreStats;
}

// Per bucket, two doubles in one growable Float64Array: units held and when (ms); beside them, the limit then in force.
const STRIDE = 2;

/**
 * A held lease (docs/stores.md, "Leases"): the limits of the call that reserved it, in order, and its cost (one number
 * for every limit, or one per limit): the tokens it set aside in each bucket, the slots it takes of each concurrency
 * limit. A reset of some of the limits drops them from the lease.
 */
interface HeldLease {
  readonly id: string;
  expiresAt: number;
  limits: readonly Limit[];
  cost: number | readonly number[];
}

/**
 * The leases held on one key, in a plain array (a key holds a few: an array's search costs less than making Maps per
 * key, which took a quarter of a reserve and its settle), and a bound on the earliest expiry among them.
 */
interface KeyLeases {
  readonly list: HeldLease[];
  /** No lease expires before this (it may be earlier than the earliest: a settled or extended lease leaves it). */
  nextExpiry: number;
}

/** The buckets of one limit of one endpoint: organization → slot. */
interface LimitBuckets {
  readonly endpoint: string;
  readonly name: string;
  readonly slots: Map<string, number>;
}

/**
 * A per-process store: buckets in a three-level Map (endpoint rule, limit name, organization) pointing at slots of a
 * Float64Array, so a call allocates nothing but its outcomes. Each slot also records its owner, so that sweeping and
 * evicting walk slot numbers and never iterate a Map (whose deleted entries would make that slow). No timers.
 */
class InProcessStore implements MemoryStore {
  readonly shared = false;
  private readonly now: () => number;
  private readonly maxBuckets: number;
  private readonly byEndpoint = new Map<string, Map<string, LimitBuckets>>();
  /** The buckets last looked up: the limiter passes the same rule-key and limit-name strings every time. */
  private lastBuckets: LimitBuckets | undefined;
  private state: Float64Array = new Float64Array(STRIDE * 1024);
  /** Per slot, the shape of the limit in force when the bucket was written. */
  private shapes: (BucketShape | undefined)[] = [];
  /** Per slot, the organization that owns it (undefined: free) and its limit's buckets. */
  private owners: (string | undefined)[] = [];
  private ownerBuckets: (LimitBuckets | undefined)[] = [];
  /**
   * Per limit of the call under way: its slot (-1: no bucket yet), its units refilled to now (Q), and what held
   * leases set aside there (P, or for a concurrency limit the slots they take), read before anything is written.
   */
  private readonly callSlots: number[] = [];
  private readonly callHeld: number[] = [];
  private readonly callAside: number[] = [];
  /** Held leases by endpoint and organization, and how many there are: with none, a call never looks. */
  private readonly leases = new Map<string, Map<string, KeyLeases>>();
  private leaseCount = 0;
  /** Keys whose entry holds no lease now: kept for their next one, dropped together when many (dropLease). */
  private emptyKeys = 0;
  /** Blocks in force, by organization and endpoint ('*': every endpoint). */
  private readonly blocked = new Map<string, KeptBlock>();
  /** How many limits of the call under way have no bucket yet. */
  private callMissing = 0;
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
    if (typeof options !== 'object' || options === null) {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: memoryStore takes an options object, got ${describeValue(options)}`,
      );
    }
    checkOptionKeys(options, MEMORY_STORE_OPTIONS, 'memoryStore');
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

  consume(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    _budgetMs?: number,
    lease?: Lease,
  ): Outcome[] {
    const now = Math.floor(this.now());
    const held = this.leaseCount === 0 ? undefined : this.heldLeases(organization, endpoint, now);
    const outcomes = this.read(organization, endpoint, limits, cost, now, held);
    const n = limits.length;
    for (let i = 0; i < n; i++) if ((outcomes[i] as Outcome) < 0) return this.refuse(outcomes, limits, now);
    // Charged, a bucket holds its outcome and what leases set aside there (Q = outcome + P); a reservation charges
    // nothing, its lease sets the cost aside, and the bucket keeps Q as read.
    if (lease !== undefined) this.hold(organization, endpoint, limits, cost, lease, now, held);
    const units = lease === undefined ? outcomes : this.callHeld;
    for (let i = 0; i < n; i++) {
      const slot = this.callSlots[i] as number;
      if (slot >= 0) {
        const limit = limits[i] as Limit;
        // Time never moves backwards in a bucket, or the same interval would refill twice.
        const at = writtenAt(this.state[slot * STRIDE + 1] as number, now, limit);
        this.write(slot, (units[i] as number) + (lease === undefined ? (this.callAside[i] as number) : 0), at, limit);
      }
    }
    if (this.callMissing !== 0 && lease === undefined)
      this.createMissing(organization, endpoint, limits, outcomes, now);
    return outcomes;
  }

  peek(organization: string, endpoint: string, limits: readonly Limit[], cost: number | readonly number[]): Outcome[] {
    const n = limits.length;
    const now = Math.floor(this.now());
    const held = this.leaseCount === 0 ? undefined : this.heldLeases(organization, endpoint, now);
    const outcomes = this.read(organization, endpoint, limits, cost, now, held);
    for (let i = 0; i < n; i++) {
      if ((outcomes[i] as Outcome) < 0) {
        for (let j = 0; j < n; j++) outcomes[j] = refusal((this.callHeld[j] as number) - (this.callAside[j] as number));
        break;
      }
    }
    return outcomes;
  }

  settle(organization: string, endpoint: string, limits: readonly Limit[], change: LeaseChange): boolean {
    const now = Math.floor(this.now());
    const held = this.leaseCount === 0 ? undefined : this.heldLeases(organization, endpoint, now);
    const lease = held?.list.find((each) => each.id === change.id);
    if (held === undefined || lease === undefined) return false;
    if (change.holdMs !== undefined) {
      lease.expiresAt = now + change.holdMs;
      if (lease.expiresAt < held.nextExpiry) held.nextExpiry = lease.expiresAt;
      return true;
    }
    this.dropLease(held, lease);
    const reserved = lease.limits;
    for (let j = 0; j < reserved.length; j++) {
      const shape = reserved[j] as Limit;
      if (shape.kind === 'concurrency') continue;
      const i = limits === reserved ? j : limits.findIndex((limit) => limit.name === shape.name);
      // A limit the lease holds that the call does not name is charged what it set aside.
      const given = i === -1 ? undefined : (limits[i] as Limit);
      const tokens = given === undefined ? costAt(lease.cost, j) : costAt(change.actual, i);
      this.charge(organization, endpoint, shape, given, tokens, now, held);
    }
    return true;
  }

  /**
   * Charges `tokens` to a bucket at `now` in place of what a lease set aside there, under `given`'s shape (else the
   * bucket's own, else `reserved`, the one it was reserved with), never below the debt floor: what it holds, Q − P of
   * the leases still held, stays at least minus the capacity.
   */
  private charge(
    organization: string,
    endpoint: string,
    reserved: Limit,
    given: BucketShape | undefined,
    tokens: number,
    now: number,
    held: KeyLeases,
  ): void {
    const name = reserved.name;
    const slot = this.bucketsOf(endpoint, name)?.slots.get(organization);
    const limit = given ?? (slot === undefined ? reserved : (this.shapes[slot] as BucketShape));
    const u = limit.unitsPerToken;
    const q = slot === undefined ? limit.capacity * u : this.unitsNow(slot, now, limit);
    const aside = setAside(held, name) * u;
    const units = Math.max(q - tokens * u, aside + debtFloor(limit));
    if (slot === undefined)
      this.write(this.create(endpoint, name, organization, now), units, writtenAt(0, now, limit), limit);
    else this.write(slot, units, writtenAt(this.state[slot * STRIDE + 1] as number, now, limit), limit);
  }

  /** Q of a slot at `now` under `limit`'s shape. */
  private unitsNow(slot: number, now: number, limit: BucketShape): number {
    const base = slot * STRIDE;
    return unitsAt(
      this.state[base] as number,
      this.state[base + 1] as number,
      this.shapes[slot] as BucketShape,
      now,
      limit,
    );
  }

  /**
   * The leases held on a key at `now`, after expiring those whose instant has come, in order: each bucket such a lease
   * names is refilled to that instant and charged what the lease set aside, so what it holds does not change then;
   * the lease keeps its charge. (Peek expires them too: the numbers are those the lease would have had expired on
   * time, so nothing a later call sees changes.) Undefined when the key holds none.
   */
  private heldLeases(organization: string, endpoint: string, now: number): KeyLeases | undefined {
    const held = this.leases.get(endpoint)?.get(organization);
    if (held === undefined || now < held.nextExpiry) return held;
    const due: HeldLease[] = [];
    let next = Number.POSITIVE_INFINITY;
    for (const lease of held.list) {
      if (lease.expiresAt <= now) due.push(lease);
      else if (lease.expiresAt < next) next = lease.expiresAt;
    }
    held.nextExpiry = next;
    due.sort((a, b) => a.expiresAt - b.expiresAt);
    for (const lease of due) {
      this.dropLease(held, lease);
      const reserved = lease.limits;
      for (let j = 0; j < reserved.length; j++) {
        const limit = reserved[j] as Limit;
        if (limit.kind !== 'concurrency') {
          this.charge(organization, endpoint, limit, undefined, costAt(lease.cost, j), lease.expiresAt, held);
        }
      }
    }
    return held;
  }

  /** Records the lease of an admitted reserving call: per limit, the tokens it sets aside or the slots it takes. */
  private hold(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    lease: Lease,
    now: number,
    found: KeyLeases | undefined,
  ): void {
    if (found?.list.some((each) => each.id === lease.id)) {
      throw new RateLimitError('invalid_argument', `ratecard: lease ${lease.id} is already held on this key`);
    }
    let held = found ?? this.leases.get(endpoint)?.get(organization);
    if (held !== undefined && held.list.length === 0) this.emptyKeys--;
    if (held === undefined) {
      let byOrganization = this.leases.get(endpoint);
      if (byOrganization === undefined) {
        byOrganization = new Map();
        this.leases.set(endpoint, byOrganization);
      }
      held = { list: [], nextExpiry: Number.POSITIVE_INFINITY };
      byOrganization.set(organization, held);
    }
    const expiresAt = now + lease.ms;
    held.list.push({ id: lease.id, expiresAt, limits, cost });
    if (expiresAt < held.nextExpiry) held.nextExpiry = expiresAt;
    this.leaseCount++;
  }

  /** Drops a lease from its key; the key's entry goes with its last lease. */
  private dropLease(held: KeyLeases, lease: HeldLease): void {
    const list = held.list;
    const at = list.indexOf(lease);
    // Order does not matter: the last lease takes the place of the one dropped.
    list[at] = list[list.length - 1] as HeldLease;
    list.pop();
    this.leaseCount--;
    if (list.length > 0) return;
    // The key's entry is kept for its next lease (making it again for each took a sixth of a reserve and its settle,
    // measured), and entries left empty are dropped together once they are many and outnumber the leases held.
    this.emptyKeys++;
    if (this.emptyKeys > 1024 && this.emptyKeys > this.leaseCount) this.dropEmptyKeys();
  }

  private dropEmptyKeys(): void {
    for (const [endpoint, byOrganization] of this.leases) {
      for (const [organization, held] of byOrganization)
        if (held.list.length === 0) byOrganization.delete(organization);
      if (byOrganization.size === 0) this.leases.delete(endpoint);
    }
    this.emptyKeys = 0;
  }

  /**
   * Makes the buckets of an admitted call that had none, charged. After the buckets that exist: making one may sweep
   * out buckets that are full, and once charged none of this call's is, so no slot read before is freed (and reused)
   * before it is written.
   */
  private createMissing(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    outcomes: Outcome[],
    now: number,
  ): void {
    for (let i = 0; i < limits.length; i++) {
      if (this.callSlots[i] !== -1) continue;
      const limit = limits[i] as Limit;
      const units = (outcomes[i] as Outcome) + (this.callAside[i] as number);
      this.write(this.create(endpoint, limit.name, organization, now), units, writtenAt(0, now, limit), limit);
    }
  }

  /**
   * All or nothing: a refused call charges no bucket, and a limit that had the tokens reports what it holds. A bucket
   * last written under another shape takes the new one (what it holds, converted), so that it refills at the rate the
   * refusal's Retry-After was counted with.
   */
  private refuse(outcomes: Outcome[], limits: readonly Limit[], now: number): Outcome[] {
    for (let i = 0; i < limits.length; i++) {
      const held = this.callHeld[i] as number;
      outcomes[i] = refusal(held - (this.callAside[i] as number));
      const slot = this.callSlots[i] as number;
      const limit = limits[i] as Limit;
      if (slot >= 0 && !sameShape(this.shapes[slot] as BucketShape, limit)) {
        this.write(slot, held, writtenAt(this.state[slot * STRIDE + 1] as number, now, limit), limit);
      }
    }
    return outcomes;
  }

  reset(organization: string, endpoint: string, limits: readonly Limit[]): void {
    for (const limit of limits) {
      const slot = this.bucketsOf(endpoint, limit.name)?.slots.get(organization);
      if (slot !== undefined) this.forget(slot);
    }
    // Every lease's hold on those limits goes too; a lease left holding nothing is gone.
    const held = this.leases.get(endpoint)?.get(organization);
    if (held === undefined) return;
    for (const lease of [...held.list]) {
      const keep = lease.limits.map((limit) => !limits.some((reset) => reset.name === limit.name));
      if (keep.every(Boolean)) continue;
      lease.cost = lease.limits.map((_, i) => costAt(lease.cost, i)).filter((_, i) => keep[i]);
      lease.limits = lease.limits.filter((_, i) => keep[i]);
      if (lease.limits.length === 0) this.dropLease(held, lease);
    }
  }

  /**
   * Each limit's outcome on its own, as take() gives it of what the bucket holds (Q − P), with its slot, Q and P kept
   * in callSlots, callHeld and callAside; a concurrency limit's of its free slots (slot -2: it has no bucket). Nothing
   * is written.
   */
  private read(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    now: number,
    held: KeyLeases | undefined,
  ): Outcome[] {
    const n = limits.length;
    // Sized up front: pushed onto an empty array, the outcomes would get room for 17.
    const outcomes = new Array<Outcome>(n);
    const state = this.state;
    this.callMissing = 0;
    for (let i = 0; i < n; i++) {
      const limit = limits[i] as Limit;
      const aside = held === undefined ? 0 : setAside(held, limit.name) * limit.unitsPerToken;
      this.callAside[i] = aside;
      if (limit.kind === 'concurrency') {
        this.callSlots[i] = -2;
        this.callHeld[i] = limit.capacity;
        outcomes[i] = take(limit.capacity - aside, costAt(cost, i), limit);
        continue;
      }
      const slot = this.bucketsOf(endpoint, limit.name)?.slots.get(organization);
      let units: number;
      if (slot === undefined) {
        // A missing bucket is full.
        units = limit.capacity * limit.unitsPerToken;
        this.callSlots[i] = -1;
        this.callMissing++;
      } else {
        const base = slot * STRIDE;
        units = unitsAt(state[base] as number, state[base + 1] as number, this.shapes[slot] as BucketShape, now, limit);
        this.callSlots[i] = slot;
      }
      this.callHeld[i] = units;
      outcomes[i] = take(units - aside, costAt(cost, i), limit);
    }
    return outcomes;
  }

  inspect(organization: string, endpoint: string): KeptState {
    const now = Math.floor(this.now());
    const leases = (this.leaseCount === 0 ? undefined : this.heldLeases(organization, endpoint, now))?.list ?? [];
    const buckets = [];
    for (const limitBuckets of this.byEndpoint.get(endpoint)?.values() ?? []) {
      const slot = limitBuckets.slots.get(organization);
      if (slot === undefined) continue;
      const shape = this.shapes[slot] as BucketShape;
      const base = slot * STRIDE;
      buckets.push({
        name: limitBuckets.name,
        units: this.state[base] as number,
        updatedAt: this.state[base + 1] as number,
        capacity: shape.capacity,
        unitsPerToken: shape.unitsPerToken,
        unitsPerMs: shape.unitsPerMs,
      });
    }
    const kept = leases.map(({ id, expiresAt, limits, cost }) => ({
      id,
      expiresAt,
      holds: limits.map((limit, i) => ({ name: limit.name, amount: costAt(cost, i) })),
    }));
    return { now, buckets, leases: kept };
  }

  blocks(change?: BlockChange): KeptBlocks {
    const now = Math.floor(this.now());
    if (change !== undefined) {
      // As JSON: an organization may hold any character, NUL included, so no separator keeps two pairs apart.
      const key = JSON.stringify([change.organization, change.endpoint]);
      if (change.ms > 0) {
        this.blocked.set(key, {
          organization: change.organization,
          endpoint: change.endpoint,
          until: now + change.ms,
          reason: change.reason,
        });
      } else this.blocked.delete(key);
    }
    for (const [key, block] of this.blocked) if (block.until <= now) this.blocked.delete(key);
    return { now, blocks: [...this.blocked.values()] };
  }

  close(): void {
    this.blocked.clear();
    this.byEndpoint.clear();
    this.lastBuckets = undefined;
    this.state = new Float64Array(0);
    this.shapes = [];
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

  private bucketsOf(endpoint: string, name: string): LimitBuckets | undefined {
    const last = this.lastBuckets;
    if (last !== undefined && last.endpoint === endpoint && last.name === name) return last;
    const buckets = this.byEndpoint.get(endpoint)?.get(name);
    if (buckets !== undefined) this.lastBuckets = buckets;
    return buckets;
  }

  private write(slot: number, units: number, at: number, limit: BucketShape): void {
    const base = slot * STRIDE;
    this.state[base] = units;
    this.state[base + 1] = at;
    // Compared first: a bucket keeps its limit from call to call, and storing an object costs a write barrier.
    if (this.shapes[slot] !== limit) this.shapes[slot] = limit;
  }

  private isFull(slot: number, now: number): boolean {
    const base = slot * STRIDE;
    const state = this.state;
    return now - (state[base + 1] as number) >= msUntilFull(state[base] as number, this.shapes[slot] as BucketShape);
  }

  private create(endpoint: string, name: string, organization: string, now: number): number {
    if (this.size >= this.maxBuckets) this.makeRoom(now);
    else this.sweepStep(now);
    let limits = this.byEndpoint.get(endpoint);
    if (limits === undefined) {
      limits = new Map();
      this.byEndpoint.set(endpoint, limits);
    }
    let buckets = limits.get(name);
    if (buckets === undefined) {
      buckets = { endpoint, name, slots: new Map() };
      limits.set(name, buckets);
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
    this.shapes.push(undefined);
    return slot;
  }

  /** Removes a bucket, freeing its slot (and its limit's and endpoint's maps when that was their last bucket). */
  private forget(slot: number): void {
    const organization = this.owners[slot] as string;
    const buckets = this.ownerBuckets[slot] as LimitBuckets;
    buckets.slots.delete(organization);
    if (buckets.slots.size === 0) {
      const limits = this.byEndpoint.get(buckets.endpoint) as Map<string, LimitBuckets>;
      limits.delete(buckets.name);
      if (limits.size === 0) this.byEndpoint.delete(buckets.endpoint);
      if (buckets === this.lastBuckets) this.lastBuckets = undefined;
    }
    this.owners[slot] = undefined;
    this.ownerBuckets[slot] = undefined;
    this.shapes[slot] = undefined;
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

/** What the leases of a key set aside under one limit name: tokens of a bucket, or slots of a concurrency limit. */
function setAside(held: KeyLeases, name: string): number {
  let sum = 0;
  for (const lease of held.list) {
    const limits = lease.limits;
    for (let i = 0; i < limits.length; i++) if ((limits[i] as Limit).name === name) sum += costAt(lease.cost, i);
  }
  return sum;
}

/** A token-bucket store in this process: exact, allocation-free per call, bounded by `maxBuckets`. */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return new InProcessStore(options);
}
