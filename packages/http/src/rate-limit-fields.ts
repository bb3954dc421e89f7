import { parseDictionary, parseList, Token } from 'structured-headers';

/** Which response field set a wait. `probe`: held until the one request in flight has been answered. */
export type WaitSource = 'retry-after-ms' | 'retry-after' | 'ietf' | 'draft-6' | 'x-ratelimit' | 'default' | 'probe';

/** Why the client waits, or would have to wait. */
export interface RateLimitReason {
  /** Which response field set the wait. */
  source: WaitSource;
  /** Milliseconds until the server's budget allows the next request, counted from when this reason was given. */
  waitMs: number;
  /** The IETF policy that ran out, when `source` is `ietf` and the server named it. */
  policy?: string;
}

/** One quota a server stated, as of the moment its answer arrived. */
export interface Quota {
  source: 'ietf' | 'draft-6' | 'x-ratelimit';
  remaining: number;
  limit?: number;
  windowMs?: number;
  /** Milliseconds from the answer until the quota is whole again; absent when the server did not say. */
  resetMs?: number;
  policy?: string;
}

/** The rate-limit fields of one response, read into milliseconds from its arrival. */
export interface RateLimitFields {
  /** `retry-after-ms` or `Retry-After`, when one was sent and could be read. */
  retryAfter?: RateLimitReason;
  /** A Retry-After was sent but was unreadable or out of range: the server asked for a wait without a usable time. */
  garbled: boolean;
  /** The quotas of the most precise dialect sent (IETF, then draft-6, then X-RateLimit); empty when none. */
  quotas: Quota[];
}

/**
 * The most quotas read from one `RateLimit` field, in its order: servers state a handful, and every quota kept is
 * compared with the ones before it on each answer and checked on each call, so a field of thousands of items would
 * cost time quadratic in its length.
 */
export const MAX_QUOTAS = 64;

/** A wait of more than a day is taken for a garbled value (epoch seconds sent as a delay, say), not an instruction. */
export const MAX_SANE_MS = 86_400_000;

/** Values at or above this are Unix times in seconds, not delays: 2001-09-09, or a delay of 31 years. */
const EPOCH_SECONDS = 1e9;
const EPOCH_MS = 1e12;

const NUMBER = /^\d{1,15}(\.\d{1,9})?$/;
const INTEGER = /^\d{1,15}$/;

function numberOf(value: string | null): number | undefined {
  const text = value?.trim();
  return text !== undefined && NUMBER.test(text) ? Number(text) : undefined;
}

function integerOf(value: string | null): number | undefined {
  const text = value?.trim();
  return text !== undefined && INTEGER.test(text) ? Number(text) : undefined;
}

/**
 * The server's clock at the moment it answered, from the Date field; the local wall clock when Date is absent or
 * unreadable. Dates in other fields are measured against it, so a server clock that is off cancels out.
 */
function serverNow(headers: Headers, wallNow: number): number {
  const date = headers.get('date');
  const parsed = date === null ? Number.NaN : Date.parse(date);
  return Number.isNaN(parsed) ? wallNow : parsed;
}

/** A reset given as seconds to wait or as a Unix time (seconds or milliseconds), in ms from the answer. */
function resetDelay(value: number, now: number): number {
  if (value >= EPOCH_MS) return value - now;
  if (value >= EPOCH_SECONDS) return value * 1000 - now;
  return value * 1000;
}

/** A reset delay worth keeping: negative means "already reset" (0); beyond a day means garbled (dropped). */
function saneReset(ms: number): number | undefined {
  if (!Number.isFinite(ms) || ms > MAX_SANE_MS) return undefined;
  return Math.max(0, Math.ceil(ms));
}

/** Retry-After: delay-seconds (decimals tolerated) or an HTTP-date, which must look like one before Date.parse sees it. */
const HTTP_DATE = /^[A-Za-z]{3,9},? [\dA-Za-z -]+ \d{1,2}:\d{2}:\d{2}/;

function readRetryAfter(headers: Headers, now: number): { reason?: RateLimitReason; garbled: boolean } {
  const ms = headers.get('retry-after-ms');
  if (ms !== null) {
    const value = numberOf(ms);
    if (value !== undefined && value < EPOCH_MS) {
      return { reason: { source: 'retry-after-ms', waitMs: Math.ceil(value) }, garbled: false };
    }
  }
  const field = headers.get('retry-after')?.trim();
  if (field === undefined || field === '') return { garbled: ms !== null };
  const seconds = numberOf(field);
  let waitMs: number;
  if (seconds !== undefined) {
    // A delay from 10^9 s up (31 years) is an epoch time sent where a delay belongs: garbled, not an instruction.
    if (seconds >= EPOCH_SECONDS) return { garbled: true };
    waitMs = Math.ceil(seconds * 1000);
  } else if (HTTP_DATE.test(field)) waitMs = Date.parse(field) - now;
  else return { garbled: true };
  if (Number.isNaN(waitMs)) return { garbled: true };
  // However long, a readable wait is the server's word: beyond maxWait the client returns the 429 at once.
  return { reason: { source: 'retry-after', waitMs: Math.max(0, waitMs) }, garbled: false };
}

function nameOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value instanceof Token) return value.toString();
  return undefined;
}

function whole(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/** RateLimit-Policy (drafts 8 to 11): each named policy's quota `q`, window `w` and quota unit `qu`. */
function policies(field: string | null): Map<string, { limit?: number; windowMs?: number; unit?: string }> {
  const found = new Map<string, { limit?: number; windowMs?: number; unit?: string }>();
  if (field === null) return found;
  let list: ReturnType<typeof parseList>;
  try {
    list = parseList(field);
  } catch {
    return found; // RFC 9651: a field that does not parse is ignored as a whole
  }
  for (const [value, parameters] of list) {
    const name = nameOf(value);
    if (name === undefined) continue;
    const limit = whole(parameters.get('q'));
    const window = whole(parameters.get('w'));
    const unit = parameters.get('qu');
    found.set(name, {
      limit: limit !== undefined && limit > 0 ? limit : undefined,
      windowMs: window !== undefined && window > 0 ? window * 1000 : undefined,
      unit: typeof unit === 'string' ? unit : undefined,
    });
  }
  return found;
}

/** The window of a draft-6/7 RateLimit-Policy such as `10;w=60`: the first policy's `w`. */
function draftWindow(field: string | null): number | undefined {
  if (field === null) return undefined;
  try {
    const first = parseList(field)[0];
    const window = first === undefined ? undefined : whole(first[1].get('w'));
    return window !== undefined && window > 0 ? window * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The IETF `RateLimit` field: a List of `"policy";r=<remaining>;t=<seconds>` (drafts 8 to 11; draft 8 wrote the name
 * as a token), each matched with its RateLimit-Policy by name; or draft 7's Dictionary `limit=, remaining=, reset=`.
 */
function ietfQuotas(headers: Headers): Quota[] {
  const field = headers.get('ratelimit');
  if (field === null) return [];
  const quotas: Quota[] = [];
  let list: ReturnType<typeof parseList> | undefined;
  try {
    list = parseList(field);
  } catch {
    list = undefined;
  }
  if (list !== undefined) {
    const stated = policies(headers.get('ratelimit-policy'));
    for (const [value, parameters] of list) {
      if (quotas.length === MAX_QUOTAS) break;
      const remaining = whole(parameters.get('r'));
      if (remaining === undefined) continue;
      const name = nameOf(value);
      const policy = name === undefined ? undefined : stated.get(name);
      // A quota counted in bytes or concurrent requests limits requests only once it is spent.
      if (policy?.unit !== undefined && policy.unit !== 'requests' && remaining > 0) continue;
      const reset = whole(parameters.get('t'));
      quotas.push({
        source: 'ietf',
        remaining,
        limit: policy?.limit,
        windowMs: policy?.windowMs,
        resetMs: reset === undefined ? undefined : saneReset(reset * 1000),
        policy: name,
      });
    }
    return quotas;
  }
  try {
    const dictionary = parseDictionary(field);
    const remaining = whole(dictionary.get('remaining')?.[0]);
    if (remaining === undefined) return [];
    const limit = whole(dictionary.get('limit')?.[0]);
    const reset = whole(dictionary.get('reset')?.[0]);
    quotas.push({
      source: 'ietf',
      remaining,
      limit: limit !== undefined && limit > 0 ? limit : undefined,
      windowMs: draftWindow(headers.get('ratelimit-policy')),
      resetMs: reset === undefined ? undefined : saneReset(reset * 1000),
    });
  } catch {
    // neither form: ignored, as RFC 9651 asks
  }
  return quotas;
}

/** The first Integer of a field that may be a bare number or, in drafts before 6, a List such as `10, 10;w=60`. */
function firstInteger(field: string | null): number | undefined {
  if (field === null) return undefined;
  try {
    return whole(parseList(field)[0]?.[0]);
  } catch {
    return undefined;
  }
}

/** Draft 6 `RateLimit-Limit/Remaining/Reset`, or the `X-RateLimit-` fields, with the reset in seconds or epoch. */
function separateFields(headers: Headers, prefix: 'ratelimit-' | 'x-ratelimit-', now: number): Quota | undefined {
  const remaining = integerOf(headers.get(`${prefix}remaining`));
  if (remaining === undefined) return undefined;
  const limit = firstInteger(headers.get(`${prefix}limit`));
  const reset = numberOf(headers.get(`${prefix}reset`));
  return {
    source: prefix === 'ratelimit-' ? 'draft-6' : 'x-ratelimit',
    remaining,
    limit: limit !== undefined && limit > 0 ? limit : undefined,
    windowMs: prefix === 'ratelimit-' ? draftWindow(headers.get('ratelimit-policy')) : undefined,
    resetMs: reset === undefined ? undefined : saneReset(resetDelay(reset, now)),
  };
}

/** Reads every rate-limit dialect of a response. `wallNow` is the local Date.now() when it arrived. */
export function readRateLimitFields(headers: Headers, wallNow: number): RateLimitFields {
  const now = serverNow(headers, wallNow);
  const { reason, garbled } = readRetryAfter(headers, now);
  let quotas = ietfQuotas(headers);
  if (quotas.length === 0) {
    const quota = separateFields(headers, 'ratelimit-', now) ?? separateFields(headers, 'x-ratelimit-', now);
    if (quota !== undefined) quotas = [quota];
  }
  return { retryAfter: reason, garbled, quotas };
}

/** How long a quota keeps the next request back, in ms from the answer, when it has nothing left. */
export function exhaustedFor(quota: Quota): number | undefined {
  if (quota.remaining >= 1) return undefined;
  if (quota.resetMs !== undefined) return quota.resetMs;
  if (quota.limit !== undefined) return Math.ceil((quota.windowMs ?? 60_000) / quota.limit);
  return quota.windowMs;
}

/**
 * The wait a 429 asks for, by precedence: `retry-after-ms`, `Retry-After`, then the longest of the spent quotas'
 * resets. A wait that works out to zero or less becomes `minimumMs`, since a server that refuses never means "again
 * at once". Undefined when the 429 says nothing usable.
 */
export function refusalWait(fields: RateLimitFields, minimumMs: number): RateLimitReason | undefined {
  let reason = fields.retryAfter;
  if (reason === undefined) {
    for (const quota of fields.quotas) {
      const ms = exhaustedFor(quota);
      if (ms !== undefined && (reason === undefined || ms > reason.waitMs)) {
        reason = { source: quota.source, waitMs: ms };
        if (quota.policy !== undefined) reason.policy = quota.policy;
      }
    }
  }
  if (reason === undefined) return undefined;
  return reason.waitMs > 0 ? reason : { ...reason, waitMs: minimumMs };
}
