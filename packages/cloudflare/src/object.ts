import { DurableObject } from 'cloudflare:workers';
import {
  type BlockChange,
  type BucketShape,
  costAt,
  debtFloor,
  isConcurrency,
  type KeptBlock,
  type KeptBlocks,
  type KeptBucket,
  type KeptLease,
  type KeptState,
  type Lease,
  type LeaseChange,
  type Limit,
  msUntilFull,
  type Outcome,
  refusal,
  sameShape,
  take,
  unitsAt,
  writtenAt,
} from '@ratecard/core';

/**
 * What the object reads of a limit: its kind, its name, the three numbers of the arithmetic and, for a quota, the end
 * of the period the call falls in (`periodEnd`, which the limiter computes: the object needs no calendar). A core
 * `Limit` fits.
 */
export type BucketLimit = Pick<Limit, 'kind' | 'name' | 'capacity' | 'unitsPerToken' | 'unitsPerMs' | 'periodEnd'>;

/**
 * One bucket as memory and the table hold it: units held at `updatedAt` (ms) under the shape then in force, and
 * `fullAt`, the instant on this object's clock from which it is full again (the same as missing, so deleted then).
 * Units are below zero when a settled lease used more than it reserved (the bucket is in debt). A quota's bucket
 * (unitsPerMs 0) counts for the period ending at `updatedAt`, which its shape carries as `periodEnd`, and is full,
 * so deleted, from then.
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

/**
 * The tokens a lease set aside on a bucket, with the limit's shape when it reserved (a quota's with its period's end):
 * a bucket not written yet (full) is charged under it when the lease ends, in that period.
 */
interface TokenHold extends BucketShape {
  tokens: number;
}

/**
 * A held lease, as memory and the table hold it: when it expires on the caller's clock (`expiresAt`, which decisions
 * read) and on this object's (`dropAt`, which the sweep reads; the same under clock 'object'), the tokens it set
 * aside per bucket and the slots it takes per concurrency limit, by limit name.
 */
interface HeldLease {
  id: string;
  expiresAt: number;
  dropAt: number;
  tokens: ReadonlyMap<string, TokenHold>;
  slots: ReadonlyMap<string, number>;
}

interface LeaseRow extends Record<string, string | number> {
  endpoint: string;
  id: string;
  expires_at: number;
  drop_at: number;
  tokens: string;
  slots: string;
}

/**
 * An endpoint's state at a call's instant, once the leases expired by then have kept their charge: the buckets they
 * changed and the leases that ended (both to write, by a call that writes), and what the leases still held set aside.
 */
interface Seen {
  /** Buckets to write, by limit name: those expired leases charged, then those the call changes. */
  buckets: Map<string, Bucket>;
  ended: HeldLease[];
  /** Tokens held leases set aside, by bucket name. */
  aside: Map<string, number>;
  /** Slots held leases take, by concurrency limit name. */
  slots: Map<string, number>;
}

/** What a consume or peek finds at its instant, per limit: the units (Q, 0 for concurrency) and what it holds. */
interface Found {
  seen: Seen;
  buckets: (Bucket | undefined)[];
  units: number[];
  need: number[];
  held: number[];
  outcomes: Outcome[];
}

interface BlockRow extends Record<string, string | number> {
  organization: string;
  endpoint: string;
  until: number;
  reason: string;
}

/** A limit name has no space (A-Z a-z 0-9 . _ -), so `name endpoint` tells every pair apart. */
const keyOf = (endpoint: string, name: string): string => `${name} ${endpoint}`;

/** Organizations and endpoints may hold any character, so a block's key is the JSON of the pair, which tells all apart. */
const blockKey = (organization: string, endpoint: string): string => JSON.stringify([organization, endpoint]);

/** The shape a lease keeps of a limit: its numbers, and a quota's period end (JSON leaves it out for the others). */
const shapeOf = ({ capacity, unitsPerToken, unitsPerMs, periodEnd }: BucketShape): BucketShape =>
  periodEnd === undefined
    ? { capacity, unitsPerToken, unitsPerMs }
    : { capacity, unitsPerToken, unitsPerMs, periodEnd };

/**
 * The shape a bucket written at `updatedAt` keeps: a quota's (it never refills) counts for the period ending then, so
 * that charged under its own shape (a lease ending on a limit its call does not name) it stays in that period.
 */
function storedShape(capacity: number, unitsPerToken: number, unitsPerMs: number, updatedAt: number): BucketShape {
  return unitsPerMs === 0
    ? { capacity, unitsPerToken, unitsPerMs, periodEnd: updatedAt }
    : { capacity, unitsPerToken, unitsPerMs };
}

/**
 * A bucket holding `units` at `at` (core's writtenAt: a quota's period end) under `limit`'s shape; `offset` is this
 * object's clock minus the call's.
 */
function bucketOf(limit: BucketShape, units: number, at: number, offset: number): Bucket {
  const shape = storedShape(limit.capacity, limit.unitsPerToken, limit.unitsPerMs, at);
  return { units, updatedAt: at, shape, fullAt: at + msUntilFull(units, shape) + offset };
}

/** Units (Q) a bucket holds at `at` for `limit`; a missing bucket is full. */
function unitsOf(bucket: Bucket | undefined, limit: BucketShape, at: number): number {
  if (bucket === undefined) return limit.capacity * limit.unitsPerToken;
  return unitsAt(bucket.units, bucket.updatedAt, bucket.shape, at, limit);
}

/**
 * The bucket charged `tokens` at `at` under `limit`'s shape, where a lease ends (settled, or expired keeping its
 * charge): below empty at most down to its debt floor with the `rest` tokens other held leases set aside still aside.
 */
function charged(
  bucket: Bucket | undefined,
  limit: BucketShape,
  tokens: number,
  at: number,
  rest: number,
  offset: number,
): Bucket {
  const units = unitsOf(bucket, limit, at) - tokens * limit.unitsPerToken;
  const floor = debtFloor(limit) + rest * limit.unitsPerToken;
  return bucketOf(limit, Math.max(units, floor), writtenAt(bucket?.updatedAt ?? 0, at, limit), offset);
}

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
 * holding a bucket per (endpoint, limit name) and the leases held per endpoint. An object runs one call at a time and
 * each call runs to its end without awaiting anything, so a call's buckets and leases are read, charged and written
 * atomically, whichever isolate sent it.
 *
 * A call's writes go to the object's SQLite tables in one transaction, in the same turn; the runtime holds the answer
 * until they are durable, so an admitted call's charge, and a lease it holds, survive eviction and restarts, and a
 * write the storage refuses leaves every bucket and lease of the call as it was. Buckets and leases are also kept in
 * Maps, read from the tables once when the object starts: a decision then reads no row (rows read are billed too) and
 * costs one row written per limit it charges (a reserve: per bucket, plus its lease's row).
 *
 * Leases (docs/stores.md, "Leases") expire here, not in the Worker that took them, so an isolate that dies leaves its
 * leases to expire on time: every call first charges, in order of expiry, the leases of its endpoint expired by its
 * instant, and a bucket counts what the leases still held set aside as taken.
 *
 * A full bucket is the same as a missing one, so the object deletes its full buckets, rows and Map entries, when it
 * starts and when its alarm rings (the sweep), after expiring the leases whose time has come on its clock; a bucket a
 * lease holds is kept. The alarm is set for when the last bucket held is full or the last lease expires, an hour after
 * the sweep at the soonest; a call sets it only when none is set, which is when the object held nothing, so a decision
 * costs what it did. A bucket is deleted at most an hour after it is full, or, if its organization has a limit that
 * takes longer to refill from empty, at most that long; an organization that stops calling keeps no row after that
 * and its leases' expiry. A sweep deletes a bucket only at or after `fullAt`, counted with core's `msUntilFull`.
 *
 * A quota (docs/stores.md, "Quotas") is a bucket that never refills, written at the end of the period it counts for
 * (core's `writtenAt`), so full, and deleted by the first sweep, from its period's end. The one object of the namespace
 * named BLOCKS_OBJECT (store.ts) keeps no organization's buckets but every organization's blocks (`blocks`).
 */
export class RatecardBuckets extends DurableObject {
  private readonly buckets = new Map<string, Bucket>();
  /** The leases held, by endpoint, then id; an endpoint holding none has no entry. */
  private readonly leases = new Map<string, Map<string, HeldLease>>();
  /** Whether the alarm is set: from the first bucket or lease written until a sweep leaves none. */
  private alarmSet = false;
  /** The blocks object's blocks, by blockKey; undefined until its first `blocks` call reads them. */
  private blocked: Map<string, KeptBlock> | undefined;

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
    // One row per held lease, whatever the number of its limits (rows written are billed): its holds as JSON objects
    // by limit name, readable in a SELECT: tokens {"1m":{"tokens":1,"capacity":10,"unitsPerToken":6000,
    // "unitsPerMs":1}} (with the limit's shape when it reserved), slots {"sessions":1}. WITHOUT ROWID: the primary key
    // is the table, so a lease written counts one row written, not two (the row and its key's index; workerd's
    // cursor.rowsWritten, test/rows.test.ts).
    sql.exec(`CREATE TABLE IF NOT EXISTS ratecard_leases (
      endpoint TEXT NOT NULL,
      id TEXT NOT NULL,
      expires_at INTEGER NOT NULL,
      drop_at INTEGER NOT NULL,
      tokens TEXT NOT NULL,
      slots TEXT NOT NULL,
      PRIMARY KEY (endpoint, id)
    ) WITHOUT ROWID`);
    for (const row of sql.exec<Row>('SELECT * FROM ratecard_buckets')) {
      this.buckets.set(keyOf(row.endpoint, row.name), {
        units: row.units,
        updatedAt: row.updated_at,
        shape: storedShape(row.capacity, row.units_per_token, row.units_per_ms, row.updated_at),
        fullAt: row.full_at,
      });
    }
    for (const row of sql.exec<LeaseRow>('SELECT * FROM ratecard_leases')) {
      this.hold(row.endpoint, {
        id: row.id,
        expiresAt: row.expires_at,
        dropAt: row.drop_at,
        tokens: new Map(Object.entries(JSON.parse(row.tokens) as Record<string, TokenHold>)),
        slots: new Map(Object.entries(JSON.parse(row.slots) as Record<string, number>)),
      });
    }
    // Whether an alarm is still set is not known here without waiting for it: sweep, which sets it anew.
    this.sweep(Date.now());
  }

  /** The alarm: expires the leases whose time has come, deletes the buckets that are full, sets the alarm again. */
  alarm(): void {
    this.sweep(Date.now());
  }

  /**
   * Takes `cost` tokens (one number for every limit, or one per limit) from the bucket of every limit if each holds
   * them, and the slots of every concurrency limit if each has them free, else from none; one outcome per limit.
   * With `lease`, reserves instead: the tokens are set aside and the slots taken under `lease.id` until `lease.ms`
   * from now, and the outcomes are those a consume would give. `now`: the caller's clock (epoch ms), or undefined for
   * this object's. `deadline`: epoch ms on this object's clock after which the caller no longer waits; a call arriving
   * then charges nothing and answers null. 'taken': the endpoint holds a lease of that id already; nothing charged.
   */
  consume(
    endpoint: string,
    limits: readonly BucketLimit[],
    cost: number | readonly number[],
    now: number | undefined,
    deadline: number | undefined,
    lease?: Lease,
  ): Outcome[] | null | 'taken' {
    const clock = Date.now();
    if (deadline !== undefined && clock >= deadline) return null;
    const at = now ?? clock;
    const found = this.find(endpoint, limits, cost, at);
    const { seen } = found;
    const ended = seen.ended.map((held) => held.id);
    if (lease !== undefined) {
      const held = this.leases.get(endpoint)?.get(lease.id);
      if (held !== undefined && held.expiresAt > at) return 'taken';
    }
    if (found.outcomes.some((outcome) => outcome < 0)) {
      // All or nothing: nothing charged, and a bucket written under another shape takes the new one (what it holds,
      // converted), so that it refills at the rate the refusal's Retry-After was counted with.
      limits.forEach((limit, i) => {
        const bucket = found.buckets[i];
        if (bucket !== undefined && !sameShape(bucket.shape, limit)) {
          seen.buckets.set(
            limit.name,
            bucketOf(limit, found.units[i] as number, writtenAt(bucket.updatedAt, at, limit), clock - at),
          );
        }
      });
      this.commit(endpoint, seen.buckets, [], ended);
      return found.held.map(refusal);
    }
    const tokens = new Map<string, TokenHold>();
    const slots = new Map<string, number>();
    limits.forEach((limit, i) => {
      const need = found.need[i] as number;
      if (isConcurrency(limit)) {
        slots.set(limit.name, need);
        return;
      }
      tokens.set(limit.name, { tokens: need, ...shapeOf(limit) });
      const bucket = found.buckets[i];
      // A reserve leaves Q as it is and sets its tokens aside: a missing bucket stays missing (full), and one written
      // is written again under this shape at this instant, as a consume would.
      if (lease !== undefined && bucket === undefined) return;
      const units = (found.units[i] as number) - (lease === undefined ? need * limit.unitsPerToken : 0);
      seen.buckets.set(limit.name, bucketOf(limit, units, writtenAt(bucket?.updatedAt ?? 0, at, limit), clock - at));
    });
    const put: HeldLease[] =
      lease === undefined ? [] : [{ id: lease.id, expiresAt: at + lease.ms, dropAt: clock + lease.ms, tokens, slots }];
    this.commit(endpoint, seen.buckets, put, ended);
    return found.outcomes;
  }

  /**
   * Settles, cancels or extends the lease `change.id` of `endpoint`, taken by a consume of `limits`: with `actual`
   * (tokens, one number or one per limit; 0 cancels), each bucket the lease names is charged `actual` in place of what
   * it set aside, down to its debt floor at most, and its slots are freed; with `holdMs`, it is held until `holdMs`
   * from now instead. True when the lease was held; false, changing nothing, when not. `now` and `deadline` as
   * consume's; a call arriving past the deadline changes nothing and answers null.
   */
  settle(
    endpoint: string,
    limits: readonly BucketLimit[],
    change: LeaseChange,
    now: number | undefined,
    deadline: number | undefined,
  ): boolean | null {
    const clock = Date.now();
    if (deadline !== undefined && clock >= deadline) return null;
    const at = now ?? clock;
    const seen = this.expire(endpoint, at);
    const ended = seen.ended.map((held) => held.id);
    const lease = this.leases.get(endpoint)?.get(change.id);
    if (lease === undefined || lease.expiresAt <= at) {
      this.commit(endpoint, seen.buckets, [], ended);
      return false;
    }
    if (change.holdMs !== undefined) {
      const held = { ...lease, expiresAt: at + change.holdMs, dropAt: clock + change.holdMs };
      this.commit(endpoint, seen.buckets, [held], ended);
      return true;
    }
    for (const [name, hold] of lease.tokens) {
      const bucket = seen.buckets.get(name) ?? this.buckets.get(keyOf(endpoint, name));
      // What the other held leases set aside stays aside.
      const rest = (seen.aside.get(name) ?? 0) - hold.tokens;
      const i = limits.findIndex((limit) => limit.name === name && !isConcurrency(limit));
      const limit = limits[i];
      // The actual cost in place of what was set aside; a limit the call does not name is charged what was set
      // aside, under the shape its bucket has.
      seen.buckets.set(
        name,
        limit === undefined
          ? charged(bucket, bucket?.shape ?? hold, hold.tokens, at, rest, clock - at)
          : charged(bucket, limit, costAt(change.actual, i), at, rest, clock - at),
      );
    }
    ended.push(lease.id);
    this.commit(endpoint, seen.buckets, [], ended);
    return true;
  }

  /** The outcomes `consume` would give at `now` (or this object's clock), charging and writing nothing. */
  peek(
    endpoint: string,
    limits: readonly BucketLimit[],
    cost: number | readonly number[],
    now: number | undefined,
  ): Outcome[] {
    const found = this.find(endpoint, limits, cost, now ?? Date.now());
    return found.outcomes.some((outcome) => outcome < 0) ? found.held.map(refusal) : found.outcomes;
  }

  /**
   * Forgets the bucket of each named limit, which makes it full, and every lease's hold on those limits (a lease left
   * holding nothing is gone). `deadline`: as consume's; a call arriving after it forgets nothing and answers false.
   */
  reset(endpoint: string, names: readonly string[], deadline: number | undefined): boolean {
    if (deadline !== undefined && Date.now() >= deadline) return false;
    const put: HeldLease[] = [];
    const ended: string[] = [];
    for (const lease of this.leases.get(endpoint)?.values() ?? []) {
      if (!names.some((name) => lease.tokens.has(name) || lease.slots.has(name))) continue;
      const tokens = new Map([...lease.tokens].filter(([name]) => !names.includes(name)));
      const slots = new Map([...lease.slots].filter(([name]) => !names.includes(name)));
      if (tokens.size === 0 && slots.size === 0) ended.push(lease.id);
      else put.push({ ...lease, tokens, slots });
    }
    const storage = this.ctx.storage;
    storage.transactionSync(() => {
      for (const name of names) {
        storage.sql.exec('DELETE FROM ratecard_buckets WHERE endpoint = ? AND name = ?', endpoint, name);
      }
      this.writeLeases(endpoint, put, ended);
    });
    for (const name of names) this.buckets.delete(keyOf(endpoint, name));
    this.keepLeases(endpoint, put, ended);
    return true;
  }

  /**
   * What the object keeps for `endpoint` at `now` (the caller's clock, or this object's): its buckets as written and
   * its leases held, as they stand once the leases expired by then have kept their charge (the figures a call would
   * see). Writes nothing and reads no row: the Maps hold what the tables do.
   */
  inspect(endpoint: string, now: number | undefined): KeptState {
    const at = now ?? Date.now();
    const seen = this.expire(endpoint, at);
    const buckets = new Map<string, Bucket>();
    for (const [key, bucket] of this.buckets) {
      const space = key.indexOf(' ');
      if (key.slice(space + 1) === endpoint) buckets.set(key.slice(0, space), bucket);
    }
    for (const [name, bucket] of seen.buckets) buckets.set(name, bucket);
    const kept: KeptBucket[] = [...buckets].map(([name, { units, updatedAt, shape }]) => ({
      name,
      units,
      updatedAt,
      capacity: shape.capacity,
      unitsPerToken: shape.unitsPerToken,
      unitsPerMs: shape.unitsPerMs,
    }));
    const leases: KeptLease[] = [];
    for (const lease of this.leases.get(endpoint)?.values() ?? []) {
      if (seen.ended.includes(lease)) continue;
      const holds = [...lease.tokens].map(([name, hold]) => ({ name, amount: hold.tokens }));
      for (const [name, amount] of lease.slots) holds.push({ name, amount });
      leases.push({ id: lease.id, expiresAt: lease.expiresAt, holds });
    }
    return { now: at, buckets: kept, leases };
  }

  /**
   * The blocks in force at `now` (the caller's clock, or this object's), after making `change` when given: kept only by
   * the one object the store names for them (store.ts, BLOCKS_OBJECT), never by an organization's. They are read once
   * from the table by the first call and then answered from the Map, so a read (every process, about twice a second)
   * costs no row; a change writes its row, and deletes the rows of the blocks ended by then, in one transaction.
   */
  blocks(change: BlockChange | undefined, now: number | undefined): KeptBlocks {
    const at = now ?? Date.now();
    const blocked = this.blocked ?? this.readBlocks();
    if (change !== undefined) {
      const { organization, endpoint, ms, reason } = change;
      const key = blockKey(organization, endpoint);
      // The rows of the blocks ended by now go with the change: a read never writes.
      const ended = [...blocked].filter(([, block]) => block.until <= at);
      const sql = this.ctx.storage.sql;
      const remove = 'DELETE FROM ratecard_blocks WHERE organization = ? AND endpoint = ?';
      const put = 'INSERT OR REPLACE INTO ratecard_blocks VALUES (?, ?, ?, ?)';
      this.ctx.storage.transactionSync(() => {
        for (const [, block] of ended) sql.exec(remove, block.organization, block.endpoint);
        if (ms > 0) sql.exec(put, organization, endpoint, at + ms, reason);
        else sql.exec(remove, organization, endpoint);
      });
      for (const [endedKey] of ended) blocked.delete(endedKey);
      if (ms > 0) blocked.set(key, { organization, endpoint, until: at + ms, reason });
      else blocked.delete(key);
    }
    return { now: at, blocks: [...blocked.values()].filter((block) => block.until > at) };
  }

  /**
   * The blocks table, made by the first call to `blocks` (an organization's object never has one), read into the Map.
   * WITHOUT ROWID, as the leases': a block written is one row written.
   */
  private readBlocks(): Map<string, KeptBlock> {
    const sql = this.ctx.storage.sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS ratecard_blocks (
      organization TEXT NOT NULL,
      endpoint TEXT NOT NULL,
      until INTEGER NOT NULL,
      reason TEXT NOT NULL,
      PRIMARY KEY (organization, endpoint)
    ) WITHOUT ROWID`);
    const blocked = new Map<string, KeptBlock>();
    for (const { organization, endpoint, until, reason } of sql.exec<BlockRow>('SELECT * FROM ratecard_blocks')) {
      blocked.set(blockKey(organization, endpoint), { organization, endpoint, until, reason });
    }
    this.blocked = blocked;
    return blocked;
  }

  /** What the limits of a consume find at `at`, and the outcomes of charging `cost`: consume's and peek's reading. */
  private find(endpoint: string, limits: readonly BucketLimit[], cost: number | readonly number[], at: number): Found {
    const seen = this.expire(endpoint, at);
    const buckets = limits.map((limit) =>
      isConcurrency(limit)
        ? undefined
        : (seen.buckets.get(limit.name) ?? this.buckets.get(keyOf(endpoint, limit.name))),
    );
    const units = limits.map((limit, i) => (isConcurrency(limit) ? 0 : unitsOf(buckets[i], limit, at)));
    const need = limits.map((_, i) => costAt(cost, i));
    // What a limit holds for this decision: a bucket's units less what held leases set aside (Q - P); a concurrency
    // limit's free slots.
    const held = limits.map((limit, i) =>
      isConcurrency(limit)
        ? limit.capacity - (seen.slots.get(limit.name) ?? 0)
        : (units[i] as number) - (seen.aside.get(limit.name) ?? 0) * limit.unitsPerToken,
    );
    const outcomes = limits.map((limit, i) => take(held[i] as number, need[i] as number, limit));
    return { seen, buckets, units, need, held, outcomes };
  }

  /**
   * The endpoint at `at`: the leases expired by then (`expiresAt <= at`) keep their charge, in order of expiry, each
   * bucket refilled to that instant under its shape and then charged what the lease set aside; and what the leases
   * still held set aside. Nothing is written: a call that writes writes `buckets` and drops `ended` with its own changes.
   */
  private expire(endpoint: string, at: number): Seen {
    const seen: Seen = { buckets: new Map(), ended: [], aside: new Map(), slots: new Map() };
    for (const lease of this.leases.get(endpoint)?.values() ?? []) {
      for (const [name, hold] of lease.tokens) seen.aside.set(name, (seen.aside.get(name) ?? 0) + hold.tokens);
      if (lease.expiresAt <= at) seen.ended.push(lease);
      else for (const [name, slots] of lease.slots) seen.slots.set(name, (seen.slots.get(name) ?? 0) + slots);
    }
    seen.ended.sort((a, b) => a.expiresAt - b.expiresAt);
    for (const lease of seen.ended) {
      // Gone before it is charged, as at a settle: the floor counts what the leases still held set aside.
      for (const [name, hold] of lease.tokens) seen.aside.set(name, (seen.aside.get(name) as number) - hold.tokens);
      for (const [name, hold] of lease.tokens) {
        const bucket = seen.buckets.get(name) ?? this.buckets.get(keyOf(endpoint, name));
        const rest = seen.aside.get(name) as number;
        const offset = lease.dropAt - lease.expiresAt;
        seen.buckets.set(name, charged(bucket, bucket?.shape ?? hold, hold.tokens, lease.expiresAt, rest, offset));
      }
    }
    return seen;
  }

  /**
   * Writes a call's buckets (by limit name) and leases (held ones put, ended ones dropped by id) to the tables in one
   * transaction, then to the Maps: a write that fails (storage refused) leaves both as they were, and the call rejects
   * having charged nothing. A bucket's `fullAt` is on this object's clock: under clock 'client', `msUntilFull` after
   * its `updatedAt` on the caller's clock is that many ms after the call on this one's (Redis counts a key's expiry
   * from the caller's now the same way).
   */
  private commit(
    endpoint: string,
    buckets: ReadonlyMap<string, Bucket>,
    put: readonly HeldLease[],
    ended: readonly string[],
  ): void {
    if (buckets.size === 0 && put.length === 0 && ended.length === 0) return;
    const storage = this.ctx.storage;
    storage.transactionSync(() => {
      for (const [name, { units, updatedAt, shape, fullAt }] of buckets) {
        storage.sql.exec(
          'INSERT OR REPLACE INTO ratecard_buckets VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
          endpoint,
          name,
          units,
          updatedAt,
          shape.capacity,
          shape.unitsPerToken,
          shape.unitsPerMs,
          fullAt,
        );
      }
      this.writeLeases(endpoint, put, ended);
    });
    for (const [name, bucket] of buckets) this.buckets.set(keyOf(endpoint, name), bucket);
    this.keepLeases(endpoint, put, ended);
    // Unset only while the object held nothing: the Maps hold this call's few, so setting it costs what they do.
    if (!this.alarmSet) this.schedule(Date.now());
  }

  /** The lease rows of a write: ended ones deleted first, so that an id ended and taken again in one call is held. */
  private writeLeases(endpoint: string, put: readonly HeldLease[], ended: readonly string[]): void {
    const sql = this.ctx.storage.sql;
    for (const id of ended) sql.exec('DELETE FROM ratecard_leases WHERE endpoint = ? AND id = ?', endpoint, id);
    for (const lease of put) {
      sql.exec(
        'INSERT OR REPLACE INTO ratecard_leases VALUES (?, ?, ?, ?, ?, ?)',
        endpoint,
        lease.id,
        lease.expiresAt,
        lease.dropAt,
        JSON.stringify(Object.fromEntries(lease.tokens)),
        JSON.stringify(Object.fromEntries(lease.slots)),
      );
    }
  }

  /** The Map's side of writeLeases, once the rows are written. */
  private keepLeases(endpoint: string, put: readonly HeldLease[], ended: readonly string[]): void {
    const held = this.leases.get(endpoint);
    if (held !== undefined) {
      for (const id of ended) held.delete(id);
      if (held.size === 0) this.leases.delete(endpoint);
    }
    for (const lease of put) this.hold(endpoint, lease);
  }

  private hold(endpoint: string, lease: HeldLease): void {
    let held = this.leases.get(endpoint);
    if (held === undefined) {
      held = new Map();
      this.leases.set(endpoint, held);
    }
    held.set(lease.id, lease);
  }

  /**
   * Expires the leases whose time has come at `now` (this object's clock), as a call would, then deletes every bucket
   * full at `now` that no lease holds, rows first, and sets the alarm for the others.
   */
  private sweep(now: number): void {
    const due: [string, number][] = [];
    for (const [endpoint, held] of this.leases) {
      // The leases due on this clock, and with them every one expiring earlier on the callers' clock, in order.
      let until: number | undefined;
      for (const lease of held.values()) {
        if (lease.dropAt <= now && (until === undefined || lease.expiresAt > until)) until = lease.expiresAt;
      }
      if (until !== undefined) due.push([endpoint, until]);
    }
    for (const [endpoint, until] of due) {
      const seen = this.expire(endpoint, until);
      this.commit(
        endpoint,
        seen.buckets,
        [],
        seen.ended.map((lease) => lease.id),
      );
    }
    const kept = new Set<string>();
    for (const [endpoint, held] of this.leases) {
      for (const lease of held.values()) for (const name of lease.tokens.keys()) kept.add(keyOf(endpoint, name));
    }
    const full: string[] = [];
    for (const [key, bucket] of this.buckets) if (bucket.fullAt <= now && !kept.has(key)) full.push(key);
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
   * Sets the alarm for when the last bucket held is full or the last lease expires, between SWEEP_GAP_MS and
   * ALARM_AHEAD_MAX_MS after `now`; none if nothing is held.
   */
  private schedule(now: number): void {
    this.alarmSet = this.buckets.size > 0 || this.leases.size > 0;
    if (!this.alarmSet) return;
    let last = now + SWEEP_GAP_MS;
    for (const bucket of this.buckets.values()) last = Math.max(last, bucket.fullAt);
    for (const held of this.leases.values()) for (const lease of held.values()) last = Math.max(last, lease.dropAt);
    void this.ctx.storage.setAlarm(Math.min(last, now + ALARM_AHEAD_MAX_MS));
  }
}
