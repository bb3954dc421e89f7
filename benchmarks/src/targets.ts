/** The targets table: each row a ratio of two figures measured side by side in one run: met, not met or not measured. */
import { ONE_SERVER } from './redis.js';
import { human, type Measurement, median, type Results, sig, type TargetRow } from './results.js';

/** A figure of a measurement; per round (a list), the ratio is the median of the rounds' ratios, paired in order. */
type Figure = (m: Measurement) => number | readonly number[] | null | undefined;
const ops: Figure = (m) => m.opsPerSecond;
const instructions: Figure = (m) => m.extra.instructionsPerDecision;
const cpu: Figure = (m) => m.redis?.cpuMicrosPerDecision;
const perCpu: Figure = (m) => m.extra.requestsPerServerCpuSecond;

/** [figure, a, b, what is compared, bound, at least (else at most), unit, 'raw': note raw requests/s too] */
type Ratio = [string, string, string, Figure, number, boolean, string, 'raw'?];

// biome-ignore format: a table, one target a line
const RATIOS: Ratio[] = [
  ['memory: `await limiter.consume()` vs `RateLimiterMemory.consume()`, one limit, alternating rounds', 'memory/ratecard/consume', 'memory/rate-limiter-flexible/consume', (m) => m.rounds, 1.3, true, ' calls/s'],
  ['memory: two limits per request vs one (`ratecard/consume`)', 'memory/ratecard/consume-2-limits', 'memory/ratecard/consume', ops, 0.6, true, ' calls/s'],
  ['Redis standalone, 10k orgs, 256 in flight: decisions/s vs `RateLimiterRedis`', 'redis/ratecard/256-in-flight', 'redis/rate-limiter-flexible/256-in-flight', ops, 2.5, true, '/s'],
  ['Redis standalone: redis-server CPU per decision, batched, one limit, vs `RateLimiterRedis`', 'redis/ratecard/256-in-flight', 'redis/rate-limiter-flexible/256-in-flight', cpu, 0.45, false, ' µs'],
  ['a lone one-limit decision: redis-server instructions vs the floor script, same run (`script-cost --lone`)', 'script/ratecard/lone', 'script/floor/lone', instructions, 1.1, false, ' instructions'],
  ['memory: a reserve plus its settle vs one consume, calls/s', 'memory/ratecard/reserve-settle', 'memory/ratecard/consume', ops, 0.45, true, ' calls/s'],
  ['Redis standalone: redis-server CPU per reserve plus its settle vs per consume (same run)', 'redis/ratecard-reserve/256-in-flight', 'redis/ratecard/256-in-flight', cpu, 2.2, false, ' µs'],
  ['Redis standalone: CPU per decision, two limits per request vs one (same run)', 'redis/ratecard-2-limits/256-in-flight', 'redis/ratecard/256-in-flight', cpu, 1.6, false, ' µs'],
  ['Redis Cluster (3 masters): decisions/s vs `RateLimiterRedis` on the same cluster', 'cluster/ratecard/256-in-flight', 'cluster/rate-limiter-flexible/256-in-flight', ops, 2, true, '/s'],
  ['Redis Cluster: CPU per decision vs standalone (same run)', 'cluster/ratecard/256-in-flight', `cluster/${ONE_SERVER}/256-in-flight`, cpu, 1.5, false, ' µs'],
  ['node-redis client vs ioredis client, standalone decisions/s', 'redis/ratecard-node-redis/256-in-flight', 'redis/ratecard/256-in-flight', ops, 0.9, true, '/s'],
  ['a lone decision (1 in flight): p50 vs `RateLimiterRedis`, alternating paired rounds', 'redis/ratecard/1-in-flight', 'redis/rate-limiter-flexible/1-in-flight', (m) => m.latencyRounds?.p50Micros, 1.15, false, ' µs'],
  ['a lone decision (1 in flight): p99 vs `RateLimiterRedis`, alternating paired rounds', 'redis/ratecard/1-in-flight', 'redis/rate-limiter-flexible/1-in-flight', (m) => m.latencyRounds?.p99Micros, 1.25, false, ' µs'],
  ['reference service `POST /browsers`: with limiter vs without (no middleware at all)', 'http/with-limiter', 'http/without-limiter', perCpu, 0.9, true, ' requests per server CPU-s', 'raw'],
  ['reference service: metrics on vs off', 'http/with-limiter-metrics', 'http/with-limiter', perCpu, 0.95, true, ' requests per server CPU-s'],
];

/** Why a Redis run does not describe Redis: decisions from the fallback store or failed calls beyond 0.1%. */
function trouble(m: Measurement): string | null {
  if (m.redis === null) return null;
  const bad = m.redis.notFromStore + m.redis.errors;
  const all = m.redis.admitted + m.redis.denied + m.redis.errors;
  return all > 0 && bad / all > 0.001 ? `${m.id}: ${bad} of ${all} decisions not made by Redis or failed` : null;
}

export function evaluateTargets(
  results: Pick<Results, 'measurements' | 'skipped'>,
  heapOrganizations: number,
): TargetRow[] {
  const find = (id: string): Measurement | undefined => results.measurements.find((m) => m.id === id);
  // A missing figure's reason: its suite's line in `skipped`.
  const absent = (id: string): string => {
    const suite = id.split('/')[0];
    const why = results.skipped.find((line) => line.startsWith(`${suite}:`));
    return `not measured: ${why ?? `the ${suite} suite did not run`}`;
  };
  const row = (figure: string, target: string, measured: string, value: number | null, met?: boolean): TargetRow => {
    const verdict = met === undefined ? 'not measured' : met ? 'met' : 'not met';
    return { figure, target, measured, value, verdict };
  };

  const rows = RATIOS.map(([figure, aId, bId, pick, bound, atLeast, unit, second]): TargetRow => {
    const target = `${atLeast ? '>=' : '<='} ${bound}x`;
    const [a, b] = [find(aId), find(bId)];
    if (a === undefined || b === undefined) return row(figure, target, absent(a === undefined ? aId : bId), null);
    const problem = trouble(a) ?? trouble(b);
    const [x, y] = [pick(a), pick(b)];
    if (problem !== null || x == null || y == null || y === 0 || (typeof y === 'object' && y.length === 0))
      return row(figure, target, `not measured: ${problem ?? 'a figure is missing'}`, null);
    let note = '';
    if (second === 'raw' && a.opsPerSecond != null && b.opsPerSecond != null)
      note = ` (raw requests/s: ${sig(a.opsPerSecond / b.opsPerSecond)}x)`;
    const [xs, ys] = [typeof x === 'number' ? [x] : x, typeof y === 'number' ? [y] : y];
    const value = median(ys.map((each, i) => (xs[i] ?? Number.NaN) / each));
    if (typeof x !== 'number') note = `, median of ${ys.length} paired rounds' ratios`;
    const measured = `${human(median(xs))} vs ${human(median(ys))}${unit} = ${sig(value)}x${note}`;
    return row(figure, target, measured, sig(value, 4), atLeast ? value >= bound : value <= bound);
  });

  // Heap, after the memory rows: measured against its bound only with 1M organizations tracked.
  const heap = find('heap/ratecard')?.bytesPerOrganization;
  const flexibleHeap = find('heap/rate-limiter-flexible')?.bytesPerOrganization ?? '–';
  const heapRow = (measured: string, value: number | null = null, met?: boolean): TargetRow =>
    row('memory: heap per tracked organization at 1M', '<= 100 B', measured, value, met);
  const tracked = heapOrganizations.toLocaleString('en-US');
  rows.splice(
    2,
    0,
    heap == null
      ? heapRow(absent('heap/ratecard'))
      : heapOrganizations < 1_000_000
        ? heapRow(`not measured: a quick run tracks ${tracked} organizations (${heap} B each)`)
        : heapRow(`${heap} B (RateLimiterMemory: ${flexibleHeap} B)`, heap, heap <= 100),
  );

  const redisRuns = results.measurements.filter((m) => m.redis !== null);
  const ours = redisRuns.filter((m) => m.contender.startsWith('ratecard'));
  const total = (runs: Measurement[], key: 'overAdmitted' | 'notFromStore'): number =>
    runs.reduce((sum, m) => sum + (m.redis?.[key] ?? 0), 0);
  const over = total(ours, 'overAdmitted');
  const theirs = total(redisRuns, 'overAdmitted') - over;
  // The fallback store's per-process buckets do not share Redis' bound: say how many decisions they made.
  const measured = `${over} over ${ours.length} ratecard runs, which took ${total(ours, 'notFromStore')} decisions from the fallback store (RateLimiterRedis: ${theirs})`;
  const figure = 'over-admitted decisions in every Redis run';
  rows.push(
    ours.length === 0 ? row(figure, '0', absent('redis/ratecard'), null) : row(figure, '0', measured, over, over === 0),
  );
  return rows;
}
