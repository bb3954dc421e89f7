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

/**
 * The numbers of a limit the arithmetic reads; a store keeps them with a bucket as the shape then in force. A quota's
 * (unitsPerMs 0) carries the end of the period a call falls in, `periodEnd`.
 */
export type BucketShape = Pick<Limit, 'capacity' | 'unitsPerToken' | 'unitsPerMs' | 'periodEnd'>;

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
 * The time a bucket is written at: `now`, or the time it was written at if later (an interval never refills twice);
 * for a quota, the end of its period (the later of the stored one and the call's). `storedAt` 0 for a new bucket.
 */
export function writtenAt(storedAt: number, now: number, limit: BucketShape): number {
  const at = limit.periodEnd ?? now;
  return storedAt > at ? storedAt : at;
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
  // A quota's bucket holds `units` for the period ending at `updatedAt`; a later period starts full.
  if (limit.periodEnd !== undefined) {
    const full = limit.capacity * limit.unitsPerToken;
    return updatedAt < limit.periodEnd || units > full ? full : units;
  }
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
 * `outcome` units after it; `outcome < 0`: nothing was charged, and the bucket holds `-1 - outcome` units, or, when it
 * is in debt (a settled lease used more than it reserved: it holds h < 0 units), the outcome is `h - 1 - DEBT_OFFSET`,
 * below every outcome of a bucket that is not. A request with several limits gets one outcome per limit, all admitted
 * or none (a limit that had the tokens but was not charged, because another refused, reports what it holds as a
 * negative outcome too). For a concurrency limit a unit is a slot, and what it "holds" is its free slots.
 */
export type Outcome = number;

/**
 * Where the outcomes of a bucket in debt start: a refused bucket holds less than the capacity it was asked (at most
 * 2^52 units), so `-1 - held` lies in [-2^52, -1] for held >= 0, and a debt h in [1 - 2^52, -1] (DEBT_FLOOR) gives
 * `h - 1 - 2^52` in [-2^53, -2^52 - 2]: every one an integer a double holds exactly.
 */
export const DEBT_OFFSET: number = 2 ** 52;

/** The deepest debt a bucket may be in, in units: minus its capacity, and above -2^52 (see DEBT_OFFSET). */
export function debtFloor(limit: BucketShape): number {
  const full = limit.capacity * limit.unitsPerToken;
  return full < DEBT_OFFSET ? -full : 1 - DEBT_OFFSET;
}

/** The outcome of a refusal by a bucket holding `held` units (negative in debt). */
export function refusal(held: number): Outcome {
  return held >= 0 ? -1 - held : held - 1 - DEBT_OFFSET;
}

/** Outcome of asking `cost` tokens of `limit` from a bucket holding `held` units. */
export function take(held: number, cost: number, limit: BucketShape): Outcome {
  const need = cost * limit.unitsPerToken;
  return held >= need ? held - need : refusal(held);
}

/** True when the outcome is a refusal: nothing was charged. */
export function isLimited(outcome: Outcome): boolean {
  return outcome < 0;
}

/** Units the bucket holds after the request (after the charge if admitted, untouched if not; negative in debt). */
export function unitsAfter(outcome: Outcome): number {
  if (outcome >= 0) return outcome;
  return outcome >= -DEBT_OFFSET ? -1 - outcome : outcome + 1 + DEBT_OFFSET;
}

/** The cost a request asks of its i-th limit: a number asks it of every limit, a list one per limit, in order. */
export function costAt(cost: number | readonly number[], i: number): number {
  return typeof cost === 'number' ? cost : (cost[i] as number);
}

/** Whole tokens left after the request; 0 when limited. */
export function remainingTokens(outcome: Outcome, limit: BucketShape): number {
  return outcome < 0 ? 0 : Math.floor(outcome / limit.unitsPerToken);
}

/**
 * Whole seconds until this limit's bucket holds `cost` tokens (at least 1 when it lacks them); 0 when it has them. A
 * concurrency limit that lacks the slots answers 1: a slot frees when a holder settles, which nobody can foresee
 * (docs/algorithm.md, "Leases").
 */
export function retryAfterSeconds(outcome: Outcome, limit: BucketShape, cost: number): number {
  const missing = cost * limit.unitsPerToken - unitsAfter(outcome);
  if (outcome >= 0 || missing <= 0) return 0;
  if (limit.periodEnd !== undefined) return Math.max(1, secondsUntil(limit.periodEnd));
  if (limit.unitsPerMs === 0) return 1;
  const seconds = ceilDiv(missing, limit.unitsPerMs * 1000);
  return seconds > 1 ? seconds : 1;
}

/**
 * Whole seconds until the bucket is full again: for a quota, until its next period starts (by this process's clock);
 * 0 for a concurrency limit, which does not refill.
 */
export function resetAfterSeconds(outcome: Outcome, limit: BucketShape): number {
  if (limit.periodEnd !== undefined) return secondsUntil(limit.periodEnd);
  if (limit.unitsPerMs === 0) return 0;
  return ceilDiv(limit.capacity * limit.unitsPerToken - unitsAfter(outcome), limit.unitsPerMs * 1000);
}

/** Whole seconds from this process's now until an instant, 0 when it has passed. */
function secondsUntil(instant: number): number {
  const ms = instant - Date.now();
  return ms > 0 ? ceilDiv(ms, 1000) : 0;
}

/**
 * Milliseconds from the moment of the outcome until a bucket holding `units` is full again (a store's TTL); 0 for a
 * limit that never refills: a quota written at its period's end (writtenAt) is full again then.
 */
export function msUntilFull(units: number, limit: BucketShape): number {
  if (limit.unitsPerMs === 0) return 0;
  return ceilDiv(limit.capacity * limit.unitsPerToken - units, limit.unitsPerMs);
}

/**
 * Milliseconds from the moment of an outcome until the bucket holds `cost` tokens (a deny cache's horizon); 0 for a
 * concurrency limit, whose slot may free at any moment.
 */
export function msUntilAvailable(outcome: Outcome, limit: BucketShape, cost: number): number {
  const missing = cost * limit.unitsPerToken - unitsAfter(outcome);
  if (outcome >= 0 || missing <= 0 || limit.unitsPerMs === 0) return 0;
  return ceilDiv(missing, limit.unitsPerMs);
}
