import type { Store } from '@ratecard/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES } from '../src/body.js';
import { type Answer, type RunningService, send, sendRaw, startService, testKeys, until } from './helpers.js';

const RATE_LIMITED = '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}';
const UNAUTHORIZED =
  '{"code":"unauthorized","message":"Missing or invalid authorization token. Send exactly one header: Authorization: Bearer <token>."}';

function expectError(answer: Answer, status: number, body: string): void {
  expect({ status: answer.status, text: answer.text }).toEqual({ status, text: body });
  expect(answer.headers.get('content-type')).toBe('application/json');
}

/**
 * The end-to-end behaviour of the service over real HTTP, run once per store. `newStore` gives a fresh store per test;
 * organizations are named uniquely per test, so no test sees another's buckets.
 */
export function serviceSuite(newStore: () => Store): void {
  let service: RunningService;
  let tokens: ReturnType<typeof testKeys>['tokens'];

  beforeEach(async () => {
    const made = testKeys('suite');
    tokens = made.tokens;
    service = await startService(newStore(), made.keys);
  });
  afterEach(async () => {
    await service.close();
  });

  describe('the rate limit', () => {
    it('answers the 11th POST /browsers of a Developer organization in one burst with 429 and Retry-After: 6', async () => {
      const started = performance.now();
      for (let i = 1; i <= 10; i++) {
        const answer = await send(service.url, 'POST', '/browsers', { token: tokens.developer });
        expect(answer.status).toBe(201);
        expect(answer.headers.get('x-ratelimit-limit')).toBe('10');
        expect(answer.headers.get('x-ratelimit-remaining')).toBe(String(10 - i));
      }
      const denied = await send(service.url, 'POST', '/browsers', { token: tokens.developer });
      const elapsed = performance.now() - started;
      expectError(denied, 429, RATE_LIMITED);
      // A token refills every 6 s: 6 when the burst took under a second, as it does on the memory store's clock that
      // stands still (memory.test.ts). Redis reads its own clock, which a busy machine can move a second meanwhile.
      expect(elapsed < 1_000 ? ['6'] : ['1', '2', '3', '4', '5', '6']).toContain(denied.headers.get('retry-after'));
      expect(denied.headers.get('x-ratelimit-limit')).toBe('10');
      expect(denied.headers.get('x-ratelimit-remaining')).toBe('0');
      // Every answer came from the store under test, not from a fallback.
      expect(service.decisions.map(({ decision }) => decision.source)).toEqual(Array(11).fill('store'));
    });

    it('counts per organization: another organization is not limited by the first', async () => {
      for (let i = 0; i < 11; i++) await send(service.url, 'POST', '/browsers', { token: tokens.developer });
      const other = await send(service.url, 'POST', '/browsers', { token: tokens.other });
      expect(other.status).toBe(201);
      expect(other.headers.get('x-ratelimit-remaining')).toBe('24');
    });

    it('gives a trial Enterprise organization the Start-Up limit of 100', async () => {
      const answer = await send(service.url, 'POST', '/browsers', { token: tokens.trial });
      expect(answer.status).toBe(201);
      expect(answer.headers.get('x-ratelimit-limit')).toBe('100');
      expect(answer.headers.get('x-ratelimit-remaining')).toBe('99');
    });

    it('never answers 429 on the shadow routes, even past the limit', async () => {
      const token = tokens.hobbyist;
      const created = await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'shadow', size: 1 } });
      expect(created.status).toBe(201);
      const statuses: number[] = [];
      for (let i = 0; i < 30; i++) {
        const spelling = i % 2 === 0 ? 'browser-pools' : 'browser_pools';
        const answers = await Promise.all([
          send(service.url, 'POST', '/invocations', { token, body: { action: 'run' } }),
          send(service.url, 'POST', `/${spelling}`, { token, body: { name: `p${i}`, size: 0 } }),
          send(service.url, i % 3 === 0 ? 'PUT' : 'PATCH', `/${spelling}/shadow`, { token, body: { size: 2 } }),
        ]);
        for (const answer of answers) {
          statuses.push(answer.status);
          expect(answer.headers.get('retry-after')).toBeNull();
        }
      }
      expect(new Set(statuses)).toEqual(new Set([202, 201, 200]));
      // The limiter did see them over the limit: shadow mode counts and reports, it only never refuses.
      const limited = service.decisions.filter(({ decision }) => decision.mode === 'shadow' && decision.limited);
      expect(new Set(limited.map(({ decision }) => decision.rule))).toEqual(
        new Set(['POST /invocations', 'POST /browser-pools', 'PUT /browser-pools/:id']),
      );
      // And POST /browsers still has its own full bucket.
      const browsers = await send(service.url, 'POST', '/browsers', { token });
      expect(browsers.headers.get('x-ratelimit-remaining')).toBe('24');
    });

    it('counts PATCH and PUT, in both spellings, against the one rule PUT /browser-pools/:id', async () => {
      const token = tokens.hobbyist;
      await send(service.url, 'POST', '/browser_pools', { token, body: { name: 'spell', size: 1 } });
      const updates = [
        ['PUT', '/browser_pools/spell'],
        ['PATCH', '/browser_pools/spell'],
        ['PUT', '/browser-pools/spell'],
        ['PATCH', '/browser-pools/spell'],
      ] as const;
      for (const [index, [method, path]] of updates.entries()) {
        const answer = await send(service.url, method, path, { token, body: { size: index + 2 } });
        expect(answer.status, `${method} ${path}`).toBe(200);
        expect(answer.json).toMatchObject({ browser_pool_config: { size: index + 2 } });
      }
      expect(service.decisions.map(({ decision }) => decision.rule)).toEqual([
        'POST /browser-pools',
        'PUT /browser-pools/:id',
        'PUT /browser-pools/:id',
        'PUT /browser-pools/:id',
        'PUT /browser-pools/:id',
      ]);
      expect(service.decisions.map(({ request }) => request.endpoint)).toEqual([
        'POST /browser-pools',
        'PUT /browser-pools/:id',
        'PUT /browser-pools/:id',
        'PUT /browser-pools/:id',
        'PUT /browser-pools/:id',
      ]);
      // One bucket for the create, one for every update whatever its method and spelling.
      expect(service.decisions.map(({ decision }) => decision.remaining)).toEqual([24, 24, 23, 22, 21]);
      // The methods not counted by a rule are not shown as another: a PATCH elsewhere is still a 405 naming PATCH.
      const elsewhere = await send(service.url, 'PATCH', '/browser-pools/spell/flush', { token });
      expect(elsewhere.json).toEqual({ code: 'method_not_allowed', message: 'Method PATCH is not allowed here.' });
    });

    it('charges nothing for requests that fail authentication, the scope or the plan check', async () => {
      await send(service.url, 'POST', '/browsers', { token: 'nope' });
      await send(service.url, 'POST', '/browser-pools', { token: tokens.noPools, body: { name: 'x', size: 1 } });
      await send(service.url, 'PUT', '/browser-pools/x', { token: tokens.developer, body: { size: 1 } });
      expect(service.decisions).toEqual([]);
    });
  });

  describe('browsers', () => {
    it('creates a browser session with the settings sent, finds it by id and deletes it', async () => {
      const token = tokens.startup;
      const created = await send(service.url, 'POST', '/browsers', {
        token,
        body: { headless: true, stealth: true, timeout_seconds: 120, name: 'agent', tags: { team: 'qa' } },
      });
      expect(created.status).toBe(201);
      const session = created.json as { session_id: string };
      expect(session).toEqual({
        session_id: expect.stringMatching(/^br_[0-9a-f]{20}$/),
        cdp_ws_url: `ws://127.0.0.1:9222/devtools/browser/${session.session_id}`,
        webdriver_ws_url: `ws://127.0.0.1:9222/session/${session.session_id}`,
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        headless: true,
        stealth: true,
        timeout_seconds: 120,
        name: 'agent',
        tags: { team: 'qa' },
      });
      const found = await send(service.url, 'GET', `/browsers/${session.session_id}`, { token });
      expect(found.json).toEqual(session);
      expect((await send(service.url, 'GET', `/browsers/${session.session_id}`, { token: tokens.other })).status).toBe(
        404,
      );
      const deleted = await send(service.url, 'DELETE', `/browsers/${session.session_id}`, { token });
      expect(deleted.status).toBe(204);
      expect((await send(service.url, 'GET', `/browsers/${session.session_id}`, { token })).status).toBe(404);
      expect((await send(service.url, 'DELETE', `/browsers/${session.session_id}`, { token })).status).toBe(404);
    });

    it('gives a browser created without settings the API defaults', async () => {
      const created = await send(service.url, 'POST', '/browsers', { token: tokens.startup });
      expect(created.json).toMatchObject({ headless: false, stealth: false, timeout_seconds: 60 });
    });
  });

  describe('pools', () => {
    it('creates a pool full of available browsers, echoes its config and finds it by id and by name', async () => {
      const created = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.hobbyist,
        body: {
          name: 'main',
          size: 3,
          headless: true,
          timeout_seconds: 600,
          extensions: [{ name: 'ublock' }],
          viewport: { width: 1280, height: 800 },
        },
      });
      expect(created.status).toBe(201);
      expect(created.headers.get('content-type')).toBe('application/json');
      const pool = created.json as { id: string };
      expect(pool).toEqual({
        id: expect.stringMatching(/^bp_[0-9a-f]{20}$/),
        name: 'main',
        available_count: 3,
        acquired_count: 0,
        browser_pool_config: {
          name: 'main',
          size: 3,
          headless: true,
          timeout_seconds: 600,
          extensions: [{ name: 'ublock' }],
          viewport: { width: 1280, height: 800 },
        },
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        extension_ids: ['ublock'],
      });
      for (const key of [pool.id, 'main']) {
        const found = await send(service.url, 'GET', `/browser_pools/${key}`, { token: tokens.hobbyist });
        expect(found.status).toBe(200);
        expect(found.json).toEqual(pool);
      }
    });

    it('creates a pool without a name, found by its id only', async () => {
      const created = await send(service.url, 'POST', '/browser_pools', { token: tokens.hobbyist, body: { size: 1 } });
      expect(created.status).toBe(201);
      const pool = created.json as { id: string; name?: string };
      expect(pool.name).toBeUndefined();
      expect((await send(service.url, 'GET', `/browser_pools/${pool.id}`, { token: tokens.hobbyist })).json).toEqual(
        pool,
      );
    });

    it('lists pools a page at a time, with X-Has-More and X-Next-Offset, filtered by name or query', async () => {
      const token = tokens.hobbyist;
      for (const name of ['alpha', 'beta', 'alphabet', 'gamma', 'delta']) {
        await send(service.url, 'POST', '/browser_pools', { token, body: { name, size: 0 } });
      }
      const first = await send(service.url, 'GET', '/browser_pools?limit=2', { token });
      expect((first.json as { name: string }[]).map((pool) => pool.name)).toEqual(['alpha', 'beta']);
      expect(first.headers.get('x-has-more')).toBe('true');
      expect(first.headers.get('x-next-offset')).toBe('2');
      const last = await send(service.url, 'GET', '/browser_pools?limit=2&offset=4', { token });
      expect((last.json as { name: string }[]).map((pool) => pool.name)).toEqual(['delta']);
      expect(last.headers.get('x-has-more')).toBe('false');
      expect(last.headers.get('x-next-offset')).toBe('0');
      const named = await send(service.url, 'GET', '/browser-pools?name=ALPHA', { token });
      expect((named.json as { name: string }[]).map((pool) => pool.name)).toEqual(['alpha']);
      const query = await send(service.url, 'GET', '/browser-pools?query=alph', { token });
      expect((query.json as { name: string }[]).map((pool) => pool.name)).toEqual(['alpha', 'alphabet']);
      expect((await send(service.url, 'GET', '/browser-pools', { token: tokens.other })).json).toEqual([]);
      const bad = await send(service.url, 'GET', '/browser_pools?limit=0&colour=red', { token });
      expect(bad.json).toEqual({
        code: 'invalid_request',
        message: 'The query is invalid.',
        details: [
          { code: 'invalid_value', message: 'limit: must be a whole number from 1 to 100, got 0' },
          { code: 'invalid_value', message: 'colour: is not a query parameter of this operation' },
        ],
      });
    });

    it('acquires a browser session, releases it for reuse or replacement, and flush spares the acquired', async () => {
      const token = tokens.hobbyist;
      await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'fl', size: 5, stealth: true } });
      const leases: { session_id: string }[] = [];
      for (let i = 0; i < 2; i++) {
        const acquired = await send(service.url, 'POST', '/browser-pools/fl/acquire', {
          token,
          body: { name: `lease-${i}`, tags: { run: String(i) } },
        });
        expect(acquired.status).toBe(200);
        expect(acquired.json).toMatchObject({
          session_id: expect.stringMatching(/^br_/),
          stealth: true,
          headless: false,
          name: `lease-${i}`,
          tags: { run: String(i) },
          pool: { id: expect.stringMatching(/^bp_/), name: 'fl' },
        });
        leases.push(acquired.json as { session_id: string });
      }
      const flushed = await send(service.url, 'POST', '/browser_pools/fl/flush', { token });
      expect(flushed.status).toBe(204);
      expect(flushed.text).toBe('');
      const after = await send(service.url, 'GET', '/browser-pools/fl', { token });
      expect(after.json).toMatchObject({ available_count: 0, acquired_count: 2, browser_pool_config: { size: 5 } });
      // The acquired browsers are the same browsers: each can still be released, and then is available.
      const [kept, replaced] = leases.map((lease) => lease.session_id);
      const reused = await send(service.url, 'POST', '/browser-pools/fl/release', {
        token,
        body: { session_id: kept },
      });
      expect(reused.status).toBe(204);
      const renewed = await send(service.url, 'POST', '/browser-pools/fl/release', {
        token,
        body: { session_id: replaced, reuse: false },
      });
      expect(renewed.status).toBe(204);
      expect((await send(service.url, 'GET', '/browser-pools/fl', { token })).json).toMatchObject({
        available_count: 2,
        acquired_count: 0,
      });
      // The reused browser comes back without its lease's name and tags; the replaced one does not come back.
      const again = [
        (await send(service.url, 'POST', '/browser-pools/fl/acquire', { token })).json as Record<string, unknown>,
        (await send(service.url, 'POST', '/browser-pools/fl/acquire', { token })).json as Record<string, unknown>,
      ];
      const ids = again.map((session) => session.session_id);
      expect(ids).toContain(kept);
      expect(ids).not.toContain(replaced);
      const reusedSession = again.find((session) => session.session_id === kept);
      expect(reusedSession?.name).toBeUndefined();
      expect(reusedSession?.tags).toBeUndefined();
    });

    it('holds an acquire until a browser is released, and answers 204 when none comes in time', async () => {
      const token = tokens.hobbyist;
      await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'wait', size: 1 } });
      const first = (await send(service.url, 'POST', '/browser-pools/wait/acquire', { token })).json as {
        session_id: string;
      };
      const timedOut = await send(service.url, 'POST', '/browser-pools/wait/acquire', {
        token,
        body: { acquire_timeout_seconds: 0 },
      });
      expect(timedOut.status).toBe(204);
      expect(timedOut.text).toBe('');
      const waiting = send(service.url, 'POST', '/browser-pools/wait/acquire', {
        token,
        body: { acquire_timeout_seconds: 10 },
      });
      // Released once the third acquire waits, not after a fixed 100 ms that a busy machine can outlast: the acquire
      // would then find the released browser idle, and the hold go untested.
      await until(() => service.acquires() === 3, 'the third acquire');
      await send(service.url, 'POST', '/browser-pools/wait/release', { token, body: { session_id: first.session_id } });
      const served = await waiting;
      expect(served.status).toBe(200);
      expect(served.json).toMatchObject({ session_id: first.session_id });
      // A wait that runs out is answered 204 after its timeout.
      const started = Date.now();
      const late = await send(service.url, 'POST', '/browser-pools/wait/acquire', {
        token,
        body: { acquire_timeout_seconds: 1 },
      });
      expect(late.status).toBe(204);
      expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    });

    it('accepts both spellings, browser_pools and browser-pools, on every pool route', async () => {
      for (const spelling of ['browser_pools', 'browser-pools']) {
        const at = (suffix: string): string => `/${spelling}/${spelling}-pool${suffix}`;
        const token = tokens.hobbyist;
        const created = await send(service.url, 'POST', `/${spelling}`, {
          token,
          body: { name: `${spelling}-pool`, size: 2 },
        });
        expect(created.status).toBe(201);
        expect((await send(service.url, 'GET', at(''), { token })).status).toBe(200);
        expect((await send(service.url, 'PATCH', at(''), { token, body: { size: 3 } })).json).toMatchObject({
          available_count: 3,
        });
        const acquired = await send(service.url, 'POST', at('/acquire'), { token });
        expect(acquired.status).toBe(200);
        const { session_id } = acquired.json as { session_id: string };
        const released = await send(service.url, 'POST', at('/release'), { token, body: { session_id } });
        expect(released.status).toBe(204);
        expect((await send(service.url, 'POST', at('/flush'), { token })).status).toBe(204);
        expect((await send(service.url, 'GET', at(''), { token })).json).toMatchObject({
          available_count: 0,
          acquired_count: 0,
        });
        expect((await send(service.url, 'DELETE', at(''), { token })).status).toBe(204);
        expect((await send(service.url, 'GET', at(''), { token })).status).toBe(404);
      }
    });

    it('updates size, name and settings, never below the acquired browsers', async () => {
      const token = tokens.hobbyist;
      await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'rs', size: 2 } });
      await send(service.url, 'POST', '/browser-pools/rs/acquire', { token });
      const grown = await send(service.url, 'PATCH', '/browser-pools/rs', { token, body: { size: 4, stealth: true } });
      expect(grown.json).toMatchObject({
        available_count: 3,
        acquired_count: 1,
        browser_pool_config: { size: 4, stealth: true },
      });
      const shrunk = await send(service.url, 'PUT', '/browser-pools/rs', { token, body: { size: 1, name: 'small' } });
      expect(shrunk.json).toMatchObject({ name: 'small', available_count: 0, acquired_count: 1 });
      expect((await send(service.url, 'GET', '/browser-pools/rs', { token })).status).toBe(404);
      const tooSmall = await send(service.url, 'PATCH', '/browser-pools/small', { token, body: { size: 0 } });
      expectError(
        tooSmall,
        409,
        '{"code":"conflict","message":"The pool has 1 acquired browsers, so its size cannot go below that (got 0); release some first."}',
      );
      expect(tooSmall.headers.get('x-should-retry')).toBe('false');
      const unchanged = await send(service.url, 'PATCH', '/browser-pools/small', { token, body: { name: '' } });
      expect(unchanged.json).toMatchObject({ name: 'small' });
    });

    it('deletes a pool with acquired browsers only when forced', async () => {
      const token = tokens.hobbyist;
      await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'del', size: 1 } });
      await send(service.url, 'POST', '/browser-pools/del/acquire', { token });
      const blocked = await send(service.url, 'DELETE', '/browser-pools/del', { token });
      expectError(
        blocked,
        409,
        '{"code":"conflict","message":"The pool has 1 acquired browsers; release them first, or delete with force: true to end them."}',
      );
      expect((await send(service.url, 'DELETE', '/browser-pools/del', { token, body: { force: true } })).status).toBe(
        204,
      );
      expect((await send(service.url, 'GET', '/browser-pools/del', { token })).status).toBe(404);
    });

    it("answers 404 for another organization's pool, by id and by name, on every pool route", async () => {
      const created = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.hobbyist,
        body: { name: 'mine', size: 2 },
      });
      const { id } = created.json as { id: string };
      for (const key of [id, 'mine']) {
        const attempts = await Promise.all([
          send(service.url, 'GET', `/browser-pools/${key}`, { token: tokens.other }),
          send(service.url, 'PATCH', `/browser-pools/${key}`, { token: tokens.other, body: { size: 9 } }),
          send(service.url, 'DELETE', `/browser-pools/${key}`, { token: tokens.other }),
          send(service.url, 'POST', `/browser-pools/${key}/acquire`, { token: tokens.other }),
          send(service.url, 'POST', `/browser-pools/${key}/release`, {
            token: tokens.other,
            body: { session_id: 'br_x' },
          }),
          send(service.url, 'POST', `/browser_pools/${key}/flush`, { token: tokens.other }),
        ]);
        for (const answer of attempts) {
          expectError(
            answer,
            404,
            JSON.stringify({
              code: 'not_found',
              message: `No browser pool with id or name "${key}" in this organization.`,
            }),
          );
        }
      }
      const untouched = await send(service.url, 'GET', '/browser-pools/mine', { token: tokens.hobbyist });
      expect(untouched.json).toMatchObject({ available_count: 2, acquired_count: 0 });
      // The other organization may use the same name for a pool of its own.
      const same = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.other,
        body: { name: 'mine', size: 1 },
      });
      expect(same.status).toBe(201);
    });
  });

  describe('errors', () => {
    it('answers 401 for a missing header, another scheme, an empty or unknown token', async () => {
      const cases: Record<string, string>[] = [
        {},
        { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
        { authorization: 'Bearer' },
        { authorization: 'Bearer ' },
        { authorization: 'Bearer not-a-known-token' },
        { authorization: `Bearer ${tokens.developer}x` },
        { authorization: `Token ${tokens.developer}` },
        { authorization: tokens.developer },
      ];
      for (const headers of cases) {
        const answer = await send(service.url, 'POST', '/browsers', { headers });
        expectError(answer, 401, UNAUTHORIZED);
        expect(answer.headers.get('www-authenticate')).toBe('Bearer');
      }
      // The scheme name is case-insensitive.
      const lower = await send(service.url, 'POST', '/browsers', {
        headers: { authorization: `bearer ${tokens.developer}` },
      });
      expect(lower.status).toBe(201);
    });

    it('answers 401 to two Authorization headers, even when both carry a valid token', async () => {
      const answer = await sendRaw(service.port, 'POST', '/browsers', {
        authorization: [`Bearer ${tokens.developer}`, `Bearer ${tokens.developer}`],
      });
      expect(answer.status).toBe(401);
      expect(answer.headers['content-type']).toBe('application/json');
      expect(answer.text).toBe(UNAUTHORIZED);
    });

    it('answers 401 to an 8 KiB token and 431 to headers over the server bound, with an Error body', async () => {
      const long = await send(service.url, 'GET', '/browser-pools/x', { token: 'a'.repeat(8 * 1024) });
      expectError(long, 401, UNAUTHORIZED);
      const huge = await send(service.url, 'GET', '/browser-pools/x', { token: 'a'.repeat(64 * 1024) });
      expectError(
        huge,
        431,
        '{"code":"headers_too_large","message":"The request headers are larger than the server accepts."}',
      );
    });

    it('answers 403 when the key lacks the scope of the route area, or its plan lacks the area', async () => {
      const routes = [
        ['POST', '/browser-pools'],
        ['GET', '/browser_pools'],
        ['GET', '/browser_pools/anything'],
        ['PATCH', '/browser_pools/anything'],
        ['POST', '/browser_pools/anything/flush'],
      ] as const;
      for (const [method, path] of routes) {
        expectError(
          await send(service.url, method, path, { token: tokens.noPools }),
          403,
          '{"code":"forbidden","message":"This API key lacks the browser_pools scope needed here.","inner_error":{"code":"missing_scope","message":"the key\'s scopes do not include browser_pools"}}',
        );
        expectError(
          await send(service.url, method, path, { token: tokens.developer }),
          403,
          '{"code":"forbidden","message":"The developer plan does not include browser_pools.","inner_error":{"code":"insufficient_plan","message":"upgrade to a plan that includes browser_pools"}}',
        );
      }
      expect((await send(service.url, 'POST', '/browsers', { token: tokens.noPools })).status).toBe(201);
      expect((await send(service.url, 'POST', '/browsers', { token: tokens.developer })).status).toBe(201);
    });

    it('answers 404 for an unknown route and for an unknown pool', async () => {
      for (const path of [
        '/',
        '/nope',
        '/browsers/a/b',
        '/Browsers',
        '/browser-pools/a/b/c',
        '/browser-pools/a/destroy',
      ]) {
        expectError(
          await send(service.url, 'POST', path, { token: tokens.developer }),
          404,
          '{"code":"not_found","message":"No such route."}',
        );
      }
      expectError(
        await send(service.url, 'POST', '/browser_pools/ghost/flush', { token: tokens.hobbyist }),
        404,
        '{"code":"not_found","message":"No browser pool with id or name \\"ghost\\" in this organization."}',
      );
    });

    it('answers 405 with an Allow header for a method the route does not take', async () => {
      const cases: [string, string, string][] = [
        ['GET', '/browsers', 'POST'],
        ['PUT', '/browsers/br_x', 'GET, HEAD, DELETE'],
        ['POST', '/browser-pools/x', 'GET, HEAD, PATCH, PUT, DELETE'],
        ['DELETE', '/browser_pools', 'GET, HEAD, POST'],
        ['GET', '/browser-pools/x/flush', 'POST'],
        ['PATCH', '/invocations', 'POST'],
        ['OPTIONS', '/browsers', 'POST'],
      ];
      for (const [method, path, allow] of cases) {
        const answer = await send(service.url, method, path, { token: tokens.developer });
        expectError(
          answer,
          405,
          JSON.stringify({ code: 'method_not_allowed', message: `Method ${method} is not allowed here.` }),
        );
        expect(answer.headers.get('allow')).toBe(allow);
      }
    });

    it('answers 409 with x-should-retry: false for a duplicate pool name and a release of an available browser', async () => {
      const token = tokens.hobbyist;
      await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'dup', size: 1 } });
      const duplicate = await send(service.url, 'POST', '/browser_pools', { token, body: { name: 'dup', size: 4 } });
      expectError(duplicate, 409, '{"code":"conflict","message":"A browser pool named \\"dup\\" already exists."}');
      expect(duplicate.headers.get('x-should-retry')).toBe('false');
      const { session_id } = (await send(service.url, 'POST', '/browser-pools/dup/acquire', { token })).json as {
        session_id: string;
      };
      await send(service.url, 'POST', '/browser-pools/dup/release', { token, body: { session_id } });
      const twice = await send(service.url, 'POST', '/browser-pools/dup/release', { token, body: { session_id } });
      expectError(
        twice,
        409,
        JSON.stringify({ code: 'conflict', message: `Browser "${session_id}" is not acquired.` }),
      );
      expect(twice.headers.get('x-should-retry')).toBe('false');
    });

    it('answers 400 for malformed JSON', async () => {
      const answer = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.hobbyist,
        raw: '{"name": "x", ',
        headers: { 'content-type': 'application/json' },
      });
      expectError(
        answer,
        400,
        '{"code":"invalid_request","message":"The request body is not valid JSON.","inner_error":{"code":"malformed_json","message":"the body could not be parsed as JSON"}}',
      );
    });

    it('answers 400 naming every field of the wrong type or value', async () => {
      const answer = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.hobbyist,
        body: { name: 42, size: '3', colour: 'red' },
      });
      expectError(
        answer,
        400,
        JSON.stringify({
          code: 'invalid_request',
          message: 'The request body is invalid: colour, name, size.',
          details: [
            { code: 'unknown_field', message: 'colour: is not a field of this operation' },
            { code: 'invalid_type', message: 'name: must be a string, got 42' },
            { code: 'invalid_type', message: 'size: must be a whole number, got "3"' },
          ],
        }),
      );
      const fractional = await send(service.url, 'PUT', '/browser-pools/x', {
        token: tokens.hobbyist,
        body: { size: 1.5 },
      });
      expect(fractional.json).toEqual({
        code: 'invalid_request',
        message: 'The request body is invalid: size.',
        details: [{ code: 'invalid_value', message: 'size: must be a whole number from 0 to 1000, got 1.5' }],
      });
      const missing = await send(service.url, 'POST', '/browser-pools/x/release', {
        token: tokens.hobbyist,
        body: { reuse: 'yes' },
      });
      expect(missing.json).toEqual({
        code: 'invalid_request',
        message: 'The request body is invalid: session_id, reuse.',
        details: [
          { code: 'missing_field', message: 'session_id: is required' },
          { code: 'invalid_type', message: 'reuse: must be true or false, got "yes"' },
        ],
      });
      const settings = await send(service.url, 'POST', '/browsers', {
        token: tokens.hobbyist,
        body: { headless: 1, timeout_seconds: 5, viewport: { width: 800 }, tags: { a: 1 }, extensions: [{}] },
      });
      expect(settings.json).toEqual({
        code: 'invalid_request',
        message: 'The request body is invalid: extensions, headless, tags, timeout_seconds, viewport.',
        details: [
          { code: 'invalid_value', message: 'extensions: item 0 must give an id or a name' },
          { code: 'invalid_type', message: 'headless: must be true or false, got 1' },
          { code: 'invalid_value', message: 'tags: "a" must be a string, got 1' },
          { code: 'invalid_value', message: 'timeout_seconds: must be a whole number from 10 to 259200, got 5' },
          { code: 'invalid_value', message: 'viewport: height must be a whole number from 1 to 10000, got undefined' },
        ],
      });
      const notObject = await send(service.url, 'POST', '/browsers', { token: tokens.developer, body: [1, 2] });
      expect(notObject.json).toEqual({
        code: 'invalid_request',
        message: 'The request body is invalid: body.',
        details: [{ code: 'invalid_type', message: 'body: must be a JSON object, got an array' }],
      });
    });

    it('answers 415 for a body that is not declared as JSON', async () => {
      const answer = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.hobbyist,
        raw: 'name=x&size=1',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expectError(
        answer,
        415,
        '{"code":"unsupported_media_type","message":"Request bodies must be JSON: send Content-Type: application/json.","inner_error":{"code":"content_type","message":"got \\"application/x-www-form-urlencoded\\""}}',
      );
    });

    it('answers 413 for a body over 1 MiB, declared or streamed, and takes one of exactly 1 MiB', async () => {
      const PAYLOAD_TOO_LARGE =
        '{"code":"payload_too_large","message":"The request body is larger than 1048576 bytes (1 MiB)."}';
      const declared = await send(service.url, 'POST', '/browsers', {
        token: tokens.developer,
        raw: new Uint8Array(MAX_BODY_BYTES + 1).fill(0x20),
        headers: { 'content-type': 'application/json' },
      });
      expectError(declared, 413, PAYLOAD_TOO_LARGE);
      const chunk = new Uint8Array(64 * 1024).fill(0x20);
      let sent = 0;
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          // Up to 2 MiB, in chunks, with no Content-Length: the limit is found by counting.
          if (sent >= 2 * MAX_BODY_BYTES) controller.close();
          else {
            sent += chunk.length;
            controller.enqueue(chunk);
          }
        },
      });
      const streamed = await fetch(`${service.url}/browsers`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.developer}`, 'content-type': 'application/json' },
        body: stream,
        duplex: 'half',
      } as RequestInit);
      expect(streamed.status).toBe(413);
      expect(await streamed.text()).toBe(PAYLOAD_TOO_LARGE);
      const padding = MAX_BODY_BYTES - '{"pad":""}'.length;
      const exact = await send(service.url, 'POST', '/invocations', {
        token: tokens.developer,
        raw: `{"pad":"${'x'.repeat(padding)}"}`,
        headers: { 'content-type': 'application/json' },
      });
      expect(exact.status).toBe(202);
    });

    it('answers 500 with no internal detail when the limiter fails, and reports the error', async () => {
      await service.limiter.close();
      const answer = await send(service.url, 'POST', '/browsers', { token: tokens.developer });
      expectError(answer, 500, '{"code":"internal_error","message":"Internal server error."}');
      expect(service.errors).toHaveLength(1);
    });
  });
}
