import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLimiter, limitFor } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { createApp, createServiceServer, PLAN_EXCLUDES, PoolRegistry } from './app.js';
import type { ApiKeys } from './auth.js';
import { type Config, loadKeysFile, readConfig } from './config.js';
import { startMetrics } from './metrics.js';
import { openStore } from './store.js';

/** Longest a shutdown waits for in-flight requests before cutting the connections that still hold them. */
const DRAIN_TIMEOUT_MS = 10_000;
/**
 * A signal this soon after the first is the same Ctrl-C delivered twice: the terminal sends SIGINT to the whole
 * process group, and a parent that relays it (pnpm does, for `pnpm start`) sends another. Only a later one means
 * "stop now".
 */
const REPEAT_WINDOW_MS = 1_000;

function listen(server: Server, config: Config): Promise<AddressInfo> {
  return new Promise<AddressInfo>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

function table(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? [];
  return rows.map((row) => `  ${row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ')}`.trimEnd());
}

function banner(address: AddressInfo, config: Config, store: string, keys: ApiKeys): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const lines = [`ratecard reference service listening on http://${host}:${address.port}`, `store: ${store}`];
  const entries = Object.entries(keys);
  if (config.demoKeys) {
    // The shipped tokens are public by design; tokens from any other keys file are secrets and are never printed.
    lines.push(`demo tokens (${config.keysFile}):`);
    const rows = [['TOKEN', 'ORGANIZATION', 'PLAN', 'POST /browsers', 'SCOPES']];
    for (const [token, key] of entries) {
      const plan = `${key.plan}${key.trial === true ? ' (trial)' : ''}${key.override === undefined ? '' : ' (override)'}`;
      // A scope the plan lacks is shown as such: its routes answer 403 whatever the key says.
      const scopes = key.scopes.map((scope) =>
        PLAN_EXCLUDES[key.plan]?.includes(scope) === true ? `(${scope}: not in plan)` : scope,
      );
      rows.push([token, key.organization, plan, `${limitFor(key)}/min`, scopes.join(', ') || 'none']);
    }
    lines.push(...table(rows));
  } else {
    lines.push(`API keys: ${entries.length} from ${config.keysFile}`);
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const config = readConfig(process.env);
  const keys = loadKeysFile(config.keysFile);
  const backend = await openStore(config);
  const metrics = config.metricsPort === undefined ? undefined : await startMetrics(config.metricsPort, config.host);
  // Under Redis, per-process buckets answer while Redis is unreachable (the limiter's default 'fallback' policy).
  const fallback = memoryStore();
  const limiter = createLimiter(metrics?.instrument(backend, fallback) ?? { store: backend.store, fallback });
  const pools = new PoolRegistry();
  const app = createApp({ limiter, keys, pools });

  // From shutdown on, every answer closes its connection, so keep-alive clients cannot hold the shutdown open; that
  // includes requests already in flight, hence the set of responses not yet sent.
  let draining = false;
  const unsent = new Set<ServerResponse>();
  const server = createServiceServer((request, response) => {
    if (draining) {
      response.setHeader('connection', 'close');
    } else {
      unsent.add(response);
      response.on('close', () => unsent.delete(response));
    }
    app(request, response);
  }, config.limits);
  const address = await listen(server, config);
  console.log(banner(address, config, backend.description, keys));
  if (metrics !== undefined) console.log(`metrics: ${metrics.url}`);

  let firstSignalAt = 0;
  const shutdown = async (signal: NodeJS.Signals): Promise<void> => {
    if (draining) {
      if (performance.now() - firstSignalAt < REPEAT_WINDOW_MS) return;
      console.log(`${signal} again: exiting without waiting`);
      process.exit(1);
    }
    draining = true;
    firstSignalAt = performance.now();
    // An acquire waiting for a browser would hold its connection for up to its timeout: it is answered 204 now.
    pools.close();
    for (const response of unsent) if (!response.headersSent) response.setHeader('connection', 'close');
    console.log(`${signal}: finishing in-flight requests`);
    const cut = setTimeout(() => server.closeAllConnections(), DRAIN_TIMEOUT_MS);
    cut.unref();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
    clearTimeout(cut);
    await limiter.close();
    await backend.close();
    await metrics?.close();
    console.log('stopped');
    process.exit(0);
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, (received) => {
      shutdown(received).catch((error: unknown) => {
        console.error('reference-service: shutdown failed:', error);
        process.exit(1);
      });
    });
  }
}

main().catch((error: unknown) => {
  // Configuration and keys-file errors carry a message written for the operator; anything else keeps its stack.
  const known = error instanceof Error && (error.name === 'ConfigError' || error.name === 'KeysFileError');
  const busy = error instanceof Error && 'code' in error && error.code === 'EADDRINUSE';
  if (busy) console.error(`reference-service: ${(error as Error).message}; set PORT to a free port`);
  else console.error(known ? (error as Error).message : error);
  process.exit(1);
});
