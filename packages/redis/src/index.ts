/**
 * ratecard's Redis and Redis Cluster store, `redisStore({ client })`: buckets shared by every replica, one atomic Lua
 * script per batch of calls, on ioredis, iovalkey or node-redis.
 *
 * @module @ratecard/redis
 */
import { describeValue, RateLimitError } from '@ratecard/core';
import { encodeName } from './keys.js';

export type { RedisClient } from './client.js';
export { type RedisStore, type RedisStoreOptions, type RedisStoreStats, redisStore } from './store.js';
export {
  decodeEndpointLeases,
  decodeEndpointValue,
  MAX_KEPT_ENTRIES,
  type StoredBucket,
  type StoredLease,
} from './value.js';

/**
 * The Redis key that holds an organization's buckets under an endpoint rule (one per limit named there), as the store
 * writes it: `<prefix>{<organization>}:<endpoint>`, names percent-encoded. `endpoint` is the rule's key (`ALL /api/*`),
 * which the limiter passes to the store, not the request's path. Refuses (`invalid_argument`) an organization or
 * endpoint that is not a non-empty string, and a prefix with braces.
 */
export function endpointKey(organization: string, endpoint: string, prefix = 'ratecard:'): string {
  checkName(organization, 'organization');
  checkName(endpoint, 'endpoint');
  // An empty first hash tag is one Redis and cluster-key-slot hash differently (see store.ts).
  if (typeof prefix !== 'string' || prefix.includes('{') || prefix.includes('}')) {
    throw new RateLimitError(
      'invalid_argument',
      `ratecard: endpointKey needs a prefix without braces, got ${describeValue(prefix)}`,
    );
  }
  return `${prefix}{${encodeName(organization)}}:${encodeName(endpoint)}`;
}

function checkName(value: unknown, field: 'organization' | 'endpoint'): void {
  // No bound on the length: the limiter refuses names over 256 characters, but the store used alone takes them.
  if (typeof value !== 'string' || value.length === 0) {
    throw new RateLimitError(
      'invalid_argument',
      `ratecard: endpointKey needs an ${field} that is a non-empty string, got ${describeValue(value)}`,
    );
  }
}
