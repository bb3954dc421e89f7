/**
 * Reading an endpoint's Redis value back, for operators and tests. The value is written by the Lua in
 * scripts/consume.ts, and docs/redis.md describes it; this is its one reader outside Redis, and it reads exactly what
 * the scripts do.
 */
import { type KeptBucket, type KeptLease, type KeptState, MAX_BUCKET_UNITS, MAX_INTERVAL_MS } from '@ratecard/core';

/** A bucket as Redis holds it: the units it held when, and the shape of the limit then in force (docs/algorithm.md). */
export interface StoredBucket {
  /** The limit's name, which tells the buckets of one endpoint apart. */
  name: string;
  /** Units held at `updatedAt` (a token is `unitsPerToken` units). */
  units: number;
  /** Epoch ms the units were counted at. */
  updatedAt: number;
  /** Most tokens the bucket held under that limit. */
  capacity: number;
  /** Units that limit refilled per ms; 0 for a quota, whose `updatedAt` is the end of the period it counts for. */
  unitsPerMs: number;
  /** Units in one token of that limit. */
  unitsPerToken: number;
}

/**
 * The latest updatedAt a value may hold (and the latest `now()` the store accepts): epoch ms in the year 10889. It
 * keeps every sum the script forms (an expiry instant, a TTL) far below 2^53, so Lua's doubles hold them exactly.
 */
export const MAX_UPDATED_AT: number = 2 ** 48 - 1;

/**
 * Most entries a write keeps for limits its call does not name (another call's on the same endpoint, or a limit since
 * renamed), besides the call's own: a caller naming ever new limits cannot grow one value without end. The ones
 * written last are kept; a bucket dropped past the bound is a full one when its limit is named again.
 */
export const MAX_KEPT_ENTRIES = 16;

/** A lease the value holds: its id, when it expires, and what it holds per limit name. */
export interface StoredLease {
  /** The id the reserve gave it, unique among the key's leases. */
  id: string;
  /** Epoch ms on the store's clock at which it expires, keeping its charge. */
  expiresAt: number;
  /** Per limit name: the tokens it set aside in that bucket, or the slots it holds of that concurrency limit. */
  holds: Record<string, number>;
}

/**
 * One entry: a limit's name, two numbers and a shape in decimal, one space apart:
 * `<name> <units> <updatedAt> <capacity>/<unitsPerMs>/<unitsPerToken>`; units are negative in debt. Leading zeros are
 * read as the number they pad, as the script reads them. Number() is exact below 2^53 and gives at least 2^53 above,
 * past every range.
 */
const ENTRY = /^([^ ]+) (-?\d+) (\d+) (\d+)\/(\d+)\/(\d+)$/;
/** What the scripts parse as an entry before checking it: a name of anything but spaces, a shape of anything but commas. */
const PARSED = /^[^ ]+ -?\d+ \d+ [^,]+$/;
/** A held lease: `@<id> <expiresAt> <name>=<amount>[ <name>=<amount> ...]`. */
const LEASE = /^@([^ ,]+) (\d+)((?: [^ =,]+=\d+)+)$/;
/** The leases' header, before them: `@ <first expiresAt> <last expiresAt> <name>=<total>[ ...]`. */
const HEADER = /^@ \d+ \d+ [^,]+$/;

/**
 * The buckets and held leases of a value, or undefined for a value the scripts read as holding nothing. The leases
 * follow the buckets, from the first `@` on (no name or number holds one), joined by `, ` as the buckets are: a header
 * (`@ <first> <last> <name>=<total> ...`, what the scripts read on every call) and then the leases in order of expiry.
 * The scripts read a lease itself only when it is due, settled or extended; this checks every one.
 */
function decode(value: string | Uint8Array): { buckets: StoredBucket[]; leases: StoredLease[] } | undefined {
  let text = typeof value === 'string' ? value : Buffer.from(value).toString('latin1');
  const leases: StoredLease[] = [];
  const cut = text.indexOf('@');
  if (cut !== -1) {
    if (cut > 0 && text.slice(cut - 2, cut) !== ', ') return undefined;
    const [header, ...held] = text.slice(cut).split(', ');
    if (!HEADER.test(header as string) || held.length === 0) return undefined;
    for (const entry of held) {
      const fields = LEASE.exec(entry);
      if (fields === null || Number(fields[2]) > MAX_UPDATED_AT) return undefined;
      const holds: Record<string, number> = {};
      for (const hold of (fields[3] as string).slice(1).split(' ')) {
        const [name, amount] = hold.split('=') as [string, string];
        holds[name] = Number(amount);
      }
      leases.push({ id: fields[1] as string, expiresAt: Number(fields[2]), holds });
    }
    if (cut === 0) return { buckets: [], leases };
    text = text.slice(0, cut - 2);
  }
  const buckets: StoredBucket[] = [];
  const seen = new Set<string>();
  for (const entry of text.split(', ')) {
    if (!PARSED.test(entry)) return undefined;
    const fields = ENTRY.exec(entry);
    const name = entry.slice(0, entry.indexOf(' '));
    if (seen.has(name)) continue;
    seen.add(name);
    if (fields === null) continue;
    const bucket = {
      name,
      units: Number(fields[2]),
      updatedAt: Number(fields[3]),
      capacity: Number(fields[4]),
      unitsPerMs: Number(fields[5]),
      unitsPerToken: Number(fields[6]),
    };
    const full = bucket.capacity * bucket.unitsPerToken;
    // A quota is kept as a bucket that never refills, a request one unit (docs/stores.md, "Quotas").
    const quota = bucket.unitsPerMs === 0 && bucket.unitsPerToken === 1;
    if (
      bucket.capacity >= 1 &&
      bucket.unitsPerToken >= 1 &&
      bucket.unitsPerToken <= MAX_INTERVAL_MS &&
      (bucket.unitsPerMs >= 1 || quota) &&
      full <= MAX_BUCKET_UNITS &&
      bucket.units <= full &&
      bucket.units >= -full &&
      bucket.updatedAt <= MAX_UPDATED_AT
    ) {
      buckets.push(bucket);
    }
  }
  return { buckets, leases };
}

/**
 * Decodes an endpoint's value (a string, or the bytes `getBuffer` returns): its buckets in the order they are held.
 * Returns undefined for a value the scripts read as no bucket at all: anything but entries joined by `, ` (then held
 * leases, see decodeEndpointLeases). An entry whose shape is not three numbers or whose numbers lie outside the bounds
 * core puts on a limit (capacity × unitsPerToken ≤ 2^52, unitsPerToken ≤ MAX_INTERVAL_MS, each at least 1 but a
 * quota's unitsPerMs, 0 with unitsPerToken 1, units
 * between minus and plus a full bucket, updatedAt at most MAX_UPDATED_AT) is left out, as is a second entry of one
 * name: the scripts read the first entry of a name, and a missing or unreadable one as a full bucket. (The scripts
 * check an entry's shape only when its text differs from the request's, whose bounds core checked: the same entries
 * pass.) A bucket's units are Q of docs/stores.md, "Leases": what it holds for a decision is Q less the tokens × U
 * that held leases set aside on it.
 */
export function decodeEndpointValue(value: string | Uint8Array): StoredBucket[] | undefined {
  return decode(value)?.buckets;
}

/**
 * The leases an endpoint's value holds, in the order held (expired ones included until a call next reads the key and
 * charges them); undefined for a value the scripts read as holding nothing.
 */
export function decodeEndpointLeases(value: string | Uint8Array): StoredLease[] | undefined {
  return decode(value)?.leases;
}

/**
 * What a value holds at `now` (the store's clock), as `Store.inspect` answers it: the leases whose instant has come
 * expired in order of it, each charging the buckets it names what it set aside, exactly as the next script run on the
 * key will (scripts/bucket.ts, `charge`): refilled to the lease's expiry under the bucket's own shape, then less its
 * tokens; a name with no bucket (a full one, or a concurrency limit's slots) is charged nothing. A missing value, or
 * one the scripts read as holding nothing, holds nothing.
 */
export function keptState(value: string | Uint8Array | undefined, now: number): KeptState {
  const decoded = value === undefined ? undefined : decode(value);
  if (decoded === undefined) return { now, buckets: [], leases: [] };
  const buckets = decoded.buckets.map((bucket) => ({ ...bucket }));
  const due = decoded.leases.filter((lease) => lease.expiresAt <= now).sort((a, b) => a.expiresAt - b.expiresAt);
  for (const lease of due) {
    for (const [name, tokens] of Object.entries(lease.holds)) {
      const bucket = buckets.find((candidate) => candidate.name === name);
      if (bucket === undefined) continue;
      const full = bucket.capacity * bucket.unitsPerToken;
      const elapsed = lease.expiresAt - bucket.updatedAt;
      let units = bucket.units;
      // A quota never refills, and its updatedAt is its period's end, not an instant it was counted at.
      if (elapsed > 0 && bucket.unitsPerMs > 0) {
        const refill = elapsed * bucket.unitsPerMs;
        units = refill >= full - units ? full : units + refill;
        bucket.updatedAt = lease.expiresAt;
      }
      bucket.units = units - tokens * bucket.unitsPerToken;
    }
  }
  const kept: KeptBucket[] = buckets.map(({ name, units, updatedAt, capacity, unitsPerToken, unitsPerMs }) => ({
    name,
    units,
    updatedAt,
    capacity,
    unitsPerToken,
    unitsPerMs,
  }));
  const leases: KeptLease[] = decoded.leases
    .filter((lease) => lease.expiresAt > now)
    .map(({ id, expiresAt, holds }) => ({
      id,
      expiresAt,
      holds: Object.entries(holds).map(([name, amount]) => ({ name, amount })),
    }));
  return { now, buckets: kept, leases };
}
