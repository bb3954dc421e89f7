import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';

const guide = readFileSync(new URL('../../../docs/observability.md', import.meta.url), 'utf8');

/** The js block under a `### heading` of docs/observability.md, as written. */
function example(heading: string): string {
  const section = guide.split(/^### /m).find((part) => part.startsWith(`${heading}\n`));
  const code = section === undefined ? undefined : /```js\n([\s\S]*?)```/.exec(section)?.[1];
  if (code === undefined) throw new Error(`docs/observability.md has no js example under "### ${heading}"`);
  return code;
}

/**
 * A node flag that makes Date.now stand still at the instant the process starts: the memory store's buckets then see
 * no time pass, so 10 of 11 requests pass against 10 a minute at any machine speed.
 */
const STILL_CLOCK = `--import=data:text/javascript,${encodeURIComponent('const at = Date.now(); Date.now = () => at;')}`;

// Written inside this package so that imports resolve through the workspace, the package's own name included.
const files: string[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill();
    await exited;
  }
  for (const file of files.splice(0)) rmSync(file, { force: true });
});

/** Runs an example on port 0 and resolves with the URL it prints once listening. */
function startExample(name: string, code: string): Promise<string> {
  const file = fileURLToPath(new URL(`../docs-${name}.tmp.mjs`, import.meta.url));
  writeFileSync(file, code);
  files.push(file);
  const child = spawn(process.execPath, [STILL_CLOCK, file], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const url = /listening on (http:\/\/\S+)/.exec(output)?.[1];
      if (url !== undefined) resolve(url);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.on('exit', (code) => reject(new Error(`the ${name} example exited (${code}) before listening:\n${output}`)));
  });
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition, and its `# HELP`/`# TYPE`/`# UNIT` lines apart. */
function parseExposition(text: string): { samples: Sample[]; metadata: string[] } {
  const samples: Sample[] = [];
  const metadata: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) metadata.push(line);
    if (line.startsWith('#') || line.trim() === '') continue;
    const parsed = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (parsed === null) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (parsed[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1] as string] = pair[2] as string;
    }
    samples.push({ name: parsed[1] as string, labels, value: Number(parsed[3]) });
  }
  return { samples, metadata };
}

/** The value of the one sample of `name` whose labels include `labels`. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter(
    (sample) => sample.name === name && Object.entries(labels).every(([key, want]) => sample.labels[key] === want),
  );
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

/** 11 POST /browsers by the Developer key (10 a minute), then one scrape of /metrics; answers its samples. */
async function decideAndScrape(url: string): Promise<{ samples: Sample[]; metadata: string[]; type: string | null }> {
  const statuses: number[] = [];
  for (let i = 0; i < 11; i++) {
    const response = await fetch(`${url}/browsers`, { method: 'POST', headers: { authorization: 'Bearer key-dev' } });
    statuses.push(response.status);
    await response.arrayBuffer();
  }
  expect(statuses).toEqual([...Array(10).fill(201), 429]);
  const scrape = await fetch(`${url}/metrics`);
  expect(scrape.status).toBe(200);
  return { ...parseExposition(await scrape.text()), type: scrape.headers.get('content-type') };
}

/** What both setups serve of ratecard's: the decisions, the store histogram in seconds, the service's name. */
function expectRatecardMetrics(samples: Sample[], metadata: string[]): void {
  const browsers = { ratecard_rule: 'POST /browsers', ratecard_mode: 'enforce', ratecard_plan: 'developer' };
  expect(value(samples, 'ratecard_decisions_total', { ...browsers, ratecard_outcome: 'allowed' })).toBe(10);
  expect(
    value(samples, 'ratecard_decisions_total', { ...browsers, ratecard_outcome: 'limited', ratecard_limit: '1m' }),
  ).toBe(1);
  // The scrapes themselves were neither limited nor counted: 11 decisions in all.
  const decisions = samples.filter((sample) => sample.name === 'ratecard_decisions_total');
  expect(decisions.reduce((sum, sample) => sum + sample.value, 0)).toBe(11);
  expect(metadata).toContain('# TYPE ratecard_store_duration_seconds histogram');
  expect(value(samples, 'ratecard_store_duration_seconds_count', { ratecard_store: 'memory' })).toBe(11);
  expect(value(samples, 'ratecard_store_duration_seconds_bucket', { ratecard_store: 'memory', le: '+Inf' })).toBe(11);
  expect(samples.every((sample) => !/^ratecard_store_duration_(bucket|sum|count)$/.test(sample.name))).toBe(true);
  expect(value(samples, 'target_info')).toBe(1);
  expect(samples.find((sample) => sample.name === 'target_info')?.labels.service_name).toBe('browsers-api');
  expect(JSON.stringify(samples)).not.toContain('org-1');
}

describe('the examples in docs/observability.md, run as written', () => {
  beforeAll(() => {
    // The examples import the packages by name, which resolves to dist/.
    for (const name of ['otel', 'http', 'memory', 'core']) {
      if (!existsSync(new URL(`../../${name}/dist/index.js`, import.meta.url))) {
        throw new Error(`the examples need the packages built first: pnpm build (no packages/${name}/dist)`);
      }
    }
  });

  it("serves the limiter's metrics on the app's own port, from a Fastify route", async () => {
    const url = await startExample('own-port', example("On the app's own port (Fastify)"));
    const { samples, metadata, type } = await decideAndScrape(url);
    expect(type).toMatch(/^text\/plain/);
    expectRatecardMetrics(samples, metadata);
  });

  it("serves the limiter's metrics and prom-client's on one /metrics", async () => {
    const url = await startExample('prom-client', example('Beside prom-client (Fastify)'));
    const { samples, metadata, type } = await decideAndScrape(url);
    expect(type).toMatch(/^text\/plain; version=0\.0\.4/);
    expectRatecardMetrics(samples, metadata);
    // prom-client's default metrics are there too, and every family is declared once.
    expect(value(samples, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(metadata).toContain('# TYPE nodejs_heap_size_total_bytes gauge');
    const types = metadata.filter((line) => line.startsWith('# TYPE '));
    expect(new Set(types).size).toBe(types.length);
  });
});
