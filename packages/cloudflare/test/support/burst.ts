import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareWorker, startWorkerd, type Workerd, type WranglerConfig } from './workerd.js';

// The README's Worker under a burst: its code block as written (durableObjectStore, fallback: memoryStore(), the
// default storeTimeoutMs, Hono's middleware) with the free plan swapped for the plan measured, and, for counting
// only, an onDecision hook that tallies each organization's decisions by source, read at GET /counts. Used by
// bench/burst.ts (`pnpm --filter @ratecard/cloudflare burst`) and test/readme-burst.test.ts. The same Worker with
// routes that reserve a slot of a concurrency limit serves test/leases-burst.test.ts.

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

function block(language: string): string {
  const found = README.match(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``));
  if (found === null) throw new Error(`the README has no ${language} block`);
  return found[1] as string;
}

/** Replaces `from` (which must occur exactly once) in the README's code, so that a README edit fails loudly here. */
function swap(code: string, from: string, to: string): string {
  if (code.split(from).length !== 2) throw new Error(`the README's Worker no longer has exactly one \`${from}\``);
  return code.replace(from, to);
}

/** The plans measured, with the numbers of each: the exact bound of a burst is counted from them. */
export const PLANS = {
  'perMinute(100)': { capacity: 100, refill: 100, intervalMs: 60_000 },
  'perHour(100)': { capacity: 100, refill: 100, intervalMs: 3_600_000 },
} as const;
export type Plan = keyof typeof PLANS;

/** The README's Worker with `plan` as the free plan, counting decisions per organization and source. */
export function readmeWorker(plan: Plan): string {
  let code = block('js');
  code = swap(
    code,
    "import { createLimiter, perHour } from '@ratecard/core';",
    "import { createLimiter, perHour, perMinute } from '@ratecard/core';",
  );
  code = swap(code, 'free: perHour(100)', `free: ${plan}`);
  code = swap(code, '  fallback: memoryStore(),\n', '  fallback: memoryStore(),\n  onDecision: count,\n');
  return swap(
    code,
    'export default app;',
    `// Added for the measurement: this isolate's decisions by organization, source and verdict.
const counts = new Map();
function count(decision, request) {
  const tally = counts.get(request.organization) ?? {};
  const key = \`\${decision.source} \${decision.allowed ? 'admitted' : 'refused'}\`;
  tally[key] = (tally[key] ?? 0) + 1;
  counts.set(request.organization, tally);
}
app.get('/counts', (c) => c.json(counts.get(c.req.query('organization')) ?? {}));

export default app;`,
  );
}

/**
 * The README's Worker with three routes for leases, beside its own: POST /sessions reserves a slot of the
 * organization's `concurrency(n)` through the README's limiter and keeps the Reservation in this isolate under a handle
 * (the answer says whether it was admitted, by which source, and the handle); POST /sessions/end settles the one under
 * a handle; GET /sessions peeks, answering the concurrency limit's outcome. The storeTimeoutMs of worker.mjs, so that
 * a burst queued at one object is all decided by it (a fallback's memory store holds slots of its own).
 */
export function readmeLeaseWorker(): string {
  let code = block('js');
  code = swap(
    code,
    "import { createLimiter, perHour } from '@ratecard/core';",
    "import { concurrency, createLimiter, perHour } from '@ratecard/core';",
  );
  code = swap(code, '  fallback: memoryStore(),\n', '  fallback: memoryStore(),\n  storeTimeoutMs: 5_000,\n');
  return swap(
    code,
    'export default app;',
    `// Added for the lease burst: an organization's sessions, at most n at once, held in this isolate until ended.
const sessions = (c) => ({
  organization: c.req.query('organization'),
  endpoint: 'POST /sessions',
  limits: [concurrency(Number(c.req.query('n')), { name: 'sessions' })],
});
const reservations = new Map();
let handles = 0;
app.post('/sessions', async (c) => {
  const reservation = await limiter.reserve({ ...sessions(c), leaseMs: 600_000 });
  const handle = reservation.held ? String(handles++) : null;
  if (handle !== null) reservations.set(handle, reservation);
  return c.json({ allowed: reservation.allowed, source: reservation.source, handle });
});
app.post('/sessions/end', async (c) => {
  const reservation = reservations.get(c.req.query('handle'));
  reservations.delete(c.req.query('handle'));
  return c.json({ ended: reservation === undefined ? false : await reservation.settle() });
});
app.get('/sessions', async (c) => {
  const decision = await limiter.peek(sessions(c));
  return c.json({ outcome: decision.outcomes[0], source: decision.source });
});

export default app;`,
  );
}

/** workerd serving the README's Worker with `plan`, in `isolates` isolates (Worker services) sharing its objects. */
export function startReadmeWorker(plan: Plan, isolates: number): Promise<{ workerd: Workerd; stop(): Promise<void> }> {
  return startWorker(readmeWorker(plan), isolates);
}

/** workerd serving `readmeLeaseWorker()` in `isolates` isolates sharing its objects. */
export function startLeaseWorker(isolates: number): Promise<{ workerd: Workerd; stop(): Promise<void> }> {
  return startWorker(readmeLeaseWorker(), isolates);
}

async function startWorker(code: string, isolates: number): Promise<{ workerd: Workerd; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'ratecard-cloudflare-burst-'));
  const wrangler = JSON.parse(block('jsonc')) as WranglerConfig;
  await prepareWorker({ contents: code }, wrangler, dir, join(dir, 'storage'), isolates);
  const workerd = await startWorkerd(dir);
  return {
    workerd,
    async stop() {
      await workerd.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One burst's figures. */
export interface Round {
  admitted: number;
  refused: number;
  /** Answers other than 200 and 429. */
  other: number;
  /** From the first request sent to the last answer read, in this process. */
  durationMs: number;
  /** The most an exact limiter may admit over that time: capacity + refill × duration / interval, floored. */
  bound: number;
  /** Decisions the fallback store made, admitted and refused, summed over the isolates. */
  fallbackAdmitted: number;
  fallbackRefused: number;
}

/** `requests` concurrent POSTs of one organization, sent round-robin to the Worker's isolates, counted. */
export async function burst(workerd: Workerd, plan: Plan, organization: string, requests: number): Promise<Round> {
  const started = performance.now();
  const statuses = await Promise.all(
    Array.from({ length: requests }, async (_, i) => {
      const response = await fetch(`${workerd.urls[i % workerd.urls.length]}/browsers`, {
        method: 'POST',
        headers: { 'x-api-key': organization },
      });
      await response.text();
      return response.status;
    }),
  );
  const durationMs = performance.now() - started;
  const { capacity, refill, intervalMs } = PLANS[plan];
  let fallbackAdmitted = 0;
  let fallbackRefused = 0;
  for (const url of workerd.urls) {
    const tally = (await (await fetch(`${url}/counts?organization=${encodeURIComponent(organization)}`)).json()) as
      | Record<string, number>
      | undefined;
    fallbackAdmitted += tally?.['fallback admitted'] ?? 0;
    fallbackRefused += tally?.['fallback refused'] ?? 0;
  }
  const admitted = statuses.filter((status) => status === 200).length;
  const refused = statuses.filter((status) => status === 429).length;
  return {
    admitted,
    refused,
    other: requests - admitted - refused,
    durationMs,
    bound: Math.floor(capacity + (refill * durationMs) / intervalMs),
    fallbackAdmitted,
    fallbackRefused,
  };
}
