/**
 * `rateLimitedFetch()`: a `fetch` that waits out 429s and paces itself by whatever rate-limit headers a server
 * sends, one budget per origin shared by its callers.
 *
 * @module @ratecard/http/client
 */
import { checkOptionKeys, describeValue, RateLimitError } from '@ratecard/core';
import {
  type Quota,
  type RateLimitReason,
  readRateLimitFields,
  refusalWait,
  type WaitSource,
} from './rate-limit-fields.js';

export type { RateLimitReason, WaitSource };

/** The shape of the global `fetch`. */
export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** What `rateLimitedFetch` returns: a `fetch`, and a way to forget what it learned of a server. */
export interface RateLimitedFetch extends FetchFunction {
  /**
   * Forgets what the client knows of one budget: its quotas and any wait a 429 asked for (after an admin reset on the
   * server, say). `key` is the budget's key: by default an origin, `new URL(url).origin`. Calls waiting for that budget
   * go as if it were new. True when the client had such a budget.
   */
  forget(key: string): boolean;
}

/** Time as the client sees it; replaceable so simulations and tests can run on a virtual clock. */
export interface Clock {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  /** Resolves after `ms` milliseconds; rejects with `signal.reason` as soon as `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Options of `rateLimitedFetch`; every one has a default. */
export interface RateLimitedFetchOptions {
  /** The fetch that sends the requests; default the global `fetch`, looked up per call. */
  fetch?: FetchFunction;
  /** Retries after a 429, per call; default 3. 0 turns retrying off (waiting for the shared budget still runs). */
  maxRetries?: number;
  /**
   * Longest one wait of a call, in milliseconds; default 60 000 (a call that waits, is refused and waits again may wait
   * this long each time, at most `maxRetries` times). A 429 asking for longer is returned at once, and a call that would
   * have to wait longer for its budget gets a 429 from the client at once, without being sent; a wait that fits is sent
   * when it ends.
   */
  maxWait?: number;
  /**
   * Longest the client holds the calls of one budget on a server's word, in milliseconds; default 300 000 (5 minutes),
   * and never less than `maxWait`. A 429 asking for longer (`Retry-After: 90000`), or a spent quota whose reset is
   * further off, holds them this long; then one request goes to ask again. `Infinity` honours every wait whole.
   */
  maxHold?: number;
  /** Pace requests from the quota fields servers send (IETF RateLimit, draft-6 RateLimit-*, X-RateLimit-*); default true. */
  pace?: boolean;
  /**
   * Which requests share one budget; default the origin (`https://api.example.com`). Return a finer key when the server
   * counts paths apart (ratecard counts per rule), or include the API key when one client sends for several accounts.
   */
  key?: (method: string, url: URL) => string;
  /** Called once for each wait, when it ends: for logs and metrics. Errors it throws are ignored. */
  onWait?: (event: WaitEvent) => void;
  /** Default: `performance.now()` and `setTimeout`. */
  clock?: Clock;
}

/** Every key of RateLimitedFetchOptions: rateLimitedFetch refuses any other. */
const FETCH_OPTIONS = {
  fetch: true,
  maxRetries: true,
  maxWait: true,
  maxHold: true,
  pace: true,
  key: true,
  onWait: true,
  clock: true,
} satisfies Record<keyof RateLimitedFetchOptions, true>;

/** One wait of one call, reported through `onWait`. */
export interface WaitEvent {
  /** The budget's key (by default the origin). */
  key: string;
  /** How long the call was held, in milliseconds. */
  ms: number;
  /** What held it last. */
  reason: RateLimitReason;
  /** `sent`: the request went on; `gave-up`: it could not go within maxWait and got a 429; `aborted`: its signal fired. */
  outcome: 'sent' | 'gave-up' | 'aborted';
}

/** The reason attached to a 429 the client returns; `sent` is false when the client answered without sending. */
export interface RefusalReason extends RateLimitReason {
  /** True when the server answered the 429; false when the client answered without sending. */
  sent: boolean;
}

/** One call waiting for its budget. */
interface Waiter {
  since: number;
  /** clock.now() after which it no longer waits. */
  deadline: number;
  reason: RateLimitReason;
  go: (refusal: Response | undefined) => void;
}

/** What the client knows of one server budget (one key), shared by every call that uses it. */
interface Budget {
  key: string;
  /** The quotas of the last answer that stated any, and clock.now() when it arrived. */
  quotas: Quota[];
  quotaAt: number;
  /** No request goes before this, because of a 429. */
  blockedUntil: number;
  block: RateLimitReason | undefined;
  /** After a 429 the next request goes alone, and the others wait for its answer. */
  probing: boolean;
  /** Requests sent and not answered yet. */
  inFlight: number;
  queue: Waiter[];
  /** Waiters released in a row are spaced by a random gap, so a queue never leaves all at once. */
  nextRelease: number;
  wakeAt: number;
  wake: AbortController | undefined;
}

/** The default maxHold: 5 minutes. A server refusing for a day is then asked again 288 times a day, by one request. */
const DEFAULT_MAX_HOLD_MS = 300_000;

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
  checkOptionKeys(options, FETCH_OPTIONS, 'rateLimitedFetch');
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
  const { maxHold } = options;
  if (maxHold !== undefined && (typeof maxHold !== 'number' || !(maxHold >= 0))) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: maxHold must be a number of milliseconds, 0 or more (Infinity: no bound), got ${describeValue(maxHold)}`,
    );
  }
  for (const name of ['fetch', 'key', 'onWait'] as const) {
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

/** A 429 whose wait works out to zero or less waits this long: a refusal never means "again at once". */
const MINIMUM_WAIT_MS = 1000;

/** A 429 with a Retry-After that cannot be read waits this long, doubled on each retry of the same call. */
const DEFAULT_WAIT_MS = 1000;

/** The gap between two waiters released in a row: 5 to 50 ms, at random. */
const GAP_MIN_MS = 5;
const GAP_SPREAD_MS = 45;

const PROBE: RateLimitReason = { source: 'probe', waitMs: 0 };

/** The reasons attached to the 429s the client returns. */
const reasons = new WeakMap<Response, RefusalReason>();

/**
 * Why a 429 returned by `rateLimitedFetch` was not waited out: which field asked for how long, and whether the request
 * was sent at all. Undefined for any other response.
 */
export function rateLimitReason(response: Response): RefusalReason | undefined {
  return reasons.get(response);
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

/** The 429 a call gets, without being sent, when its budget would hold it past maxWait. */
function refuse(reason: RateLimitReason): Response {
  const response = new Response(null, {
    status: 429,
    statusText: 'Too Many Requests',
    headers: { 'retry-after': String(Math.max(1, Math.ceil(reason.waitMs / 1000))) },
  });
  reasons.set(response, { ...reason, sent: false });
  return response;
}

/**
 * When a quota lets the next request go: at once while it has a whole request to spare beyond those in flight; at
 * its reset when it states one (a window-counting server gives everything back then); otherwise as it refills,
 * limit per window, continuously (a token bucket such as ratecard's sends no reset). Infinity: the quota's window is
 * over and a request in flight will bring the new one.
 */
function quotaReadyAt(quota: Quota, at: number, inFlight: number, now: number): number {
  if (quota.remaining >= inFlight + 1) return now;
  const window = quota.windowMs ?? 60_000;
  if (quota.resetMs !== undefined || quota.limit === undefined) {
    const resetAt = at + (quota.resetMs ?? window);
    if (now < resetAt) return resetAt;
    return inFlight > 0 ? Number.POSITIVE_INFINITY : now;
  }
  const refilled = (Math.max(0, now - at) * quota.limit) / window;
  const tokens = Math.min(quota.limit, quota.remaining + refilled) - inFlight;
  if (tokens >= 1) return now;
  return now + Math.ceil(((1 - tokens) * window) / quota.limit);
}

/**
 * Answers to concurrent requests can arrive out of order. Within one window a quota only goes down, so a count higher
 * than the one already known for the same window (same policy, a reset within a second and a half, or within half the
 * window for a shorter one such as a per-second limit's) is a stale answer.
 */
function lowest(quota: Quota, now: number, budget: Budget): Quota {
  if (quota.resetMs === undefined) return quota;
  const known = budget.quotas.find((old) => old.source === quota.source && old.policy === quota.policy);
  if (known?.resetMs === undefined || known.remaining >= quota.remaining) return quota;
  const tolerance = Math.min(1500, (quota.windowMs ?? Number.POSITIVE_INFINITY) / 2);
  const sameWindow = Math.abs(budget.quotaAt + known.resetMs - (now + quota.resetMs)) < tolerance;
  return sameWindow ? { ...quota, remaining: known.remaining } : quota;
}

function gap(): number {
  return GAP_MIN_MS + Math.random() * GAP_SPREAD_MS;
}

/**
 * A fetch for rate-limited APIs:
 *
 * 1. It reads every rate-limit dialect: `retry-after-ms` and `Retry-After` (seconds, or an HTTP-date measured against
 *    the response's Date), the IETF `RateLimit`/`RateLimit-Policy` fields (RFC 9651, several policies: the most
 *    restrictive wins), draft-6 `RateLimit-*` and `X-RateLimit-*`, and the window or reset each states.
 * 2. Calls sharing one client share one budget per key (by default per origin): a 429 or a spent quota holds every
 *    call, and when the wait ends they are let through one at a time, spaced by a random gap. While the server has
 *    stated no quota, and right after a 429, one request goes at a time, each after the previous answer.
 * 3. A call waits at most `maxWait` and retries at most `maxRetries` times; otherwise it gets a 429 at once, with
 *    `rateLimitReason(response)` saying why. The request's signal aborts a wait at once; `onWait` reports each wait.
 * 4. One answer holds a budget's calls at most `maxHold`, however long it asks for; `forget(key)` drops a budget.
 *
 * A request whose body is a stream is not retried. Timers exist only while a call waits.
 */
export function rateLimitedFetch(options: RateLimitedFetchOptions = {}): RateLimitedFetch {
  checkOptions(options);
  const maxRetries = options.maxRetries ?? 3;
  const maxWait = options.maxWait ?? 60_000;
  // Never below maxWait: a wait a call may sit out before retrying is honoured whole, so its retry is not refused again.
  const maxHold = Math.max(options.maxHold ?? DEFAULT_MAX_HOLD_MS, maxWait);
  const pace = options.pace ?? true;
  const clock = options.clock ?? defaultClock;
  const onWait = options.onWait;
  const keyOf = options.key ?? ((_method: string, url: URL): string => url.origin);
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

  function budgetFor(key: string): Budget {
    let budget = budgets.get(key);
    if (budget !== undefined) {
      // Map order is recency order, so the idle budget evicted below is the least recently used.
      budgets.delete(key);
      budgets.set(key, budget);
      return budget;
    }
    if (budgets.size >= MAX_BUDGETS) {
      for (const [oldKey, old] of budgets) {
        if (old.queue.length === 0 && old.inFlight === 0) {
          budgets.delete(oldKey);
          break;
        }
      }
    }
    budget = {
      key,
      quotas: [],
      quotaAt: 0,
      blockedUntil: 0,
      block: undefined,
      probing: false,
      inFlight: 0,
      queue: [],
      nextRelease: 0,
      wakeAt: Number.POSITIVE_INFINITY,
      wake: undefined,
    };
    budgets.set(key, budget);
    return budget;
  }

  /** When the next request may go, and why not sooner. Infinity: when the request in flight is answered. */
  function readiness(budget: Budget, now: number): { at: number; reason: RateLimitReason | undefined } {
    let at = now;
    let reason: RateLimitReason | undefined;
    if (budget.blockedUntil > now) {
      at = budget.blockedUntil;
      reason = budget.block;
    }
    // Until a server states its quota, only its answers tell how much it takes: learn them one request at a time.
    const alone = budget.probing || (pace && budget.quotas.length === 0);
    if (alone && budget.inFlight > 0) return { at: Number.POSITIVE_INFINITY, reason: reason ?? PROBE };
    if (pace) {
      for (const quota of budget.quotas) {
        const ready = heldAtMost(quotaReadyAt(quota, budget.quotaAt, budget.inFlight, now), budget, now);
        if (ready > at) {
          at = ready;
          reason = { source: quota.source, waitMs: 0 };
          if (quota.policy !== undefined) reason.policy = quota.policy;
        }
      }
    }
    return { at, reason };
  }

  /**
   * A quota's hold, cut at maxHold after the answer that stated it: from then on one request goes at a time, as when a
   * quota's window is over, and its answer brings a new quota. Infinity (waiting for an answer) stays.
   */
  function heldAtMost(ready: number, budget: Budget, now: number): number {
    const end = budget.quotaAt + maxHold;
    if (ready <= end || !Number.isFinite(ready)) return ready;
    if (end > now) return end;
    return budget.inFlight > 0 ? Number.POSITIVE_INFINITY : now;
  }

  function report(budget: Budget, waiter: Waiter, now: number, outcome: WaitEvent['outcome']): void {
    if (onWait === undefined) return;
    try {
      onWait({ key: budget.key, ms: now - waiter.since, reason: waiter.reason, outcome });
    } catch {
      // A logging hook must not break the queue it reports on.
    }
  }

  /** Lets through every waiter the budget allows now, gives up those that cannot go in time, and sets the next wake. */
  function drain(budget: Budget): void {
    const now = clock.now();
    const ready = readiness(budget, now);
    for (const waiter of [...budget.queue]) {
      if (ready.reason !== undefined) {
        const waitMs = Number.isFinite(ready.at) ? Math.ceil(ready.at - now) : 0;
        waiter.reason = { ...ready.reason, waitMs };
      }
      // A call that may go now goes, however late its timer fired: only a wait that still ends past the deadline is
      // given up (a block a newer 429 moved, say).
      const late = Number.isFinite(ready.at) ? ready.at > now && ready.at > waiter.deadline : now >= waiter.deadline;
      if (!late) continue;
      budget.queue.splice(budget.queue.indexOf(waiter), 1);
      if (Number.isFinite(ready.at)) {
        report(budget, waiter, now, 'gave-up');
        waiter.go(refuse(waiter.reason));
      } else {
        // Held only for another request's answer, and that for maxWait already: it goes, as pacing always has.
        budget.inFlight++;
        report(budget, waiter, now, 'sent');
        waiter.go(undefined);
      }
    }
    while (budget.queue.length > 0) {
      if (Math.max(readiness(budget, now).at, budget.nextRelease) > now) break;
      const waiter = budget.queue.shift() as Waiter;
      budget.inFlight++;
      report(budget, waiter, now, 'sent');
      waiter.go(undefined);
      if (budget.queue.length > 0) budget.nextRelease = now + gap();
    }
    schedule(budget, now);
  }

  function schedule(budget: Budget, now: number): void {
    let next = Number.POSITIVE_INFINITY;
    if (budget.queue.length > 0) {
      next = Math.max(readiness(budget, now).at, budget.nextRelease);
      for (const waiter of budget.queue) next = Math.min(next, waiter.deadline);
    }
    if (next === budget.wakeAt) return;
    budget.wake?.abort();
    budget.wake = undefined;
    budget.wakeAt = next;
    if (!Number.isFinite(next)) return;
    const wake = new AbortController();
    budget.wake = wake;
    clock.sleep(Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(next - now))), wake.signal).then(
      () => {
        if (budget.wake !== wake) return;
        budget.wake = undefined;
        budget.wakeAt = Number.POSITIVE_INFINITY;
        drain(budget);
      },
      () => undefined, // superseded by a newer wake
    );
  }

  /**
   * Waits until the budget lets this call send, and counts it in flight; resolves with a 429 instead when that would
   * take longer than maxWait. A retry after a 429 goes to the head of the queue.
   */
  function admit(
    budget: Budget,
    signal: AbortSignal | undefined,
    retry: boolean,
  ): Promise<Response | undefined> | undefined {
    const now = clock.now();
    if (budget.queue.length === 0) {
      const ready = readiness(budget, now);
      if (ready.at <= now) {
        budget.inFlight++;
        return undefined;
      }
      if (Number.isFinite(ready.at) && ready.at - now > maxWait && ready.reason !== undefined) {
        return Promise.resolve(refuse({ ...ready.reason, waitMs: Math.ceil(ready.at - now) }));
      }
    }
    return new Promise<Response | undefined>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = (): void => {
        const index = budget.queue.indexOf(waiter);
        if (index < 0) return;
        budget.queue.splice(index, 1);
        report(budget, waiter, clock.now(), 'aborted');
        reject(signal?.reason);
        drain(budget);
      };
      const waiter: Waiter = {
        since: now,
        deadline: now + maxWait,
        reason: PROBE,
        go: (refusal) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(refusal);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (retry) budget.queue.unshift(waiter);
      else budget.queue.push(waiter);
      drain(budget);
    });
  }

  /** Takes in an answer (undefined: the request failed): its quotas, and for a 429 the wait it asks of everyone. */
  function settle(budget: Budget, response: Response | undefined, attempt: number): RateLimitReason | undefined {
    budget.inFlight = Math.max(0, budget.inFlight - 1);
    let refusal: RateLimitReason | undefined;
    if (response !== undefined) {
      const now = clock.now();
      const fields = readRateLimitFields(response.headers, Date.now());
      if (pace && fields.quotas.length > 0) {
        budget.quotas = fields.quotas.map((quota) => lowest(quota, now, budget));
        budget.quotaAt = now;
      }
      if (response.status === 429) {
        refusal = refusalWait(fields, MINIMUM_WAIT_MS);
        if (refusal === undefined && fields.garbled) {
          refusal = { source: 'default', waitMs: DEFAULT_WAIT_MS * 2 ** Math.min(attempt, 16) };
        }
        // Even a 429 that says nothing holds the others a moment, so that they do not pile in after it. However long
        // the server asks for, they are held at most maxHold: then one request goes to ask again.
        const hold = refusal ?? { source: 'default', waitMs: DEFAULT_WAIT_MS };
        const until = now + Math.min(hold.waitMs, maxHold);
        if (until > budget.blockedUntil) {
          budget.blockedUntil = until;
          budget.block = hold;
        }
        budget.probing = true;
      } else {
        budget.probing = false;
      }
    }
    drain(budget);
    return refusal;
  }

  function forget(key: string): boolean {
    if (typeof key !== 'string') {
      throw new RateLimitError(
        'invalid_argument',
        `ratecard: forget takes a budget key, by default an origin such as 'https://api.example.com', got ${describeValue(key)}`,
      );
    }
    const budget = budgets.get(key);
    if (budget === undefined) return false;
    if (budget.queue.length === 0 && budget.inFlight === 0) {
      budget.wake?.abort();
      budgets.delete(key);
      return true;
    }
    // Calls are waiting or in flight: keep the budget (it counts them), and let the waiting go as it now allows.
    budget.quotas = [];
    budget.quotaAt = 0;
    budget.blockedUntil = 0;
    budget.block = undefined;
    budget.probing = false;
    drain(budget);
    return true;
  }

  const rateLimited = async function rateLimited(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const send = options.fetch ?? globalThis.fetch;
    const key = budgetKey(input, init);
    if (key === undefined) return send(input, init);
    const budget = budgetFor(key);
    const signal = requestSignal(input, init);
    const replayable = canReplay(input, init);
    for (let attempt = 0; ; attempt++) {
      const refused = await admit(budget, signal, attempt > 0);
      if (refused !== undefined) return refused;
      let response: Response;
      try {
        response = await send(input, init);
      } catch (error) {
        settle(budget, undefined, attempt);
        throw error;
      }
      const refusal = settle(budget, response, attempt);
      // A 429 that says nothing of when to come back is the caller's to handle.
      if (response.status !== 429 || refusal === undefined) return response;
      reasons.set(response, { ...refusal, sent: true });
      if (attempt >= maxRetries || !replayable || refusal.waitMs > maxWait) return response;
      await discard(response);
    }
  };
  return Object.assign(rateLimited, { forget });
}
