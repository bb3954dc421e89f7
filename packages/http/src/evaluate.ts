import {
  checkOptionKeys,
  type Decision,
  describeValue,
  type Limiter,
  type LimitRequest,
  MAX_LEASE_MS,
  RateLimitError,
  type Reservation,
} from '@ratecard/core';
import { INTERNAL_ERROR, RATE_LIMIT_EXCEEDED } from './body.js';
import { checkPolicy, type RateLimitHeaderOptions, rateLimitHeaders } from './headers.js';

/**
 * Who sent a request and what limits it: everything of a `LimitRequest` but the endpoint, which the middleware finds.
 * `{ organization, plan }` under plans; `{ organization: ip, limits: perSecond(5) }` for limits of the caller's own.
 * Any other key (`limit` for `limits`) is refused: the request is answered 500 and the error goes to `onError`.
 */
export type Identity = Omit<LimitRequest, 'endpoint'>;

/** Every key of Identity: an identity with another is refused (checkIdentity). */
const IDENTITY = {
  organization: true,
  plan: true,
  trial: true,
  override: true,
  limits: true,
  cost: true,
  leaseMs: true,
} satisfies Record<keyof Identity, true>;

/**
 * Tells who sent a request, or null (or undefined) for a request it cannot tell: that request goes on untouched, so
 * authentication further on can answer it. An exception in it is the application's: on a request that matches a rule
 * each adapter hands it to the framework's error handling (see docs/http.md). What it returns must be null, undefined
 * or an Identity with no other key: anything else is answered 500, its error (`invalid_argument`) going to `onError`.
 */
export type Identify<Request> = (
  request: Request,
) => Identity | null | undefined | Promise<Identity | null | undefined>;

/** The actual cost of a request, as `reservation.settle` takes it: a number for every token bucket, or one per limit name. */
export type ActualCost = number | Readonly<Record<string, number>>;

/** What `lease` takes besides `true`: how long a lease is held, and how the actual cost is read off the response. */
export interface LeaseOptions<Request, Response> {
  /**
   * How long a request's lease is held unless its response finishes first, in ms; default the limiter's (60 000). A
   * request still running then keeps its charge and frees its slots (the lease expires). `identify` may give a
   * request its own `leaseMs`.
   */
  ms?: number;
  /**
   * The request's actual cost, read once its response has been sent whole: a number for every token bucket, or an
   * object by limit name (`{ tokens: usage.total_tokens }`), as `reservation.settle` takes it; undefined (or null)
   * charges what was reserved. Not called for a request the client abandoned, which is charged what was reserved. What
   * it throws or rejects with, or a cost the reservation refuses, goes to `onError`, and the lease is settled with
   * what was reserved.
   */
  settle?(request: Request, response: Response): ActualCost | null | undefined | Promise<ActualCost | null | undefined>;
}

/** Every key of LeaseOptions: the middleware refuses any other. */
const LEASE_OPTIONS = { ms: true, settle: true } satisfies Record<keyof LeaseOptions<unknown, unknown>, true>;

/** Options of every middleware: the limiter, who is asking, and which headers to send. */
export interface RateLimitOptions<Request, Response = unknown> extends RateLimitHeaderOptions {
  /** The limiter from `createLimiter`; its rules decide which requests are counted. */
  limiter: Limiter;
  /**
   * Who is asking: `{ organization, plan }` or `{ organization, limits }`; null or undefined lets the request
   * through uncounted.
   */
  identify: Identify<Request>;
  /**
   * Called when the limiter fails and the middleware answers 500 (for example the store is down and the limiter's
   * `onStoreError` is 'throw'), and when a lease could not be settled as asked (`lease.settle` threw or gave a cost the
   * reservation refuses, or the store failed). Default: the framework's logger, else `console.error`.
   */
  onError?: (error: unknown, request: Request) => void;
  /**
   * Reserve instead of consume (`limiter.reserve`): the request holds a lease from the decision until its response has
   * been sent whole, then it is settled with what `lease.settle` returns (default what was reserved); a request whose
   * client went away first is settled then with what was reserved. Needed for a concurrency limit, which only a lease
   * holds. `true` takes the defaults. docs/http.md, "Leases".
   */
  lease?: boolean | LeaseOptions<Request, Response>;
}

/** Every key of RateLimitOptions: the middleware refuses any other. */
const RATE_LIMIT_OPTIONS = {
  limiter: true,
  identify: true,
  onError: true,
  ietf: true,
  policy: true,
  shadowHeaders: true,
  lease: true,
} satisfies Record<keyof RateLimitOptions<unknown>, true>;

/** What an adapter does with a request. */
export type Verdict =
  /** Go on to the handler, after setting these headers (none when the request was not counted). */
  | {
      /** Call the handler. */
      readonly action: 'next';
      /** Rate-limit headers to set on the handler's response. */
      readonly headers: Readonly<Record<string, string>>;
      /** The limiter's decision; null when no rule matched or `identify` returned null. */
      readonly decision: Decision | null;
      /** With `lease`: the admitted reservation the adapter ends once the response is done (endLease). */
      readonly lease?: Reservation;
    }
  /** Answer now: 429 for a denial, 500 when the limiter failed. */
  | {
      /** Answer with `status`, `headers` and `body` instead of calling the handler. */
      readonly action: 'respond';
      /** 429 for a denial, 500 when the limiter failed. */
      readonly status: 429 | 500;
      /** The response's headers: rate-limit headers, `Retry-After` on a 429, and the content type. */
      readonly headers: Readonly<Record<string, string>>;
      /** The JSON Error body, serialised. */
      readonly body: string;
      /** The limiter's decision; null when the limiter failed. */
      readonly decision: Decision | null;
      /** What made the limiter fail (500 only); report it, never send it. */
      readonly error?: unknown;
    };

/** The limiter's catch-all rule key (core's EVERY_ENDPOINT), which it reads as "no rule matched". */
const CATCH_ALL = 'ALL /*';

const PASS: Verdict = Object.freeze({ action: 'next', headers: Object.freeze({}), decision: null });

const DENIED_BODY = JSON.stringify(RATE_LIMIT_EXCEEDED);
const FAILED: Extract<Verdict, { action: 'respond' }> = Object.freeze({
  action: 'respond',
  status: 500,
  headers: Object.freeze({ 'content-type': 'application/json' }),
  body: JSON.stringify(INTERNAL_ERROR),
  decision: null,
});

/** The 500 verdict for a failure; the error rides along for `onError` and never reaches the body. */
export function failed(error: unknown): Extract<Verdict, { action: 'respond' }> {
  return { ...FAILED, headers: { ...FAILED.headers }, error };
}

/** The middleware options after validation; build once with `resolveOptions`, pass to `evaluate` per request. */
export interface ResolvedOptions<Request, Response = unknown> {
  /** The limiter, checked to have `consume` and `ruleFor`. */
  readonly limiter: Limiter;
  /** The `identify` function, checked to be one. */
  readonly identify: Identify<Request>;
  /** Which headers to send, checked. */
  readonly headers: Readonly<RateLimitHeaderOptions>;
  /** The failure reporter given, or undefined for the adapter's default. */
  readonly onError: ((error: unknown, request: Request) => void) | undefined;
  /** With `lease`: reserve, with these settings (`{}` for `true`); undefined: consume. */
  readonly lease: Readonly<LeaseOptions<Request, Response>> | undefined;
}

/** Validates middleware options once, when the middleware is built. Throws `invalid_option`. */
export function resolveOptions<Request, Response = unknown>(
  options: RateLimitOptions<Request, Response>,
): ResolvedOptions<Request, Response> {
  if (typeof options !== 'object' || options === null) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: the rate-limit middleware needs an options object { limiter, identify }, got ${describeValue(options)}`,
    );
  }
  checkOptionKeys(options, RATE_LIMIT_OPTIONS, 'the rate-limit middleware');
  const { limiter, identify, onError, ietf, policy, shadowHeaders, lease } = options;
  if (
    typeof limiter !== 'object' ||
    limiter === null ||
    typeof limiter.consume !== 'function' ||
    typeof limiter.ruleFor !== 'function'
  ) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: limiter must be a Limiter from createLimiter, got ${describeValue(limiter)}`,
    );
  }
  if (typeof identify !== 'function') {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: identify must be a function returning { organization, plan } or { organization, limits }, or null, got ${describeValue(identify)}`,
    );
  }
  if (onError !== undefined && typeof onError !== 'function') {
    throw new RateLimitError('invalid_option', `ratecard: onError must be a function, got ${describeValue(onError)}`);
  }
  for (const [name, value] of [
    ['ietf', ietf],
    ['shadowHeaders', shadowHeaders],
  ] as const) {
    if (value !== undefined && typeof value !== 'boolean') {
      throw new RateLimitError('invalid_option', `ratecard: ${name} must be a boolean, got ${describeValue(value)}`);
    }
  }
  if (policy !== undefined) checkPolicy(policy);
  return {
    limiter,
    identify,
    headers: Object.freeze({ ietf, policy, shadowHeaders }),
    onError,
    lease: leaseOptions(lease, limiter),
  };
}

function leaseOptions<Request, Response>(
  lease: RateLimitOptions<Request, Response>['lease'],
  limiter: Limiter,
): Readonly<LeaseOptions<Request, Response>> | undefined {
  if (lease === undefined || lease === false) return undefined;
  if (lease !== true && (typeof lease !== 'object' || lease === null)) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: lease must be true, false or { ms?, settle? }, got ${describeValue(lease)}`,
    );
  }
  if (typeof limiter.reserve !== 'function') {
    throw new RateLimitError(
      'invalid_option',
      'ratecard: lease needs a limiter with reserve (@ratecard/core with leases)',
    );
  }
  if (lease === true) return Object.freeze({});
  checkOptionKeys(lease, LEASE_OPTIONS, 'lease');
  const { ms, settle } = lease;
  if (ms !== undefined && (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 1 || ms > MAX_LEASE_MS)) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: lease.ms must be a whole number of milliseconds from 1 to ${MAX_LEASE_MS}, got ${describeValue(ms)}`,
    );
  }
  if (settle !== undefined && typeof settle !== 'function') {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: lease.settle must be a function (request, response) => actual cost, got ${describeValue(settle)}`,
    );
  }
  return Object.freeze({ ms, settle });
}

/** Bytes a decoded path part must not gain, or the limiter would split or cut the path somewhere else. */
const STRUCTURAL = /[/?#]/g;

/**
 * The path to match against the rules, from a request target as it arrived. An absolute-form target
 * (`http://host/browsers`, which servers accept from proxies) is reduced to its path, and percent-encoded bytes are
 * decoded, because routers such as Fastify's and Hono's route `/%62rowsers` to `/browsers`: without this a client could
 * dodge a rule by spelling the path differently. Encoded `/`, `?` and `#` stay encoded.
 */
export function requestPath(target: string): string {
  let path = target;
  if (!path.startsWith('/')) {
    const scheme = path.indexOf('://');
    if (scheme === -1) return path;
    const slash = path.indexOf('/', scheme + 3);
    path = slash === -1 ? '/' : path.slice(slash);
  }
  if (!path.includes('%')) return path;
  let end = path.length;
  const query = path.indexOf('?');
  if (query !== -1) end = query;
  const fragment = path.indexOf('#');
  if (fragment !== -1 && fragment < end) end = fragment;
  const decoded = path.slice(0, end).replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
    try {
      return decodeURIComponent(run).replace(STRUCTURAL, encodeURIComponent);
    } catch {
      return run;
    }
  });
  return decoded + path.slice(end);
}

/**
 * The one decision every adapter makes: find the rule for the method and path (the only match against the rules on
 * the way: the limiter gets the rule's key), identify the sender, consume a token and say what to answer. It rejects
 * only when `identify` throws or rejects on a request that matches a rule (that error is the application's); a limiter
 * failure, or an identity that is not one (checkIdentity), is a 500 verdict carrying the error.
 *
 * A request that matches no rule is limited only by limits `identify` gives it, under the rule key `ALL /*`, which is
 * also the endpoint handed to the limiter: its path and query are no part of its bucket, and a target no endpoint
 * name could hold (a path over 256 characters, `OPTIONS *`) is counted like any other. Until `identify` could give
 * limits it was not called for such requests at all, so an exception there lets the request go on untouched, as it did
 * then: the application's authentication, not the limiter, answers it. An identity with a misspelt key is refused
 * there too, before the request is let through for want of `limits`: `limit` for `limits` would otherwise let every
 * request through uncounted, with no header and no word.
 */
export async function evaluate<Request, Response = unknown>(
  options: ResolvedOptions<Request, Response>,
  method: string,
  target: string,
  request: Request,
): Promise<Verdict> {
  const path = requestPath(target);
  const rule = options.limiter.ruleFor(method, path);
  let identity: Identity | null | undefined;
  if (rule !== undefined) identity = await options.identify(request);
  else {
    try {
      identity = await options.identify(request);
    } catch {
      return PASS;
    }
  }
  if (identity === null || identity === undefined) return PASS;
  try {
    checkIdentity(identity);
    if (rule === undefined && identity.limits === undefined) return PASS;
    const { organization, plan, trial, override, limits, cost, leaseMs } = identity;
    const request: LimitRequest = {
      organization,
      plan,
      trial,
      override,
      limits,
      cost,
      // Where no rule matches, the limiter counts a request carrying limits under its catch-all rule: name that rule,
      // not `${method} ${path}`, whose query could take it past the 256 characters an endpoint may have.
      endpoint: rule?.key ?? CATCH_ALL,
    };
    const lease = options.lease;
    if (lease === undefined) return verdictFor(await options.limiter.consume(request), options.headers);
    request.leaseMs = leaseMs ?? lease.ms;
    const reservation = await options.limiter.reserve(request);
    const verdict = verdictFor(reservation, options.headers);
    // A refused reservation, or one answered without a store, holds nothing to end.
    return verdict.action === 'next' && reservation.held ? { ...verdict, lease: reservation } : verdict;
  } catch (error) {
    return failed(error);
  }
}

/**
 * Throws `invalid_argument` for an identity that is not an object, or has a key of its own that an Identity lacks
 * (even one set to undefined), as the limiter refuses such a request: the middleware builds the limiter's request from
 * the keys it knows, so the limiter never sees another. Per request, as identify makes an identity per request: a
 * for-in with a switch on the known names, the message (the key most likely meant, every key taken) built only for an
 * unknown one. With the limiter's own check of the request, `evaluate` of a request carrying a limit on the memory
 * store took 1 255 ns before and 1 283 after, best of 12 runs each in a scratch A/B on a shared 2-core machine. A key
 * the identity inherits is not its own and is let be.
 */
function checkIdentity(identity: unknown): void {
  if (typeof identity !== 'object' || identity === null) throw notAnIdentity(identity);
  for (const key in identity) {
    switch (key) {
      case 'organization':
      case 'plan':
      case 'trial':
      case 'override':
      case 'limits':
      case 'cost':
      case 'leaseMs':
        continue;
      default:
        if (Object.hasOwn(identity, key)) {
          checkOptionKeys(identity, IDENTITY, 'the identity identify returned', 'invalid_argument');
        }
    }
  }
}

function notAnIdentity(identity: unknown): RateLimitError {
  return new RateLimitError(
    'invalid_argument',
    `ratecard: identify must return { organization, plan?, trial?, override?, limits?, cost?, leaseMs? }, null or undefined, got ${describeValue(identity)}`,
  );
}

function verdictFor(decision: Decision, options: Readonly<RateLimitHeaderOptions>): Verdict {
  const headers = rateLimitHeaders(decision, options);
  if (decision.allowed) return { action: 'next', headers, decision };
  headers['content-type'] = 'application/json';
  return { action: 'respond', status: 429, headers, body: DENIED_BODY, decision };
}

/**
 * Ends a request's lease (a 'next' verdict's `lease`), to be called once, when its response is done. `finished`: the
 * response was sent whole, and the lease is settled with what `lease.settle(request, response)` returns (what was
 * reserved without one). Not finished (the client went away first): settled with what was reserved, never cancelled,
 * because the handler may have done the work, and a client must not get it for free by hanging up. An exception in
 * `lease.settle`, or a cost the reservation refuses, goes to `report` and the lease is settled with what was reserved;
 * a store that fails goes to `report` too (the lease then expires keeping its charge). Never rejects.
 */
export async function endLease<Request, Response>(
  options: ResolvedOptions<Request, Response>,
  lease: Reservation,
  request: Request,
  response: Response,
  finished: boolean,
  report: (error: unknown) => void,
): Promise<void> {
  let actual: ActualCost | undefined;
  const settle = options.lease?.settle;
  if (finished && settle !== undefined) {
    try {
      actual = (await settle(request, response)) ?? undefined;
    } catch (error) {
      report(error);
    }
  }
  try {
    await lease.settle(actual);
  } catch (error) {
    report(error);
    // A cost the reservation refuses left the lease held: settle it as reserved, so that its slots are freed now.
    if (error instanceof RateLimitError && error.code === 'invalid_argument' && lease.held) {
      try {
        await lease.settle();
      } catch (again) {
        report(again);
      }
    }
  }
}

/** Reports a limiter failure through `onError`, or `fallback` when none was given; a throwing hook is ignored. */
export function reportError<Request, Response>(
  options: ResolvedOptions<Request, Response>,
  error: unknown,
  request: Request,
  fallback: (error: unknown) => void,
): void {
  try {
    if (options.onError !== undefined) options.onError(error, request);
    else fallback(error);
  } catch {
    // A broken logger must not turn a 500 into a hung request.
  }
}

/** The default report when no framework logger exists. */
export function logToConsole(error: unknown): void {
  console.error('ratecard: the rate limiter failed, so the request was answered 500', error);
}

/** The default report of a lease that could not be settled as asked, when no framework logger exists. */
export function logLeaseToConsole(error: unknown): void {
  console.error('ratecard: a lease could not be settled as asked', error);
}
