/**
 * Rate limiting for a node:http request listener: `withRateLimit(handler, options)`.
 *
 * @module @ratecard/http/node
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeValue, RateLimitError } from '@ratecard/core';
import {
  endLease,
  evaluate,
  failed,
  logLeaseToConsole,
  logToConsole,
  type RateLimitOptions,
  reportError,
  resolveOptions,
  type Verdict,
} from './evaluate.js';
import { setHeaders, whenDone, writeVerdict } from './write-node.js';

export type { ActualCost, Identify, Identity, LeaseOptions, RateLimitOptions } from './evaluate.js';

/** A node:http request listener, as `http.createServer` takes it. */
export type RequestListener = (request: IncomingMessage, response: ServerResponse) => void;

/** Options of `withRateLimit`; `identify` gets the node:http request, `lease.settle` the request and response. */
export type NodeRateLimitOptions = RateLimitOptions<IncomingMessage, ServerResponse>;

/**
 * Wraps a node:http handler: requests that match a rule and that `identify` names are counted; a denial is answered
 * 429 here and never reaches `handler`; an allowed request reaches it with the rate-limit headers already set.
 *
 * With no framework to hand errors to, an exception in `identify` is answered like a limiter failure: 500 with an
 * `internal_error` body, the error going to `onError` (default `console.error`). What `handler` itself throws or
 * rejects with is left alone, as node:http would: with `lease`, a request its handler never answers holds its lease
 * until the connection closes (or the lease expires).
 */
export function withRateLimit(
  handler: (request: IncomingMessage, response: ServerResponse) => unknown,
  options: NodeRateLimitOptions,
): RequestListener {
  if (typeof handler !== 'function') {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: withRateLimit needs a request handler function, got ${describeValue(handler)}`,
    );
  }
  const settings = resolveOptions(options);
  const act = (verdict: Verdict, request: IncomingMessage, response: ServerResponse): void => {
    if (verdict.action === 'next') {
      const lease = verdict.lease;
      if (lease !== undefined) {
        whenDone(response, (finished) => {
          void endLease(settings, lease, request, response, finished, (error) =>
            reportError(settings, error, request, logLeaseToConsole),
          );
        });
      }
      setHeaders(response, verdict.headers);
      handler(request, response);
      return;
    }
    if (verdict.status === 500) reportError(settings, verdict.error, request, logToConsole);
    writeVerdict(response, verdict);
  };
  return (request, response) => {
    evaluate(settings, request.method ?? 'GET', request.url ?? '/', request).then(
      (verdict) => act(verdict, request, response),
      (error: unknown) => act(failed(error), request, response),
    );
  };
}
