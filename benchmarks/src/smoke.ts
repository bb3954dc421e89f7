// The smoke test (`pnpm --filter @ratecard/benchmarks test`): `bench --quick` into a temporary directory, never over
// the committed results, then checks every output is there and well formed. It checks no target (a benchmark ratio
// is not a test), but it does check what no run may do: fail calls, or over-admit beyond its fallback decisions.
import { type SpawnSyncOptions, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Results } from './results.js';

/** Runs one of the built scripts beside this one. */
const run = (file: string, args: string[], options: SpawnSyncOptions) =>
  spawnSync(process.execPath, [fileURLToPath(new URL(`./${file}`, import.meta.url)), ...args], options);
const out = mkdtempSync(join(tmpdir(), 'ratecard-bench-'));
const problems: string[] = [];
const check = (ok: boolean, problem: string): void => void (ok || problems.push(problem));
try {
  const started = performance.now();
  const bench = run('bench.js', ['--quick', '--out', out], { stdio: 'inherit', timeout: 170_000 });
  const seconds = (performance.now() - started) / 1000;
  check(bench.status === 0, `bench --quick exited with ${bench.status ?? bench.signal}`);
  console.log(`smoke: bench --quick took ${Math.round(seconds)} s`);
  const json = join(out, 'latest.json');
  const results = existsSync(json) ? (JSON.parse(readFileSync(json, 'utf8')) as Results) : undefined;
  check(results !== undefined, 'latest.json was not written');
  for (const suite of ['memory', 'heap', 'redis', 'cluster', 'http'])
    check(results?.measurements.some((m) => m.suite === suite) === true, `no ${suite} figures`);
  for (const m of results?.measurements ?? []) {
    const figure = m.opsPerSecond ?? m.bytesPerOrganization ?? m.extra.instructionsPerDecision ?? Number.NaN;
    check(m.method.length > 40 && Number.isFinite(figure) && figure > 0, `${m.id} lacks its figure or its method`);
    // Redis' decisions are exact; only the fallback store's (a busy machine blowing the time budget) can over-admit.
    const r = m.contender.startsWith('ratecard') ? m.redis : null;
    const [over, errors] = [r?.overAdmitted ?? 0, r?.errors ?? 0];
    check(over <= (r?.notFromStore ?? 0) && errors === 0, `${m.id}: ${over} over-admitted, ${errors} failed`);
  }
  check(results?.targets.length === 17, `${results?.targets.length} target rows, not 17`);
  for (const t of results?.targets ?? [])
    check(t.verdict !== 'not measured' || t.measured.startsWith('not measured: '), `${t.figure}: no reason given`);
  const md = join(out, 'latest.md');
  check(existsSync(md) && readFileSync(md, 'utf8').includes('## Targets'), 'latest.md lacks the targets');
  const svgs = readdirSync(out).filter((file) => file.endsWith('.svg'));
  check(svgs.length === 4, `${svgs.length} charts written, not 4`);
  for (const svg of svgs) {
    const text = readFileSync(join(out, svg), 'utf8');
    const clean = text.startsWith('<svg') && text.trimEnd().endsWith('</svg>') && !text.includes('NaN');
    check(clean, `${svg} is not a clean SVG`);
  }
  const sized = run('size.js', ['--orgs', '50000', '--rps', '2000', '--results', json], { encoding: 'utf8' });
  const sizing = sized.status === 0 ? String(sized.stdout) : '';
  check(/Redis shards/.test(sizing) && /replicas/.test(sizing), `bench:size failed: ${sized.stderr}`);
} finally {
  rmSync(out, { recursive: true, force: true });
}
for (const problem of problems) process.stderr.write(`smoke: ${problem}\n`);
process.stderr.write(problems.length === 0 ? 'smoke: ok\n' : `smoke: ${problems.length} problem(s)\n`);
process.exitCode = problems.length === 0 ? 0 : 1;
