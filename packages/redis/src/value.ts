/**
 * Reading a bucket's Redis value back, for operators and tests. The value is written by the Lua in scripts/bucket.ts,
 * and docs/redis.md describes it; this is its one reader outside Redis, and it accepts exactly what the script does.
 */
import { MAX_LIMIT, UNITS_PER_TOKEN } from '@ratecard/core';

/** A bucket as Redis holds it: core's three numbers (docs/algorithm.md). */
export interface StoredBucket {
  /** Units held at `updatedAt` (a token is 60 000 units). */
  units: number;
  /** Epoch ms the units were counted at. */
  updatedAt: number;
  /** The limit (requests per minute) in force when the bucket was written. */
  limit: number;
}

/**
 * The latest updatedAt a value may hold (and the latest `now()` the store accepts): epoch ms in the year 10889. It
 * keeps every sum the script forms (an expiry instant, a TTL) far below 2^53, so Lua's doubles hold them exactly.
 */
export const MAX_UPDATED_AT: number = 2 ** 48 - 1;

/**
 * The three numbers in decimal, one space apart: `<units> <updatedAt> <limit>`. Leading zeros are read as the number
 * they pad, as the script reads them. Number() is exact below 2^53 and gives at least 2^53 above, past every range.
 */
const FORM = /^(\d+) (\d+) (\d+)$/;

/**
 * Decodes a bucket value (a string, or the bytes `getBuffer` returns). Returns undefined for a value the script would
 * read as a full bucket: anything but that text, a limit outside 1..MAX_LIMIT, more units than the limit holds, or an
 * updatedAt past MAX_UPDATED_AT.
 */
export function decodeBucketValue(value: string | Uint8Array): StoredBucket | undefined {
  const text = typeof value === 'string' ? value : Buffer.from(value).toString('latin1');
  const fields = FORM.exec(text);
  if (fields === null) return undefined;
  const units = Number(fields[1]);
  const updatedAt = Number(fields[2]);
  const limit = Number(fields[3]);
  if (limit < 1 || limit > MAX_LIMIT || units > limit * UNITS_PER_TOKEN || updatedAt > MAX_UPDATED_AT) return undefined;
  return { units, updatedAt, limit };
}
