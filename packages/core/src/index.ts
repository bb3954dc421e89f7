export {
  ceilDiv,
  isLimited,
  msUntilAvailable,
  msUntilFull,
  type Outcome,
  remainingTokens,
  resetAfterSeconds,
  retryAfterSeconds,
  take,
  UNITS_PER_TOKEN,
  unitsAfter,
  unitsAt,
} from './bucket.js';
export { DEFAULT_ENDPOINTS, type EndpointMode, type EndpointRule, EndpointRules } from './endpoints.js';
export { describeValue, RateLimitError, type RateLimitErrorCode } from './errors.js';
export {
  type BucketRef,
  createLimiter,
  type Decision,
  type DecisionSource,
  type Limiter,
  type LimiterOptions,
  type LimitRequest,
  type StoreErrorPolicy,
} from './limiter.js';
export { type Identity, limitFor, MAX_LIMIT, PLANS, type Plan } from './plans.js';
export type { Store } from './store.js';
