import { quotaExceeded } from './errors.js';

/**
 * What V8 spends on each object, array and object key beyond its JSON text. Measured on Node 20 (JSON.parse, then the
 * heap after a full GC): 1 MiB of `[{},{},…]` takes about 20 MiB of heap, of `[[],[],…]` 11 MiB, of `{"k":0,…}`
 * 5 MiB, of numbers or one long string about 1 MiB. Counting 64 bytes for each object, array and key puts the
 * estimate near or above the memory a kept value takes, whatever its shape.
 */
const BYTES_PER_NODE = 64;

/** Deepest nesting taken in a free-form object (`chrome_policy`, `telemetry`), so walking it never overflows. */
export const MAX_DEPTH = 32;

// The walks below loop with `for…of` and `for…in` rather than `Object.values`, which would allocate an array per
// object: a 1 MiB body holds some 350 000 of them.

/** Whether a JSON value nests deeper than `MAX_DEPTH` levels of objects and arrays. */
export function tooDeep(value: unknown, depth = 1): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (depth > MAX_DEPTH) return true;
  if (Array.isArray(value)) {
    for (const item of value) if (tooDeep(item, depth + 1)) return true;
    return false;
  }
  const record = value as Record<string, unknown>;
  for (const key in record) if (tooDeep(record[key], depth + 1)) return true;
  return false;
}

/** Objects, arrays and object keys in a JSON value. */
function nodes(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  let count = 1;
  if (Array.isArray(value)) {
    for (const item of value) count += nodes(item);
    return count;
  }
  const record = value as Record<string, unknown>;
  for (const key in record) count += 1 + nodes(record[key]);
  return count;
}

/**
 * What keeping a parsed JSON value (no deeper than `MAX_DEPTH`) costs in memory, in bytes: its JSON text plus 64 for
 * each object, array and key in it.
 */
export function keptBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '') + BYTES_PER_NODE * nodes(value);
}

/**
 * Bytes kept per organization, with a bound: what one organization sends can never take the service's memory from
 * the others. `what` names the holdings in the 409 past the bound ("browser settings").
 */
export class Budget {
  private readonly used = new Map<string, number>();

  constructor(
    readonly what: string,
    readonly limit: number,
  ) {}

  /**
   * Charges `bytes` to the organization, counting `freed` (what the same change gives back) as returned first, or
   * throws the 409 and charges nothing when they do not fit.
   */
  charge(organization: string, bytes: number, freed = 0): void {
    const used = (this.used.get(organization) ?? 0) - freed;
    if (used + bytes > this.limit) {
      throw quotaExceeded(
        `An organization keeps at most ${this.limit} bytes of ${this.what}: these take ${bytes} and ${used} are in use; delete some or send less.`,
      );
    }
    this.set(organization, used + bytes);
  }

  refund(organization: string, bytes: number): void {
    this.set(organization, (this.used.get(organization) ?? 0) - bytes);
  }

  private set(organization: string, bytes: number): void {
    if (bytes === 0) this.used.delete(organization);
    else this.used.set(organization, bytes);
  }
}
