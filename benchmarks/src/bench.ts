/**
 * `pnpm bench [--quick] [--out <dir>] [--only memory,heap,http,redis,cluster]`: runs the suites, prints progress on
 * stderr, and writes latest.json, latest.md and SVG charts to benchmarks/results (quick runs: results/quick; or
 * --out). `--render` measures nothing: it redraws latest.md and the charts (and re-checks the targets) from the
 * latest.json already there.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stopChildren } from './child.js';
import { cleanupAll, cleanupOnExit, onCleanup } from './cleanup.js';
import { benchConfig } from './config.js';
import { heapSuite } from './heap-suite.js';
import { httpSuite, referenceServiceBuilt } from './http-suite.js';
import { describeMachine, oneMinuteLoad } from './machine.js';
import { memorySuite } from './memory-suite.js';
import { elapsedSeconds, progress } from './progress.js';
import { loadRedisStore } from './redis-contenders.js';
import { clusterTarget, loadTesting, type RedisTarget, redisVersion, standaloneTarget } from './redis-servers.js';
import { redisClusterSuite, redisStandaloneSuite } from './redis-suite.js';
import { renderCharts, renderMarkdown } from './report.js';
import type { Measurement, Results } from './results.js';
import { evaluateTargets } from './targets.js';

const SUITES = ['memory', 'heap', 'http', 'redis', 'cluster'] as const;
type SuiteName = (typeof SUITES)[number];

const RESULTS = fileURLToPath(new URL('../results/', import.meta.url));
/** Quick runs go beside the full results, never over them (and are not committed: see benchmarks/.gitignore). */
const QUICK_RESULTS = fileURLToPath(new URL('../results/quick/', import.meta.url));

function options(): { quick: boolean; render: boolean; out: string; only: Set<SuiteName>; command: string } {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      render: { type: 'boolean', default: false },
      out: { type: 'string' },
      only: { type: 'string' },
    },
    strict: true,
  });
  const only = new Set<SuiteName>();
  for (const name of (values.only ?? SUITES.join(',')).split(',')) {
    if (!(SUITES as readonly string[]).includes(name)) {
      throw new Error(`--only takes a comma-separated list of ${SUITES.join(', ')}; got ${name}`);
    }
    only.add(name as SuiteName);
  }
  const args = process.argv.slice(2).join(' ');
  const command = process.env.npm_lifecycle_event === 'bench' ? `pnpm bench ${args}` : `node dist/bench.js ${args}`;
  return {
    quick: values.quick,
    render: values.render,
    out: resolve(values.out ?? (values.quick ? QUICK_RESULTS : RESULTS)),
    only,
    command: command.trim(),
  };
}

/** Writes latest.json, latest.md and the charts of a finished run. */
async function writeResults(out: string, results: Results): Promise<void> {
  await mkdir(out, { recursive: true });
  const charts = renderCharts(results);
  for (const [file, svg] of Object.entries(charts)) await writeAtomically(join(out, file), svg);
  await writeAtomically(join(out, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  await writeAtomically(join(out, 'latest.md'), renderMarkdown(results, Object.keys(charts)));
}

async function renderOnly(out: string): Promise<number> {
  const results = JSON.parse(await readFile(join(out, 'latest.json'), 'utf8')) as Results;
  results.targets = evaluateTargets(results.measurements, results.config);
  await writeResults(out, results);
  progress(`redrew ${join(out, 'latest.md')} and the charts from latest.json`);
  return 0;
}

/** Writes next to the target, then renames: a crash never leaves a half-written latest.json behind. */
async function writeAtomically(path: string, text: string): Promise<void> {
  const temporary = `${path}.tmp`;
  await writeFile(temporary, text);
  await rename(temporary, path);
}

async function main(): Promise<number> {
  const { quick, render, out, only, command } = options();
  if (render) return renderOnly(out);
  cleanupOnExit();
  onCleanup('child processes', stopChildren);
  const config = benchConfig(quick);
  // Every loop is bounded on its own; this bounds the whole run in case something hangs anyway.
  const watchdog = setTimeout(
    () => {
      progress('the run took too long; stopping');
      cleanupAll().finally(() => process.exit(1));
    },
    (quick ? 3 : 10) * 60_000,
  );
  watchdog.unref();

  const results: Results = {
    version: 1,
    startedAt: new Date().toISOString(),
    finishedAt: '',
    command,
    mode: quick ? 'quick' : 'full',
    config,
    machine: describeMachine(),
    measurements: [],
    targets: [],
    skipped: [],
    notes: [
      'All figures come from this one run on this machine; the targets are ratios of figures measured side by side. ' +
        'Absolute numbers move with the machine and whatever else it runs; compare ratios, and rerun before trusting a small difference.',
    ],
  };
  let failed = false;
  const run = async (name: string, suite: () => Promise<Measurement[]>): Promise<void> => {
    progress(`${name}: starting`);
    try {
      results.measurements.push(...(await suite()));
    } catch (error) {
      failed = true;
      const reason = error instanceof Error ? error.message : String(error);
      results.skipped.push({ suite: name, reason: `failed: ${reason}` });
      progress(`${name}: FAILED: ${error instanceof Error ? (error.stack ?? reason) : reason}`);
    }
  };
  progress(`ratecard benchmarks, ${results.mode} mode; results go to ${out}`);

  if (only.has('redis') || only.has('cluster')) {
    // Loaded now, while the build that just ran is fresh: a workspace rebuild later in the run (its build empties
    // dist first) cannot take them away from this process any more. A failure here is retried, and reported, below.
    await Promise.allSettled([loadRedisStore(), loadTesting()]);
  }

  // Cases that failed while the rest of their suite ran; they make the run fail like a failed suite.
  const caseFailures: string[] = [];
  if (only.has('memory')) await run('memory', () => memorySuite(config, caseFailures));
  if (only.has('heap')) await run('heap', () => heapSuite(config, caseFailures));
  for (const failure of caseFailures) {
    failed = true;
    results.skipped.push({
      suite: failure.slice(0, failure.indexOf(':')),
      reason: `failed: ${failure.slice(failure.indexOf(':') + 2)}`,
    });
  }
  if (only.has('http')) {
    if (referenceServiceBuilt()) await run('http', () => httpSuite(config));
    else {
      results.skipped.push({
        suite: 'http',
        reason: 'packages/reference-service/dist/app.js is missing: build it (pnpm build) first',
      });
    }
  }

  if (only.has('redis') || only.has('cluster')) {
    let redisReady = true;
    try {
      await loadRedisStore();
    } catch (error) {
      redisReady = false;
      const reason = `@ratecard/redis could not be loaded (build it: pnpm --filter @ratecard/redis build): ${error instanceof Error ? error.message : String(error)}`;
      if (only.has('redis')) results.skipped.push({ suite: 'redis', reason });
      if (only.has('cluster')) results.skipped.push({ suite: 'cluster', reason });
    }
    if (redisReady && only.has('redis')) {
      await run('redis', async () => {
        const target: RedisTarget = await standaloneTarget();
        try {
          results.machine.redis = await redisVersion(target.masters[0] as NonNullable<RedisTarget['masters'][0]>);
          results.machine.redisSource = target.source;
          return await redisStandaloneSuite(target, config);
        } finally {
          await target.stop();
        }
      });
    }
    if (redisReady && only.has('cluster')) {
      await run('cluster', async () => {
        const target = await clusterTarget();
        if (typeof target === 'string') {
          results.skipped.push({ suite: 'cluster', reason: target });
          return [];
        }
        try {
          results.machine.redis ??= await redisVersion(target.masters[0] as NonNullable<RedisTarget['masters'][0]>);
          results.machine.redisSource ??= target.source;
          return await redisClusterSuite(target, config);
        } finally {
          await target.stop();
        }
      });
    }
  }

  results.finishedAt = new Date().toISOString();
  results.machine.loadAverage.end = oneMinuteLoad();
  results.targets = evaluateTargets(results.measurements, config);
  await writeResults(out, results);
  await cleanupAll();
  clearTimeout(watchdog);

  progress(`done in ${Math.round(elapsedSeconds())} s; targets:`);
  for (const target of results.targets) {
    const mark = target.pass === null ? 'n/a ' : target.pass ? 'pass' : 'FAIL';
    progress(`  [${mark}] ${target.target.replace(/`/g, '')}: ${target.measured}`);
  }
  for (const skip of results.skipped) progress(`  not run: ${skip.suite}: ${skip.reason}`);
  progress(`wrote ${join(out, 'latest.md')}`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    progress(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    cleanupAll().finally(() => process.exit(1));
  },
);
