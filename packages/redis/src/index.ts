/**
 * ratecard's Redis and Redis Cluster store, `redisStore({ client })`: buckets shared by every replica, one atomic Lua
 * script per batch of calls, on ioredis, iovalkey or node-redis.
 *
 * @module @ratecard/redis
 */
import { RateLimitError } from '@ratecard/core';
import { encodeName } from './keys.js';

export type { RedisClient } from './client.js';
export { type RedisStore, type RedisStoreOptions, type RedisStoreStats, redisStore } from './store.js';
export { decodeEndpointValue, MAX_KEPT_ENTRIES, type StoredBucket } from './value.js';

/**
 * The Redis key that holds an organization's buckets at an endpoint (one per limit named there), as the store writes
 * it: `<prefix>{<organization>}:<endpoint>`, names percent-encoded.
 */
export function endpointKey(organization: string, endpoint: string, prefix = 'ratecard:'): string {
  // An empty first hash tag is one Redis and cluster-key-slot hash differently (see store.ts).
  if (organization === '' || prefix.includes('{') || prefix.includes('}')) {
    throw new RateLimitError(
      'invalid_argument',
      'ratecard: endpointKey needs a non-empty organization and a prefix without braces',
    );
  }
  return `${prefix}{${encodeName(organization)}}:${encodeName(endpoint)}`;
}
