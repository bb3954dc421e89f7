// The smoke test (`pnpm --filter @ratecard/benchmarks test`): `bench --quick` into a temporary directory, never over
// the committed results, then checks every output is there and well formed. It checks no target (a benchmark ratio
// is not a test), but it does check what no run may do: fail calls, or over-admit beyond its fallback decisions.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Results } from './results.js';

const out = mkdtempSync(join(tmpdir(), 'ratecard-bench-'));
const problems: string[] = [];
const check = (ok: boolean, problem: string): void => void (ok || problems.push(problem));
try {
  const started = performance.now();
  const bench = spawnSync(
    process.execPath,
    [fileURLToPath(new URL('./bench.js', import.meta.url)), '--quick', '--out', out],
    {
      stdio: 'inherit',
      timeout: 170_000,
    },
  );
  const seconds = (performance.now() - started) / 1000;
  check(bench.status === 0, `bench --quick exited with ${bench.status ?? bench.signal}`);
  check(seconds < 60, `bench --quick took ${Math.round(seconds)} s; it must stay under a minute`);
  const json = join(out, 'latest.json');
  const results = existsSync(json) ? (JSON.parse(readFileSync(json, 'utf8')) as Results) : undefined;
  check(results !== undefined, 'latest.json was not written');
  for (const suite of ['memory', 'heap', 'redis', 'cluster', 'http']) {
    check(results?.measurements.some((m) => m.suite === suite) === true, `no ${suite} figures`);
  }
  for (const m of results?.measurements ?? []) {
    const figure = m.opsPerSecond ?? m.bytesPerOrganization ?? Number.NaN;
    check(m.method.length > 40 && Number.isFinite(figure) && figure > 0, `${m.id} lacks its figure or its method`);
    // Redis' decisions are exact; only the fallback store's (a busy machine blowing the time budget) can over-admit.
    const {
      overAdmitted = 0,
      notFromStore = 0,
      errors = 0,
    } = m.contender.startsWith('ratecard') ? (m.redis ?? {}) : {};
    check(overAdmitted <= notFromStore && errors === 0, `${m.id}: ${overAdmitted} over-admitted, ${errors} failed`);
  }
  check(results?.targets.length === 12, `${results?.targets.length} target rows, not 12`);
  for (const t of results?.targets ?? []) {
    check(t.verdict !== 'not measured' || t.measured.startsWith('not measured: '), `${t.figure}: no reason given`);
  }
  check(
    existsSync(join(out, 'latest.md')) && readFileSync(join(out, 'latest.md'), 'utf8').includes('## Targets'),
    'latest.md lacks the targets',
  );
  const svgs = readdirSync(out).filter((file) => file.endsWith('.svg'));
  check(svgs.length === 4, `${svgs.length} charts written, not 4`);
  for (const svg of svgs) {
    const text = readFileSync(join(out, svg), 'utf8');
    check(
      text.startsWith('<svg') && text.trimEnd().endsWith('</svg>') && !text.includes('NaN'),
      `${svg} is not a clean SVG`,
    );
  }
  const size = fileURLToPath(new URL('./size.js', import.meta.url));
  const sized = spawnSync(process.execPath, [size, '--orgs', '50000', '--rps', '2000', '--results', json], {
    encoding: 'utf8',
  });
  check(
    sized.status === 0 && /Redis shards/.test(sized.stdout) && /replicas/.test(sized.stdout),
    `bench:size failed: ${sized.stderr}`,
  );
} finally {
  rmSync(out, { recursive: true, force: true });
}
for (const problem of problems) process.stderr.write(`smoke: ${problem}\n`);
process.stderr.write(problems.length === 0 ? 'smoke: ok\n' : `smoke: ${problems.length} problem(s)\n`);
process.exitCode = problems.length === 0 ? 0 : 1;
