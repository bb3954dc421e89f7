import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'vitest';
import { HARNESS } from '../test/support/harness.js';
import { FIXTURES, prepareWorker, startWorkerd, type WranglerConfig } from '../test/support/workerd.js';

// What one organization's object sustains in the local runtime: `pnpm --filter @ratecard/cloudflare bench`.
// Consumes for one organization from one isolate inside workerd (the harness's /bench route: the store and the
// object, no HTTP), then whole requests through the Hono Worker from this process. Object storage on this machine's
// temporary folder (a disk: SQLite syncs every write) and, where there is one, on /dev/shm (memory: no sync cost).
// Then two observations docs/runtimes.md reports: how many of the calls a burst of requests makes were made in the same
// turn as another call for the same organization (what batching by turn could put together), and what two workerd
// processes on one storage folder do with one organization's requests. No targets: figures to read.

interface Figures {
  perSecond: number;
  p50: number;
  p99: number;
}

const rows: string[] = [];
const row = (where: string, what: string, inFlight: number, figures: Figures) =>
  rows.push(
    `| ${where} | ${what} | ${inFlight} | ${Math.round(figures.perSecond)} | ${figures.p50.toFixed(1)} | ${figures.p99.toFixed(1)} |`,
  );

function quantiles(latencies: number[], elapsedMs: number): Figures {
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] as number;
  return { perSecond: (latencies.length / elapsedMs) * 1000, p50: at(0.5), p99: at(0.99) };
}

/** `total` POSTs of one organization through the Worker, `inFlight` at a time, timed here. */
async function overHttp(url: string, total: number, inFlight: number): Promise<Figures> {
  const organization = `bench-http-${Date.now()}-${Math.random()}`;
  const headers = { 'x-api-key': organization, 'x-plan': 'pro' };
  await (await fetch(`${url}/browsers`, { method: 'POST', headers })).text();
  const latencies: number[] = [];
  let sent = 0;
  const started = performance.now();
  const client = async () => {
    while (sent < total) {
      sent++;
      const at = performance.now();
      const response = await fetch(`${url}/browsers`, { method: 'POST', headers });
      await response.text();
      if (response.status !== 200) throw new Error(`the Worker answered ${response.status}`);
      latencies.push(performance.now() - at);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, client));
  return quantiles(latencies, performance.now() - started);
}

const places = [['disk', tmpdir()], ...(existsSync('/dev/shm') ? [['memory', '/dev/shm']] : [])] as const;

for (const [where, base] of places) {
  const dir = mkdtempSync(join(base, 'ratecard-cloudflare-bench-'));
  try {
    await prepareWorker(`${FIXTURES}harness.mjs`, HARNESS, join(dir, 'harness'), join(dir, 'storage'));
    const harness = await startWorkerd(join(dir, 'harness'));
    try {
      for (const [method, total, inFlight] of [
        ['consume', 2_000, 1],
        ['consume', 5_000, 10],
        ['consume', 5_000, 100],
        ['peek', 5_000, 1],
      ] as const) {
        const query = `method=${method}&total=${total}&inFlight=${inFlight}`;
        row(
          where,
          `${method} in the Worker`,
          inFlight,
          (await (await fetch(`${harness.url}/bench?${query}`)).json()) as Figures,
        );
      }
    } finally {
      await harness.stop();
    }
    const wrangler = JSON.parse(readFileSync(`${FIXTURES}wrangler.json`, 'utf8')) as WranglerConfig;
    await prepareWorker(`${FIXTURES}worker.mjs`, wrangler, join(dir, 'worker'), join(dir, 'storage'));
    const worker = await startWorkerd(join(dir, 'worker'));
    try {
      for (const inFlight of [1, 20])
        row(where, 'HTTP request (Hono)', inFlight, await overHttp(worker.url, 2_000, inFlight));
    } finally {
      await worker.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** 300 concurrent POSTs of one organization (100 an hour), sent round-robin to `urls`: the statuses counted. */
async function burst(urls: string[], organization: string): Promise<Record<number, number>> {
  const statuses = await Promise.all(
    Array.from({ length: 300 }, async (_, i) => {
      const response = await fetch(`${urls[i % urls.length]}/browsers`, {
        method: 'POST',
        headers: { 'x-api-key': organization },
      });
      await response.text();
      return response.status;
    }),
  );
  const counted: Record<number, number> = {};
  for (const status of statuses) counted[status] = (counted[status] ?? 0) + 1;
  return counted;
}

const notes: string[] = [];
{
  const dir = mkdtempSync(join(tmpdir(), 'ratecard-cloudflare-bench-'));
  const wrangler = JSON.parse(readFileSync(`${FIXTURES}wrangler.json`, 'utf8')) as WranglerConfig;
  try {
    await prepareWorker(new URL('fixtures/turns.mjs', import.meta.url).pathname, wrangler, dir, join(dir, 'storage'));
    const workerd = await startWorkerd(dir);
    try {
      for (let i = 0; i < 2; i++) await burst([workerd.url], `turns-${Date.now()}-${i}`);
      const counts = (await (await fetch(`${workerd.url}/counts`)).json()) as { calls: number; sameTurn: number };
      notes.push(
        `Two bursts of 300 requests of one organization: ${counts.calls} consumes sent, ${counts.sameTurn} in the same turn as another for that organization.`,
      );
    } finally {
      await workerd.stop();
    }
    // The user's Worker twice, as two processes on one storage folder.
    await prepareWorker(`${FIXTURES}worker.mjs`, wrangler, join(dir, 'a'), join(dir, 'shared'));
    await prepareWorker(`${FIXTURES}worker.mjs`, wrangler, join(dir, 'b'), join(dir, 'shared'));
    const a = await startWorkerd(join(dir, 'a'));
    const b = await startWorkerd(join(dir, 'b'));
    try {
      const split = await burst([a.url, b.url], `processes-${Date.now()}`);
      const busy = /SQLITE_BUSY/.test(a.output() + b.output());
      notes.push(
        `Two workerd processes on one storage folder, 300 concurrent requests of one organization (100 an hour) split over them: ${JSON.stringify(split)} (status: count)${busy ? ', SQLITE_BUSY in their logs' : ''}.`,
      );
      const organization = `sequential-${Date.now()}`;
      const first = await burst([a.url], organization);
      const then = await burst([b.url], organization);
      notes.push(
        `The same, one organization's requests to one process, then to the other: ${JSON.stringify(first)}, then ${JSON.stringify(then)}.`,
      );
    } finally {
      await a.stop();
      await b.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

it('measured one object', () => {
  console.log(
    [
      '| storage | call, one organization | in flight | decisions/s | p50 ms | p99 ms |',
      '| --- | --- | --- | --- | --- | --- |',
      ...rows,
      '',
      ...notes,
    ].join('\n'),
  );
});
