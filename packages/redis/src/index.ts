import { encodeName } from './keys.js';

export type { RedisClient } from './client.js';
export { type RedisStore, type RedisStoreOptions, type RedisStoreStats, redisStore } from './store.js';
export { COMPACT_LIMIT, COMPACT_TIME_WRAP, decodeBucketValue, type StoredBucket } from './value.js';

/** The Redis key of a bucket, as the store writes it: `<prefix>{<organization>}:<endpoint>`, names percent-encoded. */
export function bucketKey(organization: string, endpoint: string, prefix = 'ratecard:'): string {
  return `${prefix}{${encodeName(organization)}}:${encodeName(endpoint)}`;
}
