import { createLimiter } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { TokenBucket } from 'limiter';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import type { Library } from './results.js';

export interface HeapCase {
  library: Library;
  subject: string;
  /** Charges one request for every organization and returns what must stay alive while the heap is measured. */
  track(organizations: readonly string[]): Promise<{ keep: unknown; check: string }>;
}

export const HEAP_CASES: Readonly<Record<string, HeapCase>> = {
  'ratecard/memoryStore': {
    library: 'ratecard',
    subject:
      '`memoryStore()` (default maxBuckets 1 000 000) behind `createLimiter`, one `consumeSync` per organization',
    async track(organizations) {
      const store = memoryStore({ maxBuckets: Math.max(1_000_000, organizations.length) });
      const limiter = createLimiter({ store });
      for (const organization of organizations) {
        limiter.consumeSync({ organization, endpoint: 'POST /browsers', plan: 'developer' });
      }
      const { buckets, evicted } = store.stats();
      return { keep: limiter, check: `store.stats(): ${buckets} buckets, ${evicted} evicted` };
    },
  },
  'rate-limiter-flexible/RateLimiterMemory': {
    library: 'rate-limiter-flexible',
    subject: '`RateLimiterMemory({ points: 10, duration: 60 })`, one `consume(key)` per organization',
    async track(organizations) {
      const limiter = new RateLimiterMemory({ points: 10, duration: 60 });
      for (const organization of organizations) await limiter.consume(organization);
      return { keep: limiter, check: '' };
    },
  },
  'limiter/TokenBucket': {
    library: 'limiter',
    subject:
      '`new TokenBucket({ bucketSize: 10, tokensPerInterval: 10, interval: "minute" })` per organization in a Map',
    async track(organizations) {
      const buckets = new Map<string, TokenBucket>();
      for (const organization of organizations) {
        const bucket = new TokenBucket({ bucketSize: 10, tokensPerInterval: 10, interval: 'minute' });
        bucket.content = 10;
        bucket.tryRemoveTokens(1);
        buckets.set(organization, bucket);
      }
      return { keep: buckets, check: '' };
    },
  },
};
