// A child process of the harness (child.ts): runs a memory process' rounds, one heap case or one Redis round in a fresh
// V8, a contender's lone Redis rounds as the harness asks, or serves the reference service on 127.0.0.1 for the HTTP
// suite, and reports over IPC.
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Limiter } from '@ratecard/core';
import type { Job, Message } from './child.js';
import { HTTP_LIMIT, HTTP_VARIANTS } from './http.js';
import { MEMORY_CASES, type MemoryCase, memoryRounds } from './memory.js';
import { loneWorker, redisRound } from './redis.js';
import { organizationNames } from './results.js';

/** Loaded by path: the reference service is private, built by `pnpm build` with the packages. */
const REFERENCE_APP = new URL('../../packages/reference-service/dist/app.js', import.meta.url);
type ReferenceService = {
  createApp(options: { limiter: Limiter | null; keys: Record<string, object> }): RequestListener;
};

function send(message: Message): Promise<void> {
  return new Promise((resolve) => process.send?.(message, () => resolve()));
}

async function heapBytes(): Promise<number> {
  await new Promise((resolve) => setImmediate(resolve));
  const gc = (globalThis as { gc?: () => void }).gc as () => void;
  gc();
  gc();
  return process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
}

/** Bytes per organization, and what was tracked: returned, so it stays alive past the second reading. */
async function heap(contender: string, count: number): Promise<[number, ...unknown[]]> {
  const organizations = organizationNames(count);
  // The denied case's limiter: 10 per minute, so each organization's one call is admitted and its bucket kept.
  const run = (MEMORY_CASES[`${contender}/consume-denied`] as MemoryCase)[2](organizations);
  const before = await heapBytes();
  await run(count);
  const after = await heapBytes();
  return [(after - before) / count, run, organizations];
}

/** One bearer token per organization, with the override HTTP_LIMIT (see there). */
function benchKeys(organizations: number): Record<string, object> {
  const key = (i: number) => ({
    organization: `org_${i}`,
    plan: 'enterprise',
    override: HTTP_LIMIT,
    scopes: ['browsers'],
  });
  return Object.fromEntries(Array.from({ length: organizations }, (_, i) => [`bench_token_${i}`, key(i)]));
}

async function serve(variant: string, organizations: number): Promise<void> {
  const chosen = HTTP_VARIANTS.find((candidate) => candidate.name === variant);
  if (chosen === undefined) throw new Error(`no HTTP variant ${variant} to serve`);
  const service = (await import(REFERENCE_APP.href)) as ReferenceService;
  const server = createServer(service.createApp({ limiter: chosen.limiter(), keys: benchKeys(organizations) }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // The harness asks for the CPU used so far before and after each window, and kills the process when done.
  process.on('message', () => {
    const usage = process.cpuUsage();
    void send({ type: 'cpu', value: usage.user + usage.system });
  });
  await send({ type: 'ready', value: (server.address() as AddressInfo).port });
}

async function main(): Promise<void> {
  process.on('disconnect', () => process.exit(1));
  const job = JSON.parse(process.argv[2] ?? '{}') as Job;
  if (job.kind === 'http') return serve(job.variant, job.organizations);
  if (job.kind === 'lone') return loneWorker(job, (value) => send({ type: 'result', value }));
  const [value] =
    job.kind === 'heap'
      ? await heap(job.case, job.organizations)
      : [job.kind === 'memory' ? await memoryRounds(job) : await redisRound(job)];
  await send({ type: 'result', value });
  // Some libraries leave a timer per key behind; nothing else is left to do.
  process.exit(0);
}

main().catch(async (error: unknown) => {
  await send({ type: 'error', value: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
});
