import {
  APIError,
  AuthenticationError,
  ConflictError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
} from '@onkernel/sdk';
import type { Store } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { describeOnRedis, type RunningService, startService, testKeys, until } from './helpers.js';
import {
  ACQUIRED,
  allPools,
  connect,
  FULL_BROWSER,
  FULL_POOL,
  INVOCATION,
  POOL,
  POOL_CONFIG,
  problemsOf,
  SESSION,
  type Traffic,
} from './sdk/client.js';

/** The error a call rejects with, or a failure when it resolves. */
async function rejection(call: Promise<unknown>): Promise<APIError> {
  try {
    await call;
  } catch (error) {
    expect(error).toBeInstanceOf(APIError);
    return error as APIError;
  }
  throw new Error('the call resolved');
}

/**
 * The clock the service's store reads: the real one, except while a test holds it still. A bucket refills all the
 * time, so a request refused just now may pass a moment later: a burst a busy machine spreads over 1.9 s leaves the
 * bucket a hair short of a token when it is refused, and the next request finds one.
 */
function holdableClock(): { now: () => number; hold: () => void; release: () => void } {
  let heldAt: number | undefined;
  return {
    now: () => heldAt ?? Date.now(),
    hold: () => {
      heldAt = Date.now();
    },
    release: () => {
      heldAt = undefined;
    },
  };
}

/** `@onkernel/sdk`, as a user would point it at `pnpm start`, driving every operation the service offers. */
function sdkSuite(newStore: (now: () => number) => Store): void {
  let service: RunningService;
  let tokens: ReturnType<typeof testKeys>['tokens'];
  let traffic: Traffic;
  let clock: ReturnType<typeof holdableClock>;

  beforeEach(async () => {
    const made = testKeys('sdk');
    tokens = made.tokens;
    clock = holdableClock();
    service = await startService(newStore(clock.now), made.keys);
    traffic = { calls: [] };
  });
  afterEach(async () => {
    expect(service.errors).toEqual([]);
    await service.close();
  });

  it('creates, retrieves and deletes a browser with every setting the SDK sends', async () => {
    const kernel = connect(service.url, tokens.hobbyist, traffic);
    const created = await kernel.browsers.create(FULL_BROWSER);
    expect(problemsOf(created, SESSION)).toEqual([]);
    expect(created).toMatchObject({ kiosk_mode: true, stealth: true, name: 'agent-1', timeout_seconds: 300 });
    expect(created.cdp_ws_url).toBe(`ws://127.0.0.1:9222/devtools/browser/${created.session_id}`);
    expect(await kernel.browsers.retrieve(created.session_id)).toEqual(created);
    const bare = await kernel.browsers.create();
    expect(problemsOf(bare, SESSION)).toEqual([]);
    await kernel.browsers.deleteByID(created.session_id);
    const gone = await rejection(kernel.browsers.retrieve(created.session_id));
    expect(gone).toBeInstanceOf(NotFoundError);
    expect(gone.error).toEqual({
      code: 'not_found',
      message: `No browser "${created.session_id}" in this organization.`,
    });
    const invocation = await kernel.invocations.create({ action_name: 'run', app_name: 'app', version: '1' });
    expect(problemsOf(invocation, INVOCATION)).toEqual([]);
    expect(invocation).toMatchObject({ action_name: 'run', status: 'queued' });
  });

  it('creates a pool with every setting echoed, retrieves it by id and name, and updates it with PATCH', async () => {
    const kernel = connect(service.url, tokens.hobbyist, traffic);
    const pool = await kernel.browserPools.create(FULL_POOL);
    expect(problemsOf(pool, POOL)).toEqual([]);
    expect(problemsOf(pool.browser_pool_config, POOL_CONFIG)).toEqual([]);
    expect(pool.browser_pool_config).toEqual(FULL_POOL);
    expect(pool).toMatchObject({ name: 'full', available_count: 2, acquired_count: 0, profile_id: 'shopper' });
    expect(pool.extension_ids).toEqual(['ext_1', 'ublock']);
    expect(await kernel.browserPools.retrieve(pool.id)).toEqual(pool);
    expect(await kernel.browserPools.retrieve('full')).toEqual(pool);
    const unnamed = await kernel.browserPools.create({ size: 1 });
    expect(problemsOf(unnamed, POOL)).toEqual([]);
    expect(unnamed.name).toBeUndefined();

    const updated = await kernel.browserPools.update('full', { size: 4, stealth: false, discard_all_idle: true });
    expect(problemsOf(updated, POOL)).toEqual([]);
    expect(updated).toMatchObject({ available_count: 4, browser_pool_config: { size: 4, stealth: false } });
    expect(traffic.calls.map((call) => call.method)).toEqual(['POST', 'GET', 'GET', 'POST', 'PATCH']);
    // The PATCH counted against the spec's rule for pool updates.
    expect(service.decisions.at(-1)?.decision.rule).toBe('PUT /browser-pools/:id');
  });

  it('lists pools with the SDK pagination, page by page and auto-paginated', async () => {
    const kernel = connect(service.url, tokens.hobbyist, traffic);
    const names = ['a1', 'a2', 'b1', 'b2', 'c1'];
    for (const name of names) await kernel.browserPools.create({ name, size: 0 });
    const page = await kernel.browserPools.list({ limit: 2 });
    expect(page.getPaginatedItems().map((pool) => pool.name)).toEqual(['a1', 'a2']);
    expect([page.has_more, page.next_offset, page.hasNextPage()]).toEqual([true, 2, true]);
    for (const pool of page.getPaginatedItems()) expect(problemsOf(pool, POOL)).toEqual([]);
    const calls = traffic.calls.length;
    expect((await allPools(kernel, 2)).map((pool) => pool.name)).toEqual(names);
    // Three pages of 2, 2 and 1, and no request past the last.
    expect(traffic.calls.length - calls).toBe(3);
    const filtered = await kernel.browserPools.list({ query: 'b' });
    expect(filtered.getPaginatedItems().map((pool) => pool.name)).toEqual(['b1', 'b2']);
  });

  it('acquires, long-polls, releases and flushes the way the SDK expects', async () => {
    const kernel = connect(service.url, tokens.hobbyist, traffic);
    await kernel.browserPools.create({ name: 'work', size: 2, headless: true });
    const first = await kernel.browserPools.acquire('work', {
      name: 'lease',
      start_url: 'https://example.com',
      tags: { job: '1' },
      telemetry: { enabled: true },
    });
    expect(problemsOf(first, ACQUIRED)).toEqual([]);
    expect(first).toMatchObject({ headless: true, name: 'lease', tags: { job: '1' }, pool: { name: 'work' } });
    const second = await kernel.browserPools.acquire('work', {});
    // The SDK's long poll: none available within the timeout is a 204, which the SDK gives as null.
    expect(await kernel.browserPools.acquire('work', { acquire_timeout_seconds: 0 })).toBeNull();
    const waiting = kernel.browserPools.acquire('work', { acquire_timeout_seconds: 10 });
    // Released once the fourth acquire waits, not after a fixed 100 ms that a busy machine can outlast.
    await until(() => service.acquires() === 4, 'the fourth acquire');
    await kernel.browserPools.release('work', { session_id: first.session_id, reuse: true });
    const handedOver = await waiting;
    expect(handedOver.session_id).toBe(first.session_id);
    expect(handedOver.tags).toBeUndefined();
    await kernel.browserPools.release('work', { session_id: second.session_id, reuse: false });
    // A 204, as the SDK declares flush: it resolves to null.
    expect(await kernel.browserPools.flush('work')).toBeNull();
    expect(await kernel.browserPools.retrieve('work')).toMatchObject({ available_count: 0, acquired_count: 1 });
  });

  it('answers a conflict once, with x-should-retry: false, and deletes a pool with force', async () => {
    const kernel = connect(service.url, tokens.hobbyist, traffic);
    await kernel.browserPools.create({ name: 'once', size: 1 });
    await kernel.browserPools.acquire('once', {});
    const before = traffic.calls.length;
    const duplicate = await rejection(kernel.browserPools.create({ name: 'once', size: 1 }));
    expect(duplicate).toBeInstanceOf(ConflictError);
    expect(duplicate.error).toEqual({ code: 'conflict', message: 'A browser pool named "once" already exists.' });
    const blocked = await rejection(kernel.browserPools.delete('once'));
    expect(blocked).toBeInstanceOf(ConflictError);
    // maxRetries is the SDK's default, 2; each conflict cost one request.
    expect(traffic.calls.length - before).toBe(2);
    await kernel.browserPools.delete('once', { force: true });
    expect(await rejection(kernel.browserPools.retrieve('once'))).toBeInstanceOf(NotFoundError);
  });

  it('raises AuthenticationError, PermissionDeniedError and NotFoundError with the Error body', async () => {
    const stranger = connect(service.url, 'not-a-key', traffic);
    const unknown = await rejection(stranger.browsers.create());
    expect(unknown).toBeInstanceOf(AuthenticationError);
    expect(unknown.error).toMatchObject({ code: 'unauthorized' });
    const free = await rejection(connect(service.url, tokens.developer, traffic).browserPools.list());
    expect(free).toBeInstanceOf(PermissionDeniedError);
    expect(free.error).toMatchObject({ code: 'forbidden', inner_error: { code: 'insufficient_plan' } });
    const scoped = await rejection(connect(service.url, tokens.noPools, traffic).browserPools.flush('any'));
    expect(scoped).toBeInstanceOf(PermissionDeniedError);
    expect(scoped.error).toMatchObject({ code: 'forbidden', inner_error: { code: 'missing_scope' } });
    const missing = await rejection(connect(service.url, tokens.hobbyist, traffic).browserPools.flush('ghost'));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing.error).toEqual({
      code: 'not_found',
      message: 'No browser pool with id or name "ghost" in this organization.',
    });
  });

  it('raises RateLimitError past the limit, and the SDK retry waits out Retry-After and then succeeds', async () => {
    // 60 a minute: one token a second, so the refusal says Retry-After: 1. The clock stands still until the patient
    // client below has been refused too, which it would not be if a token came back in between.
    clock.hold();
    const impatient = connect(service.url, tokens.fast, traffic, 0);
    let refused: APIError | undefined;
    for (let i = 0; i < 70 && refused === undefined; i++) {
      refused = await impatient.browsers.create().then(
        () => undefined,
        (error: unknown) => error as APIError,
      );
    }
    expect(refused).toBeInstanceOf(RateLimitError);
    expect(refused?.error).toEqual({
      code: 'rate_limit_exceeded',
      message: 'Rate limit exceeded. Please retry later.',
    });
    expect(refused?.headers?.get('retry-after')).toBe('1');
    expect(refused?.headers?.get('x-ratelimit-remaining')).toBe('0');

    // Time moves again once its first call is answered: its retry, a second later or more, finds the token back.
    const patient: Traffic = { calls: [], onCall: clock.release };
    const retrying = connect(service.url, tokens.fast, patient);
    const started = Date.now();
    const created = await retrying.browsers.create();
    expect(problemsOf(created, SESSION)).toEqual([]);
    expect(patient.calls.map((call) => call.status)).toEqual([429, 201]);
    // It waited the second Retry-After asked for rather than its own shorter backoff (0.5 s at first).
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  }, 15_000);
}

describe('the SDK against the service on the memory store', () => {
  sdkSuite((now) => memoryStore({ now }));
});

await describeOnRedis('the SDK against the service on the Redis store', sdkSuite);
