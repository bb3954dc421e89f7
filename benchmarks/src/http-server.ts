import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLimiter, type Limiter } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';

/**
 * The reference service's public pieces. The benchmarks package does not depend on it (it is private and not in the
 * lockfile as our dependency), so its built app is loaded by path; the HTTP suite is skipped when it is not built.
 */
interface ReferenceService {
  createApp(options: { limiter: Limiter; keys: Record<string, object> }): RequestListener;
}

export const REFERENCE_APP: URL = new URL('../../packages/reference-service/dist/app.js', import.meta.url);

export interface HttpServerJob {
  kind: 'http-server';
  name: string;
  /** 'limited': the default rules, `POST /browsers` enforced. 'unlimited': a limiter with no rules. */
  variant: 'limited' | 'unlimited';
  organizations: number;
}

/**
 * A limit per organization that a run never exhausts (a few hundred requests per second per organization for a few
 * seconds) and that never refills to full between two requests, so buckets live for the whole run as they do in a
 * busy service (a store may forget a full bucket, and with a huge limit every request would create its bucket anew).
 */
export const HTTP_LIMIT = 10_000;

/** The bearer tokens the load generator sends, one organization each, never limited (override HTTP_LIMIT/min). */
export function benchKeys(organizations: number): Record<string, object> {
  const keys: Record<string, object> = {};
  for (let i = 0; i < organizations; i++) {
    keys[`bench_token_${i}`] = {
      organization: `org_${i}`,
      plan: 'enterprise',
      override: HTTP_LIMIT,
      scopes: ['browsers'],
    };
  }
  return keys;
}

/**
 * Serves the reference app on 127.0.0.1 in this (child) process. Answers IPC messages: 'cpu' with this process's CPU
 * time, 'stop' by closing and exiting.
 */
export async function serveReferenceApp(job: HttpServerJob, send: (message: object) => void): Promise<void> {
  const service = (await import(REFERENCE_APP.href)) as ReferenceService;
  const limiter =
    job.variant === 'limited'
      ? createLimiter({ store: memoryStore() })
      : createLimiter({ store: memoryStore(), endpoints: {} });
  const app = service.createApp({ limiter, keys: benchKeys(job.organizations) });
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  process.on('message', (message: { type: string }) => {
    if (message.type === 'cpu') {
      const usage = process.cpuUsage();
      send({ type: 'cpu', micros: usage.user + usage.system });
    } else if (message.type === 'stop') {
      server.closeAllConnections();
      server.close(() => process.exit(0));
    }
  });
  send({ type: 'ready', port });
}
