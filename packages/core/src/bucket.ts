import type { Limit } from './limits.js';

/**
 * The token-bucket arithmetic, exact, with no I/O. Stores (memory, Redis' Lua script) keep a few integers per bucket
 * and call these functions (or mirror them line for line) to move them. docs/algorithm.md derives every formula.
 *
 * Units: a limit refilling `refill` tokens every `intervalMs` counts a token as U = intervalMs / g units and gains
 * R = refill / g units per millisecond (g = gcd(refill, intervalMs)); a full bucket holds capacity × U units. Time is
 * whole milliseconds. Every stored value and every intermediate result is an integer below 2^53 (limits.ts bounds
 * them), so nothing drifts.
 */

/** The three numbers of a limit the arithmetic reads; a store keeps them with a bucket as the shape then in force. */
export type BucketShape = Pick<Limit, 'capacity' | 'unitsPerToken' | 'unitsPerMs'>;

/** Whether two shapes refill alike: a bucket written under one is read under the other without conversion. */
export function sameShape(a: BucketShape, b: BucketShape): boolean {
  return a.capacity === b.capacity && a.unitsPerToken === b.unitsPerToken && a.unitsPerMs === b.unitsPerMs;
}

/**
 * ceil(a / b) for non-negative safe integers. The quotient is rounded once; for it to round across an integer, a
 * would have to be at least 2^53, so the ceiling of the rounded quotient is the exact one.
 */
export function ceilDiv(a: number, b: number): number {
  return Math.ceil(a / b);
}

/**
 * Units held at `now` by a bucket that held `units` at `updatedAt` under the shape `stored`, seen by a request whose
 * limit is `limit`. Time before `now` refills at the stored shape's rate (the limit in force then), up to its
 * capacity; the amount is then converted to the new limit's units, rounding down, and capped at its capacity, so a
 * plan change keeps the tokens the bucket has and never exceeds the new capacity. A clock that went backwards refills
 * nothing.
 */
export function unitsAt(
  units: number,
  updatedAt: number,
  stored: BucketShape,
  now: number,
  limit: BucketShape,
): number {
  const storedU = stored.unitsPerToken;
  const storedFull = stored.capacity * storedU;
  const elapsed = now - updatedAt;
  let held = units;
  if (elapsed > 0) {
    // elapsed × R may pass 2^53 after a long idle time, and the comparison is still exact: a product that large
    // rounds to at least 2^53, above any missing amount (below 2^52), and a smaller one is exact.
    const refill = elapsed * stored.unitsPerMs;
    held = refill >= storedFull - units ? storedFull : units + refill;
  }
  if (limit.unitsPerToken !== storedU) return converted(held, storedU, limit);
  const full = limit.capacity * storedU;
  return held < full ? held : full;
}

/**
 * `held` units of `storedU` units a token, in units of `limit`, capped at its capacity: whole tokens convert exactly,
 * the part token rounds down. (held − tokens × storedU) × U < storedU × U ≤ (a day in ms)² < 2^53, so it is exact.
 */
function converted(held: number, storedU: number, limit: BucketShape): number {
  const u = limit.unitsPerToken;
  const tokens = Math.floor(held / storedU);
  if (tokens >= limit.capacity) return limit.capacity * u;
  return tokens * u + Math.floor(((held - tokens * storedU) * u) / storedU);
}

/**
 * The outcome of charging a bucket, as one number: `outcome >= 0`: the request was admitted and the bucket holds
 * `outcome` units after it; `outcome < 0`: nothing was charged, and the bucket holds `-1 - outcome` units. A request
 * with several limits gets one outcome per limit, all admitted or none (a limit that had the tokens but was not
 * charged, because another refused, reports what it holds as a negative outcome too).
 */
export type Outcome = number;

/** Outcome of asking `cost` tokens of `limit` from a bucket holding `held` units. */
export function take(held: number, cost: number, limit: BucketShape): Outcome {
  const need = cost * limit.unitsPerToken;
  return held >= need ? held - need : -1 - held;
}

/** True when the outcome is a refusal: nothing was charged. */
export function isLimited(outcome: Outcome): boolean {
  return outcome < 0;
}

/** Units the bucket holds after the request (after the charge if admitted, untouched if not). */
export function unitsAfter(outcome: Outcome): number {
  return outcome < 0 ? -1 - outcome : outcome;
}

/** Whole tokens left after the request; 0 when limited. */
export function remainingTokens(outcome: Outcome, limit: BucketShape): number {
  return outcome < 0 ? 0 : Math.floor(outcome / limit.unitsPerToken);
}

/** Whole seconds until this limit's bucket holds `cost` tokens (at least 1 when it lacks them); 0 when it has them. */
export function retryAfterSeconds(outcome: Outcome, limit: BucketShape, cost: number): number {
  const missing = cost * limit.unitsPerToken - unitsAfter(outcome);
  if (outcome >= 0 || missing <= 0) return 0;
  const seconds = ceilDiv(missing, limit.unitsPerMs * 1000);
  return seconds > 1 ? seconds : 1;
}

/** Whole seconds until the bucket is full again. */
export function resetAfterSeconds(outcome: Outcome, limit: BucketShape): number {
  return ceilDiv(limit.capacity * limit.unitsPerToken - unitsAfter(outcome), limit.unitsPerMs * 1000);
}

/** Milliseconds from the moment of the outcome until a bucket holding `units` is full again (a store's TTL). */
export function msUntilFull(units: number, limit: BucketShape): number {
  return ceilDiv(limit.capacity * limit.unitsPerToken - units, limit.unitsPerMs);
}

/** Milliseconds from the moment of an outcome until the bucket holds `cost` tokens (a deny cache's horizon). */
export function msUntilAvailable(outcome: Outcome, limit: BucketShape, cost: number): number {
  const missing = cost * limit.unitsPerToken - unitsAfter(outcome);
  if (outcome >= 0 || missing <= 0) return 0;
  return ceilDiv(missing, limit.unitsPerMs);
}
