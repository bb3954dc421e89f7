import { DurableObject } from 'cloudflare:workers';
import { type BucketShape, type Limit, type Outcome, sameShape, take, unitsAt } from '@ratecard/core';

/** What the object reads of a limit: its name and the three numbers of the arithmetic. A core `Limit` fits. */
export type BucketLimit = Pick<Limit, 'name' | 'capacity' | 'unitsPerToken' | 'unitsPerMs'>;

/** One bucket as memory and the table hold it: units held at `updatedAt` (ms) under the shape then in force. */
interface Bucket {
  units: number;
  updatedAt: number;
  shape: BucketShape;
}

interface Row extends Record<string, string | number> {
  endpoint: string;
  name: string;
  units: number;
  updated_at: number;
  capacity: number;
  units_per_token: number;
  units_per_ms: number;
}

/** A bucket to write: units held at `at` under `limit`'s shape. */
interface Write {
  limit: BucketLimit;
  units: number;
  at: number;
}

/** A limit name has no space (A-Z a-z 0-9 . _ -), so `name endpoint` tells every pair apart. */
const keyOf = (endpoint: string, name: string): string => `${name} ${endpoint}`;

/**
 * The buckets of one organization: a Durable Object, one per organization (the store names it by the organization),
 * holding a bucket per (endpoint, limit name). An object runs one call at a time and each call runs to its end
 * without awaiting anything, so a call's buckets are read, charged and written atomically, whichever isolate sent it.
 *
 * A call's writes go to the object's SQLite table in one transaction, in the same turn; the runtime holds the answer
 * until they are durable, so an admitted call's charge survives eviction and restarts, and a write the storage
 * refuses leaves every bucket of the call as it was. The buckets are also kept in a Map, read from the table once
 * when the object starts: a decision then reads no row (rows read are billed too) and costs one row written per
 * limit it charges.
 */
export class RatecardBuckets extends DurableObject {
  private readonly buckets = new Map<string, Bucket>();

  constructor(...args: ConstructorParameters<typeof DurableObject>) {
    super(...args);
    const sql = this.ctx.storage.sql;
    // One row of plain integers per bucket, the same numbers the Map holds: a SELECT shows a bucket as it is.
    sql.exec(`CREATE TABLE IF NOT EXISTS ratecard_buckets (
      endpoint TEXT NOT NULL,
      name TEXT NOT NULL,
      units INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      capacity INTEGER NOT NULL,
      units_per_token INTEGER NOT NULL,
      units_per_ms INTEGER NOT NULL,
      PRIMARY KEY (endpoint, name)
    )`);
    for (const row of sql.exec<Row>('SELECT * FROM ratecard_buckets')) {
      this.buckets.set(keyOf(row.endpoint, row.name), {
        units: row.units,
        updatedAt: row.updated_at,
        shape: { capacity: row.capacity, unitsPerToken: row.units_per_token, unitsPerMs: row.units_per_ms },
      });
    }
  }

  /**
   * Takes `cost` tokens from the bucket of every limit if each holds them, else from none; one outcome per limit.
   * `now`: the caller's clock (epoch ms), or undefined for this object's. `deadline`: epoch ms on this object's clock
   * after which the caller no longer waits; a call arriving then charges nothing and answers null.
   */
  consume(
    endpoint: string,
    limits: readonly BucketLimit[],
    cost: number,
    now: number | undefined,
    deadline: number | undefined,
  ): Outcome[] | null {
    const clock = Date.now();
    if (deadline !== undefined && clock >= deadline) return null;
    const at = now ?? clock;
    const found = limits.map((limit) => this.buckets.get(keyOf(endpoint, limit.name)));
    const held = limits.map((limit, i) => this.held(found[i], limit, at));
    const outcomes = limits.map((limit, i) => take(held[i] as number, cost, limit));
    if (outcomes.some((outcome) => outcome < 0)) {
      // All or nothing: nothing charged, and a bucket written under another shape takes the new one (what it holds,
      // converted), so that it refills at the rate the refusal's Retry-After was counted with.
      const changed: Write[] = [];
      limits.forEach((limit, i) => {
        const bucket = found[i];
        if (bucket !== undefined && !sameShape(bucket.shape, limit)) {
          changed.push({ limit, units: held[i] as number, at: Math.max(at, bucket.updatedAt) });
        }
      });
      if (changed.length > 0) this.write(endpoint, changed);
      return held.map((units) => -1 - units);
    }
    // Time never moves backwards in a bucket, or the same interval would refill twice.
    this.write(
      endpoint,
      limits.map((limit, i) => ({ limit, units: outcomes[i] as Outcome, at: Math.max(at, found[i]?.updatedAt ?? at) })),
    );
    return outcomes;
  }

  /** The outcomes `consume` would give at `now` (or this object's clock), charging and writing nothing. */
  peek(endpoint: string, limits: readonly BucketLimit[], cost: number, now: number | undefined): Outcome[] {
    const at = now ?? Date.now();
    const held = limits.map((limit) => this.held(this.buckets.get(keyOf(endpoint, limit.name)), limit, at));
    const outcomes = limits.map((limit, i) => take(held[i] as number, cost, limit));
    return outcomes.some((outcome) => outcome < 0) ? held.map((units) => -1 - units) : outcomes;
  }

  /**
   * Forgets the bucket of each named limit, which makes it full. `deadline`: as consume's; a call arriving after it
   * forgets nothing and answers false.
   */
  reset(endpoint: string, names: readonly string[], deadline: number | undefined): boolean {
    if (deadline !== undefined && Date.now() >= deadline) return false;
    const storage = this.ctx.storage;
    storage.transactionSync(() => {
      for (const name of names) {
        storage.sql.exec('DELETE FROM ratecard_buckets WHERE endpoint = ? AND name = ?', endpoint, name);
      }
    });
    for (const name of names) this.buckets.delete(keyOf(endpoint, name));
    return true;
  }

  /** Units a bucket holds at `at` for `limit`; a missing bucket is full. */
  private held(bucket: Bucket | undefined, limit: BucketLimit, at: number): number {
    if (bucket === undefined) return limit.capacity * limit.unitsPerToken;
    return unitsAt(bucket.units, bucket.updatedAt, bucket.shape, at, limit);
  }

  /**
   * Writes a call's buckets to the table in one transaction, then to the Map: a write that fails (storage refused)
   * leaves both as they were, and the call rejects having charged nothing.
   */
  private write(endpoint: string, writes: readonly Write[]): void {
    const storage = this.ctx.storage;
    storage.transactionSync(() => {
      for (const { limit, units, at } of writes) {
        storage.sql.exec(
          'INSERT OR REPLACE INTO ratecard_buckets VALUES (?, ?, ?, ?, ?, ?, ?)',
          endpoint,
          limit.name,
          units,
          at,
          limit.capacity,
          limit.unitsPerToken,
          limit.unitsPerMs,
        );
      }
    });
    for (const { limit, units, at } of writes) {
      const shape = { capacity: limit.capacity, unitsPerToken: limit.unitsPerToken, unitsPerMs: limit.unitsPerMs };
      this.buckets.set(keyOf(endpoint, limit.name), { units, updatedAt: at, shape });
    }
  }
}
