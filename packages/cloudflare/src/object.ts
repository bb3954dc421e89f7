import { DurableObject } from 'cloudflare:workers';
import { type BucketShape, type Limit, msUntilFull, type Outcome, sameShape, take, unitsAt } from '@ratecard/core';

/** What the object reads of a limit: its name and the three numbers of the arithmetic. A core `Limit` fits. */
export type BucketLimit = Pick<Limit, 'name' | 'capacity' | 'unitsPerToken' | 'unitsPerMs'>;

/**
 * One bucket as memory and the table hold it: units held at `updatedAt` (ms) under the shape then in force, and
 * `fullAt`, the instant on this object's clock from which it is full again (the same as missing, so deleted then).
 */
interface Bucket {
  units: number;
  updatedAt: number;
  shape: BucketShape;
  fullAt: number;
}

interface Row extends Record<string, string | number> {
  endpoint: string;
  name: string;
  units: number;
  updated_at: number;
  capacity: number;
  units_per_token: number;
  units_per_ms: number;
  full_at: number;
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
 * The shortest time between two sweeps. An alarm is billed as a request and a sweep reads every bucket in memory, so
 * an organization busy on a limit that refills in a second must not get an alarm a second; a full row kept up to an
 * hour longer costs only its bytes.
 */
const SWEEP_GAP_MS = 3_600_000;

/**
 * The furthest ahead an alarm is set: workerd refuses an alarm after the year 2189, and a bucket may take longer than
 * that to fill (a limit refilling one token a day, for millions of tokens). An alarm that rings early just sweeps again.
 */
const ALARM_AHEAD_MAX_MS = 365 * 86_400_000;

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
 *
 * A full bucket is the same as a missing one, so the object deletes its full buckets, rows and Map entries, when it
 * starts and when its alarm rings (the sweep). The alarm is set for when the last bucket held is full, an hour after
 * the sweep at the soonest; a call sets it only when none is set, which is when the object held no bucket, so a
 * decision costs what it did. A bucket is deleted at most an hour after it is full, or, if its organization has a
 * limit that takes longer to refill from empty, at most that long; an organization that stops calling keeps no row
 * after that. A sweep deletes a bucket only at or after `fullAt`, counted with core's `msUntilFull`.
 */
export class RatecardBuckets extends DurableObject {
  private readonly buckets = new Map<string, Bucket>();
  /** Whether the alarm is set: from the first bucket written until a sweep leaves none. */
  private alarmSet = false;

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
      full_at INTEGER NOT NULL,
      PRIMARY KEY (endpoint, name)
    )`);
    for (const row of sql.exec<Row>('SELECT * FROM ratecard_buckets')) {
      this.buckets.set(keyOf(row.endpoint, row.name), {
        units: row.units,
        updatedAt: row.updated_at,
        shape: { capacity: row.capacity, unitsPerToken: row.units_per_token, unitsPerMs: row.units_per_ms },
        fullAt: row.full_at,
      });
    }
    // Whether an alarm is still set is not known here without waiting for it: sweep, which sets it anew.
    this.sweep(Date.now());
  }

  /** The alarm: deletes the buckets that are full and sets the alarm for the others. */
  alarm(): void {
    this.sweep(Date.now());
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
      if (changed.length > 0) this.write(endpoint, changed, clock - at);
      return held.map((units) => -1 - units);
    }
    // Time never moves backwards in a bucket, or the same interval would refill twice.
    this.write(
      endpoint,
      limits.map((limit, i) => ({ limit, units: outcomes[i] as Outcome, at: Math.max(at, found[i]?.updatedAt ?? at) })),
      clock - at,
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
   * leaves both as they were, and the call rejects having charged nothing. `offset`: this object's clock minus the
   * call's (0 under clock 'object'). A bucket is full `msUntilFull` after its `updatedAt` on the caller's clock; on this
   * object's clock that instant is `offset` later (Redis counts a key's expiry from the caller's now the same way).
   */
  private write(endpoint: string, writes: readonly Write[], offset: number): void {
    const storage = this.ctx.storage;
    const written = writes.map(({ limit, units, at }) => {
      const shape = { capacity: limit.capacity, unitsPerToken: limit.unitsPerToken, unitsPerMs: limit.unitsPerMs };
      return { units, updatedAt: at, shape, fullAt: at + msUntilFull(units, shape) + offset };
    });
    storage.transactionSync(() => {
      writes.forEach(({ limit }, i) => {
        const { units, updatedAt, shape, fullAt } = written[i] as Bucket;
        storage.sql.exec(
          'INSERT OR REPLACE INTO ratecard_buckets VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
          endpoint,
          limit.name,
          units,
          updatedAt,
          shape.capacity,
          shape.unitsPerToken,
          shape.unitsPerMs,
          fullAt,
        );
      });
    });
    writes.forEach(({ limit }, i) => this.buckets.set(keyOf(endpoint, limit.name), written[i] as Bucket));
    // Unset only while the object held no bucket: the Map holds this call's few, so setting it costs what they do.
    if (!this.alarmSet) this.schedule(Date.now());
  }

  /** Deletes every bucket full at `now` (this object's clock), rows first, then sets the alarm for the others. */
  private sweep(now: number): void {
    const full: string[] = [];
    for (const [key, bucket] of this.buckets) if (bucket.fullAt <= now) full.push(key);
    if (full.length > 0) {
      const storage = this.ctx.storage;
      storage.transactionSync(() => {
        for (const key of full) {
          const space = key.indexOf(' ');
          storage.sql.exec(
            'DELETE FROM ratecard_buckets WHERE endpoint = ? AND name = ?',
            key.slice(space + 1),
            key.slice(0, space),
          );
        }
      });
      for (const key of full) this.buckets.delete(key);
    }
    this.schedule(now);
  }

  /**
   * Sets the alarm for when the last bucket held is full, between SWEEP_GAP_MS and ALARM_AHEAD_MAX_MS after `now`;
   * none if none is held.
   */
  private schedule(now: number): void {
    this.alarmSet = this.buckets.size > 0;
    if (!this.alarmSet) return;
    let last = now + SWEEP_GAP_MS;
    for (const bucket of this.buckets.values()) last = Math.max(last, bucket.fullAt);
    void this.ctx.storage.setAlarm(Math.min(last, now + ALARM_AHEAD_MAX_MS));
  }
}
