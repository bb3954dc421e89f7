// `pnpm bench [--quick] [--only memory,heap,redis,script,cluster,http] [--out <dir>]`: runs the suites side by side and
// writes latest.json, latest.md and the SVG charts to benchmarks/results (a quick run: results/quick).
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { killWorkers } from './child.js';
import { type HttpConfig, httpSuite } from './http.js';
import { heapSuite, MEMORY_GROUPS, type MemoryConfig, memorySuite } from './memory.js';
import { elapsedSeconds, plan, say, startSteps, stopSteps } from './progress.js';
import {
  contendersIn,
  hasValgrind,
  type LoneSizes,
  loneSuite,
  type RedisTarget,
  redisVersion,
  runShape,
  scriptCostSuite,
  shapesFor,
  startTarget,
} from './redis.js';
import { renderCharts, renderMarkdown, summary } from './report.js';
import { describeMachine, type Measurement, oneMinuteLoad, type Results, type Suite } from './results.js';
import { evaluateTargets } from './targets.js';

const SUITES: readonly Suite[] = ['memory', 'heap', 'redis', 'script', 'cluster', 'http'];

/** Sizes and durations of a full run and of a quick one (the smoke test in `pnpm test`, under a minute). */
function sizes(quick: boolean) {
  const pick = <T>(full: T, short: T): T => (quick ? short : full);
  // biome-ignore format: one suite a line
  return {
    memory: { organizations: 10_000, processes: pick(3, 1), rounds: pick(10, 4), calls: pick(100_000, 20_000), warmupCalls: pick(200_000, 100_000), heapOrganizations: pick(1_000_000, 100_000) } satisfies MemoryConfig,
    redis: { organizations: 10_000, rounds: pick(3, 1), roundMs: pick(4000, 1000), overLimitMs: pick(2500, 700), warmupMs: pick(1000, 200) },
    lone: { rounds: pick(10, 4), calls: pick(2000, 500) } satisfies LoneSizes,
    script: { loneCalls: pick(4800, 600) },
    http: { connections: 64, organizations: 100, rounds: pick(3, 1), windows: pick(6, 1), seconds: 1 } satisfies HttpConfig,
  };
}

function options(): { quick: boolean; only: Suite[]; out: string; command: string } {
  const { values } = parseArgs({
    options: { quick: { type: 'boolean', default: false }, only: { type: 'string' }, out: { type: 'string' } },
  });
  const only = (values.only?.split(',') ?? SUITES) as Suite[];
  const unknown = only.filter((suite) => !SUITES.includes(suite));
  if (unknown.length > 0) throw new Error(`--only takes ${SUITES.join(',')}; got ${unknown.join(',')}`);
  const results = fileURLToPath(new URL(values.quick ? '../results/quick/' : '../results/', import.meta.url));
  const args = process.argv.slice(2).join(' ');
  const command = process.env.npm_lifecycle_event === 'bench' ? `pnpm bench ${args}` : `node dist/bench.js ${args}`;
  return { quick: values.quick, only, out: resolve(values.out ?? results), command: command.trim() };
}

/** Next to the target, then renamed: an interrupted run never leaves half a file behind. */
async function write(path: string, text: string): Promise<void> {
  await writeFile(`${path}.tmp`, text);
  await rename(`${path}.tmp`, path);
}

async function main(): Promise<number> {
  const { quick, only, out, command } = options();
  const config = sizes(quick);
  const head = { startedAt: new Date().toISOString(), seconds: 0, command, machine: describeMachine() };
  const results: Results = { ...head, mode: quick ? 'quick' : 'full', measurements: [], targets: [], skipped: [] };
  let redis: RedisTarget | undefined;
  const stop = async (): Promise<void> => {
    stopSteps();
    killWorkers();
    await redis?.stop().catch(() => {});
    redis = undefined;
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => void stop().finally(() => process.exit(130)));
  // Every loop is bounded; this bounds the whole run in case something hangs anyway.
  setTimeout(() => void stop().finally(() => process.exit(1)), (quick ? 3 : 15) * 60_000).unref();

  say(`ratecard benchmarks (${results.mode}): ${only.join(', ')}`);
  startSteps();
  let failed = false;
  const run = async (suite: Suite, steps: number, body: () => Promise<Measurement[]>): Promise<void> => {
    if (!only.includes(suite)) return void results.skipped.push(`${suite}: left out by --only`);
    plan(steps);
    try {
      results.measurements.push(...(await body()));
    } catch (error) {
      failed = true;
      results.skipped.push(`${suite}: failed: ${error instanceof Error ? error.message : String(error)}`);
      say(`${suite} FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    }
  };
  const redisRounds = (kind: RedisTarget['kind']): number =>
    shapesFor(config.redis).reduce((sum, shape) => sum + shape.rounds * contendersIn(kind, shape.name).length, 0) +
    (kind === 'redis' ? config.lone.rounds * contendersIn(kind, '1-in-flight').length : 0);
  const onRedis = (kind: RedisTarget['kind']) => async (): Promise<Measurement[]> => {
    const target = await startTarget(kind);
    redis = target;
    results.machine.redis ??= await redisVersion(target);
    const measured: Measurement[] = [];
    for (const shape of shapesFor(config.redis)) measured.push(...(await runShape(target, shape)));
    if (kind === 'redis') measured.push(...(await loneSuite(target, config.lone)));
    await stop();
    return measured;
  };
  await run('memory', config.memory.processes * MEMORY_GROUPS.length, () => memorySuite(config.memory));
  await run('heap', 2, () => heapSuite(config.memory));
  await run('redis', redisRounds('redis'), onRedis('redis'));
  if (only.includes('script') && !hasValgrind())
    results.skipped.push('script: valgrind is not on PATH (callgrind counts redis-server instructions)');
  else await run('script', 1, () => scriptCostSuite(config.script.loneCalls));
  await run('cluster', redisRounds('cluster'), onRedis('cluster'));
  await run('http', config.http.rounds, () => httpSuite(config.http));
  await stop();

  results.seconds = Math.round(elapsedSeconds());
  results.machine.loadAverage.end = oneMinuteLoad();
  results.targets = evaluateTargets(results, config.memory.heapOrganizations);
  await mkdir(out, { recursive: true });
  const charts = await renderCharts(results);
  for (const [file, svg] of Object.entries(charts)) await write(join(out, file), svg);
  await write(join(out, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  await write(join(out, 'latest.md'), renderMarkdown(results, Object.keys(charts)));
  process.stderr.write(summary(results));
  say(`wrote ${join(out, 'latest.md')}, latest.json and ${Object.keys(charts).length} charts`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    say(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    killWorkers();
    process.exit(1);
  },
);
