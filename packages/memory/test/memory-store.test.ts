import { createLimiter, perHour, perMinute, perSecond, RateLimitError } from '@ratecard/core';
import { describe, expect, it } from 'vitest';
import { type MemoryStoreOptions, memoryStore } from '../src/index.js';

const T0 = 1_700_000_000_000;
/** 10 a minute: a token is 6 000 units. */
const dev = [perMinute(10)];

describe('memoryStore', () => {
  it('is private to the process and answers with plain values', () => {
    const store = memoryStore();
    expect(store.shared).toBe(false);
    expect(store.consume('o', 'e', dev, 1)).toEqual([9 * 6_000]);
  });

  it('decides through the limiter', async () => {
    const limiter = createLimiter({ store: memoryStore() });
    const decision = await limiter.consume({ organization: 'o', endpoint: 'POST /browsers', plan: 'hobbyist' });
    expect(decision).toMatchObject({ allowed: true, limit: 25, remaining: 24, source: 'store' });
  });

  it('drops buckets that refilled to full when it reaches maxBuckets, losing nothing', () => {
    let now = T0;
    const store = memoryStore({ now: () => now, maxBuckets: 100 });
    for (let i = 0; i < 100; i++) store.consume(`org-${i}`, 'e', dev, 1);
    now += 6_000;
    store.consume('newcomer', 'e', dev, 1);
    expect(store.stats()).toEqual({ buckets: 1, dropped: 100, evicted: 0 });
  });

  it('drops full buckets as new ones are created, long before the bound', () => {
    let now = T0;
    const store = memoryStore({ now: () => now });
    for (let i = 0; i < 1_000; i++) store.consume(`early-${i}`, 'e', dev, 1);
    now += 6_000;
    for (let i = 0; i < 1_000; i++) store.consume(`late-${i}`, 'e', dev, 1);
    // Each creation looked at the two oldest buckets: the 1 000 early ones had refilled, so all were dropped.
    expect(store.stats()).toEqual({ buckets: 1_000, dropped: 1_000, evicted: 0 });
    expect(store.peek('early-0', 'e', dev, 10)).toEqual([0]);
  });

  it('evicts one bucket only when none is full, counting it', () => {
    let now = T0;
    const store = memoryStore({ now: () => now, maxBuckets: 3 });
    for (const organization of ['a', 'b', 'c']) store.consume(organization, 'e', dev, 10);
    now += 1_000;
    store.consume('d', 'e', dev, 10);
    expect(store.stats()).toEqual({ buckets: 3, dropped: 0, evicted: 1 });
    // The evicted organization starts over with a full bucket, which is why evictions are counted.
    const full = ['a', 'b', 'c'].filter((organization) => store.peek(organization, 'e', dev, 10)[0] === 0);
    expect(full).toHaveLength(1);
  });

  it('stays within maxBuckets under a flood of new organizations', () => {
    const store = memoryStore({ now: () => T0, maxBuckets: 1_000 });
    for (let i = 0; i < 20_000; i++) store.consume(`flood-${i}`, 'e', dev, 1);
    const stats = store.stats();
    expect(stats.buckets).toBe(1_000);
    expect(stats.evicted).toBe(19_000);
  });

  it('reads Date.now on every call by default, so time passing within one turn refills', () => {
    const store = memoryStore();
    const fast = [perMinute(10_000)];
    store.consume('turn', 'e', fast, 10_000);
    const sameTurnStart = Date.now();
    while (Date.now() - sameTurnStart < 7) {
      // Busy-wait past one token's refill time (6 ms at a limit of 10 000/min) without leaving this turn.
    }
    expect(store.consume('turn', 'e', fast, 1)[0]).toBeGreaterThanOrEqual(0);
  });

  it('reuses the slot of a reset bucket', () => {
    const store = memoryStore({ now: () => T0 });
    store.consume('a', 'e', dev, 10);
    store.reset('a', 'e', dev);
    expect(store.stats().buckets).toBe(0);
    expect(store.consume('b', 'e', dev, 1)).toEqual([54_000]);
  });

  it('rejects options it cannot use', () => {
    expect(() => memoryStore({ maxBuckets: 0 })).toThrowError(RateLimitError);
    expect(() => memoryStore({ maxBuckets: 1.5 })).toThrowError(/maxBuckets must be a positive integer, got 1.5/);
    expect(() => memoryStore({ now: 5 as unknown as () => number })).toThrowError(/now must be a function/);
    expect(() => memoryStore(null as unknown as MemoryStoreOptions)).toThrowError(
      /memoryStore takes an options object, got null/,
    );
  });

  it('takes every option of MemoryStoreOptions', () => {
    const every: Required<MemoryStoreOptions> = { now: () => T0, maxBuckets: 1 };
    const store = memoryStore(every);
    store.consume('a', 'e', dev, 10);
    store.consume('b', 'e', dev, 10);
    expect(store.stats()).toEqual({ buckets: 1, dropped: 0, evicted: 1 });
  });

  it('refuses an unknown option, even one set to undefined, naming the option it most likely meant', () => {
    for (const options of [{ maxBucket: 10 }, { maxBucket: undefined }]) {
      let error: unknown;
      try {
        memoryStore(options as MemoryStoreOptions);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(RateLimitError);
      expect((error as RateLimitError).code).toBe('invalid_option');
      expect((error as RateLimitError).message).toBe(
        'ratecard: memoryStore got an unknown option "maxBucket"; did you mean "maxBuckets"? It takes now, maxBuckets',
      );
    }
  });

  it('admits exactly the capacity among 10 000 concurrent consumes on one key', async () => {
    // A still clock: with the real one, the tokens that refill while 10 000 calls run would be admitted too.
    const limiter = createLimiter({ store: memoryStore({ now: () => T0 }) });
    const request = { organization: 'hot', endpoint: 'POST /browsers', plan: 'enterprise' as const, override: 2_500 };
    const decisions = await Promise.all(Array.from({ length: 10_000 }, () => limiter.consume(request)));
    expect(decisions.filter((d) => d.allowed).length).toBe(2_500);
  });
});

describe('memoryStore endpoint maps', () => {
  it('keeps counting after an endpoint lost its last bucket and came back', () => {
    const store = memoryStore({ now: () => T0 });
    store.consume('a', 'e', dev, 10);
    store.reset('a', 'e', dev);
    store.consume('a', 'e', dev, 10);
    expect(store.consume('a', 'e', dev, 1)[0]).toBeLessThan(0);
    expect(store.stats().buckets).toBe(1);
  });
});

describe('memoryStore with several limits', () => {
  const both = [perSecond(10), perHour(5)];

  it('keeps one bucket per limit name, and creates none for a refused call', () => {
    const store = memoryStore({ now: () => T0 });
    expect(store.consume('a', 'e', both, 5)).toEqual([500, 0]);
    expect(store.stats().buckets).toBe(2);
    expect(store.consume('b', 'e', [perHour(5)], 5)).toEqual([0]);
    expect(store.consume('b', 'e', both, 1)).toEqual([-1 - 1_000, -1]);
    // The per-second bucket of b was never charged, so it was never made.
    expect(store.stats().buckets).toBe(3);
  });

  it('frees the slot of each limit reset, keeping the others', () => {
    const store = memoryStore({ now: () => T0 });
    store.consume('a', 'e', both, 5);
    store.reset('a', 'e', [perSecond(10)]);
    expect(store.stats().buckets).toBe(1);
    expect(store.peek('a', 'e', both, 1)).toEqual([-1 - 1_000, -1]);
    store.reset('a', 'e', both);
    expect(store.stats().buckets).toBe(0);
  });

  it('charges each bucket of a call its own, when making one sweeps out another that had refilled to full', () => {
    let now = T0;
    const store = memoryStore({ now: () => now });
    const tens = perMinute(10);
    const fives = perMinute(5, { name: 'fives' });
    expect(store.consume('o', 'e', [tens], 1)).toEqual([54_000]);
    now += 6_000;
    // The 1m bucket is full again, and making the new 'fives' bucket sweeps it out: it must still be charged.
    expect(store.consume('o', 'e', [fives, tens], 1)).toEqual([48_000, 54_000]);
    expect(store.peek('o', 'e', [fives, tens], 1)).toEqual([36_000, 48_000]);
  });

  it('drops a full bucket of one limit while the other still refills', () => {
    let now = T0;
    const store = memoryStore({ now: () => now, maxBuckets: 2 });
    store.consume('a', 'e', both, 1);
    now += 100;
    // The per-second bucket is full again (one token in 100 ms); the hourly one is not: only the full one goes.
    store.consume('b', 'e', [perSecond(10)], 1);
    expect(store.stats()).toEqual({ buckets: 2, dropped: 1, evicted: 0 });
    expect(store.peek('a', 'e', both, 5)).toEqual([-1 - 1_000, -1 - (4 * 720_000 + 100)]);
  });
});
