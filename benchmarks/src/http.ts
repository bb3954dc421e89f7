/** The reference service's `POST /browsers` over HTTP, variant beside variant, loaded by autocannon. */
import type { ChildProcess } from 'node:child_process';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { createLimiter, type Limiter } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { limiterMetrics } from '@ratecard/otel';
import autocannon from 'autocannon';
import { nextMessage, startWorker } from './child.js';
import { say, step } from './progress.js';
import { human, type Measurement, measurement, median, sig } from './results.js';

/**
 * A limit per organization no run exhausts. A token comes back every 6 ms, so below 16 600 requests per second over
 * the suite's 100 organizations (every run on two cores so far) a bucket is full again before its organization's next
 * request, as most organizations' are between theirs in a real server, and the memory store makes it anew.
 */
export const HTTP_LIMIT = 10_000;

/** As the reference service serves them: decisions counted, the memory store's counters observed. */
function withMetrics(): Limiter {
  const meterProvider = new MeterProvider({ readers: [new PrometheusExporter({ preventServerStart: true })] });
  const metrics = limiterMetrics({ meterProvider });
  return createLimiter({ store: metrics.memory(memoryStore(), { time: false }), onDecision: metrics.onDecision });
}

/** Each variant's app gets `limiter()`: null, the app without any rate-limit middleware. */
// biome-ignore format: a table, one variant a line
export const HTTP_VARIANTS: readonly { name: string; subject: string; limiter: () => Limiter | null }[] = [
  { name: 'without-limiter', subject: '`createApp({ limiter: null })`: the same app with no rate-limit middleware at all', limiter: () => null },
  { name: 'with-limiter', subject: '`createApp({ limiter: createLimiter({ store: memoryStore() }) })`, the default rules', limiter: () => createLimiter({ store: memoryStore() }) },
  { name: 'with-limiter-metrics', subject: 'the same limiter with `limiterMetrics()` of `@ratecard/otel`, read by a Prometheus exporter', limiter: withMetrics },
];

export type HttpConfig = Record<'connections' | 'organizations' | 'rounds' | 'windows' | 'seconds', number>;

function load(port: number, config: HttpConfig): Promise<autocannon.Result> {
  const body = '{"name":"bench"}';
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: config.connections,
    duration: config.seconds,
    // Each connection cycles through these: one bearer token per organization.
    requests: Array.from({ length: config.organizations }, (_, i) => ({
      method: 'POST' as const,
      path: '/browsers',
      headers: { authorization: `Bearer bench_token_${i}`, 'content-type': 'application/json' },
      body,
    })),
  });
}

async function cpuSeconds(server: ChildProcess): Promise<number> {
  const answer = nextMessage(server, 5000);
  server.send({ type: 'cpu' });
  return ((await answer) as number) / 1e6;
}

type Round = { perSecond: number; perCpuSecond: number; p50: number; p99: number; other: number };

/**
 * One round: a fresh server process per variant, each warmed up for a window, then `windows` windows of load on each,
 * variants alternating window by window. Whatever slows the machine for a few seconds then lands on every variant
 * alike, where a few seconds per variant, one after another, would put it on one. A server idles between its windows,
 * so its CPU is read before the first and after the last. Returns each variant's figures.
 */
async function measureRound(config: HttpConfig): Promise<Round[]> {
  const servers = HTTP_VARIANTS.map((v) =>
    startWorker({ kind: 'http', variant: v.name, organizations: config.organizations }),
  );
  try {
    const ports = (await Promise.all(servers.map((server) => nextMessage(server, 20_000)))) as number[];
    for (const port of ports) await load(port, config);
    const before = await Promise.all(servers.map(cpuSeconds));
    const results = servers.map((): autocannon.Result[] => []);
    for (let window = 0; window < config.windows; window++) {
      const order = servers.map((_, i) => i);
      for (const i of window % 2 === 0 ? order : order.reverse())
        results[i]?.push(await load(ports[i] as number, config));
    }
    const cpu = (await Promise.all(servers.map(cpuSeconds))).map((after, i) => after - (before[i] as number));
    return results.map((windows, i) => {
      const sum = (of: (r: autocannon.Result) => number): number => windows.reduce((total, r) => total + of(r), 0);
      const requests = sum((r) => r.requests.total);
      const percentile = (p: 'p50' | 'p99'): number => median(windows.map((r) => r.latency[p] * 1000));
      // biome-ignore format: one figure a field
      return { perSecond: requests / sum((r) => r.duration), perCpuSecond: requests / (cpu[i] as number), p50: percentile('p50'), p99: percentile('p99'), other: sum((r) => r.requests.total - (r.statusCodeStats?.['201']?.count ?? 0) + r.errors) };
    });
  } finally {
    for (const server of servers) server.kill('SIGKILL');
  }
}

/** Figures are medians of rounds; the load generator shares the machine, so ratios use requests per server CPU-s. */
export async function httpSuite(config: HttpConfig): Promise<Measurement[]> {
  const rounds: Round[][] = [];
  for (let round = 1; round <= config.rounds; round++) {
    step(`http round ${round}/${config.rounds}`);
    const measured = await measureRound(config);
    rounds.push(measured);
    HTTP_VARIANTS.forEach((variant, i) => {
      const { perSecond, perCpuSecond, other } = measured[i] as Round;
      say(
        `http   ${variant.name.padEnd(21)} r${round} ${human(perSecond).padStart(6)} req/s ` +
          `${human(perCpuSecond).padStart(6)} per CPU-s${other > 0 ? ` ${other} not 201` : ''}`,
      );
    });
  }
  const method =
    `reference service (createApp on node:http), one process per variant on 127.0.0.1, fresh ones every round; ` +
    `autocannon in the harness process: ${config.connections} connections, POST /browsers with a JSON body, bearer ` +
    `tokens of ${config.organizations} organizations (override ${HTTP_LIMIT}/min, never denied); each round warms ` +
    `every variant for a window of ${config.seconds} s, then measures ${config.windows} windows on each, variants ` +
    `alternating window by window; a round's figure is its windows' requests over their server CPU ` +
    `(process.cpuUsage() of the server process); ${config.rounds} rounds, median of rounds; latency percentiles from ` +
    'autocannon, the median of windows, then of rounds';
  return HTTP_VARIANTS.map((variant, i) => {
    const all = rounds.map((measured) => measured[i] as Round);
    const pick = (field: keyof Round): number => sig(median(all.map((r) => r[field])));
    return measurement({
      id: `http/${variant.name}`,
      suite: 'http',
      contender: variant.name,
      subject: variant.subject,
      method,
      rounds: all.map((r) => sig(r.perCpuSecond)),
      opsPerSecond: pick('perSecond'),
      p50Micros: pick('p50'),
      p99Micros: pick('p99'),
      extra: { requestsPerServerCpuSecond: pick('perCpuSecond'), notCreated: all.reduce((sum, r) => sum + r.other, 0) },
    });
  });
}
