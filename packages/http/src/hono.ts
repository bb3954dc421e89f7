/**
 * Hono middleware, `rateLimit(options)`: on Node, Bun, Deno and Cloudflare Workers.
 *
 * @module @ratecard/http/hono
 */
import type { Context, MiddlewareHandler } from 'hono';
import {
  endLease,
  evaluate,
  logLeaseToConsole,
  logToConsole,
  type RateLimitOptions,
  reportError,
  resolveOptions,
} from './evaluate.js';

export type { ActualCost, Identify, Identity, LeaseOptions, RateLimitOptions } from './evaluate.js';

/**
 * Options of the Hono middleware; `identify` gets the Hono context (`c.req`, and `c.get(...)` from earlier middleware),
 * `lease.settle` the context and the response the handler produced.
 */
export type HonoRateLimitOptions = RateLimitOptions<Context, Response>;

/**
 * The body of a response, passed through as the server reads it, calling `end(true)` when it has been read to its end,
 * `end(false)` when the reader cancelled it (the client went away) or it failed.
 */
function watchBody(body: ReadableStream<Uint8Array>, once: (finished: boolean) => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const chunk = await reader.read();
        if (chunk.done) {
          controller.close();
          once(true);
        } else {
          controller.enqueue(chunk.value);
        }
      } catch (error) {
        controller.error(error);
        once(false);
      }
    },
    cancel(reason) {
      once(false);
      return reader.cancel(reason);
    },
  });
}

/**
 * Hono middleware, web-standard Request and Response only, so it runs wherever Hono runs. An exception in `identify`
 * propagates to `app.onError`. With `lease`, the lease ends when the server has read the response's body to its end (or
 * at once for a response without one, and for HEAD, whose body Hono drops unread), or when the client goes away first:
 * the request's `signal` aborts (which @hono/node-server, Deno and Bun do when the connection closes) or the server
 * cancels the body.
 */
export function rateLimit(options: HonoRateLimitOptions): MiddlewareHandler {
  const settings = resolveOptions(options);
  return async (c, next) => {
    const verdict = await evaluate(settings, c.req.method, c.req.url, c);
    if (verdict.action === 'respond') {
      if (verdict.status === 500) reportError(settings, verdict.error, c, logToConsole);
      // A copy: the node-server adapter adds content-length to the record it is given.
      return c.body(verdict.body, verdict.status, { ...verdict.headers });
    }
    const lease = verdict.lease;
    if (lease === undefined) {
      await next();
      // Set after the handler, on whatever response it produced (c.header copies a response whose headers are frozen).
      for (const name in verdict.headers) c.header(name, verdict.headers[name]);
      return undefined;
    }
    let ended = false;
    const end = (finished: boolean): void => {
      if (ended) return;
      ended = true;
      // Not finished, no response is read (endLease calls no settle then): c.res would make Hono a default one.
      const response = finished ? c.res : Response.error();
      void endLease(settings, lease, c, response, finished, (error) =>
        reportError(settings, error, c, logLeaseToConsole),
      );
    };
    const signal = c.req.raw.signal;
    if (signal.aborted) end(false);
    else signal.addEventListener('abort', () => end(false), { once: true });
    try {
      await next();
    } catch (error) {
      // Hono hands a handler's exception to onError inside next(); one that escapes it leaves no response to watch, so
      // the lease is settled as reserved.
      end(false);
      throw error;
    }
    for (const name in verdict.headers) c.header(name, verdict.headers[name]);
    const body = c.res.body;
    if (body === null || c.req.method === 'HEAD') end(true);
    else if (!ended) c.res = new Response(watchBody(body, end), c.res);
    return undefined;
  };
}
