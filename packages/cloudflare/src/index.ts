/**
 * ratecard's store for Cloudflare Workers, `durableObjectStore({ namespace })`: exact limits shared by every isolate in
 * every location, one Durable Object (`RatecardBuckets`) per organization holding its buckets.
 *
 * @module @ratecard/cloudflare
 */
export { type BucketLimit, RatecardBuckets } from './object.js';
export {
  BLOCKS_OBJECT,
  type BucketsNamespace,
  type BucketsStub,
  type DurableObjectStoreOptions,
  durableObjectStore,
} from './store.js';
