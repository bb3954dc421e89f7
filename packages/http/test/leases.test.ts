import { Agent, createServer, request as httpRequest, type Server } from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import {
  concurrency,
  createLimiter,
  type LeaseEvent,
  type Limiter,
  perMinute,
  RateLimitError,
  type Store,
} from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import express, { type NextFunction, type Request, type Response } from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { parseList } from 'structured-headers';
import { afterEach, describe, expect, it } from 'vitest';
import type { ActualCost, Identity } from '../src/evaluate.js';
import { rateLimit as expressRateLimit } from '../src/express.js';
import { rateLimit as fastifyRateLimit } from '../src/fastify.js';
import { rateLimit as honoRateLimit } from '../src/hono.js';
import { withRateLimit } from '../src/node.js';
import { listen, testClock } from './support.js';

const DENIAL = '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}';

/** What the handler answers: a body, and the tokens it used in `x-tokens` (read by settle) when given. */
interface Answer {
  body: string;
  tokens?: string;
}

/** What each adapter's lease app is built from. */
interface LeaseConfig {
  limiter: Limiter;
  identify: () => Identity;
  /** The actual cost from the response's `x-tokens`, as each framework's response gives it. */
  settle: (tokens: string | undefined) => ActualCost | undefined;
  onError: (error: unknown) => void;
  /** The handler's work; a rejection is thrown by the handler. */
  answer: (method: string, path: string) => Promise<Answer>;
  ietf: boolean;
}

interface LeaseAdapter {
  name: string;
  start: (config: LeaseConfig) => Promise<{ url: string; close: () => Promise<void> }>;
  /** The framework answers a handler's exception (500); node:http leaves it to the process. */
  answersThrows: boolean;
}

const headerText = (value: unknown): string | undefined => (value === undefined ? undefined : String(value));

const adapters: LeaseAdapter[] = [
  {
    name: 'node:http',
    answersThrows: false,
    start: (config) => {
      const listener = withRateLimit(
        async (request, response) => {
          const answer = await config.answer(request.method ?? 'GET', request.url ?? '/');
          if (answer.tokens !== undefined) response.setHeader('x-tokens', answer.tokens);
          response.end(answer.body);
        },
        {
          limiter: config.limiter,
          identify: config.identify,
          onError: config.onError,
          ietf: config.ietf,
          lease: { settle: (_request, response) => config.settle(headerText(response.getHeader('x-tokens'))) },
        },
      );
      return listen(createServer(listener));
    },
  },
  {
    name: 'Express',
    answersThrows: true,
    start: (config) => {
      const app = express();
      app.use(
        expressRateLimit({
          limiter: config.limiter,
          identify: config.identify,
          onError: config.onError,
          ietf: config.ietf,
          lease: { settle: (_request, response) => config.settle(headerText(response.getHeader('x-tokens'))) },
        }),
      );
      app.use(async (request: Request, response: Response) => {
        const answer = await config.answer(request.method, request.url);
        if (answer.tokens !== undefined) response.set('x-tokens', answer.tokens);
        response.send(answer.body);
      });
      app.use((error: Error, _request: Request, response: Response, _next: NextFunction) => {
        response.status(500).send(error.message);
      });
      return listen(createServer(app));
    },
  },
  {
    name: 'Fastify',
    answersThrows: true,
    start: async (config) => {
      const app = Fastify();
      await app.register(fastifyRateLimit, {
        limiter: config.limiter,
        identify: config.identify,
        onError: config.onError,
        ietf: config.ietf,
        lease: { settle: (_request, reply) => config.settle(headerText(reply.getHeader('x-tokens'))) },
      });
      app.all('/*', async (request, reply) => {
        const answer = await config.answer(request.method, request.url);
        if (answer.tokens !== undefined) reply.header('x-tokens', answer.tokens);
        return answer.body;
      });
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      return { url, close: () => app.close() };
    },
  },
  {
    name: 'Hono',
    answersThrows: true,
    start: (config) => {
      const app = new Hono();
      app.use(
        honoRateLimit({
          limiter: config.limiter,
          identify: config.identify,
          onError: config.onError,
          ietf: config.ietf,
          lease: { settle: (_c, response) => config.settle(response.headers.get('x-tokens') ?? undefined) },
        }),
      );
      app.all('*', async (c) => {
        const answer = await config.answer(c.req.method, new URL(c.req.url).pathname);
        if (answer.tokens !== undefined) c.header('x-tokens', answer.tokens);
        return c.text(answer.body);
      });
      return listen(createAdaptorServer({ fetch: app.fetch }) as Server);
    },
  },
];

/** A store that counts the calls it passes on: a request decided twice, or a lease settled twice, shows here. */
function counted(store: Store): { store: Store; calls: { consume: number; settle: number } } {
  const calls = { consume: 0, settle: 0 };
  return {
    calls,
    store: {
      shared: store.shared,
      consume: (...args) => {
        calls.consume++;
        return store.consume(...args);
      },
      settle: (...args) => {
        calls.settle++;
        return store.settle(...args);
      },
      peek: (...args) => store.peek(...args),
      reset: (...args) => store.reset(...args),
      inspect: (...args) => store.inspect(...args),
      blocks: (...args) => store.blocks(...args),
      close: () => store.close(),
    },
  };
}

/** Lease events as onLease reports them, and a wait for the n-th: no sleeping, whatever the machine's speed. */
function leaseLog(): {
  events: LeaseEvent[];
  onLease: (event: LeaseEvent) => void;
  count: (n: number) => Promise<void>;
} {
  const events: LeaseEvent[] = [];
  const waiting: { n: number; resolve: () => void }[] = [];
  return {
    events,
    onLease: (event) => {
      events.push(event);
      for (const waiter of waiting.filter((each) => each.n <= events.length)) {
        waiting.splice(waiting.indexOf(waiter), 1);
        waiter.resolve();
      }
    },
    count: (n) => (events.length >= n ? Promise.resolve() : new Promise((resolve) => waiting.push({ n, resolve }))),
  };
}

/** A promise the test resolves by hand. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

const slots = concurrency(1, { name: 'slots' });
const tokens = perMinute(100, { name: 'tokens' });

describe.each(adapters)('$name with lease', (adapter) => {
  let running: { close: () => Promise<void> } | undefined;

  afterEach(async () => {
    await running?.close();
    running = undefined;
  });

  async function start(
    options: {
      answer?: LeaseConfig['answer'];
      identify?: LeaseConfig['identify'];
      settle?: LeaseConfig['settle'];
      ietf?: boolean;
    } = {},
  ) {
    const clock = testClock();
    const { store, calls } = counted(memoryStore({ now: clock.now }));
    const log = leaseLog();
    const limiter = createLimiter({ store, plans: { free: tokens }, onLease: log.onLease });
    const errors: unknown[] = [];
    const app = await adapter.start({
      limiter,
      // One slot and 100 tokens per organization; each request reserves 10 tokens.
      identify: options.identify ?? (() => ({ organization: 'org-1', limits: [slots, tokens], cost: { tokens: 10 } })),
      settle: options.settle ?? ((used) => (used === undefined ? undefined : { tokens: Number(used) })),
      onError: (error) => errors.push(error),
      answer: options.answer ?? (async () => ({ body: 'ok', tokens: '3' })),
      ietf: options.ietf ?? false,
    });
    running = app;
    return { url: app.url, calls, log, errors };
  }

  it('settles each request once, after its response, with the actual cost its settle reads off the response', async () => {
    const app = await start();
    const first = await fetch(`${app.url}/chat`, { method: 'POST' });
    expect(first.status).toBe(200);
    expect(await first.text()).toBe('ok');
    // 10 tokens set aside of 100: the token bucket is what X-RateLimit-* state.
    expect(first.headers.get('x-ratelimit-limit')).toBe('100');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('90');
    await app.log.count(1);
    const second = await fetch(`${app.url}/chat`, { method: 'POST' });
    await second.arrayBuffer();
    // The first was settled at 3: 97 left, 10 set aside again.
    expect(second.headers.get('x-ratelimit-remaining')).toBe('87');
    await app.log.count(2);
    expect(app.log.events).toEqual(['settled', 'settled']);
    expect(app.calls).toEqual({ consume: 2, settle: 2 });
    expect(app.errors).toEqual([]);
  });

  it('settles each of several requests on one kept-alive connection once, freeing the slot for the next', async () => {
    const app = await start();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const { hostname, port } = new URL(app.url);
    const send = () =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        const request = httpRequest({ hostname, port, method: 'POST', path: '/chat', agent }, (response) => {
          response.resume();
          response.on('end', () => resolve({ status: response.statusCode ?? 0, reused: request.reusedSocket }));
        });
        request.on('error', reject);
        request.end();
      });
    const seen: { status: number; reused: boolean }[] = [];
    for (let i = 1; i <= 3; i++) {
      seen.push(await send());
      await app.log.count(i);
    }
    agent.destroy();
    expect(seen).toEqual([
      { status: 200, reused: false },
      { status: 200, reused: true },
      { status: 200, reused: true },
    ]);
    expect(app.calls).toEqual({ consume: 3, settle: 3 });
  });

  it('settles a HEAD request once, with the cost its settle reads', async () => {
    const app = await start();
    const head = await fetch(`${app.url}/chat`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    await app.log.count(1);
    const next = await fetch(`${app.url}/chat`, { method: 'POST' });
    await next.arrayBuffer();
    expect(next.headers.get('x-ratelimit-remaining')).toBe('87');
    await app.log.count(2);
    expect(app.calls).toEqual({ consume: 2, settle: 2 });
  });

  if (adapter.answersThrows) {
    it('settles a request whose handler throws once, as reserved when settle finds no cost', async () => {
      const app = await start({
        answer: async (_method, path) => {
          if (path === '/broken') throw new Error('handler failed');
          return { body: 'ok', tokens: '3' };
        },
      });
      const broken = await fetch(`${app.url}/broken`, { method: 'POST' });
      expect(broken.status).toBe(500);
      await broken.arrayBuffer();
      await app.log.count(1);
      const next = await fetch(`${app.url}/chat`, { method: 'POST' });
      await next.arrayBuffer();
      // The failed request kept its 10 reserved: 90 left, 10 set aside again.
      expect(next.headers.get('x-ratelimit-remaining')).toBe('80');
      await app.log.count(2);
      expect(app.calls).toEqual({ consume: 2, settle: 2 });
    });
  }

  it('settles a request whose client went away before the handler answered once, as reserved, and frees its slot', async () => {
    const slow = gate();
    const reached = gate();
    const answered = gate();
    const app = await start({
      answer: async (_method, path) => {
        if (path !== '/slow') return { body: 'ok', tokens: '3' };
        reached.open();
        await slow.promise;
        answered.open();
        return { body: 'late', tokens: '1' };
      },
    });
    const client = new AbortController();
    const abandoned = fetch(`${app.url}/slow`, { method: 'POST', signal: client.signal }).catch(
      (error: unknown) => error,
    );
    await reached.promise;
    client.abort();
    expect(await abandoned).toMatchObject({ name: 'AbortError' });
    await app.log.count(1);
    // The slot is free though the handler still runs.
    const meanwhile = await fetch(`${app.url}/chat`, { method: 'POST' });
    expect(meanwhile.status).toBe(200);
    // 10 kept by the abandoned request (its settle is not asked), 10 set aside now.
    expect(meanwhile.headers.get('x-ratelimit-remaining')).toBe('80');
    await meanwhile.arrayBuffer();
    await app.log.count(2);
    slow.open();
    await answered.promise;
    const after = await fetch(`${app.url}/chat`, { method: 'POST' });
    await after.arrayBuffer();
    expect(after.headers.get('x-ratelimit-remaining')).toBe('77');
    await app.log.count(3);
    expect(app.log.events).toEqual(['settled', 'settled', 'settled']);
    expect(app.calls).toEqual({ consume: 3, settle: 3 });
  });

  it('reports an exception in settle to onError and settles as reserved', async () => {
    const app = await start({
      settle: () => {
        throw new Error('no usage field');
      },
    });
    await (await fetch(`${app.url}/chat`, { method: 'POST' })).arrayBuffer();
    await app.log.count(1);
    const next = await fetch(`${app.url}/chat`, { method: 'POST' });
    await next.arrayBuffer();
    expect(next.headers.get('x-ratelimit-remaining')).toBe('80');
    await app.log.count(2);
    expect(app.errors).toEqual([new Error('no usage field'), new Error('no usage field')]);
    expect(app.calls.settle).toBe(2);
  });

  it('reports a cost the reservation refuses to onError and settles as reserved, freeing the slot', async () => {
    const app = await start({ settle: () => ({ tokens: 2.5 }) });
    await (await fetch(`${app.url}/chat`, { method: 'POST' })).arrayBuffer();
    await app.log.count(1);
    const next = await fetch(`${app.url}/chat`, { method: 'POST' });
    await next.arrayBuffer();
    expect(next.status).toBe(200);
    expect(next.headers.get('x-ratelimit-remaining')).toBe('80');
    await app.log.count(2);
    expect(app.errors).toHaveLength(2);
    expect(app.errors[0]).toBeInstanceOf(RateLimitError);
    expect((app.errors[0] as RateLimitError).code).toBe('invalid_argument');
    // The refused cost reached no store: one settle per request, as reserved.
    expect(app.calls.settle).toBe(2);
  });

  it('answers a refusal by the concurrency limit 429 with Retry-After: 1, its headers stating the token bucket only', async () => {
    const slow = gate();
    const reached = gate();
    const app = await start({
      ietf: true,
      answer: async () => {
        reached.open();
        await slow.promise;
        return { body: 'ok', tokens: '3' };
      },
    });
    const holding = fetch(`${app.url}/chat`, { method: 'POST' });
    await reached.promise;
    const refused = await fetch(`${app.url}/chat`, { method: 'POST' });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toBe('application/json');
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.headers.get('x-ratelimit-limit')).toBe('100');
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(refused.headers.get('ratelimit-policy')).toBe('"tokens";q=100;w=60');
    // The token bucket had the tokens and was not charged: it still holds 90.
    expect(refused.headers.get('ratelimit')).toBe('"tokens";r=90;t=6');
    expect(await refused.text()).toBe(DENIAL);
    slow.open();
    expect((await holding).status).toBe(200);
    await app.log.count(1);
    // The refusal reserved nothing, so there was nothing to settle.
    expect(app.calls).toEqual({ consume: 2, settle: 1 });
  });

  it('sends neither X-RateLimit-* nor IETF fields for a request limited by a concurrency limit alone', async () => {
    const slow = gate();
    const reached = gate();
    const app = await start({
      ietf: true,
      identify: () => ({ organization: 'org-1', limits: slots }),
      answer: async () => {
        reached.open();
        await slow.promise;
        return { body: 'ok' };
      },
    });
    const holding = fetch(`${app.url}/chat`, { method: 'POST' });
    await reached.promise;
    const refused = await fetch(`${app.url}/chat`, { method: 'POST' });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'ratelimit', 'ratelimit-policy']) {
      expect(refused.headers.get(name)).toBeNull();
    }
    await refused.arrayBuffer();
    slow.open();
    const held = await holding;
    expect(held.status).toBe(200);
    expect(held.headers.get('x-ratelimit-limit')).toBeNull();
    expect(held.headers.get('ratelimit')).toBeNull();
    await held.arrayBuffer();
    await app.log.count(1);
  });
});

it('parses the fields of a request with a concurrency limit and two token buckets as RFC 9651 lists', async () => {
  const { rateLimitHeaders } = await import('../src/headers.js');
  const clock = testClock();
  const limiter = createLimiter({ store: memoryStore({ now: clock.now }), plans: { free: tokens } });
  const reservation = await limiter.reserve({
    organization: 'org-1',
    endpoint: 'POST /chat',
    limits: [perMinute(10), slots, tokens],
  });
  const headers = rateLimitHeaders(reservation, { ietf: true });
  expect(headers['X-RateLimit-Limit']).toBe('10');
  expect(headers['X-RateLimit-Remaining']).toBe('9');
  expect(parseList(headers['RateLimit-Policy'] as string).map(([name]) => name)).toEqual(['1m', 'tokens']);
  expect(parseList(headers.RateLimit as string).map(([name]) => name)).toEqual(['1m', 'tokens']);
});
