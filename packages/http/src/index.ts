/**
 * The spec's rate-limit headers and 429 body, and the framework-neutral steps every adapter takes (`resolveOptions`,
 * `evaluate`), for writing an adapter of your own. The middleware are in `/node`, `/express`, `/fastify`, `/hono`.
 *
 * @module @ratecard/http
 */
export { type ErrorBody, type ErrorDetail, INTERNAL_ERROR, RATE_LIMIT_EXCEEDED } from './body.js';
export {
  evaluate,
  failed,
  type Identify,
  type Identity,
  type RateLimitOptions,
  type ResolvedOptions,
  requestPath,
  resolveOptions,
  type Verdict,
} from './evaluate.js';
export { type RateLimitHeaderOptions, rateLimitHeaders } from './headers.js';
