import {
  createLimiter,
  type EndpointMode,
  type Limit,
  type Limiter,
  perHour,
  perMinute,
  perSecond,
  RateLimitError,
  type StoreErrorPolicy,
} from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { parseList } from 'structured-headers';
import { afterEach, describe, expect, it } from 'vitest';
import type { Identity } from '../src/evaluate.js';
import type { RateLimitHeaderOptions } from '../src/headers.js';
import { asynchronous, brokenStore, identityFrom, rawRequest, type TestClock, testClock } from './support.js';

/** What `identify` sees of a request in these tests: its headers and the client's IP address as the framework gives it. */
export interface Sender {
  header: (name: string) => string | undefined;
  ip: string | undefined;
}

/** The tests' identify: the stand-in for authentication of support.ts unless a test gives its own. */
const BY_HEADERS = (sender: Sender): Identity | null => identityFrom(sender.header);

/** What an adapter test starts: an app with the middleware in front of a catch-all handler answering 200 `ok`. */
export interface AppConfig extends RateLimitHeaderOptions {
  limiter: Limiter;
  /** What identify returns for a request; the adapter hands it the request's headers and IP address. */
  identify: (sender: Sender) => Identity | null;
  /** Passed to the middleware; reports limiter failures. */
  onError: (error: unknown) => void;
  /** When set, identify throws this instead of reading the headers. */
  identifyThrows?: Error & { status?: number };
  /** Counts requests that reached the handler. */
  reached: () => void;
}

export interface RunningApp {
  url: string;
  close: () => Promise<void>;
}

export interface AdapterUnderTest {
  name: string;
  /**
   * Builds and listens. identify must return `config.identify` of the request's sender; the app's own error handling must
   * answer an error carrying `status: 401` with 401 and the body `{"code":"unauthorized","message":"..."}`.
   */
  start: (config: AppConfig) => Promise<RunningApp>;
  /** True when an exception in identify reaches the framework's error handling (all but node:http). */
  identifyErrorsGoToApp: boolean;
  /** What the server answers `OPTIONS *` with before any middleware runs, if it does (Hono's Node server: 400). */
  asteriskFormStatus?: number;
}

const DENIAL = '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}';
const FAILURE = '{"code":"internal_error","message":"Internal server error."}';

interface Harness {
  url: string;
  clock: TestClock;
  reached: () => number;
  errors: unknown[];
  send: (method: string, path: string, who?: Record<string, string>) => Promise<Response>;
}

/** The same behaviour checks, against every adapter over real HTTP. */
export function adapterSuite(adapter: AdapterUnderTest): void {
  // A store may answer with values (memory) or promises (Redis); every adapter must behave the same on both.
  describe.each(['synchronous', 'asynchronous'] as const)(`${adapter.name} adapter, %s store`, (kind) => {
    let running: RunningApp | undefined;

    afterEach(async () => {
      await running?.close();
      running = undefined;
    });

    async function start(
      options: RateLimitHeaderOptions & {
        endpoints?: Record<string, EndpointMode>;
        onStoreError?: StoreErrorPolicy;
        broken?: boolean;
        identifyThrows?: AppConfig['identifyThrows'];
        identify?: AppConfig['identify'];
      } = {},
    ): Promise<Harness> {
      const clock = testClock();
      const limiter = createLimiter({
        store:
          options.broken === true
            ? brokenStore()
            : kind === 'synchronous'
              ? memoryStore({ now: clock.now })
              : asynchronous(memoryStore({ now: clock.now })),
        endpoints: options.endpoints,
        onStoreError: options.onStoreError,
      });
      let reached = 0;
      const errors: unknown[] = [];
      running = await adapter.start({
        limiter,
        identify: options.identify ?? BY_HEADERS,
        ietf: options.ietf,
        policy: options.policy,
        shadowHeaders: options.shadowHeaders,
        identifyThrows: options.identifyThrows,
        onError: (error) => errors.push(error),
        reached: () => {
          reached++;
        },
      });
      const url = running.url;
      return {
        url,
        clock,
        reached: () => reached,
        errors,
        send: (method, path, who = { authorization: 'Bearer org-1' }) => fetch(url + path, { method, headers: who }),
      };
    }

    it.each([
      ['developer', {}, '10'],
      ['hobbyist', {}, '25'],
      ['startup', {}, '100'],
      ['enterprise', {}, '250'],
      ['developer on trial', { 'x-trial': '1' }, '100'],
      ['enterprise with an override', { 'x-override': '1000' }, '1000'],
    ])('sends the exact limit and remaining for a %s organization', async (label, extra, limit) => {
      const app = await start();
      const plan = label.split(' ')[0] as string;
      const response = await app.send('POST', '/browsers', { authorization: 'Bearer org-1', 'x-plan': plan, ...extra });
      expect(response.status).toBe(200);
      expect(await response.text()).toBe('ok');
      expect(response.headers.get('x-ratelimit-limit')).toBe(limit);
      expect(response.headers.get('x-ratelimit-remaining')).toBe(String(Number(limit) - 1));
      expect(response.headers.get('retry-after')).toBeNull();
      expect(response.headers.get('ratelimit')).toBeNull();
    });

    it('answers the 11th request of a Developer burst 429 with the exact body, headers and Retry-After: 6', async () => {
      const app = await start();
      for (let i = 1; i <= 10; i++) {
        const response = await app.send('POST', '/browsers');
        expect(response.status).toBe(200);
        expect(response.headers.get('x-ratelimit-remaining')).toBe(String(10 - i));
        await response.arrayBuffer();
      }
      const denied = await app.send('POST', '/browsers');
      expect(denied.status).toBe(429);
      expect(denied.headers.get('content-type')).toBe('application/json');
      expect(denied.headers.get('retry-after')).toBe('6');
      expect(denied.headers.get('x-ratelimit-limit')).toBe('10');
      expect(denied.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(await denied.text()).toBe(DENIAL);
      expect(app.reached()).toBe(10);
    });

    it('lets the request through again once Retry-After has passed', async () => {
      const app = await start();
      for (let i = 0; i < 10; i++) await (await app.send('POST', '/browsers')).arrayBuffer();
      const denied = await app.send('POST', '/browsers');
      await denied.arrayBuffer();
      app.clock.advance(Number(denied.headers.get('retry-after')) * 1000);
      const allowed = await app.send('POST', '/browsers');
      expect(allowed.status).toBe(200);
      expect(allowed.headers.get('x-ratelimit-remaining')).toBe('0');
    });

    it('keeps one bucket per organization', async () => {
      const app = await start();
      for (let i = 0; i < 10; i++) await (await app.send('POST', '/browsers')).arrayBuffer();
      const other = await app.send('POST', '/browsers', { authorization: 'Bearer org-2' });
      expect(other.status).toBe(200);
      expect(other.headers.get('x-ratelimit-remaining')).toBe('9');
    });

    it('never answers 429 on a shadow route and sends no headers there by default', async () => {
      const app = await start();
      for (let i = 0; i < 15; i++) {
        const response = await app.send('POST', '/invocations');
        expect(response.status).toBe(200);
        expect(response.headers.get('x-ratelimit-limit')).toBeNull();
        expect(response.headers.get('retry-after')).toBeNull();
        await response.arrayBuffer();
      }
      expect(app.reached()).toBe(15);
    });

    it('sends the headers on a shadow route with shadowHeaders, still without 429 or Retry-After', async () => {
      const app = await start({ shadowHeaders: true });
      let last: Response | undefined;
      for (let i = 0; i < 12; i++) {
        last = await app.send('POST', '/invocations');
        expect(last.status).toBe(200);
        await last.arrayBuffer();
      }
      expect(last?.headers.get('x-ratelimit-limit')).toBe('10');
      expect(last?.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(last?.headers.get('retry-after')).toBeNull();
    });

    it('sends no rate-limit headers on a route without a rule', async () => {
      const app = await start();
      for (const [method, path] of [
        ['GET', '/browsers'],
        ['GET', '/health'],
        ['DELETE', '/browsers/abc'],
      ] as const) {
        const response = await app.send(method, path);
        expect(response.status).toBe(200);
        expect(response.headers.get('x-ratelimit-limit')).toBeNull();
        expect(response.headers.get('x-ratelimit-remaining')).toBeNull();
        await response.arrayBuffer();
      }
    });

    it('counts browser_pools and browser-pools, trailing slashes, case and query strings in one bucket', async () => {
      const app = await start({
        endpoints: { 'POST /browser-pools': 'enforce', 'PUT /browser-pools/:id': 'enforce' },
      });
      const seen: (string | null)[] = [];
      for (const path of [
        '/browser-pools',
        '/browser_pools',
        '/browser_pools/',
        '/Browser-Pools?name=a',
        '/%62rowser-pools',
      ]) {
        const response = await app.send('POST', path);
        seen.push(response.headers.get('x-ratelimit-remaining'));
        await response.arrayBuffer();
      }
      expect(seen).toEqual(['9', '8', '7', '6', '5']);
      const puts: (string | null)[] = [];
      for (const path of ['/browser-pools/abc', '/browser_pools/def/', '/browser-pools/ghi?x=1']) {
        const response = await app.send('PUT', path);
        puts.push(response.headers.get('x-ratelimit-remaining'));
        await response.arrayBuffer();
      }
      expect(puts).toEqual(['9', '8', '7']);
    });

    it('counts an absolute-form request target, as proxies send it, in the same bucket', async () => {
      const app = await start();
      await (await app.send('POST', '/browsers')).arrayBuffer();
      const raw = await rawRequest(app.url, 'POST', `${app.url}/browsers`, { authorization: 'Bearer org-1' });
      expect(raw.headers['x-ratelimit-remaining']).toBe('8');
    });

    it('lets a request that identify returns null for through untouched', async () => {
      const app = await start();
      for (let i = 0; i < 12; i++) {
        const response = await app.send('POST', '/browsers', {});
        expect(response.status).toBe(200);
        expect(response.headers.get('x-ratelimit-limit')).toBeNull();
        await response.arrayBuffer();
      }
      expect(app.reached()).toBe(12);
    });

    it('answers 500 with an Error body and no internals when the store fails under onStoreError: throw', async () => {
      const app = await start({ broken: true, onStoreError: 'throw' });
      const response = await app.send('POST', '/browsers');
      expect(response.status).toBe(500);
      expect(response.headers.get('content-type')).toBe('application/json');
      const body = await response.text();
      expect(body).toBe(FAILURE);
      expect(body).not.toMatch(/ECONNREFUSED|secret-host|at /);
      expect(response.headers.get('x-ratelimit-limit')).toBeNull();
      expect(app.reached()).toBe(0);
      expect(app.errors).toHaveLength(1);
      expect(app.errors[0]).toBeInstanceOf(RateLimitError);
      expect((app.errors[0] as RateLimitError).code).toBe('store_unavailable');
    });

    it('answers a failed store by the limiter policy when it is not throw (deny: 429)', async () => {
      const app = await start({ broken: true, onStoreError: 'deny' });
      const response = await app.send('POST', '/browsers');
      expect(response.status).toBe(429);
      expect(response.headers.get('retry-after')).toBe('6');
      expect(await response.text()).toBe(DENIAL);
    });

    if (adapter.identifyErrorsGoToApp) {
      it("hands an exception in identify to the framework's error handling", async () => {
        const error = Object.assign(new Error('bad token'), { status: 401 });
        const app = await start({ identifyThrows: error });
        const response = await app.send('POST', '/browsers');
        expect(response.status).toBe(401);
        expect(await response.json()).toEqual({ code: 'unauthorized', message: 'bad token' });
        expect(app.errors).toEqual([]);
      });
    } else {
      it('answers 500 internal_error and reports an exception in identify to onError', async () => {
        const error = new Error('auth database down');
        const app = await start({ identifyThrows: error });
        const response = await app.send('POST', '/browsers');
        expect(response.status).toBe(500);
        expect(await response.text()).toBe(FAILURE);
        expect(app.errors).toEqual([error]);
      });
    }

    it('lets a route without a rule through untouched when identify throws there, as when it was not asked', async () => {
      const app = await start({ identifyThrows: new Error('no key on a public route') });
      const response = await app.send('GET', '/health');
      expect(response.status).toBe(200);
      expect(response.headers.get('x-ratelimit-limit')).toBeNull();
      expect(app.errors).toEqual([]);
    });

    it('limits per IP with limits from identify, on a route no rule matches: the 11th at once is a 429', async () => {
      const perIp = perSecond(5, { burst: 10 });
      const app = await start({
        ietf: true,
        identify: ({ ip }) => (ip === undefined ? null : { organization: ip, limits: perIp }),
      });
      for (let i = 1; i <= 10; i++) {
        const response = await app.send('POST', '/api/upload', {});
        expect(response.status).toBe(200);
        expect(response.headers.get('x-ratelimit-limit')).toBe('10');
        expect(response.headers.get('x-ratelimit-remaining')).toBe(String(10 - i));
        await response.arrayBuffer();
      }
      const denied = await app.send('POST', '/api/upload', {});
      expect(denied.status).toBe(429);
      expect(denied.headers.get('content-type')).toBe('application/json');
      // One token comes back every 200 ms: Retry-After rounds it up to a second.
      expect(denied.headers.get('retry-after')).toBe('1');
      expect(denied.headers.get('x-ratelimit-limit')).toBe('10');
      expect(denied.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(denied.headers.get('ratelimit-policy')).toBe('"1s";q=10;w=2');
      expect(denied.headers.get('ratelimit')).toBe('"1s";r=0;t=1');
      expect(await denied.text()).toBe(DENIAL);
      expect(app.reached()).toBe(10);
      app.clock.advance(200);
      const again = await app.send('POST', '/api/upload', {});
      expect(again.status).toBe(200);
      expect(again.headers.get('x-ratelimit-remaining')).toBe('0');
    });

    it('answers 500 for an identity with a misspelt key, never letting it through uncounted, and reports it', async () => {
      const perIp = perSecond(5, { burst: 10 });
      const app = await start({
        identify: ({ ip }) => ({ organization: ip ?? 'unknown', limit: perIp }) as unknown as Identity,
      });
      for (const [method, path] of [
        ['POST', '/api/upload'],
        ['GET', '/health'],
        ['POST', '/browsers'],
      ] as const) {
        const response = await app.send(method, path, {});
        expect(response.status).toBe(500);
        expect(response.headers.get('x-ratelimit-limit')).toBeNull();
        expect(await response.text()).toBe(FAILURE);
      }
      expect(app.reached()).toBe(0);
      expect(app.errors).toHaveLength(3);
      for (const error of app.errors) {
        expect(error).toBeInstanceOf(RateLimitError);
        expect(error).toMatchObject({
          code: 'invalid_argument',
          message:
            'ratecard: the identity identify returned has an unknown key "limit"; did you mean "limits"? It takes organization, plan, trial, override, limits, cost, leaseMs',
        });
      }
    });

    it('enforces limits identify gives on a shadow route, which stays shadow for plan limits', async () => {
      const app = await start({
        identify: ({ header }) =>
          header('x-own') === '1' ? { organization: 'org-1', limits: perSecond(2) } : identityFrom(header),
      });
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await app.send('POST', '/invocations', { 'x-own': '1' })).status);
      expect(statuses).toEqual([200, 200, 429]);
      const byPlan = [];
      for (let i = 0; i < 11; i++)
        byPlan.push((await app.send('POST', '/invocations', { authorization: 'Bearer org-2' })).status);
      expect(byPlan).toEqual(Array(11).fill(200));
    });

    it('keeps limits of one name given for different routes no rule matches in buckets of their own', async () => {
      const byRoute: Record<string, Limit> = { search: perMinute(30), export: perMinute(2), items: perMinute(100) };
      const app = await start({
        identify: ({ header }) => ({ organization: 'org-1', limits: byRoute[header('x-route') ?? ''] ?? perMinute(1) }),
      });
      const call = async (method: string, path: string, route: string) => {
        const response = await app.send(method, path, { 'x-route': route });
        await response.arrayBuffer();
        return response.status;
      };
      for (let i = 0; i < 30; i++) expect(await call('POST', '/search', 'search')).toBe(200);
      expect(await call('POST', '/search', 'search')).toBe(429);
      const exports = [];
      for (let i = 0; i < 3; i++) exports.push(await call('POST', '/export', 'export'));
      expect(exports).toEqual([200, 200, 429]);
      const items = [];
      for (let i = 0; i < 5; i++) items.push(await call('GET', `/items/${i}?page=${i}`, 'items'));
      expect(items).toEqual([200, 200, 200, 200, 200]);
    });

    it('limits a request with a query string of 260 characters by its limits from identify, never 500', async () => {
      const app = await start({
        identify: ({ ip }) => (ip === undefined ? null : { organization: ip, limits: perSecond(5, { burst: 10 }) }),
      });
      const statuses: number[] = [];
      for (let i = 0; i < 11; i++) {
        // A different query each time: the query is no part of the bucket.
        const response = await app.send('GET', `/search?q=${String(i).padEnd(260, 'x')}`, {});
        statuses.push(response.status);
        if (i === 0) expect(response.headers.get('x-ratelimit-remaining')).toBe('9');
        await response.arrayBuffer();
      }
      expect(statuses).toEqual([...Array<number>(10).fill(200), 429]);
      expect(app.errors).toEqual([]);
    });

    it('limits a request whose path alone is 300 characters by its limits from identify, never 500', async () => {
      const app = await start({
        identify: ({ ip }) => (ip === undefined ? null : { organization: ip, limits: perSecond(1) }),
      });
      const path = `/files/${'a'.repeat(300)}`;
      const first = await app.send('GET', path, {});
      expect(first.status).toBe(200);
      expect(first.headers.get('x-ratelimit-limit')).toBe('1');
      await first.arrayBuffer();
      const second = await app.send('GET', `${path}b`, {});
      expect(second.status).toBe(429);
      await second.arrayBuffer();
      expect(app.errors).toEqual([]);
    });

    it('counts a request no rule matches under the catch-all, not under a rule ALL /:tenant beside it', async () => {
      const app = await start({
        endpoints: { 'ALL /:tenant': 'shadow' },
        identify: ({ ip }) => (ip === undefined ? null : { organization: ip, limits: perSecond(1) }),
      });
      const first = await app.send('GET', '/a/b', {});
      await first.arrayBuffer();
      const second = await app.send('GET', '/c/d?page=2', {});
      await second.arrayBuffer();
      expect([first.status, second.status]).toEqual([200, 429]);
    });

    it('never answers OPTIONS * 500: it is limited by its limits from identify, or the server answers it first', async () => {
      const app = await start({
        identify: ({ ip }) => (ip === undefined ? null : { organization: ip, limits: perSecond(1) }),
      });
      const first = await rawRequest(app.url, 'OPTIONS', '*', {});
      const second = await rawRequest(app.url, 'OPTIONS', '*', {});
      expect(app.errors).toEqual([]);
      if (adapter.asteriskFormStatus !== undefined) {
        expect([first.status, second.status]).toEqual([adapter.asteriskFormStatus, adapter.asteriskFormStatus]);
        return;
      }
      // Counted like any request, so the second within the second is refused.
      expect(first.status).toBe(200);
      expect(first.headers['x-ratelimit-limit']).toBe('1');
      expect(second.status).toBe(429);
    });

    it('still passes a route no rule matches untouched when identify gives no limits', async () => {
      const app = await start({ ietf: true });
      for (let i = 0; i < 15; i++) {
        const response = await app.send('POST', '/api/upload');
        expect(response.status).toBe(200);
        expect(response.headers.get('x-ratelimit-limit')).toBeNull();
        expect(response.headers.get('ratelimit')).toBeNull();
        await response.arrayBuffer();
      }
    });

    it('lists both limits of a 10/s + 1000/h request as RateLimit-Policy and RateLimit items', async () => {
      const limits = [perSecond(10), perHour(1000)];
      const app = await start({
        ietf: true,
        identify: ({ header }) => {
          const organization = header('authorization');
          return organization === undefined ? null : { organization, limits };
        },
      });
      const first = await app.send('POST', '/browsers');
      await first.arrayBuffer();
      expect(first.status).toBe(200);
      const policies = parseList(first.headers.get('ratelimit-policy') as string);
      expect(policies.map(([name, parameters]) => [name, Object.fromEntries(parameters)])).toEqual([
        ['1s', { q: 10, w: 1 }],
        ['1h', { q: 1000, w: 3600 }],
      ]);
      const items = parseList(first.headers.get('ratelimit') as string);
      expect(items.map(([name, parameters]) => [name, Object.fromEntries(parameters)])).toEqual([
        ['1s', { r: 9, t: 1 }],
        ['1h', { r: 999, t: 4 }],
      ]);
      for (let i = 0; i < 9; i++) await (await app.send('POST', '/browsers')).arrayBuffer();
      const denied = await app.send('POST', '/browsers');
      await denied.arrayBuffer();
      expect(denied.status).toBe(429);
      expect(denied.headers.get('retry-after')).toBe('1');
      expect(denied.headers.get('x-ratelimit-limit')).toBe('10');
      // The hour was not charged for the refused request: it still holds 990.
      expect(denied.headers.get('ratelimit')).toBe('"1s";r=0;t=1, "1h";r=990;t=36');
      // A second later the second's bucket is full again; the hour has refilled 1000/3600 of a token.
      app.clock.advance(1000);
      const later = await app.send('POST', '/browsers');
      await later.arrayBuffer();
      expect(later.status).toBe(200);
      expect(later.headers.get('ratelimit')).toBe('"1s";r=9;t=1, "1h";r=989;t=39');
    });

    it('adds IETF RateLimit-Policy and RateLimit fields that parse as RFC 9651 lists', async () => {
      const app = await start({ ietf: true });
      const first = await app.send('POST', '/browsers', { authorization: 'Bearer org-1', 'x-plan': 'hobbyist' });
      await first.arrayBuffer();
      const [policy] = parseList(first.headers.get('ratelimit-policy') as string);
      expect(policy?.[0]).toBe('1m');
      expect(Object.fromEntries(policy?.[1] ?? [])).toEqual({ q: 25, w: 60 });
      const [limit] = parseList(first.headers.get('ratelimit') as string);
      expect(limit?.[0]).toBe('1m');
      // One token used of 25: the bucket is full again in 60/25 = 2.4 s, so t = 3.
      expect(Object.fromEntries(limit?.[1] ?? [])).toEqual({ r: 24, t: 3 });
    });

    it('makes the IETF t equal Retry-After on a denial, with a policy prefix escaped', async () => {
      const app = await start({ ietf: true, policy: 'browsers "per-minute" \\ v1' });
      for (let i = 0; i < 10; i++) await (await app.send('POST', '/browsers')).arrayBuffer();
      app.clock.advance(1500);
      const denied = await app.send('POST', '/browsers');
      await denied.arrayBuffer();
      expect(denied.status).toBe(429);
      expect(denied.headers.get('retry-after')).toBe('5');
      const [policy] = parseList(denied.headers.get('ratelimit-policy') as string);
      expect(policy?.[0]).toBe('browsers "per-minute" \\ v1:1m');
      expect(Object.fromEntries(policy?.[1] ?? [])).toEqual({ q: 10, w: 60 });
      const [limit] = parseList(denied.headers.get('ratelimit') as string);
      expect(limit?.[0]).toBe('browsers "per-minute" \\ v1:1m');
      expect(Object.fromEntries(limit?.[1] ?? [])).toEqual({ r: 0, t: 5 });
    });
  });
}
