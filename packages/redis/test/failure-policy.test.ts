import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createLimiter, type Decision, type Limiter, RateLimitError, type StoreErrorPolicy } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisStore } from '../src/index.js';
import { canStartRedis, type RedisServer, startRedis } from '../src/testing.js';
import { consumeRpm, peekRpm } from './support/limits.js';
import { REDIS_EXTERNAL, REDIS_URL, ready, uniqueOrg } from './support/redis.js';

/**
 * The limiter's time budget (given to every limiter whose calls are timed here: the default is 500 ms), and what a
 * call may take beyond it: the deadline timer's 1 ms and event-loop lag.
 */
const BUDGET_MS = 100;
const SLACK_MS = 50;

/**
 * The bound on a call's time from now until `bound()` is read: the budget and slack, plus the worst delay of this
 * process's event loop meanwhile (the timer that answers by policy fires that late), as the fault fleet allows its
 * children. A busy machine does not fail the test; a store that holds a call past its budget on a punctual loop does.
 */
function settleBound(): { bound(): number } {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  return {
    bound: () => {
      delay.disable();
      return BUDGET_MS + SLACK_MS + delay.max / 1e6;
    },
  };
}

/** These tests kill their own server, so they need redis-server even when REDIS_URL names a shared one. */
const canSpawn = REDIS_URL !== null && (!REDIS_EXTERNAL || canStartRedis('@ratecard/redis fault tests'));

const EXPECTED_SOURCE: Record<Exclude<StoreErrorPolicy, 'throw'>, Decision['source']> = {
  fallback: 'fallback',
  deny: 'fail-closed',
  allow: 'fail-open',
};

interface Settled {
  start: number;
  end: number;
  decision?: Decision;
  error?: unknown;
}

/** Keeps `loops` consume calls going until stopped, yielding to the event loop between calls. */
function traffic(limiter: Limiter, loops: number): { settled: Settled[]; stop(): Promise<void> } {
  const settled: Settled[] = [];
  let running = true;
  const org = uniqueOrg('fault');
  const loop = async (): Promise<void> => {
    while (running) {
      const start = performance.now();
      try {
        // A limit no traffic here can exhaust: a denial would come from the deny cache, exact even while Redis is
        // down, and these tests look at what the policy answers.
        const decision = await limiter.consume({
          organization: org,
          endpoint: 'POST /browsers',
          plan: 'enterprise',
          override: 100_000_000,
        });
        settled.push({ start, end: performance.now(), decision });
      } catch (error) {
        settled.push({ start, end: performance.now(), error });
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  const all = Promise.all(Array.from({ length: loops }, loop));
  return {
    settled,
    stop: async () => {
      running = false;
      await all;
    },
  };
}

/** Connection errors are what these tests cause; the client logs unhandled ones. */
function quiet(client: Redis): Redis {
  client.on('error', () => {});
  return client;
}

function slowest(settled: readonly Settled[]): number {
  let max = 0;
  for (const call of settled) max = Math.max(max, call.end - call.start);
  if (process.env.RATECARD_REPORT === '1') console.log(`slowest of ${settled.length} calls: ${max.toFixed(1)} ms`);
  return max;
}

async function until(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function lastDecision(settled: readonly Settled[]): Decision | undefined {
  return settled.at(-1)?.decision;
}

describe.skipIf(!canSpawn)('when Redis fails', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(() => server.stop());

  async function connectedLimiter(policy: StoreErrorPolicy): Promise<{ client: Redis; limiter: Limiter }> {
    const client = quiet(new Redis(server.url));
    await ready(client);
    return {
      client,
      limiter: createLimiter({
        store: redisStore({ client }),
        fallback: memoryStore(),
        onStoreError: policy,
        storeTimeoutMs: BUDGET_MS,
      }),
    };
  }

  for (const policy of ['fallback', 'deny', 'allow', 'throw'] as const) {
    it(`settles every call within the budget while Redis is killed and restarted, policy '${policy}'`, async () => {
      const { client, limiter } = await connectedLimiter(policy);
      const loop = settleBound();
      const calls = traffic(limiter, 8);
      await until('decisions from Redis', () => lastDecision(calls.settled)?.source === 'store');
      const killedAt = performance.now();
      await server.kill();
      await new Promise((resolve) => setTimeout(resolve, 600));
      const restartedAt = performance.now();
      await server.restart();
      await until('decisions from Redis again', () => lastDecision(calls.settled)?.source === 'store');
      await calls.stop();
      client.disconnect();

      expect(slowest(calls.settled)).toBeLessThanOrEqual(loop.bound());
      const down = calls.settled.filter((call) => call.start >= killedAt && call.end <= restartedAt);
      expect(down.length).toBeGreaterThan(20);
      const byPolicy =
        policy === 'throw'
          ? (call: Settled) =>
              call.error instanceof RateLimitError && ['store_unavailable', 'store_timeout'].includes(call.error.code)
          : (call: Settled) => call.decision?.source === EXPECTED_SOURCE[policy];
      expect(down.filter((call) => !byPolicy(call)).slice(0, 5)).toEqual([]);
      expect(lastDecision(calls.settled)?.source).toBe('store');
    });
  }

  it('settles every call within the budget while Redis hangs, and answers from Redis once it resumes', async () => {
    const { client, limiter } = await connectedLimiter('fallback');
    const loop = settleBound();
    const calls = traffic(limiter, 8);
    await until('decisions from Redis', () => lastDecision(calls.settled)?.source === 'store');
    const pausedAt = performance.now();
    process.kill(server.pid as number, 'SIGSTOP');
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      process.kill(server.pid as number, 'SIGCONT');
    }
    const resumedAt = performance.now();
    await until('decisions from Redis again', () => lastDecision(calls.settled)?.source === 'store');
    await calls.stop();
    client.disconnect();

    expect(slowest(calls.settled)).toBeLessThanOrEqual(loop.bound());
    const hung = calls.settled.filter((call) => call.start >= pausedAt && call.end <= resumedAt);
    expect(hung.length).toBeGreaterThan(8);
    expect(hung.filter((call) => call.decision?.source !== 'fallback').slice(0, 5)).toEqual([]);
  });

  it('charges nothing for calls the policy answered while they waited, unsent, behind a hung Redis', async () => {
    const client = quiet(new Redis(server.url));
    await ready(client);
    const store = redisStore({ client });
    const limiter = createLimiter({ store, onStoreError: 'deny' });
    // 60 per minute: a token a second, so the second or so this takes refills at most two.
    const request = {
      organization: uniqueOrg('hung'),
      endpoint: 'POST /browsers',
      plan: 'developer',
      override: 60,
    } as const;
    // A decision first, so that the limiter has read the blocks: the calls below go to the store's queue, not to a
    // read of the blocks that waits for them all.
    expect((await limiter.consume(request)).source).toBe('store');
    const pid = server.pid as number;
    process.kill(pid, 'SIGSTOP');
    let decisions: Decision[];
    try {
      // One call per tick: the first two leave as the two flushes a standalone store keeps outstanding, and are lost
      // in the hang; the other 40 wait in the store's queue.
      const pending: Promise<Decision>[] = [];
      for (let i = 0; i < 42; i++) {
        pending.push(limiter.consume(request));
        await new Promise((resolve) => process.nextTick(resolve));
      }
      decisions = await Promise.all(pending);
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(new Set(decisions.map((decision) => decision.source))).toEqual(new Set(['fail-closed']));
    // Once Redis runs again the two flushes land; the 40 queued calls, long answered by the policy, must not follow.
    await until('the outstanding flushes to return', () => store.stats().sent >= 2);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const held = -1 - (await peekRpm(store, request.organization, request.endpoint, 60, 60));
    expect(Math.floor(held / 60_000)).toBeGreaterThanOrEqual(58);
    // The first decision's reply told the store Redis' clock, so the two flushes that land late charge nothing either
    // (late); with the first decision, three were sent.
    expect(store.stats()).toMatchObject({ sent: 3, expired: 42, late: 2 });
    client.disconnect();
  });

  it('refuses calls at once during a long hang, once a call is past its budget, and queues only those before it', async () => {
    const client = quiet(new Redis(server.url));
    await ready(client);
    const store = redisStore({ client });
    const limiter = createLimiter({
      store,
      fallback: memoryStore(),
      onStoreError: 'fallback',
      storeTimeoutMs: BUDGET_MS,
      log: () => {},
    });
    const request = { organization: uniqueOrg('flood'), endpoint: 'POST /browsers', plan: 'enterprise' } as const;
    // A first call tells the store Redis' clock, so that the script refuses the calls out in the hang once it resumes.
    expect((await limiter.consume(request)).source).toBe('store');
    const pid = server.pid as number;
    process.kill(pid, 'SIGSTOP');
    let queued: number;
    const pending: Promise<Decision>[] = [];
    try {
      // 100 calls every 10 ms for a second: 10 000 calls, about 1 000 per 100 ms budget.
      for (let tick = 0; tick < 100; tick++) {
        for (let i = 0; i < 100; i++) pending.push(limiter.consume(request));
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      queued = store.stats().queued;
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const decisions = await Promise.all(pending);
    if (process.env.RATECARD_REPORT === '1') console.log(`queued at the end of the hang: ${queued}`, store.stats());
    expect(new Set(decisions.map((decision) => decision.source))).toEqual(new Set(['fallback']));
    // The calls of the first budget wait (queued, then dropped unsent); every later one is refused when it is made.
    expect(queued).toBeLessThanOrEqual(2_000);
    expect(store.stats().unavailable).toBeGreaterThan(8_000);
    expect(store.stats().expired).toBeLessThan(2_000);
    // The calls queued when the first call out passed its budget were dropped unsent then; the answer to the calls out
    // (each refused by the script, which got them late) ends the refusals.
    expect(store.stats().queued).toBe(0);
    await until('the calls out to come back', () => store.stats().late === store.stats().sent - 1);
    expect((await limiter.consume(request)).source).toBe('store');
    client.disconnect();
  });

  it('waits for a client that is still connecting, within the budget, and answers from Redis', async () => {
    const client = quiet(new Redis(server.url));
    const store = redisStore({ client });
    const limiter = createLimiter({ store, fallback: memoryStore(), storeTimeoutMs: BUDGET_MS });
    const request = { organization: uniqueOrg('early'), endpoint: 'POST /browsers', plan: 'startup' } as const;
    expect(client.status).not.toBe('ready');
    const loop = settleBound();
    const start = performance.now();
    const early = await Promise.all(Array.from({ length: 20 }, () => limiter.consume(request)));
    expect(performance.now() - start).toBeLessThanOrEqual(loop.bound());
    expect(early.map((decision) => decision.source)).toEqual(Array(20).fill('store'));
    expect(early.at(-1)?.remaining).toBe(80);
    expect(store.stats()).toMatchObject({ unavailable: 0, sent: 20 });
    client.disconnect();
  });

  it('asks a lazyConnect client to connect, and answers its first call from Redis', async () => {
    const client = quiet(new Redis(server.url, { lazyConnect: true }));
    const store = redisStore({ client });
    const limiter = createLimiter({ store, fallback: memoryStore() });
    const request = { organization: uniqueOrg('lazy'), endpoint: 'POST /browsers', plan: 'startup' } as const;
    expect((await limiter.consume(request)).source).toBe('store');
    client.disconnect();
  });

  it('answers by policy within the budget when the client never connects, and sends nothing later', async () => {
    const client = quiet(new Redis({ port: 1, host: '127.0.0.1', retryStrategy: () => 50 }));
    const store = redisStore({ client });
    const limiter = createLimiter({ store, fallback: memoryStore(), storeTimeoutMs: BUDGET_MS });
    const request = { organization: uniqueOrg('never'), endpoint: 'POST /browsers', plan: 'startup' } as const;
    const loop = settleBound();
    const start = performance.now();
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.consume(request)));
    expect(performance.now() - start).toBeLessThanOrEqual(loop.bound());
    expect(new Set(decisions.map((decision) => decision.source))).toEqual(new Set(['fallback']));
    await new Promise((resolve) => setTimeout(resolve, 20));
    // A fresh limiter's decisions wait for its first read of the blocks, refused once the client's first attempt
    // failed (see test/never-connected.test.ts): no consume is made, none is left to expire, and the stats (which count
    // consume calls) count none.
    expect(store.stats()).toMatchObject({ sent: 0, queued: 0, expired: 0, unavailable: 0 });
    client.disconnect();
  });

  it('refuses a call at once with store_unavailable while the client is not ready', async () => {
    const client = new Redis(server.url, { lazyConnect: true });
    client.disconnect();
    const store = redisStore({ client });
    const refusal = await Promise.resolve(consumeRpm(store, uniqueOrg('closed'), 'e', 10, 1)).catch((error) => error);
    expect(refusal).toBeInstanceOf(RateLimitError);
    expect(refusal.code).toBe('store_unavailable');
    expect(store.stats()).toMatchObject({ unavailable: 1, sent: 0 });
  });

  it('tells a node-redis client never connected to connect, and logs so once under the fallback', async () => {
    const client = createClient({ url: server.url });
    const store = redisStore({ client });
    const refusal = await Promise.resolve(consumeRpm(store, uniqueOrg('unopened'), 'e', 10, 1)).catch((error) => error);
    expect(refusal).toBeInstanceOf(RateLimitError);
    expect(refusal.code).toBe('store_unavailable');
    expect(refusal.message).toBe(
      'ratecard: the node-redis client is not open: connect it with `await client.connect()`, or it was closed',
    );
    const lines: string[] = [];
    const limiter = createLimiter({ store, fallback: memoryStore(), log: (line) => lines.push(line) });
    const request = { organization: uniqueOrg('unopened'), endpoint: 'POST /browsers', plan: 'startup' } as const;
    expect((await limiter.consume(request)).source).toBe('fallback');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('connect it with `await client.connect()`');
  });
});
