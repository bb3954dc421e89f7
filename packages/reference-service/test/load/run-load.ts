/**
 * A steady-rate load run against the built service (`dist/main.js`) on Redis, over loopback: the service runs in its
 * own process, as `pnpm start` runs it, with a preloaded probe that reports its heap after a full GC; this process
 * sends requests on a fixed schedule and times each from the instant it was due (so a slow answer also delays the
 * requests queued behind it in the count, as a real client's would be).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { captureOutput } from '../output.js';

export interface LoadOptions {
  /** The built service entry, `dist/main.js`. */
  main: string;
  redisUrl: string;
  /** Requests per second, evenly spaced. */
  rate: number;
  durationMs: number;
  /** Run at the same rate before the first heap reading, so that it sees a warmed-up service. */
  warmupMs: number;
  /** Keep-alive connections the requests share. */
  connections: number;
}

export interface LoadReport {
  rate: number;
  durationMs: number;
  sent: number;
  answered: number;
  /** Requests that got no answer (socket error). */
  errors: number;
  statuses: Record<string, number>;
  /** Milliseconds from when each request was due to the end of its answer. */
  latency: { p50: number; p99: number; p999: number; max: number };
  /** Seconds of the run (from 0) whose slowest answer took over 100 ms, with that answer's latency. */
  slowSeconds: { second: number; maxMs: number }[];
  /** Heap in use after a full GC, in bytes, before the run (after warm-up) and after it. */
  heapBefore: number;
  heapAfter: number;
  rssAfter: number;
  /** What the service printed on stderr (it prints only failures there). */
  serviceErrors: string;
}

/** Organizations with room for everything (their buckets live in Redis), and one Hobbyist organization that hits
 * its 25 per minute at once, so denials (429, from the deny cache) are part of the mix. */
const ROOMY_ORGANIZATIONS = 64;

interface Shot {
  method: string;
  path: string;
  body: string;
}

const SHOTS: readonly Shot[] = [
  { method: 'POST', path: '/browsers', body: '' },
  { method: 'POST', path: '/browsers', body: '' },
  { method: 'POST', path: '/invocations', body: '{"action":"run"}' },
  { method: 'GET', path: '/browser-pools/load', body: '' },
];

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

function writeKeys(dir: string): string[] {
  const keys: Record<string, unknown> = {};
  const tokens: string[] = [];
  const run = randomBytes(4).toString('hex');
  const scopes = ['browsers', 'browser_pools', 'invocations'];
  for (let i = 0; i < ROOMY_ORGANIZATIONS; i++) {
    const token = `load_${run}_${i}`;
    keys[token] = { organization: `org_load_${run}_${i}`, plan: 'enterprise', override: 1_000_000, scopes };
    tokens.push(token);
  }
  // A plan with browser pools (the free Developer plan has none) and a small limit, so its POST /browsers meet 429s.
  const limited = `load_${run}_hobbyist`;
  keys[limited] = { organization: `org_load_${run}_hobbyist`, plan: 'hobbyist', scopes };
  tokens.push(limited);
  writeFileSync(join(dir, 'keys.json'), JSON.stringify(keys));
  return tokens;
}

async function startService(options: LoadOptions, keysFile: string): Promise<{ child: ChildProcess; port: number }> {
  const probe = fileURLToPath(new URL('./heap-probe.mjs', import.meta.url));
  const child = spawn(process.execPath, ['--expose-gc', '--import', probe, options.main], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', REDIS_URL: options.redisUrl, API_KEYS_FILE: keysFile },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const printed = captureOutput(child);
  for (let waited = 0; waited < 15_000; waited += 20) {
    const port = /listening on http:\/\/[^:]+:(\d+)/.exec(printed.stdout())?.[1];
    if (port !== undefined) return { child, port: Number(port) };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  child.kill('SIGKILL');
  throw new Error(`the service did not start: ${printed.stdout()}${printed.stderr()}`);
}

function heapOf(child: ChildProcess): Promise<{ heapUsed: number; rss: number }> {
  return new Promise((resolve) => {
    child.once('message', (message) => resolve(message as { heapUsed: number; rss: number }));
    child.send('heap');
  });
}

interface Phase {
  sent: number;
  answered: number;
  errors: number;
  statuses: Record<string, number>;
  latencies: Float64Array;
  /** Per second of the run, the slowest answer to a request due in it. */
  worstBySecond: number[];
}

/** Sends `rate` requests a second for `durationMs` and resolves once every one is answered. */
function steadyLoad(port: number, agent: Agent, tokens: readonly string[], rate: number, durationMs: number) {
  const total = Math.floor((rate * durationMs) / 1000);
  const phase: Phase = {
    sent: 0,
    answered: 0,
    errors: 0,
    statuses: {},
    latencies: new Float64Array(total),
    worstBySecond: [],
  };
  const interval = 1000 / rate;
  const start = performance.now();
  return new Promise<Phase>((resolve) => {
    const settle = (due: number, status: string | undefined): void => {
      if (status === undefined) phase.errors++;
      else phase.statuses[status] = (phase.statuses[status] ?? 0) + 1;
      const latency = performance.now() - due;
      phase.latencies[phase.answered++] = latency;
      const second = Math.floor((due - start) / 1000);
      phase.worstBySecond[second] = Math.max(phase.worstBySecond[second] ?? 0, latency);
      if (phase.answered === total) resolve(phase);
    };
    const fire = (i: number, due: number): void => {
      const shot = SHOTS[i % SHOTS.length] as Shot;
      const token = tokens[Math.floor(i / SHOTS.length) % tokens.length] as string;
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      if (shot.body !== '') headers['content-type'] = 'application/json';
      const outgoing = request({ host: '127.0.0.1', port, method: shot.method, path: shot.path, agent, headers });
      outgoing.on('response', (response) => {
        response.resume();
        response.on('end', () => settle(due, String(response.statusCode)));
        response.on('error', () => settle(due, undefined));
      });
      outgoing.on('error', () => settle(due, undefined));
      outgoing.end(shot.body);
    };
    const tick = (): void => {
      const now = performance.now();
      const due = Math.min(total, Math.floor((now - start) / interval) + 1);
      while (phase.sent < due) {
        fire(phase.sent, start + phase.sent * interval);
        phase.sent++;
      }
      if (phase.sent < total) setTimeout(tick, 1);
    };
    if (total === 0) resolve(phase);
    else tick();
  });
}

export async function runLoad(options: LoadOptions): Promise<LoadReport> {
  const dir = mkdtempSync(join(tmpdir(), 'ratecard-load-'));
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections });
  let service: { child: ChildProcess; port: number } | undefined;
  try {
    const tokens = writeKeys(dir);
    service = await startService(options, join(dir, 'keys.json'));
    let stderr = '';
    service.child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const { port } = service;
    for (const token of tokens) {
      await fetch(`http://127.0.0.1:${port}/browser-pools`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'load', size: 4 }),
      });
    }
    await steadyLoad(port, agent, tokens, options.rate, options.warmupMs);
    const before = await heapOf(service.child);
    const phase = await steadyLoad(port, agent, tokens, options.rate, options.durationMs);
    const after = await heapOf(service.child);
    const sorted = phase.latencies.slice(0, phase.answered).sort();
    const exited = new Promise((resolve) => service?.child.once('exit', resolve));
    agent.destroy();
    service.child.kill('SIGTERM');
    await exited;
    return {
      rate: options.rate,
      durationMs: options.durationMs,
      sent: phase.sent,
      answered: phase.answered,
      errors: phase.errors,
      statuses: phase.statuses,
      latency: {
        p50: percentile(sorted, 50),
        p99: percentile(sorted, 99),
        p999: percentile(sorted, 99.9),
        max: percentile(sorted, 100),
      },
      slowSeconds: phase.worstBySecond.map((maxMs, second) => ({ second, maxMs })).filter((entry) => entry.maxMs > 100),
      heapBefore: before.heapUsed,
      heapAfter: after.heapUsed,
      rssAfter: after.rss,
      serviceErrors: stderr,
    };
  } finally {
    agent.destroy();
    if (service !== undefined && service.child.exitCode === null) service.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

export function describeReport(report: LoadReport): string {
  const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  const ms = (value: number): string => `${value.toFixed(2)} ms`;
  return [
    `load: ${report.rate} requests/s for ${report.durationMs / 1000} s on Redis over loopback`,
    `  sent ${report.sent}, answered ${report.answered}, socket errors ${report.errors}`,
    `  statuses ${JSON.stringify(report.statuses)}`,
    `  latency from due time: p50 ${ms(report.latency.p50)}, p99 ${ms(report.latency.p99)}, p99.9 ${ms(report.latency.p999)}, max ${ms(report.latency.max)}`,
    `  seconds with an answer over 100 ms: ${report.slowSeconds.map((s) => `${s.second} (${ms(s.maxMs)})`).join(', ') || 'none'}`,
    `  heap after GC: before ${mib(report.heapBefore)}, after ${mib(report.heapAfter)} (${report.heapAfter >= report.heapBefore ? '+' : ''}${mib(report.heapAfter - report.heapBefore)}); rss after ${mib(report.rssAfter)}`,
  ].join('\n');
}
