/**
 * Reading a bucket's Redis value back, for operators and tests. The value is written by the Lua in scripts/bucket.ts,
 * and docs/redis.md describes it; this is its one reader outside Redis, and it accepts exactly what the script does.
 */
import { MAX_BUCKET_UNITS, MAX_INTERVAL_MS } from '@ratecard/core';

/** A bucket as Redis holds it: the units it held when, and the shape of the limit then in force (docs/algorithm.md). */
export interface StoredBucket {
  /** Units held at `updatedAt` (a token is `unitsPerToken` units). */
  units: number;
  /** Epoch ms the units were counted at. */
  updatedAt: number;
  /** Most tokens the bucket held under that limit. */
  capacity: number;
  /** Units that limit refilled per ms. */
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
 * Two numbers and a shape in decimal, one space apart: `<units> <updatedAt> <capacity>/<unitsPerMs>/<unitsPerToken>`.
 * Leading zeros are read as the number they pad, as the script reads them. Number() is exact below 2^53 and gives at
 * least 2^53 above, past every range.
 */
const FORM = /^(\d+) (\d+) (\d+)\/(\d+)\/(\d+)$/;

/**
 * Decodes a bucket value (a string, or the bytes `getBuffer` returns). Returns undefined for a value the script would
 * read as a full bucket: anything but that text, a capacity, unitsPerMs or unitsPerToken outside the bounds core puts
 * on a limit (capacity × unitsPerToken ≤ 2^52, unitsPerToken ≤ MAX_INTERVAL_MS, each at least 1), more units than that
 * capacity holds, or an updatedAt past MAX_UPDATED_AT. (The script checks the shape only when its text differs from
 * the request's, whose bounds core checked: the same values pass.)
 */
export function decodeBucketValue(value: string | Uint8Array): StoredBucket | undefined {
  const text = typeof value === 'string' ? value : Buffer.from(value).toString('latin1');
  const fields = FORM.exec(text);
  if (fields === null) return undefined;
  const units = Number(fields[1]);
  const updatedAt = Number(fields[2]);
  const capacity = Number(fields[3]);
  const unitsPerMs = Number(fields[4]);
  const unitsPerToken = Number(fields[5]);
  if (
    capacity < 1 ||
    unitsPerToken < 1 ||
    unitsPerToken > MAX_INTERVAL_MS ||
    unitsPerMs < 1 ||
    capacity * unitsPerToken > MAX_BUCKET_UNITS ||
    units > capacity * unitsPerToken ||
    updatedAt > MAX_UPDATED_AT
  ) {
    return undefined;
  }
  return { units, updatedAt, capacity, unitsPerMs, unitsPerToken };
}
