import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { firstErrorLine, missingModule } from './child.js';
import { onCleanup } from './cleanup.js';
import type { BenchConfig } from './config.js';
import { httpLoad } from './http-load.js';
import { HTTP_LIMIT, type HttpServerJob, REFERENCE_APP } from './http-server.js';
import { progress } from './progress.js';
import { type Measurement, measurement } from './results.js';
import { human, latencyMicros, sig } from './stats.js';

const WORKER = fileURLToPath(new URL('./worker.js', import.meta.url));

/** Whether the reference service is built; the HTTP suite needs its dist/app.js. */
export function referenceServiceBuilt(): boolean {
  return existsSync(fileURLToPath(REFERENCE_APP));
}

interface ServerChild {
  port: number;
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

/** Starts the server child, retrying once after a pause when a workspace package was being rebuilt. */
async function startServer(job: HttpServerJob): Promise<ServerChild> {
  try {
    return await startServerOnce(job);
  } catch (error) {
    if (!missingModule(error)) throw error;
    progress('http: a module was missing when the server started (a build in progress?); retrying once');
    await new Promise((resolve) => setTimeout(resolve, 5000));
    return startServerOnce(job);
  }
}

function startServerOnce(job: HttpServerJob): Promise<ServerChild> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = fork(WORKER, [JSON.stringify(job)], { stdio: ['ignore', 'inherit', 'pipe', 'ipc'] });
    const kill = onCleanup(`http server child ${job.variant}`, () => {
      child.kill('SIGKILL');
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      stderr = (stderr + chunk.toString()).slice(-2000);
    });
    const timer = setTimeout(() => reject(new Error('the reference service did not start within 15 s')), 15_000);
    child.once('close', (code) => {
      clearTimeout(timer);
      void kill();
      const why = firstErrorLine(stderr.split('\n'));
      reject(
        new Error(`the reference service child exited (${code}) before it was ready${why === '' ? '' : `: ${why}`}`),
      );
    });
    const waiters: ((micros: number) => void)[] = [];
    child.on('message', (message: { type: string; port?: number; micros?: number; ok?: boolean; error?: string }) => {
      if (message.type === 'ready') {
        clearTimeout(timer);
        resolve({
          port: message.port as number,
          cpuMicros: () =>
            new Promise((answer) => {
              waiters.push(answer);
              child.send({ type: 'cpu' });
            }),
          stop: async () => {
            const exited = new Promise((done) => child.once('exit', done));
            child.send({ type: 'stop' });
            await Promise.race([exited, new Promise((done) => setTimeout(done, 3000))]);
            await kill();
          },
        });
      } else if (message.type === 'cpu') {
        waiters.shift()?.(message.micros as number);
      } else if (message.ok === false) {
        clearTimeout(timer);
        reject(new Error(`the reference service child failed: ${message.error}`));
      }
    });
  });
}

interface Round {
  requestsPerSecond: number;
  /** Requests per second of server CPU: what a saturated server would serve, whatever the load generator left it. */
  requestsPerCpuSecond: number;
  p50: number;
  p99: number;
  serverCpuShare: number;
  requests: number;
  elapsedMs: number;
  statuses: Record<string, number>;
  errors: number;
}

async function measureVariant(variant: HttpServerJob['variant'], config: BenchConfig): Promise<Round> {
  const h = config.http;
  const server = await startServer({ kind: 'http-server', name: variant, variant, organizations: h.organizations });
  try {
    const tokens = Array.from({ length: h.organizations }, (_, i) => `bench_token_${i}`);
    const shape = {
      port: server.port,
      method: 'POST',
      path: '/browsers',
      body: '{"name":"bench"}',
      tokens,
      connections: h.connections,
      maxRequests: 5_000_000,
    };
    await httpLoad({ ...shape, durationMs: h.warmupMs });
    const cpuBefore = await server.cpuMicros();
    const result = await httpLoad({ ...shape, durationMs: h.durationMs });
    const cpuAfter = await server.cpuMicros();
    const { p50, p99 } = latencyMicros(result.latencies, result.latencies.length);
    return {
      requestsPerSecond: (result.requests / result.elapsedMs) * 1000,
      requestsPerCpuSecond: result.requests / ((cpuAfter - cpuBefore) / 1e6),
      p50,
      p99,
      serverCpuShare: (cpuAfter - cpuBefore) / 1000 / result.elapsedMs,
      requests: result.requests,
      elapsedMs: result.elapsedMs,
      statuses: result.statuses,
      errors: result.errors,
    };
  } finally {
    await server.stop();
  }
}

/**
 * The reference service's `POST /browsers` with its limiter (memory store, the default rules) and without (the same
 * app given a limiter with no rules, so the middleware passes every request on after one rule lookup). Variants
 * alternate, each in a fresh server process. The best round of each is reported: other work on the machine can only
 * slow a round down, so the fastest round is the closest to what the server can do, and both variants get the same
 * treatment.
 */
export async function httpSuite(config: BenchConfig): Promise<Measurement[]> {
  const h = config.http;
  const rounds: Record<HttpServerJob['variant'], Round[]> = { limited: [], unlimited: [] };
  for (let round = 0; round < h.rounds; round++) {
    for (const variant of ['unlimited', 'limited'] as const) {
      const result = await measureVariant(variant, config);
      rounds[variant].push(result);
      progress(
        `http: ${variant.padEnd(10)} round ${round + 1}: ${human(result.requestsPerSecond, 'req/s')}  ` +
          `${human(result.requestsPerCpuSecond, 'req per server CPU-s')}  p50 ${sig(result.p50)} µs  ` +
          `p99 ${sig(result.p99)} µs  server CPU ${Math.round(result.serverCpuShare * 100)}%  statuses ${JSON.stringify(result.statuses)}`,
      );
    }
  }
  const out: Measurement[] = [];
  for (const variant of ['unlimited', 'limited'] as const) {
    const all = rounds[variant];
    // The round whose server did the most work per CPU-second: the one least disturbed by anything else.
    const chosen = all.reduce((best, r) => (r.requestsPerCpuSecond > best.requestsPerCpuSecond ? r : best));
    const rps = chosen.requestsPerSecond;
    const perCpu = chosen.requestsPerCpuSecond;
    const method =
      `reference service (packages/reference-service createApp, node:http) in its own Node process on 127.0.0.1; ` +
      `load from the harness process: ${h.connections} keep-alive connections (node:http Agent), closed loop, ` +
      `POST /browsers with a 16-byte JSON body, bearer tokens of ${h.organizations} organizations round-robin ` +
      `(override ${HTTP_LIMIT}/min: never denied in a run, never full again between two requests); ` +
      `${h.warmupMs} ms warm-up then ${h.durationMs} ms measured; ` +
      `best of ${all.length} round${all.length === 1 ? '' : 's'} by requests per server CPU-second (variants ` +
      'alternate, fresh server each; other work on the machine only ever slows a round); ' +
      'latency: every request timed with performance.now() in the load generator; server CPU from the server ' +
      'process’s process.cpuUsage() (user + system) over the measured run';
    out.push(
      measurement({
        id: `http/${variant === 'limited' ? 'ratecard/with-limiter' : 'baseline/without-limiter'}`,
        suite: 'http',
        library: variant === 'limited' ? 'ratecard' : 'baseline',
        subject:
          variant === 'limited'
            ? '`POST /browsers` through `withRateLimit` with `createLimiter({ store: memoryStore() })` (default rules)'
            : '`POST /browsers` with a limiter that has no rules (`endpoints: {}`): no identify, no bucket',
        method,
        calls: chosen.requests,
        durationMs: sig(chosen.elapsedMs, 4),
        opsPerSecond: sig(rps),
        p50Micros: sig(chosen.p50),
        p99Micros: sig(chosen.p99),
        admitted: chosen.statuses['201'] ?? 0,
        denied: chosen.statuses['429'] ?? 0,
        extra: { requestsPerServerCpuSecond: sig(perCpu), serverCpuShare: sig(chosen.serverCpuShare) },
        notes: [
          `requests per second of server CPU (best round): ${sig(perCpu)}`,
          `statuses ${JSON.stringify(chosen.statuses)}, ${chosen.errors} errors`,
          `server process CPU ${Math.round(chosen.serverCpuShare * 100)}% of one core during the run`,
          `rounds (req/s): ${all.map((r) => sig(r.requestsPerSecond)).join(', ')}`,
          `rounds (req per server CPU-s): ${all.map((r) => sig(r.requestsPerCpuSecond)).join(', ')}`,
        ],
      }),
    );
  }
  return out;
}
