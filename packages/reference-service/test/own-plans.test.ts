import { createLimiter, type Limiter, perDay, perMinute, perSecond, type Store } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp, createServiceServer } from '../src/app.js';
import { send, stillMemoryStore, testKeys } from './helpers.js';

/** The limiter of docs/reference-service.md, "With plans of your own": change the two together. */
function ownPlansLimiter(store: Store): Limiter {
  return createLimiter({
    store,
    fallback: memoryStore(),
    plans: {
      developer: [perSecond(2), perMinute(10)],
      hobbyist: perMinute(25, { burst: 50 }),
      startup: [perMinute(100), perDay(50_000)],
      enterprise: perMinute(250),
    },
    trialPlan: 'startup',
    endpoints: {
      'POST /browsers': 'enforce',
      'POST /browser-pools': 'shadow',
      'PUT /browser-pools/:id': 'shadow',
      'POST /invocations': { mode: 'shadow', limits: perMinute(600) },
    },
  });
}

let close: (() => Promise<void>) | undefined;

afterEach(async () => {
  await close?.();
  close = undefined;
});

async function start(): Promise<{ url: string; tokens: ReturnType<typeof testKeys>['tokens'] }> {
  const { keys, tokens } = testKeys('own');
  // On a clock that stands still: 2 a second refills a token every 500 ms, which three requests on a busy machine took.
  const limiter = ownPlansLimiter(stillMemoryStore());
  const server = createServiceServer(createApp({ limiter, keys, onError: (error) => console.error(error) }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await limiter.close();
  };
  return { url: `http://127.0.0.1:${port}`, tokens };
}

describe('the reference service with plans of its own (docs/reference-service.md)', () => {
  it("refuses a Developer key's third POST /browsers at once by the per-second limit", async () => {
    const { url, tokens } = await start();
    for (let i = 0; i < 2; i++) {
      expect((await send(url, 'POST', '/browsers', { token: tokens.developer })).status).toBe(201);
    }
    const denied = await send(url, 'POST', '/browsers', { token: tokens.developer });
    expect(denied.status).toBe(429);
    expect(denied.headers.get('retry-after')).toBe('1');
    expect(denied.headers.get('x-ratelimit-limit')).toBe('2');
    expect(denied.headers.get('x-ratelimit-remaining')).toBe('0');
  });

  it('gives a plan with a burst of its own its burst as the limit, and a trial its trial plan', async () => {
    const { url, tokens } = await start();
    const hobbyist = await send(url, 'POST', '/browsers', { token: tokens.hobbyist });
    expect(hobbyist.headers.get('x-ratelimit-limit')).toBe('50');
    expect(hobbyist.headers.get('x-ratelimit-remaining')).toBe('49');
    const trial = await send(url, 'POST', '/browsers', { token: tokens.trial });
    expect(trial.headers.get('x-ratelimit-limit')).toBe('100');
    // The override keeps meaning requests per minute.
    const fast = await send(url, 'POST', '/browsers', { token: tokens.fast });
    expect(fast.headers.get('x-ratelimit-limit')).toBe('60');
  });

  it('leaves the routes without a rule unlimited, as the spec does', async () => {
    const { url, tokens } = await start();
    const answer = await send(url, 'GET', '/browser_pools', { token: tokens.hobbyist });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-ratelimit-limit')).toBeNull();
  });
});
