import { createLimiter, RateLimitError } from '@ratecard/core';
import { describe, expect, it } from 'vitest';
import { memoryStore } from '../src/index.js';

const T0 = 1_700_000_000_000;

describe('memoryStore', () => {
  it('is private to the process and answers with plain values', () => {
    const store = memoryStore();
    expect(store.shared).toBe(false);
    expect(store.consume('o', 'e', 10, 1)).toBe(9 * 60_000);
  });

  it('decides through the limiter', async () => {
    const limiter = createLimiter({ store: memoryStore() });
    const decision = await limiter.consume({ organization: 'o', endpoint: 'POST /browsers', plan: 'hobbyist' });
    expect(decision).toMatchObject({ allowed: true, limit: 25, remaining: 24, source: 'store' });
  });

  it('drops buckets that refilled to full when it reaches maxBuckets, losing nothing', () => {
    let now = T0;
    const store = memoryStore({ now: () => now, maxBuckets: 100 });
    for (let i = 0; i < 100; i++) store.consume(`org-${i}`, 'e', 10, 1);
    now += 6_000;
    store.consume('newcomer', 'e', 10, 1);
    expect(store.stats()).toEqual({ buckets: 1, dropped: 100, evicted: 0 });
  });

  it('drops full buckets as new ones are created, long before the bound', () => {
    let now = T0;
    const store = memoryStore({ now: () => now });
    for (let i = 0; i < 1_000; i++) store.consume(`early-${i}`, 'e', 10, 1);
    now += 6_000;
    for (let i = 0; i < 1_000; i++) store.consume(`late-${i}`, 'e', 10, 1);
    // Each creation looked at the two oldest buckets: the 1 000 early ones had refilled, so all were dropped.
    expect(store.stats()).toEqual({ buckets: 1_000, dropped: 1_000, evicted: 0 });
    expect(store.peek('early-0', 'e', 10, 10)).toBe(0);
  });

  it('evicts one bucket only when none is full, counting it', () => {
    let now = T0;
    const store = memoryStore({ now: () => now, maxBuckets: 3 });
    for (const organization of ['a', 'b', 'c']) store.consume(organization, 'e', 10, 10);
    now += 1_000;
    store.consume('d', 'e', 10, 10);
    expect(store.stats()).toEqual({ buckets: 3, dropped: 0, evicted: 1 });
    // The evicted organization starts over with a full bucket, which is why evictions are counted.
    const full = ['a', 'b', 'c'].filter((organization) => store.peek(organization, 'e', 10, 10) === 0);
    expect(full).toHaveLength(1);
  });

  it('stays within maxBuckets under a flood of new organizations', () => {
    const store = memoryStore({ now: () => T0, maxBuckets: 1_000 });
    for (let i = 0; i < 20_000; i++) store.consume(`flood-${i}`, 'e', 10, 1);
    const stats = store.stats();
    expect(stats.buckets).toBe(1_000);
    expect(stats.evicted).toBe(19_000);
  });

  it('reads Date.now on every call by default, so time passing within one turn refills', () => {
    const store = memoryStore();
    store.consume('turn', 'e', 10_000, 10_000);
    const sameTurnStart = Date.now();
    while (Date.now() - sameTurnStart < 7) {
      // Busy-wait past one token's refill time (6 ms at a limit of 10 000/min) without leaving this turn.
    }
    expect(store.consume('turn', 'e', 10_000, 1)).toBeGreaterThanOrEqual(0);
  });

  it('reuses the slot of a reset bucket', () => {
    const store = memoryStore({ now: () => T0 });
    store.consume('a', 'e', 10, 10);
    store.reset('a', 'e');
    expect(store.stats().buckets).toBe(0);
    expect(store.consume('b', 'e', 10, 1)).toBe(540_000);
  });

  it('rejects options it cannot use', () => {
    expect(() => memoryStore({ maxBuckets: 0 })).toThrowError(RateLimitError);
    expect(() => memoryStore({ maxBuckets: 1.5 })).toThrowError(/maxBuckets must be a positive integer, got 1.5/);
    expect(() => memoryStore({ now: 5 as unknown as () => number })).toThrowError(/now must be a function/);
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
    store.consume('a', 'e', 10, 10);
    store.reset('a', 'e');
    store.consume('a', 'e', 10, 10);
    expect(store.consume('a', 'e', 10, 1)).toBeLessThan(0);
    expect(store.stats().buckets).toBe(1);
  });
});
