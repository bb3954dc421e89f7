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
