/**
 * Express middleware (4 and 5): `rateLimit(options)`.
 *
 * @module @ratecard/http/express
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import {
  endLease,
  evaluate,
  logLeaseToConsole,
  logToConsole,
  type RateLimitOptions,
  reportError,
  resolveOptions,
  type Verdict,
} from './evaluate.js';
import { setHeaders, whenDone, writeVerdict } from './write-node.js';

export type { ActualCost, Identify, Identity, LeaseOptions, RateLimitOptions } from './evaluate.js';

/**
 * Options of the Express middleware; `identify` gets the Express request (after any earlier middleware), `lease.settle`
 * the request and response (read what the handler left in `response.locals`).
 */
export type ExpressRateLimitOptions = RateLimitOptions<Request, Response>;

/**
 * Express middleware (4 and 5). The path matched against the rules is `req.url`, which Express makes relative to where
 * the middleware is mounted: `app.use('/v1', rateLimit(...))` matches `/v1/browsers` against `POST /browsers`.
 * An exception in `identify` goes to `next(error)`, that is to the application's error handlers.
 */
export function rateLimit(options: ExpressRateLimitOptions): RequestHandler {
  const settings = resolveOptions(options);
  const act = (verdict: Verdict, request: Request, response: Response, next: NextFunction): void => {
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
      next();
      return;
    }
    if (verdict.status === 500) reportError(settings, verdict.error, request, logToConsole);
    writeVerdict(response, verdict);
  };
  return (request: Request, response: Response, next: NextFunction): void => {
    evaluate(settings, request.method, request.url, request).then(
      (verdict) => act(verdict, request, response, next),
      (error: unknown) => next(error),
    );
  };
}
