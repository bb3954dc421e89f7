import {
  checkOptionKeys,
  type Decision,
  describeValue,
  type Limiter,
  type LimitRequest,
  RateLimitError,
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

/** Options of every middleware: the limiter, who is asking, and which headers to send. */
export interface RateLimitOptions<Request> extends RateLimitHeaderOptions {
  /** The limiter from `createLimiter`; its rules decide which requests are counted. */
  limiter: Limiter;
  /**
   * Who is asking: `{ organization, plan }` or `{ organization, limits }`; null or undefined lets the request
   * through uncounted.
   */
  identify: Identify<Request>;
  /**
   * Called when the limiter fails and the middleware answers 500 (for example the store is down and the limiter's
   * `onStoreError` is 'throw'). Default: the framework's logger, else `console.error`.
   */
  onError?: (error: unknown, request: Request) => void;
}

/** Every key of RateLimitOptions: the middleware refuses any other. */
const RATE_LIMIT_OPTIONS = {
  limiter: true,
  identify: true,
  onError: true,
  ietf: true,
  policy: true,
  shadowHeaders: true,
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
export interface ResolvedOptions<Request> {
  /** The limiter, checked to have `consume` and `ruleFor`. */
  readonly limiter: Limiter;
  /** The `identify` function, checked to be one. */
  readonly identify: Identify<Request>;
  /** Which headers to send, checked. */
  readonly headers: Readonly<RateLimitHeaderOptions>;
  /** The failure reporter given, or undefined for the adapter's default. */
  readonly onError: ((error: unknown, request: Request) => void) | undefined;
}

/** Validates middleware options once, when the middleware is built. Throws `invalid_option`. */
export function resolveOptions<Request>(options: RateLimitOptions<Request>): ResolvedOptions<Request> {
  if (typeof options !== 'object' || options === null) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: the rate-limit middleware needs an options object { limiter, identify }, got ${describeValue(options)}`,
    );
  }
  checkOptionKeys(options, RATE_LIMIT_OPTIONS, 'the rate-limit middleware');
  const { limiter, identify, onError, ietf, policy, shadowHeaders } = options;
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
  };
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
export async function evaluate<Request>(
  options: ResolvedOptions<Request>,
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
    const { organization, plan, trial, override, limits, cost } = identity;
    const decision = await options.limiter.consume({
      organization,
      plan,
      trial,
      override,
      limits,
      cost,
      // Where no rule matches, the limiter counts a request carrying limits under its catch-all rule: name that rule,
      // not `${method} ${path}`, whose query could take it past the 256 characters an endpoint may have.
      endpoint: rule?.key ?? CATCH_ALL,
    });
    return verdictFor(decision, options.headers);
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
    `ratecard: identify must return { organization, plan?, trial?, override?, limits?, cost? }, null or undefined, got ${describeValue(identity)}`,
  );
}

function verdictFor(decision: Decision, options: Readonly<RateLimitHeaderOptions>): Verdict {
  const headers = rateLimitHeaders(decision, options);
  if (decision.allowed) return { action: 'next', headers, decision };
  headers['content-type'] = 'application/json';
  return { action: 'respond', status: 429, headers, body: DENIED_BODY, decision };
}

/** Reports a limiter failure through `onError`, or `fallback` when none was given; a throwing hook is ignored. */
export function reportError<Request>(
  options: ResolvedOptions<Request>,
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
