/** The reference service's `POST /browsers` over HTTP, variant beside variant, loaded by autocannon. */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { createLimiter, type Limiter } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { limiterMetrics } from '@ratecard/otel';
import autocannon from 'autocannon';
import { nextMessage, startWorker } from './child.js';
import { say, step } from './progress.js';
import { human, type Measurement, measurement, median, sig } from './results.js';

/** A limit per organization no run exhausts, and that never refills to full between two requests. */
export const HTTP_LIMIT = 10_000;

export interface HttpVariant {
  name: string;
  subject: string;
  /** The limiter the app gets; null: the app without any rate-limit middleware. */
  limiter: () => Limiter | null;
}

export const HTTP_VARIANTS: readonly HttpVariant[] = [
  {
    name: 'without-limiter',
    subject: '`createApp({ limiter: null })`: the same app with no rate-limit middleware at all',
    limiter: () => null,
  },
  {
    name: 'with-limiter',
    subject: '`createApp({ limiter: createLimiter({ store: memoryStore() }) })`, the default rules',
    limiter: () => createLimiter({ store: memoryStore() }),
  },
  {
    name: 'with-limiter-metrics',
    subject: 'the same limiter with `limiterMetrics()` of `@ratecard/otel`, read by a Prometheus exporter',
    limiter: () => {
      // As the reference service serves them: decisions counted, the memory store's counters observed.
      const meterProvider = new MeterProvider({ readers: [new PrometheusExporter({ preventServerStart: true })] });
      const metrics = limiterMetrics({ meterProvider });
      return createLimiter({ store: metrics.memory(memoryStore(), { time: false }), onDecision: metrics.onDecision });
    },
  },
];

export type HttpConfig = Record<'connections' | 'organizations' | 'rounds' | 'seconds' | 'warmupSeconds', number>;

function load(port: number, config: HttpConfig, seconds: number): Promise<autocannon.Result> {
  const body = '{"name":"bench"}';
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: config.connections,
    duration: seconds,
    // Each connection cycles through these: one bearer token per organization.
    requests: Array.from({ length: config.organizations }, (_, i) => ({
      method: 'POST' as const,
      path: '/browsers',
      headers: { authorization: `Bearer bench_token_${i}`, 'content-type': 'application/json' },
      body,
    })),
  });
}

async function cpuMicros(server: ChildProcess): Promise<number> {
  const answer = nextMessage(server, 5000);
  server.send({ type: 'cpu' });
  return (await answer) as number;
}

/** One round of one variant: a fresh server process, a warm-up, then the measured load. */
async function measureRound(variant: HttpVariant, config: HttpConfig) {
  const server = startWorker({ kind: 'http', variant: variant.name, organizations: config.organizations });
  try {
    const port = (await nextMessage(server, 20_000)) as number;
    await load(port, config, config.warmupSeconds);
    const before = await cpuMicros(server);
    const result = await load(port, config, config.seconds);
    const cpuSeconds = ((await cpuMicros(server)) - before) / 1e6;
    const total = result.requests.total;
    const created = result.statusCodeStats?.['201']?.count ?? 0;
    // biome-ignore format: one figure a field
    return { perSecond: total / result.duration, perCpuSecond: total / cpuSeconds, p50: result.latency.p50 * 1000, p99: result.latency.p99 * 1000, other: total - created + result.errors };
  } finally {
    server.send({ type: 'stop' });
    await Promise.race([once(server, 'exit'), sleep(3000)]);
    server.kill('SIGKILL');
  }
}

/**
 * Each round starts a fresh server process per variant, variants alternating; every figure is the median of the
 * rounds. The load generator shares the machine with the server, so the ratio is taken on requests per second of
 * server CPU, which is what a saturated server serves; raw requests per second are reported beside it.
 */
export async function httpSuite(config: HttpConfig): Promise<Measurement[]> {
  const rounds = new Map(
    HTTP_VARIANTS.map((variant) => [variant.name, [] as Awaited<ReturnType<typeof measureRound>>[]]),
  );
  for (let round = 0; round < config.rounds; round++) {
    for (const variant of round % 2 === 0 ? HTTP_VARIANTS : [...HTTP_VARIANTS].reverse()) {
      step(`http ${variant.name} ${round + 1}/${config.rounds}`);
      const result = await measureRound(variant, config);
      rounds.get(variant.name)?.push(result);
      say(
        `http   ${variant.name.padEnd(21)} r${round + 1} ${human(result.perSecond).padStart(6)} req/s ` +
          `${human(result.perCpuSecond).padStart(6)} per CPU-s${result.other > 0 ? ` ${result.other} not 201` : ''}`,
      );
    }
  }
  const method =
    `reference service (createApp on node:http) in its own process on 127.0.0.1, a fresh one per round; autocannon ` +
    `in the harness process: ${config.connections} connections, POST /browsers with a JSON body, bearer tokens of ` +
    `${config.organizations} organizations (override ${HTTP_LIMIT}/min, never denied); ${config.warmupSeconds} s ` +
    `warm-up, then ${config.seconds} s measured; ${config.rounds} rounds, variants alternating; median of rounds; ` +
    'server CPU from process.cpuUsage() of the server process; latency percentiles from autocannon';
  return HTTP_VARIANTS.map((variant) => {
    const all = rounds.get(variant.name) ?? [];
    const pick = (field: keyof (typeof all)[number]): number => sig(median(all.map((r) => r[field])));
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
