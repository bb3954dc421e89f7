/**
 * The token-bucket arithmetic, exact, with no I/O. Stores (memory, Redis' Lua script) keep three numbers per bucket
 * and call these functions (or mirror them line for line) to move them. docs/algorithm.md derives every formula.
 *
 * Units: a token is UNITS_PER_TOKEN units, so a bucket of capacity C (requests per minute) refills C units per
 * millisecond: C/60 tokens per second is C × 60 000 / 60 000 units per ms. Time is whole milliseconds. Every stored
 * value and every intermediate result is an integer below 2^53 (see MAX_LIMIT), so nothing drifts.
 */
export const UNITS_PER_TOKEN = 60_000;

/**
 * ceil(a / b) for non-negative safe integers. The quotient is rounded once; for it to round across an integer, a
 * would have to be at least 2^53, so the ceiling of the rounded quotient is the exact one.
 */
export function ceilDiv(a: number, b: number): number {
  return Math.ceil(a / b);
}

/**
 * Units held at `now` by a bucket that held `units` at `updatedAt` while its limit was `storedLimit`, seen by a
 * request whose limit is `limit`. Time before `now` refills at the stored limit's rate (the plan in force then); the
 * result is capped at the new capacity, so a plan change keeps the tokens the bucket has and never exceeds the new
 * capacity. A clock that went backwards refills nothing.
 */
export function unitsAt(units: number, updatedAt: number, storedLimit: number, now: number, limit: number): number {
  const storedFull = storedLimit * UNITS_PER_TOKEN;
  const elapsed = now - updatedAt;
  let held = units;
  if (elapsed > 0) {
    // elapsed × storedLimit may pass 2^53 after a long idle time, and the comparison is still exact: a product that
    // large rounds to at least 2^53, above any missing amount (≤ MAX_LIMIT × 60 000), and a smaller one is exact.
    const refill = elapsed * storedLimit;
    held = refill >= storedFull - units ? storedFull : units + refill;
  }
  const full = limit * UNITS_PER_TOKEN;
  return held < full ? held : full;
}

/**
 * The outcome of charging a bucket, as one number so a store can return it without allocating:
 * `outcome >= 0`: the request was admitted and the bucket holds `outcome` units after it;
 * `outcome < 0`: the request was limited, nothing was charged, and the bucket holds `-1 - outcome` units.
 */
export type Outcome = number;

/** Outcome of asking `cost` tokens from a bucket holding `held` units. */
export function take(held: number, cost: number): Outcome {
  const need = cost * UNITS_PER_TOKEN;
  return held >= need ? held - need : -1 - held;
}

export function isLimited(outcome: Outcome): boolean {
  return outcome < 0;
}

/** Units the bucket holds after the request (after the charge if admitted, untouched if limited). */
export function unitsAfter(outcome: Outcome): number {
  return outcome < 0 ? -1 - outcome : outcome;
}

/** Whole tokens left after the request; 0 when limited. */
export function remainingTokens(outcome: Outcome): number {
  return outcome < 0 ? 0 : Math.floor(outcome / UNITS_PER_TOKEN);
}

/** Whole seconds until `cost` tokens are there (at least 1) when limited; 0 when admitted. */
export function retryAfterSeconds(outcome: Outcome, limit: number, cost: number): number {
  if (outcome >= 0) return 0;
  const seconds = ceilDiv(cost * UNITS_PER_TOKEN - (-1 - outcome), limit * 1000);
  return Math.max(seconds, 1);
}

/** Whole seconds until the bucket is full again. */
export function resetAfterSeconds(outcome: Outcome, limit: number): number {
  return ceilDiv(limit * UNITS_PER_TOKEN - unitsAfter(outcome), limit * 1000);
}

/** Milliseconds from the moment of the outcome until the bucket is full again (a store's TTL). */
export function msUntilFull(units: number, limit: number): number {
  return ceilDiv(limit * UNITS_PER_TOKEN - units, limit);
}

/** Milliseconds from the moment of a limited outcome until `cost` tokens are there (a deny cache's horizon). */
export function msUntilAvailable(outcome: Outcome, limit: number, cost: number): number {
  if (outcome >= 0) return 0;
  return ceilDiv(cost * UNITS_PER_TOKEN - (-1 - outcome), limit);
}
