/**
 * Reading a bucket's Redis value back, for operators and tests. The layouts are written by the Lua in
 * scripts/bucket.ts, and docs/redis.md describes them; this is their one reader outside Redis.
 */

/** A bucket as Redis holds it: core's three numbers (docs/algorithm.md), and which layout carried them. */
export interface StoredBucket {
  /** Units held at `updatedAt` (a token is 60 000 units). */
  units: number;
  /** Epoch ms the units were counted at. */
  updatedAt: number;
  /** The limit (requests per minute) in force when the bucket was written. */
  limit: number;
  /** 'compact': one integer, 14 to 16 decimal digits (limits below 256); 'packed': 12 or 17 bytes. */
  layout: 'compact' | 'packed';
}

/** Limits below this are stored in the compact layout (the limit takes 8 bits). */
export const COMPACT_LIMIT = 256;
/** The compact layout keeps updatedAt modulo this many ms (2^21, about 35 minutes). */
export const COMPACT_TIME_WRAP: number = 2 ** 21;
/** The compact layout's span for missing units: 2^24, above 255 × 60 000. */
export const COMPACT_MISSING_SPAN: number = 2 ** 24;

/**
 * Decodes a bucket value (as `getBuffer` returns it). The compact layout keeps updatedAt modulo
 * COMPACT_TIME_WRAP, so `now` (epoch ms, the store's clock) places it: the instant with that remainder within half a
 * wrap of `now`, as the script does. Returns undefined for a value ratecard did not write, which the store reads as
 * a full bucket.
 */
export function decodeBucketValue(value: Buffer, now: number): StoredBucket | undefined {
  if (value.length >= 14 && value.length <= 16) {
    const text = value.toString('latin1');
    if (!/^[1-9]\d*$/.test(text)) return undefined;
    const v = Number(text);
    const wrapped = v % COMPACT_TIME_WRAP;
    const rest = (v - wrapped) / COMPACT_TIME_WRAP;
    const missing = rest % COMPACT_MISSING_SPAN;
    const limit = (rest - missing) / COMPACT_MISSING_SPAN;
    // As the script: a value whose fields ratecard would not write reads as a full bucket.
    if (limit < 1 || limit >= COMPACT_LIMIT || missing > limit * 60_000) return undefined;
    let ahead = (((wrapped - now) % COMPACT_TIME_WRAP) + COMPACT_TIME_WRAP) % COMPACT_TIME_WRAP;
    if (ahead >= COMPACT_TIME_WRAP / 2) ahead -= COMPACT_TIME_WRAP;
    return { units: limit * 60_000 - missing, updatedAt: now + ahead, limit, layout: 'compact' };
  }
  if (value.length === 12) {
    const [units, updatedAt, limit] = [value.readUIntLE(0, 4), value.readUIntLE(4, 6), value.readUIntLE(10, 2)];
    return { units, updatedAt, limit, layout: 'packed' };
  }
  if (value.length === 17) {
    const [units, updatedAt, limit] = [value.readUIntLE(0, 6), value.readUIntLE(6, 6), value.readUIntLE(12, 5)];
    return { units, updatedAt, limit, layout: 'packed' };
  }
  return undefined;
}
