import { type Limit, type Outcome, refusal } from '@ratecard/core';

/** A bucket found short of `cost` tokens, and until when it stays short for sure. */
interface Denial {
  /** The limit the denial was for: its bucket (the key holds one per limit name) refills at its rate, up to its capacity. */
  shape: Limit;
  cost: number;
  /** Units the bucket held at `base` (negative in debt). */
  held: number;
  /** The time `held` was true at; the bucket refills `shape.unitsPerMs` units per ms from then on. */
  base: number;
  /** The first instant at which `cost` tokens may be there again. */
  until: number;
}

/**
 * Buckets known to be short of tokens, so that a flood of denied requests costs no Redis call while it lasts. No
 * bucket gains tokens faster than its refill, so a bucket short of `cost` tokens at `base` stays short of them until
 * `until` whatever other processes do (only a reset, seen here if it is this process's, fills it sooner). Times are
 * in whatever frame the store passes, the same for every call: the client clock, or performance.now(). The store
 * asks and fills it for calls of one limit only (see store.ts), and only with a denial the script flags steady: never
 * one by a concurrency limit (a slot frees whenever a holder settles) nor one of a bucket that leases set tokens aside
 * on (a settle or cancel gives them back at once, faster than any refill). A quota refills nothing within its period:
 * its denial holds until the period ends, for calls that state the same period.
 */
export class DenyCache {
  private readonly entries = new Map<string, Denial>();
  /** Calls answered here, each one a Redis call saved. */
  hits = 0;

  constructor(private readonly maxEntries: number) {}

  get size(): number {
    return this.entries.size;
  }

  /**
   * The outcome of a call the cache can answer: the same limit name and shape (a quota: and period), the same or a larger cost, before `until`. The units
   * held are extrapolated at the shape's rate, up to its capacity; the denial itself is exact, the units as exact as
   * `base` is.
   */
  answer(key: string, limit: Limit, cost: number, now: number): Outcome | undefined {
    const denial = this.entries.get(key);
    if (denial === undefined) return undefined;
    if (now >= denial.until) {
      this.entries.delete(key);
      return undefined;
    }
    const shape = denial.shape;
    // A clock gone back past `base` could meet a bucket that held less: let Redis answer that one.
    if (
      cost < denial.cost ||
      now < denial.base ||
      (shape !== limit &&
        (limit.name !== shape.name ||
          limit.capacity !== shape.capacity ||
          limit.unitsPerMs !== shape.unitsPerMs ||
          limit.unitsPerToken !== shape.unitsPerToken ||
          limit.periodEnd !== shape.periodEnd))
    ) {
      return undefined;
    }
    this.hits++;
    const full = shape.capacity * shape.unitsPerToken;
    const held = denial.held + Math.floor(now - denial.base) * shape.unitsPerMs;
    return refusal(held < full ? held : full);
  }

  remember(key: string, shape: Limit, cost: number, held: number, base: number, until: number): void {
    if (this.maxEntries === 0) return;
    if (this.entries.size >= this.maxEntries && !this.entries.has(key)) this.makeRoom(base);
    this.entries.set(key, { shape, cost, held, base, until });
  }

  /** Drops what is known of a bucket: it was charged (so it holds less than remembered) or reset. */
  forget(key: string): void {
    if (this.entries.size !== 0) this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  /** Drops expired entries; when the cache is full of live ones, starts over (it only ever saves calls). */
  private makeRoom(now: number): void {
    for (const [key, denial] of this.entries) if (now >= denial.until) this.entries.delete(key);
    if (this.entries.size > this.maxEntries / 2) this.entries.clear();
  }
}
