import { type CalendarPeriod, type CalendarPeriodOptions, CurrentPeriod, calendarPeriod } from './calendar.js';
import { describeValue, RateLimitError } from './errors.js';
import { checkOptionKeys } from './options.js';

/**
 * A token bucket's three numbers, made once, checked where it is made, frozen, and passed around as a value: it holds
 * at most `capacity` tokens and refills `refill` tokens every `intervalMs`, continuously. docs/algorithm.md derives
 * the two unit fields: with g = gcd(refill, intervalMs), a token is intervalMs / g units and the bucket gains
 * refill / g units per millisecond, so every amount the arithmetic touches is an integer.
 */
export interface Limit {
  /**
   * 'bucket': a token bucket (tokenBucket, perSecond ... perDay). 'concurrency': at most `capacity` leases held at once
   * (concurrency). 'quota': at most `capacity` per calendar period (quota). The last two never refill: their refill,
   * intervalMs and unitsPerMs are 0 and unitsPerToken 1, so a slot or a request is one unit.
   */
  readonly kind: 'bucket' | 'concurrency' | 'quota';
  /** A quota's calendar: per day, week or month, in a time zone. */
  readonly period?: CalendarPeriod;
  /**
   * A quota as a store is given it: the period a decision falls in, by the limiter's clock (epoch ms, start inclusive,
   * end exclusive). The bucket counts for that period, and is full again when a later one starts.
   */
  readonly periodStart?: number;
  /** A quota as a store is given it: where the period ends (epoch ms, exclusive), when the next starts full. */
  readonly periodEnd?: number;
  /** Tells the buckets of one request apart, and names the limit in headers and metrics: '1s', '1m', '1h', '1d'. */
  readonly name: string;
  /** Most tokens the bucket holds: the burst; for a concurrency limit, the most slots held at once. */
  readonly capacity: number;
  /** Tokens added every `intervalMs`. */
  readonly refill: number;
  /** The refill period in milliseconds, at most a day (MAX_INTERVAL_MS). */
  readonly intervalMs: number;
  /** Units in one token: intervalMs / gcd(refill, intervalMs). */
  readonly unitsPerToken: number;
  /** Units added per millisecond: refill / gcd(refill, intervalMs); 0 for a concurrency limit, which never refills. */
  readonly unitsPerMs: number;
}

/** One limit or several: a request is admitted only when every one of them admits it. */
export type Limits = Limit | readonly Limit[];

/** The three numbers of `tokenBucket`, each a whole number. */
export interface TokenBucketOptions {
  /** Most tokens the bucket holds: the burst. */
  capacity: number;
  /** Tokens added every `intervalMs`, continuously. */
  refill: number;
  /** The refill period in milliseconds, at most a day. */
  intervalMs: number;
  /** Default: the interval, as '1s', '10s', '1m', '1h', '1d' or '250ms'. */
  name?: string;
}

/** Every key of TokenBucketOptions: tokenBucket refuses any other. */
const TOKEN_BUCKET_OPTIONS = { capacity: true, refill: true, intervalMs: true, name: true } satisfies Record<
  keyof TokenBucketOptions,
  true
>;

/** Options of `perSecond`, `perMinute`, `perHour` and `perDay`. */
export interface PeriodOptions {
  /** Most tokens the bucket holds; default the rate itself. */
  burst?: number;
  /** Default: the period, '1s', '1m', '1h' or '1d'. */
  name?: string;
}

/** Every key of PeriodOptions: perSecond, perMinute, perHour and perDay refuse any other. */
const PERIOD_OPTIONS = { burst: true, name: true } satisfies Record<keyof PeriodOptions, true>;

/** Options of `concurrency`. */
export interface ConcurrencyOptions {
  /** Default: 'concurrency'. */
  name?: string;
}

/** Every key of ConcurrencyOptions: concurrency refuses any other. */
const CONCURRENCY_OPTIONS = { name: true } satisfies Record<keyof ConcurrencyOptions, true>;

/** The most slots a concurrency limit holds. */
export const MAX_CONCURRENCY = 1_000_000;

/** The longest interval: a day. Longer ones would let the exact unit conversion of a limit change pass 2^53. */
export const MAX_INTERVAL_MS = 86_400_000;
/** The most units a bucket holds (capacity × unitsPerToken): every sum the arithmetic forms stays below 2^53. */
export const MAX_BUCKET_UNITS: number = 2 ** 52;
/** The largest refill, so that the units refilled per second (for Retry-After) stay below 2^53 too. */
export const MAX_REFILL = 1_000_000_000_000;
/** The most limits one request may carry. */
export const MAX_LIMITS_PER_REQUEST = 16;

const NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** Every limit made here, so the decision path can tell one from a look-alike object with one lookup. */
const made = new WeakSet<Limit>();
/** Each limit as a one-element list, so a request carrying one limit allocates no array. */
const alone = new WeakMap<Limit, readonly Limit[]>();

function badOption(message: string): RateLimitError {
  return new RateLimitError('invalid_option', `ratecard: ${message}`);
}

function checkWhole(value: unknown, field: string, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > max) {
    throw badOption(`${field} must be a whole number from 1 to ${max}, got ${describeValue(value)}`);
  }
  return value;
}

function gcd(a: number, b: number): number {
  let x = a;
  let y = b;
  while (y !== 0) [x, y] = [y, x % y];
  return x;
}

/** The default name of a limit: its interval in the largest whole unit. */
function intervalName(ms: number): string {
  for (const [size, unit] of [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1_000, 's'],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** A token bucket: at most `capacity` tokens, `refill` more every `intervalMs`, added continuously. */
export function tokenBucket(options: TokenBucketOptions): Limit {
  if (typeof options !== 'object' || options === null) {
    throw badOption(`tokenBucket needs { capacity, refill, intervalMs }, got ${describeValue(options)}`);
  }
  checkOptionKeys(options, TOKEN_BUCKET_OPTIONS, 'tokenBucket');
  const intervalMs = checkWhole(options.intervalMs, 'intervalMs', MAX_INTERVAL_MS);
  const refill = checkWhole(options.refill, 'refill', MAX_REFILL);
  const capacity = checkWhole(options.capacity, 'capacity', MAX_BUCKET_UNITS);
  const name = checkName(options.name ?? intervalName(intervalMs));
  const g = gcd(refill, intervalMs);
  const unitsPerToken = intervalMs / g;
  if (capacity * unitsPerToken > MAX_BUCKET_UNITS) {
    throw badOption(
      `capacity ${capacity} of a limit refilling ${refill} per ${intervalMs} ms is too large to count exactly: capacity × ${unitsPerToken} (the units in a token) must be at most 2^52`,
    );
  }
  return register({ kind: 'bucket', name, capacity, refill, intervalMs, unitsPerToken, unitsPerMs: refill / g });
}

function checkName(name: unknown): string {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw badOption(`a limit's name must be 1 to 64 of A-Z a-z 0-9 . _ -, got ${describeValue(name)}`);
  }
  return name;
}

function register(fields: Limit): Limit {
  const limit: Limit = Object.freeze(fields);
  made.add(limit);
  alone.set(limit, Object.freeze([limit]));
  return limit;
}

/**
 * At most `n` requests at once: a request holds a slot of it from `limiter.reserve` until its lease is settled,
 * cancelled or expires (docs/algorithm.md, "Leases"). It stands beside token buckets in a request's limits, a plan or an
 * endpoint rule, and is charged all-or-nothing with them; `limiter.consume` refuses a request that carries one, since
 * nothing would free its slot.
 */
export function concurrency(n: number, options?: ConcurrencyOptions): Limit {
  checkWhole(n, 'concurrency', MAX_CONCURRENCY);
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw badOption(`concurrency takes { name? } as its second argument, got ${describeValue(options)}`);
  }
  if (options !== undefined) checkOptionKeys(options, CONCURRENCY_OPTIONS, 'concurrency');
  const name = checkName(options?.name ?? 'concurrency');
  return register({
    kind: 'concurrency',
    name,
    capacity: n,
    refill: 0,
    intervalMs: 0,
    unitsPerToken: 1,
    unitsPerMs: 0,
  });
}

/** Options of `quota`: the calendar period, and a name. */
export interface QuotaOptions extends CalendarPeriodOptions {
  /** Default: the period, 'day', 'week' or 'month'. */
  name?: string;
}

/**
 * At most `n` per calendar period: per day, week (from Monday) or month (from `anchorDay`, default 1), starting at
 * midnight in `timeZone` (IANA name, default 'UTC'). Nothing refills within a period; the count starts again when the
 * next one starts. It stands beside token buckets and concurrency limits, charged all-or-nothing with them.
 */
export function quota(n: number, options: QuotaOptions): Limit {
  checkWhole(n, 'quota', MAX_REFILL);
  if (typeof options !== 'object' || options === null) {
    throw badOption(
      `quota needs { per, timeZone?, anchorDay?, name? } as its second argument, got ${describeValue(options)}`,
    );
  }
  const { name, ...calendar } = options;
  const period = calendarPeriod(calendar);
  return register({
    kind: 'quota',
    name: checkName(name ?? period.per),
    capacity: n,
    refill: 0,
    intervalMs: 0,
    unitsPerToken: 1,
    unitsPerMs: 0,
    period,
  });
}

/** Each quota's period in force and the limit a store is given for it: remade when a decision falls outside it. */
const periods = new WeakMap<Limit, { current: CurrentPeriod; start: number; limit: Limit }>();

/**
 * A request's limits as a store is given them at `now` (default Date.now()): each quota as the limit of the period
 * `now` falls in (`periodStart`, `periodEnd`), made once per period; the list itself when it holds no quota.
 */
export function inPeriod(limits: readonly Limit[], now?: number): readonly Limit[] {
  let found = false;
  for (let i = 0; i < limits.length; i++) if ((limits[i] as Limit).period !== undefined) found = true;
  if (!found) return limits;
  // Read only for a quota: a decision without one reads no clock here.
  const at = now ?? Date.now();
  return limits.map((limit) => {
    if (limit.period === undefined) return limit;
    let kept = periods.get(limit);
    if (kept === undefined) {
      kept = { current: new CurrentPeriod(limit.period), start: Number.NaN, limit };
      periods.set(limit, kept);
    }
    const bounds = kept.current.at(at);
    if (bounds.start !== kept.start) {
      kept.start = bounds.start;
      kept.limit = Object.freeze({ ...limit, periodStart: bounds.start, periodEnd: bounds.end });
    }
    return kept.limit;
  });
}

/** Whether a limit is a concurrency limit (held by leases) rather than a token bucket. */
export function isConcurrency(limit: Pick<Limit, 'kind'>): boolean {
  return limit.kind === 'concurrency';
}

function perPeriod(n: number, options: PeriodOptions | undefined, intervalMs: number, what: string): Limit {
  checkWhole(n, what, MAX_REFILL);
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw badOption(`${what} takes { burst?, name? } as its second argument, got ${describeValue(options)}`);
  }
  if (options !== undefined) checkOptionKeys(options, PERIOD_OPTIONS, what);
  const capacity = options?.burst ?? n;
  if (options?.burst !== undefined) checkWhole(capacity, 'burst', MAX_BUCKET_UNITS);
  return tokenBucket({ capacity, refill: n, intervalMs, name: options?.name });
}

/** `n` requests per second, bursts of `burst` (default n). */
export function perSecond(n: number, options?: PeriodOptions): Limit {
  return perPeriod(n, options, 1_000, 'perSecond');
}

/** `n` requests per minute, bursts of `burst` (default n): a spec plan is `perMinute(rpm)`. */
export function perMinute(n: number, options?: PeriodOptions): Limit {
  return perPeriod(n, options, 60_000, 'perMinute');
}

/** `n` requests per hour, bursts of `burst` (default n). */
export function perHour(n: number, options?: PeriodOptions): Limit {
  return perPeriod(n, options, 3_600_000, 'perHour');
}

/** `n` requests per day, bursts of `burst` (default n). */
export function perDay(n: number, options?: PeriodOptions): Limit {
  return perPeriod(n, options, 86_400_000, 'perDay');
}

/**
 * A list of limits checked for one request: each made by tokenBucket or a per-period helper, at least one, at most
 * MAX_LIMITS_PER_REQUEST, names distinct. `code` says whose mistake it is: a caller's per request, a configuration's
 * at construction. A single limit comes back as its one-element list, with no allocation.
 *
 * An array comes back as a copy, read once, element by element, and checked: nothing after this reads the caller's
 * array, which the caller may change the moment the call returns (an application reusing one array per request)
 * while a store still holds the list (the Redis store reads it when it flushes its batch, a tick later). A frozen
 * array is copied too: one whose elements are getters answers differently each time it is read. The copy is the
 * call's own, so it is not frozen: copying two limits took about 20 ns in a scratch loop (Node 22), freezing the copy
 * 30 more. A list kept for many calls is frozen (configuredLimits).
 */
export function limitList(value: unknown, what: string, code: 'invalid_argument' | 'invalid_option'): readonly Limit[] {
  if (!Array.isArray(value)) {
    const list = alone.get(value as Limit) ?? (adopted(value) ? alone.get(value as Limit) : undefined);
    if (list === undefined) throw notALimit(value, what, code);
    return list;
  }
  const n = value.length;
  if (n === 0 || n > MAX_LIMITS_PER_REQUEST) {
    throw new RateLimitError(
      code,
      `ratecard: ${what} must hold 1 to ${MAX_LIMITS_PER_REQUEST} limits, got ${n === 0 ? 'none' : n}`,
    );
  }
  const list: Limit[] = [];
  for (let i = 0; i < n; i++) {
    const limit = value[i] as Limit;
    if (!made.has(limit) && !adopted(limit)) throw notALimit(limit, what, code);
    for (let j = 0; j < i; j++) {
      if ((list[j] as Limit).name === limit.name) {
        throw new RateLimitError(
          code,
          `ratecard: ${what} has two limits named ${JSON.stringify(limit.name)}; give one a name of its own ({ name })`,
        );
      }
    }
    list.push(limit);
  }
  return list;
}

/**
 * A configuration's list of limits (a plan's, an endpoint rule's), checked as limitList checks a request's and frozen:
 * it is handed to every decision that applies it, as `decision.limits`.
 */
export function configuredLimits(value: unknown, what: string): readonly Limit[] {
  return Object.freeze(limitList(value, what, 'invalid_option'));
}

/** Each limit as a one-element list under its shaped name (limitsByShape), made the first time it is asked for. */
const shapedAlone = new WeakMap<Limit, readonly Limit[]>();

/**
 * The limits as a store keeps them where no endpoint rule names a request's buckets (the limiter's rule `ALL /*` for a
 * request carrying its own limits): each under a name that carries its numbers too, `<name>.<capacity>.<refill>.
 * <intervalMs>` (`perMinute(30)` is `1m.30.30.60000`), so that one bucket is kept per organization and limit, and a
 * request's limits never turn another request's bucket of the same name into their own shape. The name is at most
 * 104 characters of `A-Z a-z 0-9 . _ -`, and no two limits share one: the last three dot-separated parts are the
 * numbers, whatever dots the name has. One limit allocates nothing once its list is made; several allocate a list.
 */
export function limitsByShape(limits: readonly Limit[]): readonly Limit[] {
  if (limits.length === 1) return shapedList(limits[0] as Limit);
  const list: Limit[] = [];
  for (let i = 0; i < limits.length; i++) list.push(shapedList(limits[i] as Limit)[0] as Limit);
  return list;
}

function shapedList(limit: Limit): readonly Limit[] {
  let list = shapedAlone.get(limit);
  if (list === undefined) {
    const period = limit.period;
    // A quota by its calendar: the zone's '/' and '+' are not name characters.
    const numbers =
      period === undefined
        ? `${limit.capacity}.${limit.refill}.${limit.intervalMs}`
        : `${limit.capacity}.${period.per}.${period.timeZone.replace(/[^A-Za-z0-9_-]/g, '_')}.${period.anchorDay ?? 1}`;
    const name = `${limit.name}.${numbers}`;
    list = Object.freeze([Object.freeze({ ...limit, name })]);
    shapedAlone.set(limit, list);
  }
  return list;
}

function notALimit(value: unknown, what: string, code: 'invalid_argument' | 'invalid_option'): RateLimitError {
  return new RateLimitError(
    code,
    `ratecard: ${what} must be a limit or an array of limits made by perSecond, perMinute, perHour, perDay, tokenBucket, concurrency or quota, got ${describeValue(value)}`,
  );
}

/**
 * Takes a limit made by another copy of this module as made here: an application that loads both builds of
 * @ratecard/core (its ES modules import one, a CommonJS dependency requires the other) has two registries, and a limit
 * from one would otherwise be refused by the other. A frozen object whose numbers are the ones tokenBucket makes from
 * its capacity, refill, interval and name passes every check a made limit passed; anything else is not a limit.
 */
function adopted(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || !Object.isFrozen(value)) return false;
  const { kind, name, capacity, refill, intervalMs, unitsPerToken, unitsPerMs, period } = value as Limit;
  if (typeof name !== 'string') return false;
  let own: Limit;
  try {
    own =
      kind === 'concurrency'
        ? concurrency(capacity, { name })
        : kind === 'quota'
          ? quota(capacity, { ...calendarOptions(period as CalendarPeriod), name })
          : tokenBucket({ capacity, refill, intervalMs, name });
  } catch {
    return false;
  }
  if (
    own.kind !== kind ||
    own.refill !== refill ||
    own.intervalMs !== intervalMs ||
    own.unitsPerToken !== unitsPerToken ||
    own.unitsPerMs !== unitsPerMs
  ) {
    return false;
  }
  made.add(value as Limit);
  alone.set(value as Limit, Object.freeze([value as Limit]));
  return true;
}

/** The options a calendar period was made from. */
function calendarOptions(period: CalendarPeriod): CalendarPeriodOptions {
  const { per, timeZone, anchorDay } = period;
  return per === 'month' ? { per, timeZone, anchorDay } : { per, timeZone };
}

/** Whether a value is a limit made by this module (and so checked and frozen), or by another copy of it. */
export function isLimit(value: unknown): value is Limit {
  return made.has(value as Limit) || adopted(value);
}
