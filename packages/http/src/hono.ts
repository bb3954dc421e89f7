/**
 * Hono middleware, `rateLimit(options)`: on Node, Bun, Deno and Cloudflare Workers.
 *
 * @module @ratecard/http/hono
 */
import type { Context, MiddlewareHandler } from 'hono';
import { evaluate, logToConsole, type RateLimitOptions, reportError, resolveOptions } from './evaluate.js';

export type { Identify, Identity, RateLimitOptions } from './evaluate.js';

/** Options of the Hono middleware; `identify` gets the Hono context (`c.req`, and `c.get(...)` from earlier middleware). */
export type HonoRateLimitOptions = RateLimitOptions<Context>;

/**
 * Hono middleware, web-standard Request and Response only, so it runs wherever Hono runs. An exception in `identify`
 * propagates to `app.onError`.
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
    await next();
    // Set after the handler, on whatever response it produced (c.header copies a response whose headers are frozen).
    for (const name in verdict.headers) c.header(name, verdict.headers[name]);
    return undefined;
  };
}
