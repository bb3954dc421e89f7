import {
  concurrency,
  createLimiter,
  type LeaseEvent,
  type Limit,
  type LimiterOptions,
  MAX_LEASE_MS,
  perMinute,
  RateLimitError,
  type Reservation,
  type Store,
} from '@ratecard/core';
import { ExactBucketModel } from '@ratecard/core/testing';
import FakeTimers from '@sinonjs/fake-timers';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { memoryStore } from '../src/index.js';
import { rejection } from './support.js';

const T0 = 1_700_000_000_000;
let clock: ReturnType<typeof FakeTimers.install>;

beforeEach(() => {
  clock = FakeTimers.install({ now: T0, toFake: ['Date'] });
});

afterEach(() => {
  clock.uninstall();
});

const sessions = concurrency(2, { name: 'sessions' });
const starts = perMinute(10);
const tokens = perMinute(100_000, { name: 'tokens' });

function make(options: Partial<LimiterOptions> = {}) {
  const store = memoryStore({ now: () => Date.now() });
  const events: LeaseEvent[] = [];
  const limiter = createLimiter({
    store,
    plans: { free: [sessions, starts], llm: [perMinute(60), tokens] },
    endpoints: { 'POST /sessions': 'enforce', 'POST /chat': 'enforce', 'POST /shadow': 'shadow' },
    onLease: (event) => events.push(event),
    ...options,
  });
  return { limiter, store, events };
}

const session = { organization: 'org', endpoint: 'POST /sessions', plan: 'free' };
const chat = { organization: 'key', endpoint: 'POST /chat', plan: 'llm' };

describe('limiter.reserve', () => {
  it('holds two sessions at once, refuses a third with Retry-After 1, and admits it once one settles', async () => {
    const { limiter, events } = make();
    const a = await limiter.reserve(session);
    const b = await limiter.reserve(session);
    expect([a.allowed, b.allowed, a.held, b.held]).toEqual([true, true, true, true]);
    expect(a.expiresAt).toBe(T0 + 60_000);
    const c = await limiter.reserve(session);
    expect(c).toMatchObject({ allowed: false, limited: true, retryAfter: 1, held: false, expiresAt: 0 });
    expect(await c.settle()).toBe(false);
    expect(await a.settle()).toBe(true);
    expect(await a.settle()).toBe(false);
    expect(await a.cancel()).toBe(false);
    expect(a.held).toBe(false);
    expect((await limiter.reserve(session)).allowed).toBe(true);
    expect(events).toEqual(['settled']);
  });

  it('keeps a session with extend, and frees its slot when it expires unextended', async () => {
    const { limiter, events } = make();
    const a = await limiter.reserve({ ...session, leaseMs: 10_000 });
    await limiter.reserve({ ...session, leaseMs: 10_000 });
    clock.tick(9_000);
    expect(await a.extend(10_000)).toBe(true);
    expect(a.expiresAt).toBe(T0 + 19_000);
    clock.tick(1_000);
    // The other lease expired at 10 s: its slot is free, a's is held.
    const c = await limiter.reserve(session);
    expect(c.allowed).toBe(true);
    expect((await limiter.reserve(session)).allowed).toBe(false);
    clock.tick(9_000);
    expect(await a.extend(10_000)).toBe(false);
    expect(a.held).toBe(false);
    expect(events).toEqual(['extended', 'expired']);
  });

  it('counts 10 session starts a minute beside the slots: a settled session still spent its start', async () => {
    const { limiter } = make();
    for (let i = 0; i < 10; i++) expect(await (await limiter.reserve(session)).settle()).toBe(true);
    const refused = await limiter.reserve(session);
    expect(refused).toMatchObject({ allowed: false, retryAfter: 6, limit: 10 });
  });

  it('reserves max tokens and settles the usage: the unused tokens go back', async () => {
    const { limiter } = make();
    const r = await limiter.reserve({ ...chat, cost: { tokens: 4_000 } });
    expect(r.cost).toEqual([1, 4_000]);
    expect(r.remaining).toBe(59);
    expect(await r.settle({ tokens: 523 })).toBe(true);
    const states = await limiter.peek({ ...chat, cost: { tokens: 99_477 } });
    expect(states.allowed).toBe(true);
    expect((await limiter.peek({ ...chat, cost: { tokens: 99_478 } })).allowed).toBe(false);
  });

  it('takes a usage past the reservation below empty, and later requests wait for it to refill', async () => {
    const { limiter } = make();
    const r = await limiter.reserve({ ...chat, cost: { tokens: 100_000 } });
    expect(await r.settle({ tokens: 150_000 })).toBe(true);
    const refused = await limiter.consume({ ...chat, cost: { tokens: 1 } });
    // 50 000 tokens in debt, one more needed: 50 001 at 100 000 a minute is 30.0006 s.
    expect(refused).toMatchObject({ allowed: false, retryAfter: 31, remaining: 0 });
    clock.tick(30_000);
    expect((await limiter.consume({ ...chat, cost: { tokens: 1 } })).allowed).toBe(false);
    clock.tick(1_000);
    expect((await limiter.consume({ ...chat, cost: { tokens: 1 } })).allowed).toBe(true);
  });

  it('cancels: every token back and the slot free, as if the request had not been admitted', async () => {
    const { limiter, events } = make();
    const r = await limiter.reserve({ ...chat, cost: { tokens: 60_000 } });
    expect(await r.cancel()).toBe(true);
    expect((await limiter.peek({ ...chat, cost: { tokens: 100_000 } })).allowed).toBe(true);
    expect(events).toEqual(['cancelled']);
  });

  it('refuses consume of a request with a concurrency limit, pointing at reserve, charging nothing', async () => {
    const { limiter } = make();
    const error = await rejection(limiter.consume(session));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toMatch(/concurrency limit sessions.*limiter\.reserve/);
    expect((await limiter.peek({ ...session, cost: { '1m': 10 } })).allowed).toBe(true);
  });

  it('checks costs by name, lease lengths and settle amounts, charging nothing for bad input', async () => {
    const { limiter } = make();
    for (const cost of [{ token: 1 }, { tokens: 0 }, { tokens: 1.5 }, [1], 'x', null]) {
      expect((await rejection(limiter.reserve({ ...chat, cost: cost as never }))).code).toBe('invalid_argument');
    }
    expect((await rejection(limiter.reserve({ ...chat, cost: { tokens: 100_001 } }))).code).toBe('cost_exceeds_limit');
    for (const leaseMs of [0, -1, 1.5, MAX_LEASE_MS + 1, '5' as never]) {
      expect((await rejection(limiter.reserve({ ...chat, leaseMs }))).code).toBe('invalid_argument');
    }
    const r = await limiter.reserve(chat);
    for (const actual of [-1, 0.5, { nope: 1 }, { tokens: -1 }, 'x'] as never[]) {
      expect((await rejection(r.settle(actual))).code).toBe('invalid_argument');
    }
    expect((await rejection(r.extend(0))).code).toBe('invalid_argument');
    // Still held, and nothing else was charged: a full minute's tokens but the one reserved.
    expect(r.held).toBe(true);
    expect((await limiter.peek({ ...chat, cost: { '1m': 59 } })).allowed).toBe(true);
    expect((await limiter.peek({ ...chat, cost: { '1m': 60 } })).allowed).toBe(false);
    expect(await r.settle()).toBe(true);
  });

  it('holds nothing for an unlimited endpoint, a shadow refusal, or the policy allow', async () => {
    const { limiter } = make();
    const unlimited = await limiter.reserve({ organization: 'o', endpoint: 'GET /x', plan: 'free' });
    expect(unlimited).toMatchObject({ mode: 'unlimited', allowed: true, held: false });
    expect(await unlimited.settle()).toBe(false);
    const shadow = { organization: 'o', endpoint: 'POST /shadow', plan: 'free' };
    await limiter.reserve(shadow);
    await limiter.reserve(shadow);
    const over = await limiter.reserve(shadow);
    expect(over).toMatchObject({ mode: 'shadow', allowed: true, limited: true, held: false });

    const failing = brokenStore();
    const open = createLimiter({ store: failing, onStoreError: 'allow', log: () => {} });
    const allowed = await open.reserve({ organization: 'o', endpoint: 'POST /x', limits: sessions });
    expect(allowed).toMatchObject({ allowed: true, source: 'fail-open', held: false });
  });

  it('reserves on the fallback when the store fails, and settles there', async () => {
    const fallback = memoryStore({ now: () => Date.now() });
    const limiter = createLimiter({ store: brokenStore(), fallback, log: () => {} });
    const request = { organization: 'o', endpoint: 'POST /x', limits: [concurrency(1)] };
    const r = await limiter.reserve(request);
    expect(r).toMatchObject({ allowed: true, source: 'fallback', held: true });
    expect((await limiter.reserve(request)).allowed).toBe(false);
    expect(await r.settle()).toBe(true);
    expect((await limiter.reserve(request)).allowed).toBe(true);
  });

  it('refuses to reserve on a store without settle, before anything is charged', async () => {
    const inner = memoryStore({ now: () => Date.now() });
    const old: Store = { ...bind(inner), settle: undefined as never };
    const limiter = createLimiter({ store: old });
    expect((await rejection(limiter.reserve({ organization: 'o', endpoint: 'POST /x', limits: starts }))).code).toBe(
      'invalid_option',
    );
    expect(inner.stats().buckets).toBe(0);
  });
});

describe('the memory store keeps leases per key', () => {
  it('drops the entries of keys left without leases once they are many, and leases go on as before', async () => {
    const store = memoryStore({ now: () => Date.now() });
    const limits = [concurrency(1)];
    // 3 000 keys each take a lease and settle it: their entries are dropped together along the way.
    for (let i = 0; i < 3_000; i++) {
      expect(store.consume(`o${i}`, 'e', limits, [1], undefined, { id: `a${i}`, ms: 60_000 })).toEqual([0]);
      expect(store.settle(`o${i}`, 'e', limits, { id: `a${i}`, actual: 0 })).toBe(true);
    }
    for (const i of [0, 1_500, 2_999]) {
      expect(store.consume(`o${i}`, 'e', limits, [1], undefined, { id: `b${i}`, ms: 60_000 })).toEqual([0]);
      expect(store.consume(`o${i}`, 'e', limits, [1], undefined, { id: `c${i}`, ms: 60_000 })).toEqual([-1]);
      expect(store.settle(`o${i}`, 'e', limits, { id: `b${i}`, actual: 0 })).toBe(true);
      expect(store.settle(`o${i}`, 'e', limits, { id: `b${i}`, actual: 0 })).toBe(false);
    }
  });
});

describe('lease properties (memory store, fake timers)', () => {
  it('12. never more than n leases held, and every decision and settle equals the exact model', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            gap: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3_000 }), fc.integer({ min: 3_000, max: 40_000 })),
            op: fc.constantFrom('reserve', 'reserve', 'settle', 'cancel', 'extend', 'consume'),
            tokens: fc.integer({ min: 1, max: 40 }),
            actual: fc.integer({ min: 0, max: 60 }),
            ms: fc.constantFrom(1_000, 10_000, 60_000),
            pick: fc.nat(),
          }),
          { maxLength: 80 },
        ),
        async (schedule) => {
          clock.setSystemTime(T0);
          const cap = concurrency(3, { name: 'cap' });
          const bucket = perMinute(50, { name: 'tok' });
          const limits: Limit[] = [cap, bucket];
          const limiter = createLimiter({ store: memoryStore({ now: () => Date.now() }), plans: { p: limits } });
          const model = new ExactBucketModel();
          const open: { r: Reservation; id: string; until: number }[] = [];
          for (const [step, s] of schedule.entries()) {
            clock.tick(s.gap);
            const now = Date.now();
            const request = { organization: 'o', endpoint: 'POST /x', plan: 'p' };
            if (s.op === 'reserve') {
              const id = `s${step}`;
              const r = await limiter.reserve({ ...request, cost: { tok: s.tokens }, leaseMs: s.ms });
              const expected = model.reserve('k', now, limits, [1, s.tokens], id, s.ms);
              expect(r.allowed).toBe(!expected.limited);
              expect(r.retryAfter).toBe(expected.retryAfter);
              if (r.allowed) open.push({ r, id, until: now + s.ms });
            } else if (s.op === 'consume') {
              const d = await limiter.peek({ ...request, cost: { tok: s.tokens } });
              const expected = model.peekAll('k', now, limits, [1, s.tokens]);
              expect(d.allowed).toBe(!expected.limited);
              expect(d.remaining).toBe(expected.remaining);
            } else if (open.length > 0) {
              const lease = open[s.pick % open.length] as (typeof open)[number];
              let answer: boolean;
              let expected: boolean;
              if (s.op === 'extend') {
                answer = await lease.r.extend(s.ms);
                expected = model.extend('k', now, lease.id, s.ms);
                if (expected) lease.until = now + s.ms;
              } else {
                const actual = s.op === 'cancel' ? 0 : s.actual;
                answer = s.op === 'cancel' ? await lease.r.cancel() : await lease.r.settle({ tok: actual });
                expected = model.settle('k', now, limits, lease.id, [1, actual]);
                open.splice(open.indexOf(lease), 1);
              }
              expect(answer).toBe(expected);
            }
            // Leases this test holds and has not seen expire: never more than the cap.
            const held = open.filter((lease) => lease.until > Date.now() && lease.r.held).length;
            expect(held).toBeLessThanOrEqual(3);
          }
        },
      ),
      { numRuns: 120 },
    );
  });

  it('13. refunds: a bucket never holds more than had each lease cost its actual from the start', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            gap: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 5_000, max: 60_000 })),
            cost: fc.integer({ min: 1, max: 10 }),
            used: fc.integer({ min: 0, max: 10 }),
            hold: fc.integer({ min: 0, max: 3 }),
          }),
          { maxLength: 40 },
        ),
        async (schedule) => {
          clock.setSystemTime(T0);
          // U = 1 000, R = 1: a token a second, 10 at most.
          const limit = perMinute(60, { burst: 10 });
          const limiter = createLimiter({ store: memoryStore({ now: () => Date.now() }), plans: { p: limit } });
          const request = { organization: 'o', endpoint: 'POST /x', plan: 'p' };
          // The bucket had every admitted lease cost its actual at its reserve: units, refilled at 1 a ms up to 10 000.
          let world = 10_000;
          let worldAt = Date.now();
          const pending: { r: Reservation; actual: number; left: number }[] = [];
          const check = async () => {
            const now = Date.now();
            const would = Math.min(10_000, world + (now - worldAt));
            const peek = await limiter.peek({ ...request, cost: 1 });
            const held = peek.allowed ? (peek.remaining + 1) * 1_000 : -1;
            // Whole tokens: the bucket's never exceed the world's.
            expect(held).toBeLessThanOrEqual(Math.floor(would / 1_000) * 1_000);
          };
          for (const s of schedule) {
            clock.tick(s.gap);
            for (const p of [...pending]) {
              if (--p.left < 0) {
                await p.r.settle(p.actual);
                pending.splice(pending.indexOf(p), 1);
              }
            }
            const r = await limiter.reserve({ ...request, cost: s.cost, leaseMs: MAX_LEASE_MS });
            if (r.allowed) {
              const actual = Math.min(s.used, s.cost);
              const now = Date.now();
              world = Math.min(10_000, world + (now - worldAt)) - actual * 1_000;
              worldAt = now;
              pending.push({ r, actual, left: s.hold });
            }
            await check();
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});

/** A store whose every call rejects, as a Redis that is down. */
function brokenStore(): Store {
  const down = () => Promise.reject(new Error('connection refused'));
  return {
    shared: true,
    consume: down,
    settle: down,
    peek: down,
    reset: down,
    inspect: down,
    blocks: down,
    close: () => undefined,
  };
}

/** A store's methods bound to it, as a plain object. */
function bind(store: Store): Store {
  return {
    shared: store.shared,
    consume: store.consume.bind(store),
    settle: store.settle.bind(store),
    peek: store.peek.bind(store),
    reset: store.reset.bind(store),
    inspect: store.inspect.bind(store),
    blocks: store.blocks.bind(store),
    close: store.close.bind(store),
  };
}
