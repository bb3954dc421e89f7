/**
 * The smoke test (`pnpm --filter @ratecard/benchmarks test`): runs `bench --quick` into a temporary directory, never
 * over the committed results, and checks that every output is there and well formed. Targets are not checked: a
 * benchmark target is not a test.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Results } from './results.js';

const BENCH = fileURLToPath(new URL('./bench.js', import.meta.url));
const SIZE = fileURLToPath(new URL('./size.js', import.meta.url));

function check(condition: boolean, message: string, problems: string[]): void {
  if (!condition) problems.push(message);
}

function main(): number {
  const out = mkdtempSync(join(tmpdir(), 'ratecard-bench-'));
  const problems: string[] = [];
  try {
    const started = performance.now();
    const bench = spawnSync(process.execPath, [BENCH, '--quick', '--out', out], {
      stdio: ['ignore', 'inherit', 'inherit'],
      timeout: 170_000,
    });
    const seconds = (performance.now() - started) / 1000;
    check(bench.status === 0, `bench --quick exited with ${bench.status ?? bench.signal}`, problems);
    check(seconds < 60, `bench --quick took ${Math.round(seconds)} s (issue 6: under a minute)`, problems);
    const json = join(out, 'latest.json');
    check(existsSync(json), 'latest.json was not written', problems);
    if (existsSync(json)) {
      const results = JSON.parse(readFileSync(json, 'utf8')) as Results;
      check(results.mode === 'quick', 'latest.json does not say quick mode', problems);
      check(results.measurements.length > 0, 'latest.json has no measurements', problems);
      for (const m of results.measurements) {
        check(m.method.length > 40, `${m.id} does not say how it was measured`, problems);
        const figure = m.opsPerSecond ?? m.bytesPerOrganization;
        check(figure !== null && Number.isFinite(figure) && figure > 0, `${m.id} has no figure`, problems);
        if (m.redis !== null && m.library === 'ratecard') {
          check(m.redis.overAdmitted === 0, `${m.id} over-admitted ${m.redis.overAdmitted} requests`, problems);
          check(m.redis.errors === 0, `${m.id} had ${m.redis.errors} failed calls`, problems);
        }
      }
      check(results.targets.length >= 10, 'latest.json lacks the targets table', problems);
      check(results.machine.cpu.length > 0 && results.machine.cores > 0, 'latest.json lacks the machine', problems);
      const markdown = readFileSync(join(out, 'latest.md'), 'utf8');
      check(markdown.includes('## Targets'), 'latest.md lacks the targets table', problems);
      const svgs = readdirSync(out).filter((file) => file.endsWith('.svg'));
      check(svgs.length > 0, 'no SVG chart was written', problems);
      for (const svg of svgs) {
        const text = readFileSync(join(out, svg), 'utf8');
        check(text.startsWith('<svg') && text.trimEnd().endsWith('</svg>'), `${svg} is not an SVG`, problems);
        check(!text.includes('NaN'), `${svg} contains NaN`, problems);
      }
      const size = spawnSync(process.execPath, [SIZE, '--orgs', '50000', '--rps', '2000', '--results', json], {
        encoding: 'utf8',
        timeout: 20_000,
      });
      check(size.status === 0, `size exited with ${size.status}: ${size.stderr}`, problems);
      check(/Redis shards/i.test(size.stdout) && /replicas/i.test(size.stdout), 'size printed no sizing', problems);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
  for (const problem of problems) process.stderr.write(`smoke: ${problem}\n`);
  process.stderr.write(problems.length === 0 ? 'smoke: ok\n' : `smoke: ${problems.length} problem(s)\n`);
  return problems.length === 0 ? 0 : 1;
}

process.exitCode = main();
