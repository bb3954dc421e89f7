export { type BucketLimit, RatecardBuckets } from './object.js';
export {
  type BucketsNamespace,
  type BucketsStub,
  type DurableObjectStoreOptions,
  durableObjectStore,
} from './store.js';
