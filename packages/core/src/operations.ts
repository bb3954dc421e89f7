import { msUntilFull, unitsAt } from './bucket.js';
import type { DeadlineQueue } from './deadlines.js';
import { describeValue, RateLimitError } from './errors.js';
import type { BlockChange, KeptBlock, KeptBlocks, KeptState, Store } from './store.js';

/** What `limiter.inspect` answers: every limit and lease stored under a key, in tokens, by the store's clock. */
export interface Inspection {
  /** The organization and the endpoint key the store keeps them under (a rule key, or `ALL /*`). */
  readonly organization: string;
  /** The endpoint key they are kept under. */
  readonly endpoint: string;
  /** The store's now, epoch ms: every figure below is at that instant. */
  readonly at: number;
  /** Each bucket, quota and concurrency limit stored there, by name. */
  readonly limits: readonly LimitInspection[];
  /** The leases held there. */
  readonly leases: readonly LeaseInspection[];
}

/** One limit's state (`Inspection.limits`). */
export interface LimitInspection {
  /** The limit's name as the store keeps it (with its numbers where no endpoint rule matched). */
  readonly name: string;
  /** What kind of limit: as the store keeps it, a limit of slots has no bucket, only leases. */
  readonly kind: 'bucket' | 'quota' | 'concurrency';
  /** Most tokens (a quota: per period; a concurrency limit: slots as leases last reserved them, unknown: 0). */
  readonly capacity: number;
  /** Whole tokens it holds for a request now, what leases set aside taken out (negative in debt); free slots. */
  readonly tokens: number;
  /** Tokens (slots) held leases set aside. */
  readonly reserved: number;
  /** When it is full again, epoch ms on the store's clock: a bucket's refill, a quota's period end; 0 for slots. */
  readonly fullAt: number;
}

/** One held lease (`Inspection.leases`). */
export interface LeaseInspection {
  /** The lease's id. */
  readonly id: string;
  /** Epoch ms on the store's clock. */
  readonly expiresAt: number;
  /** Per limit name, the tokens it set aside or the slots it takes. */
  readonly holds: Readonly<Record<string, number>>;
}

/** The figures of what a store keeps under a key (`Store.inspect`), without the limits a request would carry. */
export function describeKept(organization: string, endpoint: string, state: KeptState): Inspection {
  const { now, buckets, leases } = state;
  const reserved = new Map<string, number>();
  for (const lease of leases) {
    for (const { name, amount } of lease.holds) reserved.set(name, (reserved.get(name) ?? 0) + amount);
  }
  const limits: LimitInspection[] = buckets.map((bucket) => {
    const aside = reserved.get(bucket.name) ?? 0;
    reserved.delete(bucket.name);
    const quota = bucket.unitsPerMs === 0;
    // A quota bucket's updatedAt is the end of the period it counts for: it is that period's count, or full.
    const shape = quota ? { ...bucket, periodEnd: bucket.updatedAt } : bucket;
    const q = quota
      ? now < bucket.updatedAt
        ? bucket.units
        : bucket.capacity
      : unitsAt(bucket.units, bucket.updatedAt, shape, now, shape);
    const held = q - aside * bucket.unitsPerToken;
    return {
      name: bucket.name,
      kind: quota ? 'quota' : 'bucket',
      capacity: bucket.capacity,
      tokens: Math.floor(held / bucket.unitsPerToken),
      reserved: aside,
      fullAt: quota ? bucket.updatedAt : now + msUntilFull(held, bucket),
    };
  });
  // A name the leases hold that has no bucket: a concurrency limit (or a bucket still full, which is kept as missing).
  for (const [name, amount] of reserved) {
    limits.push({ name, kind: 'concurrency', capacity: 0, tokens: -amount, reserved: amount, fullAt: 0 });
  }
  return {
    organization,
    endpoint,
    at: now,
    limits,
    leases: leases.map(({ id, expiresAt, holds }) => ({
      id,
      expiresAt,
      holds: Object.fromEntries(holds.map(({ name, amount }) => [name, amount])),
    })),
  };
}

/** A block in force as this process keeps it: until when by its own clock (Date.now), and why. */
export interface Block {
  /** The endpoint key refused, or '*' for every endpoint. */
  readonly endpoint: string;
  /** Epoch ms on this process's clock. */
  readonly until: number;
  /** Why, as the operator said. */
  readonly reason: string;
}

/** How old the blocks a decision reads may be: a change reaches every process within a second. */
const BLOCKS_MAX_AGE_MS = 1_000;
/** From this age a decision reads them again in the background, so that a busy process never waits for them. */
const BLOCKS_REFRESH_MS = 500;

/**
 * The blocks of a store, as one process reads them: every organization's, kept by organization, read from the store
 * when older than half a second (in the background) and waited for (within the budget) when older than a second. A
 * store private to the process (memory) is read once and after each change made here; a store without `blocks` (one
 * written before blocks) never.
 */
export class BlockBook {
  private byOrganization = new Map<string, Block[]>();
  /** Date.now() of the last read (or failed read); -Infinity before the first. */
  private readAt = Number.NEGATIVE_INFINITY;
  /** The read under way, if any. */
  private reading: Promise<Error | undefined> | undefined;
  /** Whether reads are over: a private store read once, or a store that keeps no blocks. */
  private settled: boolean;

  constructor(
    private readonly store: Store,
    private readonly deadlines: DeadlineQueue,
  ) {
    this.settled = typeof store.blocks !== 'function';
  }

  /**
   * The block in force on this organization and endpoint key (or every endpoint), if any; a promise of it when the
   * blocks are older than a second and must be read first (of the store's error, as an Error, when that read fails).
   */
  find(organization: string, endpoint: string): Block | undefined | Promise<Block | undefined | Error> {
    if (!this.settled) {
      const reading = this.due();
      if (reading !== undefined) return reading.then((failure) => failure ?? this.inForce(organization, endpoint));
    }
    // With no block anywhere, a decision costs one comparison here.
    return this.byOrganization.size === 0 ? undefined : this.inForce(organization, endpoint);
  }

  private inForce(organization: string, endpoint: string): Block | undefined {
    const blocks = this.byOrganization.get(organization);
    if (blocks === undefined) return undefined;
    const now = Date.now();
    for (const block of blocks) {
      if (block.until > now && (block.endpoint === '*' || block.endpoint === endpoint)) return block;
    }
    return undefined;
  }

  /**
   * Undefined when the blocks are fresh enough to decide with; else the read to wait for, which resolves to the store's
   * error when it failed (undefined when it answered). One read at a time, whoever waits for it: from half a second
   * on it runs in the background and no decision waits; from a second on the decisions wait for it (a burst after a
   * quiet second sends one read, not one per decision). On Workers several requests then wait for a read one of them
   * began, so the store keeps that request alive until the read is answered (the Durable Objects store's waitUntil).
   */
  private due(): Promise<Error | undefined> | undefined {
    const age = Date.now() - this.readAt;
    if (age < BLOCKS_REFRESH_MS) return undefined;
    let reading = this.reading;
    if (reading === undefined) {
      reading = this.read();
      // A store that answers with a plain value (memory) was read at once.
      if (reading === undefined) return undefined;
      this.reading = reading;
      void reading.finally(() => {
        this.reading = undefined;
      });
    }
    return age < BLOCKS_MAX_AGE_MS ? undefined : reading;
  }

  /**
   * Reads the blocks: a store that answers with a plain value (memory) at once, returning undefined; else the read,
   * raced against the budget, resolving to the store's error when it failed or ran over (the blocks last read are
   * kept, and the next read is half a second later).
   */
  private read(): Promise<Error | undefined> | undefined {
    const started = Date.now();
    let answer: KeptBlocks | Promise<KeptBlocks>;
    try {
      answer = this.store.blocks();
    } catch (error) {
      this.readAt = started;
      return Promise.resolve(asError(error));
    }
    if (!(answer instanceof Promise)) {
      this.keep(answer, started);
      return undefined;
    }
    return this.deadlines.race(answer).then(
      (kept) => {
        this.keep(kept, started);
        return undefined;
      },
      (error: unknown) => {
        this.readAt = started;
        return asError(error);
      },
    );
  }

  /** Makes a change in the store and keeps the blocks it answers. */
  async change(change: BlockChange): Promise<void> {
    this.keep(await this.store.blocks(change), Date.now());
  }

  private keep(answer: KeptBlocks, readAt: number): void {
    if (!this.store.shared) this.settled = true;
    // The store's instants as this process's: the block's remaining time from the store's now.
    const local = Date.now();
    const byOrganization = new Map<string, Block[]>();
    for (const { organization, endpoint, until, reason } of answer.blocks) {
      const list = byOrganization.get(organization) ?? [];
      list.push({ endpoint, until: local + (until - answer.now), reason });
      byOrganization.set(organization, list);
    }
    this.byOrganization = byOrganization;
    this.readAt = readAt;
  }
}

/** A store's failure as an Error, whatever it threw. */
function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(`the store failed: ${describeValue(error)}`);
}

/** A block's length: a whole number of ms from 1 to a year. */
export function checkBlockMs(ms: unknown): number {
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 1 || ms > 31_622_400_000) {
    throw new RateLimitError(
      'invalid_argument',
      `ratecard: forMs must be a whole number of milliseconds from 1 to a year (31 622 400 000), got ${describeValue(ms)}`,
    );
  }
  return ms;
}

/** A block's reason: at most 256 characters, default ''. */
export function checkReason(reason: unknown): string {
  if (reason === undefined) return '';
  if (typeof reason !== 'string' || reason.length > 256) {
    throw new RateLimitError(
      'invalid_argument',
      `ratecard: reason must be a string of at most 256 characters, got ${describeValue(reason)}`,
    );
  }
  return reason;
}
