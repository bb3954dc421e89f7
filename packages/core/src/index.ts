/**
 * Limits and plans, exact token-bucket arithmetic, endpoint rules, the `Store` contract and `createLimiter`. No
 * I/O: pair it with a store, `@ratecard/memory` or `@ratecard/redis`.
 *
 * @module @ratecard/core
 */
export {
  type BucketShape,
  ceilDiv,
  costAt,
  DEBT_OFFSET,
  debtFloor,
  isLimited,
  msUntilAvailable,
  msUntilFull,
  type Outcome,
  refusal,
  remainingTokens,
  resetAfterSeconds,
  retryAfterSeconds,
  sameShape,
  take,
  unitsAfter,
  unitsAt,
} from './bucket.js';
export {
  type CalendarPeriod,
  type CalendarPeriodOptions,
  CurrentPeriod,
  calendarPeriod,
  type PeriodBounds,
  periodAt,
} from './calendar.js';
export { type Decision, type DecisionSource, type LimitState, limitStates } from './decision.js';
export {
  DEFAULT_ENDPOINTS,
  type EndpointLimits,
  type EndpointMode,
  type EndpointRule,
  EndpointRules,
  type EndpointSpec,
  EVERY_ENDPOINT,
} from './endpoints.js';
export { describeValue, RateLimitError, type RateLimitErrorCode } from './errors.js';
export {
  type BucketRef,
  createLimiter,
  type Limiter,
  type LimiterOptions,
  type LimitRequest,
  type StoreErrorPolicy,
} from './limiter.js';
export {
  type ConcurrencyOptions,
  concurrency,
  isConcurrency,
  isLimit,
  type Limit,
  type Limits,
  MAX_BUCKET_UNITS,
  MAX_CONCURRENCY,
  MAX_INTERVAL_MS,
  MAX_LIMITS_PER_REQUEST,
  MAX_REFILL,
  type PeriodOptions,
  perDay,
  perHour,
  perMinute,
  perSecond,
  type TokenBucketOptions,
  tokenBucket,
} from './limits.js';
export { checkOptionKeys } from './options.js';
export { type Identity, limitFor, MAX_LIMIT, PLANS, type Plan, type Plans, SPEC_PLANS } from './plans.js';
export { DEFAULT_LEASE_MS, type LeaseEvent, Reservation } from './reservation.js';
export {
  clientClock,
  type Lease,
  type LeaseChange,
  MAX_LEASE_MS,
  QUEUE_WAIT_FACTOR,
  type Store,
} from './store.js';
