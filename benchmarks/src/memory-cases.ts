import { createLimiter, type Decision, type LimitRequest } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { TokenBucket } from 'limiter';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import type { Library } from './results.js';

/**
 * One call of a case on organization number `org`, and how to tell an admitted answer. The loop awaits the library's
 * own promise directly (no wrapper function adds a promise), and a rejection counts as a denial.
 */
export type Operation =
  | { sync: (org: number) => unknown; admitted: (answer: unknown) => boolean }
  | { async: (org: number) => Promise<unknown>; admitted: (answer: unknown) => boolean };

const allowed = (answer: unknown): boolean => (answer as Decision).allowed;
const always = (): boolean => true;

export interface MemoryCase {
  library: Library;
  subject: string;
  /** 'sync': a plain loop of calls; 'await': each call's promise awaited before the next call. */
  loop: 'sync' | 'await';
  /** What clock the case reads, for the method text. */
  clock: string;
  /** 'admitted': every timed call is admitted; 'denied': buckets are drained during warm-up, so nearly all deny. */
  path: 'admitted' | 'denied';
  build(organizations: readonly string[]): Operation;
}

const ENDPOINT = 'POST /browsers';
/**
 * 10 000 per minute: a process here makes at most ~700 calls per organization, so no bucket runs out (every call takes
 * the admitted path), and it refills 1/6 token per ms, so no bucket is full again between two calls to it (a store may
 * forget a full bucket; with a limit in the millions every call would find its bucket gone and create it anew).
 */
export const ROOMY_LIMIT = 10_000;
/** The Developer plan's 10 per minute: drained by warm-up, so the timed calls take the denied path. */
export const TIGHT_LIMIT = 10;

const TURN_CLOCK = 'Date.now read once per event-loop turn (the memory store default, turn-clock.ts)';
const CALL_CLOCK = 'Date.now read on every call (`now: () => Date.now()`)';

function requests(organizations: readonly string[], path: MemoryCase['path']): LimitRequest[] {
  return organizations.map((organization) =>
    path === 'admitted'
      ? { organization, endpoint: ENDPOINT, plan: 'enterprise', override: ROOMY_LIMIT }
      : { organization, endpoint: ENDPOINT, plan: 'developer' },
  );
}

/** The limiter on a memory store, called synchronously (`consumeSync`) or awaited (`consume`). */
function ratecardLimiter(loop: 'sync' | 'await', path: MemoryCase['path'], perCallClock: boolean): MemoryCase {
  return {
    library: 'ratecard',
    subject:
      loop === 'sync'
        ? '`limiter.consumeSync(request)` on `memoryStore()`'
        : '`await limiter.consume(request)` on `memoryStore()`',
    loop,
    clock: perCallClock ? CALL_CLOCK : TURN_CLOCK,
    path,
    build(organizations) {
      const store = perCallClock ? memoryStore({ now: () => Date.now() }) : memoryStore();
      const limiter = createLimiter({ store });
      const all = requests(organizations, path);
      return loop === 'sync'
        ? { sync: (org) => limiter.consumeSync(all[org] as LimitRequest), admitted: allowed }
        : { async: (org) => limiter.consume(all[org] as LimitRequest), admitted: allowed };
    },
  };
}

/** The store alone, without the limiter around it: how much of a consumeSync call is the bucket itself. */
const storeAlone: MemoryCase = {
  library: 'ratecard',
  subject:
    '`store.consume(organization, endpoint, limit, 1)` of `memoryStore()` alone, without the limiter (for scale)',
  loop: 'sync',
  clock: TURN_CLOCK,
  path: 'admitted',
  build(organizations) {
    const store = memoryStore();
    return {
      sync: (org) => store.consume(organizations[org] as string, ENDPOINT, ROOMY_LIMIT, 1),
      admitted: (answer) => (answer as number) >= 0,
    };
  },
};

function flexibleMemory(path: MemoryCase['path']): MemoryCase {
  return {
    library: 'rate-limiter-flexible',
    subject: '`await RateLimiterMemory.consume(key)` (a denial rejects; caught)',
    loop: 'await',
    clock: 'Date.now on every call (its own)',
    path,
    build(organizations) {
      const limiter = new RateLimiterMemory({ points: path === 'admitted' ? ROOMY_LIMIT : TIGHT_LIMIT, duration: 60 });
      return { async: (org) => limiter.consume(organizations[org] as string), admitted: always };
    },
  };
}

function tokenBuckets(path: MemoryCase['path']): MemoryCase {
  return {
    library: 'limiter',
    subject: '`TokenBucket.tryRemoveTokens(1)`, one bucket per organization in a Map (get, create when missing)',
    loop: 'sync',
    clock: 'performance.now on every call (its own)',
    path,
    build(organizations) {
      const size = path === 'admitted' ? ROOMY_LIMIT : TIGHT_LIMIT;
      const buckets = new Map<string, TokenBucket>();
      return {
        sync: (org) => {
          const organization = organizations[org] as string;
          let bucket = buckets.get(organization);
          if (bucket === undefined) {
            bucket = new TokenBucket({ bucketSize: size, tokensPerInterval: size, interval: 'minute' });
            // A TokenBucket starts empty; ratecard's and rate-limiter-flexible's buckets start full.
            bucket.content = size;
            buckets.set(organization, bucket);
          }
          return bucket.tryRemoveTokens(1);
        },
        admitted: (answer) => answer === true,
      };
    },
  };
}

const promiseBaseline: MemoryCase = {
  library: 'baseline',
  subject: '`await Promise.resolve(true)` (the cost of an await alone)',
  loop: 'await',
  clock: 'none',
  path: 'admitted',
  build() {
    return { async: (_org) => Promise.resolve(true), admitted: always };
  },
};

/**
 * The least an in-process limiter call can do here: find the organization among 10 000 with one Map lookup, update
 * its numbers in a Float64Array, and return a fresh small object. No validation, no rule, no clock, no arithmetic
 * worth the name: a floor to read the other synchronous figures against, not a limiter.
 */
const lookupBaseline: MemoryCase = {
  library: 'baseline',
  subject: 'one `Map.get` among the organizations, two `Float64Array` writes, a fresh 3-field object (no limiter)',
  loop: 'sync',
  clock: 'none',
  path: 'admitted',
  build(organizations) {
    const slots = new Map(organizations.map((organization, slot) => [organization, slot]));
    const state = new Float64Array(2 * organizations.length);
    return {
      sync: (org) => {
        const slot = slots.get(organizations[org] as string) as number;
        const units = (state[2 * slot] as number) + 1;
        state[2 * slot] = units;
        state[2 * slot + 1] = org;
        return { allowed: true, slot, units };
      },
      admitted: (answer) => (answer as { allowed: boolean }).allowed,
    };
  },
};

/** Every memory case by name; names are stable ids in results. */
export const MEMORY_CASES: Readonly<Record<string, MemoryCase>> = {
  'ratecard/consumeSync': ratecardLimiter('sync', 'admitted', false),
  'ratecard/consumeSync/per-call-clock': ratecardLimiter('sync', 'admitted', true),
  'ratecard/memoryStore.consume': storeAlone,
  'ratecard/consume': ratecardLimiter('await', 'admitted', false),
  'ratecard/consume/per-call-clock': ratecardLimiter('await', 'admitted', true),
  'rate-limiter-flexible/RateLimiterMemory': flexibleMemory('admitted'),
  'limiter/TokenBucket': tokenBuckets('admitted'),
  'baseline/await': promiseBaseline,
  'baseline/map-lookup': lookupBaseline,
  'ratecard/consumeSync/denied': ratecardLimiter('sync', 'denied', false),
  'ratecard/consume/denied': ratecardLimiter('await', 'denied', false),
  'rate-limiter-flexible/RateLimiterMemory/denied': flexibleMemory('denied'),
  'limiter/TokenBucket/denied': tokenBuckets('denied'),
};
