import { describeValue, RateLimitError } from '@ratecard/core';

/** The shape of the global `fetch`. */
export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Time as the client sees it; replaceable so simulations and tests can run on a virtual clock. */
export interface Clock {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  /** Resolves after `ms` milliseconds; rejects with `signal.reason` as soon as `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export interface RateLimitedFetchOptions {
  /** The fetch that sends the requests; default the global `fetch`, looked up per call. */
  fetch?: FetchFunction;
  /** Retries after a 429, per call; default 3. 0 turns retrying off (pacing still runs). */
  maxRetries?: number;
  /**
   * Longest single wait in milliseconds; default 60 000. A 429 whose Retry-After asks for more is returned as is, and
   * pacing never holds a request longer than this.
   */
  maxWait?: number;
  /** Pace requests from X-RateLimit-Remaining and X-RateLimit-Limit; default true. */
  pace?: boolean;
  /**
   * Which requests share a pacing budget; default method, origin and path (`POST https://api.example.com/browsers`).
   * Return the same key for paths that one server rule counts together, or include the API key when one client
   * sends for several organizations.
   */
  key?: (method: string, url: URL) => string;
  /** Default: `performance.now()` and `setTimeout`. */
  clock?: Clock;
}

/** What the client knows of one bucket: the last X-RateLimit-* it saw, and when. */
interface Budget {
  limit: number;
  remaining: number;
  /** clock.now() when those headers arrived. */
  at: number;
  /** Requests let through since then that have not been answered yet. */
  inFlight: number;
}

/** Budgets kept at once; the oldest goes first. A client talks to few endpoints, this only bounds a misuse of `key`. */
const MAX_BUDGETS = 1024;

/** setTimeout's longest delay. */
const MAX_TIMER_MS = 2_147_483_647;

const defaultClock: Clock = {
  now: () => performance.now(),
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};

function checkOptions(options: RateLimitedFetchOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: rateLimitedFetch options must be an object, got ${describeValue(options)}`,
    );
  }
  const { maxRetries, maxWait } = options;
  if (maxRetries !== undefined && (!Number.isSafeInteger(maxRetries) || maxRetries < 0)) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: maxRetries must be a whole number, 0 or more, got ${describeValue(maxRetries)}`,
    );
  }
  if (maxWait !== undefined && (typeof maxWait !== 'number' || !(maxWait >= 0 && maxWait <= MAX_TIMER_MS))) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: maxWait must be a number of milliseconds from 0 to ${MAX_TIMER_MS}, got ${describeValue(maxWait)}`,
    );
  }
  for (const name of ['fetch', 'key'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: ${name} must be a function, got ${describeValue(options[name])}`,
      );
    }
  }
  if (options.pace !== undefined && typeof options.pace !== 'boolean') {
    throw new RateLimitError('invalid_option', `ratecard: pace must be a boolean, got ${describeValue(options.pace)}`);
  }
  const { clock } = options;
  if (clock !== undefined && (typeof clock?.now !== 'function' || typeof clock?.sleep !== 'function')) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: clock must have now() and sleep(ms, signal), got ${describeValue(clock)}`,
    );
  }
}

/**
 * Whether fetch can send the same body again. Strings, bytes, Blobs, FormData and URLSearchParams are read afresh on
 * every call; a stream (a ReadableStream body, or a Request that carries a body) is read once, so it is never retried.
 */
function canReplay(input: string | URL | Request, init: RequestInit | undefined): boolean {
  const body = init?.body !== undefined ? init.body : input instanceof Request ? input.body : null;
  if (body === null || body === undefined) return true;
  return (
    typeof body === 'string' ||
    body instanceof ArrayBuffer ||
    ArrayBuffer.isView(body) ||
    body instanceof Blob ||
    body instanceof URLSearchParams ||
    body instanceof FormData
  );
}

/** Retry-After in milliseconds: delay-seconds or an HTTP-date; undefined when absent or unreadable. */
function retryAfterMs(response: Response): number | undefined {
  const value = response.headers.get('retry-after')?.trim();
  if (value === undefined || value === '') return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - Date.now());
}

/** A header that must be a non-negative whole number, else undefined. */
function counter(response: Response, name: string): number | undefined {
  const value = response.headers.get(name)?.trim();
  if (value === undefined || !/^\d{1,15}$/.test(value)) return undefined;
  return Number(value);
}

function requestSignal(input: string | URL | Request, init: RequestInit | undefined): AbortSignal | undefined {
  return init?.signal ?? (input instanceof Request ? input.signal : undefined);
}

async function discard(response: Response): Promise<void> {
  try {
    await response.body?.cancel();
  } catch {
    // The body is unwanted; a failure to drop it changes nothing.
  }
}

/**
 * A fetch that follows the spec's client rules:
 *
 * 1. On a 429 it reads Retry-After (seconds or an HTTP-date), waits that long and retries, at most `maxRetries` times
 *    and never waiting longer than `maxWait` (a longer Retry-After returns the 429). A request whose body is a stream
 *    is not retried. When retries run out, the last 429 is returned.
 * 2. It paces sustained work: from each response's X-RateLimit-Remaining and X-RateLimit-Limit it estimates the tokens
 *    the bucket holds (refilling at limit/60 per second, counting requests still in flight) and holds a request back
 *    until one token is there, so a steady loop runs at the limit instead of bouncing off 429s.
 *
 * Waits are abortable through the request's signal (the promise rejects with the signal's reason) and use a timer only
 * while waiting, so nothing is left to keep the process alive.
 */
export function rateLimitedFetch(options: RateLimitedFetchOptions = {}): FetchFunction {
  checkOptions(options);
  const maxRetries = options.maxRetries ?? 3;
  const maxWait = options.maxWait ?? 60_000;
  const pace = options.pace ?? true;
  const clock = options.clock ?? defaultClock;
  const keyOf = options.key ?? ((method: string, url: URL): string => `${method} ${url.origin}${url.pathname}`);
  const budgets = new Map<string, Budget>();

  function budgetKey(input: string | URL | Request, init: RequestInit | undefined): string | undefined {
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    let url: URL;
    try {
      url = input instanceof Request ? new URL(input.url) : new URL(input);
    } catch {
      return undefined; // fetch will reject the URL itself
    }
    return keyOf(method, url);
  }

  /** Waits until the budget has a token to spare, then counts the request in flight. */
  async function claim(key: string, signal: AbortSignal | undefined): Promise<Budget | undefined> {
    let waited = 0;
    for (;;) {
      const budget = budgets.get(key);
      if (budget === undefined) return undefined;
      const refilled = ((clock.now() - budget.at) * budget.limit) / 60_000;
      const tokens = Math.min(budget.limit, budget.remaining + Math.max(0, refilled)) - budget.inFlight;
      if (tokens >= 1 || waited >= maxWait) {
        budget.inFlight++;
        return budget;
      }
      const ms = Math.min(Math.ceil(((1 - tokens) * 60_000) / budget.limit), maxWait - waited);
      await clock.sleep(ms, signal);
      waited += ms;
    }
  }

  function observe(key: string, response: Response): void {
    const limit = counter(response, 'x-ratelimit-limit');
    const remaining = counter(response, 'x-ratelimit-remaining');
    if (limit === undefined || remaining === undefined || limit < 1) return;
    const budget = budgets.get(key);
    if (budget !== undefined) {
      budget.limit = limit;
      budget.remaining = remaining;
      budget.at = clock.now();
      return;
    }
    if (budgets.size >= MAX_BUDGETS) {
      const oldest = budgets.keys().next().value;
      if (oldest !== undefined) budgets.delete(oldest);
    }
    budgets.set(key, { limit, remaining, at: clock.now(), inFlight: 0 });
  }

  return async function rateLimited(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const send = options.fetch ?? globalThis.fetch;
    const signal = requestSignal(input, init);
    const replayable = canReplay(input, init);
    const key = pace ? budgetKey(input, init) : undefined;
    for (let attempt = 0; ; attempt++) {
      const budget = key === undefined ? undefined : await claim(key, signal);
      let response: Response;
      try {
        response = await send(input, init);
      } finally {
        if (budget !== undefined) budget.inFlight = Math.max(0, budget.inFlight - 1);
      }
      if (key !== undefined) observe(key, response);
      if (response.status !== 429 || attempt >= maxRetries || !replayable) return response;
      const delay = retryAfterMs(response);
      if (delay === undefined || delay > maxWait) return response;
      await discard(response);
      await clock.sleep(delay, signal);
    }
  };
}
