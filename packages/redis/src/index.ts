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
export { decodeBucketValue, type StoredBucket } from './value.js';

/**
 * The Redis key of a bucket, as the store writes it: `<prefix>{<organization>}:<endpoint>:<limit name>`, names
 * percent-encoded.
 */
export function bucketKey(organization: string, endpoint: string, limitName: string, prefix = 'ratecard:'): string {
  // An empty first hash tag is one Redis and cluster-key-slot hash differently (see store.ts).
  if (organization === '' || prefix.includes('{') || prefix.includes('}')) {
    throw new RateLimitError(
      'invalid_argument',
      'ratecard: bucketKey needs a non-empty organization and a prefix without braces',
    );
  }
  return `${prefix}{${encodeName(organization)}}:${encodeName(endpoint)}:${encodeName(limitName)}`;
}
