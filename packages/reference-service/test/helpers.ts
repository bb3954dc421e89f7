import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLimiter, type Decision, type Limiter, type LimitRequest, type Store } from '@ratecard/core';
import { type AppOptions, answerClientError, createApp } from '../src/app.js';
import type { ApiKey, ApiKeys } from '../src/auth.js';

export const ALL_SCOPES: ApiKey['scopes'] = ['browsers', 'browser_pools', 'invocations'];

/** One organization per role, named uniquely per run so buckets in a shared Redis never carry over between runs. */
export function testKeys(label: string): {
  keys: ApiKeys;
  tokens: Record<'developer' | 'trial' | 'noPools' | 'other' | 'startup', string>;
  organizations: Record<'developer' | 'trial' | 'noPools' | 'other' | 'startup', string>;
} {
  const run = `${label}_${randomBytes(4).toString('hex')}`;
  const token = (role: string): string => `tok_${role}_${randomBytes(12).toString('hex')}`;
  const tokens = {
    developer: token('developer'),
    trial: token('trial'),
    noPools: token('no_pools'),
    other: token('other'),
    startup: token('startup'),
  };
  const organizations = {
    developer: `org_developer_${run}`,
    trial: `org_trial_${run}`,
    noPools: `org_no_pools_${run}`,
    other: `org_other_${run}`,
    startup: `org_startup_${run}`,
  };
  const keys: ApiKeys = {
    [tokens.developer]: { organization: organizations.developer, plan: 'developer', scopes: ALL_SCOPES },
    [tokens.trial]: { organization: organizations.trial, plan: 'enterprise', trial: true, scopes: ALL_SCOPES },
    [tokens.noPools]: { organization: organizations.noPools, plan: 'developer', scopes: ['browsers', 'invocations'] },
    [tokens.other]: { organization: organizations.other, plan: 'developer', scopes: ALL_SCOPES },
    [tokens.startup]: { organization: organizations.startup, plan: 'startup', scopes: ALL_SCOPES },
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
  close(): Promise<void>;
}

/** The app on a real node:http server on 127.0.0.1, port 0, the way main.ts serves it. */
export async function startService(
  store: Store,
  keys: ApiKeys,
  extra: Partial<Pick<AppOptions, 'pools'>> = {},
): Promise<RunningService> {
  const decisions: RunningService['decisions'] = [];
  const errors: unknown[] = [];
  const limiter = createLimiter({ store, onDecision: (decision, request) => decisions.push({ decision, request }) });
  const app = createApp({ limiter, keys, onError: (error) => errors.push(error), ...extra });
  const server = createServer(app);
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    limiter,
    decisions,
    errors,
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
