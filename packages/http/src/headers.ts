import { type Decision, describeValue, RateLimitError } from '@ratecard/core';

export interface RateLimitHeaderOptions {
  /**
   * Also send the IETF draft fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy` and `RateLimit`.
   * Default false.
   */
  ietf?: boolean;
  /** The quota policy name in the IETF fields; default the decision's rule key, e.g. `POST /browsers`. */
  policy?: string;
  /** Send the headers on shadow-mode decisions too (they never answer 429, so there is no Retry-After). Default false. */
  shadowHeaders?: boolean;
}

/** The bucket refills its whole capacity in this many seconds: the `w` of the IETF policy. */
const WINDOW_SECONDS = 60;

/** Characters an RFC 9651 sf-string may hold: printable ASCII. `"` and `\` are escaped, the rest pass. */
const STRING_CHARS = /^[\x20-\x7e]*$/;

function sfString(value: string): string {
  return `"${value.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

/**
 * A policy name as an RFC 9651 String. A name given by the caller must already be printable ASCII (a bad name is a
 * configuration mistake, so it throws `invalid_option`); a default taken from a rule key has any other character
 * percent-encoded, because a rule key is only required to be free of whitespace.
 */
function policyName(decision: Decision, policy: string | undefined): string {
  if (policy !== undefined) {
    checkPolicy(policy);
    return sfString(policy);
  }
  const key = decision.rule ?? 'default';
  if (STRING_CHARS.test(key)) return sfString(key);
  let ascii = '';
  for (const byte of new TextEncoder().encode(key)) {
    ascii += byte >= 0x20 && byte <= 0x7e ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase()}`;
  }
  return sfString(ascii);
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

/** Whole seconds, at least 1: Retry-After never tells a client to retry at once. */
function retryAfterOf(decision: Decision): number {
  const seconds = Math.ceil(decision.retryAfter);
  return Number.isFinite(seconds) && seconds >= 1 ? seconds : 1;
}

/**
 * The response headers for a decision, as a plain record (no framework object is touched).
 *
 * - enforced, allowed: `X-RateLimit-Limit`, `X-RateLimit-Remaining`;
 * - enforced, denied: the same with `X-RateLimit-Remaining: 0`, plus `Retry-After` in whole seconds (at least 1);
 * - shadow: nothing, unless `shadowHeaders` (then the two X- headers, never Retry-After: the request goes on);
 * - unlimited (no rule): nothing.
 *
 * With `ietf`, also `RateLimit-Policy: "<policy>";q=<limit>;w=60` and `RateLimit: "<policy>";r=<remaining>;t=<s>`,
 * where `t` equals Retry-After on a denial and is the seconds until the bucket is full again otherwise.
 */
export function rateLimitHeaders(decision: Decision, options: RateLimitHeaderOptions = {}): Record<string, string> {
  const headers: Record<string, string> = {};
  if (decision.mode === 'unlimited') return headers;
  if (decision.mode === 'shadow' && options.shadowHeaders !== true) return headers;
  const denied = !decision.allowed;
  const remaining = denied ? 0 : decision.remaining;
  headers['X-RateLimit-Limit'] = String(decision.limit);
  headers['X-RateLimit-Remaining'] = String(remaining);
  const retryAfter = denied ? retryAfterOf(decision) : 0;
  if (denied) headers['Retry-After'] = String(retryAfter);
  if (options.ietf === true) {
    const name = policyName(decision, options.policy);
    // On a denial t must not end before Retry-After (the draft asks the two to agree), so it is Retry-After itself.
    const reset = denied ? retryAfter : Math.max(0, Math.ceil(decision.resetAfter));
    headers['RateLimit-Policy'] = `${name};q=${decision.limit};w=${WINDOW_SECONDS}`;
    headers.RateLimit = `${name};r=${remaining};t=${reset}`;
  }
  return headers;
}
