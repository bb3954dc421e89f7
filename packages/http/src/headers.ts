import {
  ceilDiv,
  type Decision,
  describeValue,
  type Limit,
  type LimitState,
  limitStates,
  RateLimitError,
} from '@ratecard/core';

/** Which rate-limit headers to send besides the spec's `X-RateLimit-*` and `Retry-After`. */
export interface RateLimitHeaderOptions {
  /**
   * Also send the IETF draft fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy` and `RateLimit`, one
   * item per limit of the decision. Default false.
   */
  ietf?: boolean;
  /**
   * A prefix for the IETF item names: `policy: 'api'` names the items `"api:1s"`, `"api:1h"`. Default none: each item
   * is named by its limit, `"1s"`, `"1h"`.
   */
  policy?: string;
  /** Send the headers on shadow-mode decisions too (they never answer 429, so there is no Retry-After). Default false. */
  shadowHeaders?: boolean;
}

/** Characters an RFC 9651 sf-string may hold: printable ASCII. `"` and `\` are escaped, the rest pass. */
const STRING_CHARS = /^[\x20-\x7e]*$/;

function sfString(value: string): string {
  return `"${value.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

/**
 * Seconds in which the limit refills its whole capacity from empty: the `w` of its IETF policy, capacity × intervalMs
 * / refill rounded up, computed in the limit's own units (capacity × U / R ms) so it stays exact. A quota's window is
 * its period, in which `q` is granted once: a day is 86 400 s, or 82 800 on the day clocks go forward.
 */
function windowSeconds(limit: Limit): number {
  if (limit.periodEnd !== undefined) return ceilDiv(limit.periodEnd - (limit.periodStart as number), 1000);
  return ceilDiv(limit.capacity * limit.unitsPerToken, limit.unitsPerMs * 1000);
}

/** Throws `invalid_option` unless `policy` can be an RFC 9651 String: printable ASCII, at most 256 characters. */
export function checkPolicy(policy: unknown): void {
  if (typeof policy !== 'string' || policy.length === 0 || policy.length > 256 || !STRING_CHARS.test(policy)) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: policy must be 1 to 256 printable ASCII characters (an RFC 9651 string), got ${describeValue(policy)}`,
    );
  }
}

/**
 * The largest count a field states: RFC 9651's largest Integer (15 digits). A limit may hold up to 2^52 tokens, and one
 * 16-digit `q` or `r` makes a parser drop the whole `RateLimit-Policy` or `RateLimit` field; so a larger count is
 * stated as this one (a client then paces by a little less than it has).
 */
const MAX_FIELD_COUNT = 999_999_999_999_999;

/**
 * The longest wait a field states, in seconds: from 10^9 on (2001-09-09 as a Unix time) clients, this package's among
 * them, take a number for a Unix time and read garbage. A bucket that refills in decades can ask for more; it is
 * stated as 31.7 years, which no client waits out either.
 */
const MAX_FIELD_SECONDS = 999_999_999;

/** Whole seconds, at least 1 and at most MAX_FIELD_SECONDS: Retry-After never tells a client to retry at once. */
function retryAfterOf(decision: Decision): number {
  const seconds = Math.ceil(decision.retryAfter);
  return Number.isFinite(seconds) && seconds >= 1 ? Math.min(seconds, MAX_FIELD_SECONDS) : 1;
}

/**
 * The limit the X- headers state: the decision's most restrictive token bucket, as the limiter picks its most
 * restrictive limit (on a denial the one that waits longest, else the one with the fewest whole tokens left; ties to
 * the first), among the token buckets only. Undefined when the decision holds no token bucket.
 */
function statedBucket(decision: Decision, states: readonly LimitState[]): LimitState | undefined {
  let most: LimitState | undefined;
  for (const state of states) {
    if (most === undefined) most = state;
    else if (decision.limited ? state.retryAfter > most.retryAfter : state.remaining < most.remaining) most = state;
  }
  return most;
}

/**
 * The response headers for a decision, as a plain record (no framework object is touched).
 *
 * - enforced, allowed: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, of the decision's most restrictive limit;
 * - enforced, denied: the same with `X-RateLimit-Remaining: 0`, plus `Retry-After` in whole seconds (at least 1): when
 *   every limit admits the request again;
 * - shadow: nothing, unless `shadowHeaders` (then the two X- headers, never Retry-After: the request goes on);
 * - unlimited (no rule): nothing.
 *
 * With `ietf`, also `RateLimit-Policy` and `RateLimit`, one item per limit named by the limit (docs/http.md):
 * `"1s";q=10;w=1, "1h";q=1000;w=3600` and `"1s";r=0;t=1, "1h";r=990;t=36`.
 *
 * Every count is stated as at most 999 999 999 999 999 (RFC 9651's largest Integer) and every wait (`Retry-After`,
 * `t`) as at most 999 999 999 s (from 10^9 on, clients read a Unix time), so that every parser reads each field.
 *
 * A concurrency limit is no quota that refills over time, which is what these fields describe (a client paces by them),
 * so it is left out of `X-RateLimit-*` and the IETF fields: they state the decision's token buckets, and a decision of
 * concurrency limits alone sends neither. A refusal by one still gets `Retry-After` (core's 1 s: a slot frees when a
 * holder settles, which nobody can foresee). docs/http.md, "Leases".
 */
export function rateLimitHeaders(decision: Decision, options: RateLimitHeaderOptions = {}): Record<string, string> {
  const headers: Record<string, string> = {};
  if (decision.mode === 'unlimited') return headers;
  if (decision.mode === 'shadow' && options.shadowHeaders !== true) return headers;
  const denied = !decision.allowed;
  const slots = decision.limits.some((limit) => limit.kind === 'concurrency');
  if (!slots) {
    headers['X-RateLimit-Limit'] = String(Math.min(decision.limit, MAX_FIELD_COUNT));
    headers['X-RateLimit-Remaining'] = String(denied ? 0 : Math.min(decision.remaining, MAX_FIELD_COUNT));
  }
  if (denied) headers['Retry-After'] = String(retryAfterOf(decision));
  if (!slots && options.ietf !== true) return headers;
  const states = limitStates(decision).filter((state) => state.limit.kind !== 'concurrency');
  if (slots) {
    const stated = statedBucket(decision, states);
    if (stated === undefined) return headers;
    headers['X-RateLimit-Limit'] = String(Math.min(stated.limit.capacity, MAX_FIELD_COUNT));
    headers['X-RateLimit-Remaining'] = String(denied ? 0 : Math.min(stated.remaining, MAX_FIELD_COUNT));
  }
  if (options.ietf === true) {
    const policy = options.policy;
    if (policy !== undefined) checkPolicy(policy);
    const prefix = policy === undefined ? '' : `${policy}:`;
    const policies: string[] = [];
    const items: string[] = [];
    for (let i = 0; i < states.length; i++) {
      const state = states[i] as LimitState;
      const { limit } = state;
      const name = sfString(prefix + limit.name);
      // A limit that had the tokens of a refused request was not charged and still holds them (limitStates says how
      // many): saying 0 would send a client waiting for a limit that is not the one refusing.
      const remaining = state.limited ? 0 : Math.min(state.remaining, MAX_FIELD_COUNT);
      // On a denial a spent limit's t is when it admits the request again (the draft asks t and Retry-After to agree:
      // the limit that waits longest gives both); otherwise t is when the bucket is full again.
      const reset = Math.min(
        denied && state.limited ? Math.max(1, state.retryAfter) : state.resetAfter,
        MAX_FIELD_SECONDS,
      );
      policies.push(`${name};q=${Math.min(limit.capacity, MAX_FIELD_COUNT)};w=${windowSeconds(limit)}`);
      items.push(`${name};r=${remaining};t=${reset}`);
    }
    headers['RateLimit-Policy'] = policies.join(', ');
    headers.RateLimit = items.join(', ');
  }
  return headers;
}
