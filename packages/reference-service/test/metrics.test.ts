import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { redisForTests } from '@ratecard/redis/testing';
import { build } from 'tsup';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readConfig } from '../src/config.js';
import { captureOutput } from './output.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const children: ChildProcess[] = [];

beforeAll(async () => {
  // The process under test is the current source, built as `pnpm start` builds it.
  await build({ config: join(packageDir, 'tsup.config.ts'), silent: true });
}, 30_000);

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
});

/** `node dist/main.js` with the environment given; resolves with the lines it printed once `line` matches. */
async function start(env: Record<string, string>, line: RegExp): Promise<{ stdout: () => string; match: string }> {
  const child = spawn(process.execPath, [join(packageDir, 'dist', 'main.js')], {
    cwd: packageDir,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const printed = captureOutput(child);
  for (let waited = 0; waited < 10_000; waited += 20) {
    const match = line.exec(printed.stdout())?.[1];
    if (match !== undefined) return { stdout: printed.stdout, match };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(
    `the service printed no line matching ${line}; stdout: ${printed.stdout()} stderr: ${printed.stderr()}`,
  );
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition; `# HELP`/`# TYPE`/`# UNIT` lines are returned apart. */
function parseExposition(text: string): { samples: Sample[]; metadata: string[] } {
  const samples: Sample[] = [];
  const metadata: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) {
      metadata.push(line);
      continue;
    }
    if (line.trim() === '') continue;
    const parsed = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (parsed === null) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (parsed[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1] as string] = (pair[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: parsed[1] as string, labels, value: Number(parsed[3]) });
  }
  return { samples, metadata };
}

function sampleValue(samples: Sample[], name: string, labels: Record<string, string>): number | undefined {
  const found = samples.filter(
    (sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

it('serves Prometheus text at METRICS_PORT: 10 allowed and 1 limited POST /browsers, and a shadow rule', async () => {
  const service = await start({ PORT: '0', METRICS_PORT: '0' }, /^metrics: (http:\/\/\S+)$/m);
  const metricsUrl = service.match;
  expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
  const url = /listening on (http:\/\/\S+)/.exec(service.stdout())?.[1];
  const post = (path: string, body?: string, token = 'rc_demo_developer'): Promise<Response> =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body,
    });
  const statuses: number[] = [];
  for (let i = 0; i < 11; i++) statuses.push((await post('/browsers')).status);
  expect(statuses).toEqual([...Array(10).fill(201), 429]);
  // POST /browser-pools runs under a shadow rule (docs/reference-service.md); the Developer plan has no pools.
  expect((await post('/browser-pools', '{"name":"watched","size":1}', 'rc_demo_hobbyist')).status).toBe(201);

  const scrape = await fetch(metricsUrl);
  expect(scrape.status).toBe(200);
  expect(scrape.headers.get('content-type')).toMatch(/^text\/plain/);
  const { samples, metadata } = parseExposition(await scrape.text());

  // The exporter's names, as it writes them: a counter gets `_total`.
  expect(metadata).toContain('# TYPE ratecard_decisions_total counter');
  const browsers = { ratecard_rule: 'POST /browsers', ratecard_mode: 'enforce', ratecard_plan: 'developer' };
  expect(sampleValue(samples, 'ratecard_decisions_total', { ...browsers, ratecard_outcome: 'allowed' })).toBe(10);
  // A refusal names the limit that refused: the Developer plan's one limit, perMinute(10), is '1m'.
  expect(
    sampleValue(samples, 'ratecard_decisions_total', {
      ...browsers,
      ratecard_outcome: 'limited',
      ratecard_limit: '1m',
    }),
  ).toBe(1);
  expect(
    sampleValue(samples, 'ratecard_decisions_total', {
      ratecard_rule: 'POST /browser-pools',
      ratecard_mode: 'shadow',
      ratecard_outcome: 'allowed',
      ratecard_source: 'store',
    }),
  ).toBe(1);
  const decisions = samples.filter((sample) => sample.name === 'ratecard_decisions_total');
  expect(decisions.map((sample) => sample.value).reduce((a, b) => a + b)).toBe(12);
  for (const sample of decisions) {
    expect(sample.labels.otel_scope_name).toBe('@ratecard/otel');
    expect(Object.values(sample.labels).join(' ')).not.toContain('org_developer');
  }
  // The memory store's calls are not timed here (src/metrics.ts says why); its counters are observed.
  expect(samples.filter((sample) => sample.name.startsWith('ratecard_store_duration_seconds'))).toEqual([]);
  expect(sampleValue(samples, 'ratecard_memory_buckets_held', {})).toBe(2);
  expect(sampleValue(samples, 'ratecard_memory_buckets_evicted_total', {})).toBe(0);

  expect((await fetch(metricsUrl.replace('/metrics', '/other'))).status).toBe(404);
  // The service names itself, where the SDK would say `unknown_service:node`.
  expect(samples.find((sample) => sample.name === 'target_info')?.labels.service_name).toBe(
    'ratecard-reference-service',
  );
}, 30_000);

it('takes its service name from OTEL_SERVICE_NAME', async () => {
  const service = await start(
    { PORT: '0', METRICS_PORT: '0', OTEL_SERVICE_NAME: 'billing-api' },
    /^metrics: (http:\/\/\S+)$/m,
  );
  const { samples } = parseExposition(await (await fetch(service.match)).text());
  expect(samples.find((sample) => sample.name === 'target_info')?.labels.service_name).toBe('billing-api');
}, 30_000);

it('serves no metrics when METRICS_PORT is unset, as the benchmark baseline runs it', async () => {
  const service = await start({ PORT: '0' }, /listening on (http:\/\/\S+)/);
  expect(service.stdout()).not.toContain('metrics:');
});

it('refuses a METRICS_PORT already in use with a clear message', async () => {
  const first = await start({ PORT: '0', METRICS_PORT: '0' }, /^metrics: http:\/\/127\.0\.0\.1:(\d+)\/metrics$/m);
  const child = spawn(process.execPath, [join(packageDir, 'dist', 'main.js')], {
    cwd: packageDir,
    env: { PATH: process.env.PATH ?? '', PORT: '0', METRICS_PORT: first.match },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const code = await new Promise((resolve) => child.once('exit', resolve));
  expect(code).toBe(1);
  expect(stderr.trim()).toBe(
    `reference-service: METRICS_PORT ${first.match} is in use; set METRICS_PORT to a free port, or to nothing to serve no metrics`,
  );
});

it('reads METRICS_PORT: unset or empty is off, a bad value is refused', () => {
  expect(readConfig({}).metricsPort).toBeUndefined();
  expect(readConfig({ METRICS_PORT: '' }).metricsPort).toBeUndefined();
  expect(readConfig({ METRICS_PORT: '9464' }).metricsPort).toBe(9464);
  expect(() => readConfig({ METRICS_PORT: 'prometheus' })).toThrow(
    'reference-service: METRICS_PORT must be a port number from 0 to 65535, got "prometheus"',
  );
});

// Under CI=true this throws when no Redis can be had, so the suite fails instead of passing by skipping.
const redis = await redisForTests('reference-service metrics in Redis mode');

describe.skipIf(redis === undefined)('in Redis mode', () => {
  afterAll(async () => {
    await redis?.stop();
  });

  it('times the Redis store and observes its counters', async () => {
    const service = await start(
      { PORT: '0', METRICS_PORT: '0', REDIS_URL: redis?.url ?? '' },
      /^metrics: (http:\/\/\S+)$/m,
    );
    const url = /listening on (http:\/\/\S+)/.exec(service.stdout())?.[1];
    // The override organization's 1000/min is far from anything an earlier run on a shared Redis left behind.
    for (let i = 0; i < 3; i++) {
      const answer = await fetch(`${url}/browsers`, {
        method: 'POST',
        headers: { authorization: 'Bearer rc_demo_override' },
      });
      expect(answer.status).toBe(201);
    }
    const { samples, metadata } = parseExposition(await (await fetch(service.match)).text());
    // The exporter's names, as it writes them: the unit is in the instrument's name (this exporter adds none of its
    // own, only a UNIT line), so the histogram ends in _seconds as Prometheus' conventions want.
    expect(metadata).toContain('# TYPE ratecard_store_duration_seconds histogram');
    expect(metadata).toContain('# UNIT ratecard_store_duration_seconds s');
    expect(sampleValue(samples, 'ratecard_store_duration_seconds_count', { ratecard_store: 'redis' })).toBe(3);
    expect(
      sampleValue(samples, 'ratecard_store_duration_seconds_bucket', { ratecard_store: 'redis', le: '+Inf' }),
    ).toBe(3);
    expect(sampleValue(samples, 'ratecard_redis_calls_sent_total', {})).toBe(3);
    expect(sampleValue(samples, 'ratecard_redis_calls_unavailable_total', {})).toBe(0);
    expect(
      sampleValue(samples, 'ratecard_decisions_total', { ratecard_plan: 'enterprise', ratecard_outcome: 'allowed' }),
    ).toBe(3);
    // The fallback memory store answered nothing, and holds nothing.
    expect(sampleValue(samples, 'ratecard_store_duration_seconds_count', { ratecard_store: 'memory' })).toBeUndefined();
    expect(sampleValue(samples, 'ratecard_memory_buckets_held', {})).toBe(0);
  }, 30_000);
});
