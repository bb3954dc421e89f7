import { concurrency, createLimiter, perMinute, quota, RateLimitError, type Store } from '@ratecard/core';
import FakeTimers from '@sinonjs/fake-timers';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { memoryStore } from '../src/index.js';
import { rejection } from './support.js';

const T0 = Date.parse('2026-11-27T12:00:00Z');
let clock: ReturnType<typeof FakeTimers.install>;

beforeEach(() => {
  clock = FakeTimers.install({ now: T0, toFake: ['Date'] });
});

afterEach(() => {
  clock.uninstall();
});

/**
 * One memory store seen as a store shared by processes: its answers come back as promises, as a Redis store's do, and
 * it says it is shared, so each limiter over it reads blocks as a process does (at most a second apart).
 */
function sharedStore(): Store {
  const store = memoryStore({ now: () => Date.now() });
  const later =
    <A extends unknown[], R>(call: (...args: A) => R) =>
    (...args: A): Promise<R> =>
      Promise.resolve().then(() => call(...args));
  return {
    shared: true,
    consume: later(store.consume.bind(store)),
    settle: later(store.settle.bind(store)),
    peek: later(store.peek.bind(store)),
    reset: later(store.reset.bind(store)),
    inspect: later(store.inspect.bind(store)),
    blocks: later(store.blocks.bind(store)),
    close: () => undefined,
  };
}

const options = { plans: { p: perMinute(10) }, onStoreError: 'allow' as const };
const ask = { organization: 'acme', endpoint: 'POST /x', plan: 'p' };

describe('limiter.block and unblock', () => {
  it('refuses the organization until the block ends, with its reason, charging nothing', async () => {
    const limiter = createLimiter({ store: memoryStore({ now: () => Date.now() }), ...options });
    await limiter.block({ organization: 'acme', forMs: 90_500, reason: 'abuse report 17' });
    const refused = await limiter.consume(ask);
    expect(refused).toMatchObject({ allowed: false, limited: true, source: 'block', retryAfter: 91 });
    expect(refused.block).toEqual({ reason: 'abuse report 17', until: T0 + 90_500 });
    expect((await limiter.consume({ ...ask, organization: 'other' })).allowed).toBe(true);
    clock.tick(90_500);
    expect(await limiter.consume(ask)).toMatchObject({ allowed: true, remaining: 9 });
  });

  it("blocks one endpoint's rule, and unblock lifts it", async () => {
    const endpoints = { 'POST /x': 'enforce', 'POST /y': 'enforce' } as const;
    const limiter = createLimiter({ store: memoryStore({ now: () => Date.now() }), ...options, endpoints });
    await limiter.block({ organization: 'acme', endpoint: 'POST /x', forMs: 60_000 });
    expect((await limiter.consume(ask)).source).toBe('block');
    expect((await limiter.consume({ ...ask, endpoint: 'POST /y' })).source).toBe('store');
    await limiter.unblock({ organization: 'acme', endpoint: 'POST /x' });
    expect((await limiter.consume(ask)).source).toBe('store');
  });

  it('reaches another process sharing the store within a second, both ways', async () => {
    const store = sharedStore();
    const operator = createLimiter({ store, ...options });
    const app = createLimiter({ store, ...options });
    expect((await app.consume(ask)).source).toBe('store');
    await operator.block({ organization: 'acme', forMs: 600_000, reason: 'incident' });
    // The app read the blocks at T0: until a second has passed it may decide on that read.
    // At 999 ms it decides on that read (and starts the next one in the background); from 1 s it waits for a read.
    clock.tick(999);
    expect((await app.consume(ask)).source).toBe('store');
    clock.tick(1);
    expect((await app.consume(ask)).source).toBe('block');
    await operator.unblock({ organization: 'acme' });
    clock.tick(1_000);
    expect((await app.consume(ask)).source).toBe('store');
  });

  it('refuses bad input, changing nothing', async () => {
    const limiter = createLimiter({ store: memoryStore({ now: () => Date.now() }), ...options });
    for (const ref of [
      { organization: 'acme', forMs: 0 },
      { organization: 'acme', forMs: 1.5 },
      { organization: 'acme', forMs: 60_000, reason: 'x'.repeat(257) },
      { organization: '', forMs: 60_000 },
      { organization: 'acme', forMs: 60_000, until: 5 },
    ]) {
      expect((await rejection(limiter.block(ref as never))).code).toBe('invalid_argument');
    }
    expect((await limiter.consume(ask)).source).toBe('store');
  });
});

describe('limiter.inspect', () => {
  it('answers every limit and lease stored under a key in tokens, without the plan', async () => {
    const store = memoryStore({ now: () => Date.now() });
    const limiter = createLimiter({
      store,
      plans: { p: [perMinute(10), quota(100, { per: 'day' }), concurrency(2, { name: 'sessions' })] },
    });
    const lease = await limiter.reserve({ ...ask, cost: { '1m': 3 } });
    clock.tick(6_000);
    const seen = await limiter.inspect({ organization: 'acme', endpoint: 'POST /x' });
    expect(seen.at).toBe(T0 + 6_000);
    expect(seen.endpoint).toBe('ALL /*');
    expect(seen.leases).toEqual([
      {
        id: expect.any(String),
        expiresAt: T0 + 60_000,
        holds: { '1m': 3, day: 1, sessions: 1 },
      },
    ]);
    await lease.settle();
    const after = await limiter.inspect({ organization: 'acme', endpoint: 'POST /x' });
    const byName = Object.fromEntries(after.limits.map((limit) => [limit.name, limit]));
    // The bucket was full under the 3 set aside (nothing refills above full), and the settle charged them: 7.
    expect(byName['1m']).toMatchObject({ kind: 'bucket', capacity: 10, tokens: 7, reserved: 0 });
    expect(byName.day).toMatchObject({
      kind: 'quota',
      capacity: 100,
      tokens: 99,
      fullAt: Date.parse('2026-11-28T00:00:00Z'),
    });
    expect(after.leases).toEqual([]);
  });
});
