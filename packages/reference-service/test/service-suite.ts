import type { Store } from '@ratecard/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES } from '../src/body.js';
import { type Answer, type RunningService, send, sendRaw, startService, testKeys } from './helpers.js';

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
      for (let i = 1; i <= 10; i++) {
        const answer = await send(service.url, 'POST', '/browsers', { token: tokens.developer });
        expect(answer.status).toBe(201);
        expect(answer.headers.get('x-ratelimit-limit')).toBe('10');
        expect(answer.headers.get('x-ratelimit-remaining')).toBe(String(10 - i));
      }
      const denied = await send(service.url, 'POST', '/browsers', { token: tokens.developer });
      expectError(denied, 429, RATE_LIMITED);
      expect(denied.headers.get('retry-after')).toBe('6');
      expect(denied.headers.get('x-ratelimit-limit')).toBe('10');
      expect(denied.headers.get('x-ratelimit-remaining')).toBe('0');
      // Every answer came from the store under test, not from a fallback.
      expect(service.decisions.map(({ decision }) => decision.source)).toEqual(Array(11).fill('store'));
    });

    it('counts per organization: another Developer organization is not limited by the first', async () => {
      for (let i = 0; i < 11; i++) await send(service.url, 'POST', '/browsers', { token: tokens.developer });
      const other = await send(service.url, 'POST', '/browsers', { token: tokens.other });
      expect(other.status).toBe(201);
      expect(other.headers.get('x-ratelimit-remaining')).toBe('9');
    });

    it('gives a trial Enterprise organization the Start-Up limit of 100', async () => {
      const answer = await send(service.url, 'POST', '/browsers', { token: tokens.trial });
      expect(answer.status).toBe(201);
      expect(answer.headers.get('x-ratelimit-limit')).toBe('100');
      expect(answer.headers.get('x-ratelimit-remaining')).toBe('99');
    });

    it('never answers 429 on the shadow routes, even past the limit', async () => {
      const created = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.developer,
        body: { name: 'shadow', size: 1 },
      });
      expect(created.status).toBe(201);
      const statuses: number[] = [];
      for (let i = 0; i < 15; i++) {
        const spelling = i % 2 === 0 ? 'browser-pools' : 'browser_pools';
        const answers = await Promise.all([
          send(service.url, 'POST', '/invocations', { token: tokens.developer, body: { action: 'run' } }),
          send(service.url, 'POST', `/${spelling}`, { token: tokens.developer, body: { name: `p${i}`, size: 0 } }),
          send(service.url, 'PUT', `/${spelling}/shadow`, { token: tokens.developer, body: { size: 2 } }),
        ]);
        for (const answer of answers) {
          statuses.push(answer.status);
          expect(answer.headers.get('retry-after')).toBeNull();
        }
      }
      expect(new Set(statuses)).toEqual(new Set([202, 201, 200]));
      // The limiter did see them over the limit: shadow mode counts and reports, it only never refuses.
      const limited = service.decisions.filter(({ decision }) => decision.mode === 'shadow' && decision.limited);
      expect(limited.length).toBeGreaterThan(0);
      // And POST /browsers still has its own full bucket.
      const browsers = await send(service.url, 'POST', '/browsers', { token: tokens.developer });
      expect(browsers.headers.get('x-ratelimit-remaining')).toBe('9');
    });

    it('applies a pool rule whichever spelling the path uses', async () => {
      await send(service.url, 'POST', '/browser_pools', { token: tokens.developer, body: { name: 'spell', size: 1 } });
      await send(service.url, 'PUT', '/browser_pools/spell', { token: tokens.developer, body: { size: 2 } });
      await send(service.url, 'PUT', '/browser-pools/spell', { token: tokens.developer, body: { size: 3 } });
      expect(service.decisions.map(({ decision }) => decision.rule)).toEqual([
        'POST /browser-pools',
        'PUT /browser-pools/:id',
        'PUT /browser-pools/:id',
      ]);
      const bucket = service.decisions.map(({ decision }) => decision.remaining);
      expect(bucket).toEqual([9, 9, 8]);
    });

    it('charges nothing for requests that fail authentication or the scope check', async () => {
      await send(service.url, 'POST', '/browsers', { token: 'nope' });
      await send(service.url, 'POST', '/browser-pools', { token: tokens.noPools, body: { name: 'x', size: 1 } });
      expect(service.decisions).toEqual([]);
    });
  });

  describe('pools', () => {
    it('creates a pool full of idle browsers and finds it by id and by name', async () => {
      const created = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.developer,
        body: { name: 'main', size: 3 },
      });
      expect(created.status).toBe(201);
      expect(created.headers.get('content-type')).toBe('application/json');
      const pool = created.json as { id: string };
      expect(pool).toEqual({
        id: expect.stringMatching(/^bp_[0-9a-f]{20}$/),
        name: 'main',
        size: 3,
        idle: 3,
        leased: 0,
      });
      for (const key of [pool.id, 'main']) {
        const found = await send(service.url, 'GET', `/browser-pools/${key}`, { token: tokens.developer });
        expect(found.status).toBe(200);
        expect(found.json).toEqual(pool);
      }
    });

    it('flush destroys exactly the idle browsers and leaves the leased ones', async () => {
      await send(service.url, 'POST', '/browser-pools', { token: tokens.developer, body: { name: 'fl', size: 5 } });
      const leases: string[] = [];
      for (let i = 0; i < 2; i++) {
        const acquired = await send(service.url, 'POST', '/browser-pools/fl/acquire', { token: tokens.developer });
        expect(acquired.status).toBe(200);
        leases.push((acquired.json as { browser_id: string }).browser_id);
      }
      const flushed = await send(service.url, 'POST', '/browser_pools/fl/flush', { token: tokens.developer });
      expect(flushed.status).toBe(204);
      expect(flushed.text).toBe('');
      const after = await send(service.url, 'GET', '/browser-pools/fl', { token: tokens.developer });
      expect(after.json).toMatchObject({ size: 5, idle: 0, leased: 2 });
      // The leased browsers are the same browsers: each can still be released, and then is idle.
      for (const browser of leases) {
        const released = await send(service.url, 'POST', '/browser-pools/fl/release', {
          token: tokens.developer,
          body: { browser_id: browser },
        });
        expect(released.status).toBe(204);
      }
      const end = await send(service.url, 'GET', '/browser-pools/fl', { token: tokens.developer });
      expect(end.json).toMatchObject({ idle: 2, leased: 0 });
    });

    it('accepts both spellings, browser_pools and browser-pools, on every pool route', async () => {
      for (const spelling of ['browser_pools', 'browser-pools']) {
        const at = (suffix: string): string => `/${spelling}/${spelling}-pool${suffix}`;
        const token = tokens.developer;
        const created = await send(service.url, 'POST', `/${spelling}`, {
          token,
          body: { name: `${spelling}-pool`, size: 2 },
        });
        expect(created.status).toBe(201);
        expect((await send(service.url, 'GET', at(''), { token })).status).toBe(200);
        expect((await send(service.url, 'PUT', at(''), { token, body: { size: 3 } })).json).toMatchObject({ idle: 3 });
        const acquired = await send(service.url, 'POST', at('/acquire'), { token });
        expect(acquired.status).toBe(200);
        const released = await send(service.url, 'POST', at('/release'), { token, body: acquired.json });
        expect(released.status).toBe(204);
        expect((await send(service.url, 'POST', at('/flush'), { token })).status).toBe(204);
        expect((await send(service.url, 'GET', at(''), { token })).json).toMatchObject({ size: 3, idle: 0, leased: 0 });
      }
    });

    it('resizes a pool by starting or destroying idle browsers, never below the leased ones', async () => {
      await send(service.url, 'POST', '/browser-pools', { token: tokens.developer, body: { name: 'rs', size: 2 } });
      await send(service.url, 'POST', '/browser-pools/rs/acquire', { token: tokens.developer });
      const grown = await send(service.url, 'PUT', '/browser-pools/rs', { token: tokens.developer, body: { size: 4 } });
      expect(grown.json).toMatchObject({ size: 4, idle: 3, leased: 1 });
      const shrunk = await send(service.url, 'PUT', '/browser-pools/rs', {
        token: tokens.developer,
        body: { size: 1 },
      });
      expect(shrunk.json).toMatchObject({ size: 1, idle: 0, leased: 1 });
      const tooSmall = await send(service.url, 'PUT', '/browser-pools/rs', {
        token: tokens.developer,
        body: { size: 0 },
      });
      expectError(
        tooSmall,
        409,
        '{"code":"conflict","message":"The pool has 1 leased browsers, so its size cannot go below that (got 0); release some first."}',
      );
    });

    it("answers 404 for another organization's pool, by id and by name, on every pool route", async () => {
      const created = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.developer,
        body: { name: 'mine', size: 2 },
      });
      const { id } = created.json as { id: string };
      for (const key of [id, 'mine']) {
        const attempts = await Promise.all([
          send(service.url, 'GET', `/browser-pools/${key}`, { token: tokens.other }),
          send(service.url, 'PUT', `/browser-pools/${key}`, { token: tokens.other, body: { size: 9 } }),
          send(service.url, 'POST', `/browser-pools/${key}/acquire`, { token: tokens.other }),
          send(service.url, 'POST', `/browser-pools/${key}/release`, {
            token: tokens.other,
            body: { browser_id: 'br_x' },
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
      const untouched = await send(service.url, 'GET', '/browser-pools/mine', { token: tokens.developer });
      expect(untouched.json).toMatchObject({ size: 2, idle: 2, leased: 0 });
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

    it('answers 403 when the key lacks the scope of the route area', async () => {
      for (const [method, path] of [
        ['POST', '/browser-pools'],
        ['GET', '/browser_pools/anything'],
        ['POST', '/browser_pools/anything/flush'],
      ] as const) {
        const answer = await send(service.url, method, path, { token: tokens.noPools });
        expectError(
          answer,
          403,
          '{"code":"forbidden","message":"This API key lacks the browser_pools scope needed here."}',
        );
      }
      expect((await send(service.url, 'POST', '/browsers', { token: tokens.noPools })).status).toBe(201);
    });

    it('answers 404 for an unknown route and for an unknown pool', async () => {
      for (const path of [
        '/',
        '/nope',
        '/browsers/extra',
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
        await send(service.url, 'POST', '/browser_pools/ghost/flush', { token: tokens.developer }),
        404,
        '{"code":"not_found","message":"No browser pool with id or name \\"ghost\\" in this organization."}',
      );
    });

    it('answers 405 with an Allow header for a method the route does not take', async () => {
      const cases: [string, string, string][] = [
        ['GET', '/browsers', 'POST'],
        ['DELETE', '/browser-pools/x', 'GET, HEAD, PUT'],
        ['GET', '/browser_pools', 'POST'],
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

    it('answers 409 for a duplicate pool name and for an acquire with no idle browser', async () => {
      await send(service.url, 'POST', '/browser-pools', { token: tokens.developer, body: { name: 'dup', size: 1 } });
      expectError(
        await send(service.url, 'POST', '/browser_pools', { token: tokens.developer, body: { name: 'dup', size: 4 } }),
        409,
        '{"code":"conflict","message":"A browser pool named \\"dup\\" already exists."}',
      );
      await send(service.url, 'POST', '/browser-pools/dup/acquire', { token: tokens.developer });
      expectError(
        await send(service.url, 'POST', '/browser-pools/dup/acquire', { token: tokens.developer }),
        409,
        '{"code":"conflict","message":"The pool has no idle browser to acquire."}',
      );
    });

    it('answers 400 for malformed JSON', async () => {
      const answer = await send(service.url, 'POST', '/browser-pools', {
        token: tokens.developer,
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
        token: tokens.developer,
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
        token: tokens.developer,
        body: { size: 1.5 },
      });
      expect(fractional.json).toEqual({
        code: 'invalid_request',
        message: 'The request body is invalid: size.',
        details: [{ code: 'invalid_value', message: 'size: must be a whole number from 0 to 1000, got 1.5' }],
      });
      const missing = await send(service.url, 'POST', '/browser-pools/x/release', {
        token: tokens.developer,
        body: {},
      });
      expect(missing.json).toEqual({
        code: 'invalid_request',
        message: 'The request body is invalid: browser_id.',
        details: [{ code: 'missing_field', message: 'browser_id: is required' }],
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
        token: tokens.developer,
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
