import { randomBytes } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLimiter, type Decision, type Limiter, type LimitRequest, type Store } from '@ratecard/core';
import { type MemoryStore, memoryStore } from '@ratecard/memory';
import { redisStore } from '@ratecard/redis';
import { redisForTests } from '@ratecard/redis/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe } from 'vitest';
import { type AppOptions, createApp, createServiceServer, PoolRegistry, type ServerLimits } from '../src/app.js';
import type { ApiKey, ApiKeys } from '../src/auth.js';

export const ALL_SCOPES: ApiKey['scopes'] = ['browsers', 'browser_pools', 'invocations'];

type Role = 'developer' | 'hobbyist' | 'trial' | 'noPools' | 'other' | 'startup' | 'fast';

/**
 * One organization per role, named uniquely per run so buckets in a shared Redis never carry over between runs.
 * `developer` has no browser pools (its plan lacks them); `hobbyist` and `other` are two Hobbyist organizations;
 * `fast` has an override of 60 per minute, so a refused `POST /browsers` is told to retry after 1 s.
 */
export function testKeys(label: string): {
  keys: ApiKeys;
  tokens: Record<Role, string>;
  organizations: Record<Role, string>;
} {
  const run = `${label}_${randomBytes(4).toString('hex')}`;
  const roles: Role[] = ['developer', 'hobbyist', 'trial', 'noPools', 'other', 'startup', 'fast'];
  const tokens = {} as Record<Role, string>;
  const organizations = {} as Record<Role, string>;
  for (const role of roles) {
    tokens[role] = `tok_${role}_${randomBytes(12).toString('hex')}`;
    organizations[role] = `org_${role}_${run}`;
  }
  const keys: ApiKeys = {
    [tokens.developer]: { organization: organizations.developer, plan: 'developer', scopes: ALL_SCOPES },
    [tokens.hobbyist]: { organization: organizations.hobbyist, plan: 'hobbyist', scopes: ALL_SCOPES },
    [tokens.trial]: { organization: organizations.trial, plan: 'enterprise', trial: true, scopes: ALL_SCOPES },
    [tokens.noPools]: { organization: organizations.noPools, plan: 'startup', scopes: ['browsers', 'invocations'] },
    [tokens.other]: { organization: organizations.other, plan: 'hobbyist', scopes: ALL_SCOPES },
    [tokens.startup]: { organization: organizations.startup, plan: 'startup', scopes: ALL_SCOPES },
    [tokens.fast]: { organization: organizations.fast, plan: 'hobbyist', override: 60, scopes: ALL_SCOPES },
  };
  return { keys, tokens, organizations };
}

export interface RunningService {
  /** `http://127.0.0.1:<port>` */
  url: string;
  port: number;
  limiter: Limiter;
  /** Every decision the limiter made, in order. */
  decisions: { decision: Decision; request: LimitRequest }[];
  /** Every error the app reported (answered 500). */
  errors: unknown[];
  /** Connections the server holds open now. */
  connections(): Promise<number>;
  /** Acquires the app has asked of its pools so far; one that found no browser is waiting once counted. */
  acquires(): number;
  close(): Promise<void>;
}

/**
 * A memory store whose clock stands still at the instant it is made: its buckets see no time pass, so what a test reads
 * of them (Retry-After: 6 for the 11th request of 10 a minute, a third request refused by 2 a second) holds however
 * long a busy machine takes to send the requests.
 */
export function stillMemoryStore(): MemoryStore {
  const at = Date.now();
  return memoryStore({ now: () => at });
}

/** Waits until `done` holds, checking every 10 ms; fails after 10 s (a busy machine) with `what`. */
export async function until(done: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !done(); waited += 10) {
    if (waited >= 10_000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The app on a real node:http server on 127.0.0.1, port 0, the way main.ts serves it. */
export async function startService(
  store: Store,
  keys: ApiKeys,
  extra: Partial<Pick<AppOptions, 'pools' | 'browsers'>> & { limits?: ServerLimits } = {},
): Promise<RunningService> {
  const decisions: RunningService['decisions'] = [];
  const errors: unknown[] = [];
  const limiter = createLimiter({
    store,
    fallback: memoryStore(),
    onDecision: (decision, request) => decisions.push({ decision, request }),
  });
  const { limits, ...stores } = extra;
  const pools = stores.pools ?? new PoolRegistry();
  let acquires = 0;
  const acquire = pools.acquire.bind(pools);
  pools.acquire = (...args) => {
    // Counted once the call has returned: by then one that found no browser has joined the waiters.
    const session = acquire(...args);
    acquires++;
    return session;
  };
  const app = createApp({ limiter, keys, onError: (error) => errors.push(error), ...stores, pools });
  const server = createServiceServer(app, limits);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    limiter,
    decisions,
    errors,
    acquires: () => acquires,
    connections: () =>
      new Promise((resolve, reject) =>
        server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
      ),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await limiter.close();
    },
  };
}

export interface Answer {
  status: number;
  headers: Headers;
  /** The raw body text. */
  text: string;
  /** The body parsed as JSON, or undefined when there is none. */
  json: unknown;
}

/** One request over real HTTP with fetch. */
export async function send(
  url: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; raw?: string | Uint8Array; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | Uint8Array | undefined = options.raw;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(`${url}${path}`, { method, headers, body });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: text === '' ? undefined : JSON.parse(text) };
}

/**
 * A request through node:http's client, which can send what fetch cannot: a header repeated on separate lines.
 */
export function sendRaw(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string | string[]>,
  body?: string,
): Promise<{ status: number; headers: IncomingMessage['headers']; text: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          text: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

/**
 * `suite` in a describe block titled `title`, its stores Redis stores over one client of a redis-server started for
 * it. Under CI=true this throws when no Redis can be had, so the suite fails instead of passing by skipping.
 */
export async function describeOnRedis(
  title: string,
  suite: (newStore: (now?: () => number) => Store) => void,
): Promise<void> {
  const target = await redisForTests(title);
  describe.skipIf(target === undefined)(title, () => {
    let client: Redis;
    beforeAll(async () => {
      client = new Redis(target?.url ?? '');
      // Once PING answers the client is ready, so no decision falls back to memory for want of a connection.
      await client.ping();
    });
    afterAll(async () => {
      await client.quit();
      await target?.stop();
    });
    // Redis' own clock by default; the clock given, with one.
    suite((now) => (now === undefined ? redisStore({ client }) : redisStore({ client, clock: 'client', now })));
  });
}
