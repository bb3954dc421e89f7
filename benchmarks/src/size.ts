// `pnpm bench:size --orgs <n> --rps <r> [--plan-mix developer=..,hobbyist=..] [--endpoints <k>] [--results <file>]`:
// what a deployment needs, from the figures of the latest `pnpm bench` run, with every assumption printed.
import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PLANS, type Plan } from '@ratecard/core';
import { human, type Measurement, machineLine, type Results, sig } from './results.js';

/** Share of one core Redis' main thread may use before its latency suffers; the rest is headroom. */
const REDIS_CPU_BUDGET = 0.5;
/** Share of one core a limiter replica (one Node process) is planned to use at the given load. */
const REPLICA_CPU_BUDGET = 0.6;
/** Allocator fragmentation and overhead on top of what the keys weigh. */
const FRAGMENTATION = 1.2;

function fail(message: string): never {
  process.stderr.write(`bench:size: ${message}\n`);
  process.exit(2);
}

function positive(name: string, text: string | undefined): number {
  const value = Number(text);
  if (text === undefined || !Number.isFinite(value) || value <= 0)
    fail(`--${name} must be a positive number, got ${text}`);
  return value;
}

/** `developer=60,hobbyist=30,startup=10` (shares or percentages) → fractions summing to 1. */
function planMix(text: string | undefined): Map<Plan, number> {
  const mix = new Map<Plan, number>();
  let total = 0;
  for (const part of (text ?? 'developer=1').split(',')) {
    const [plan = '', share] = part.split('=');
    if (!Object.hasOwn(PLANS, plan))
      fail(`--plan-mix: unknown plan ${JSON.stringify(plan)} (plans: ${Object.keys(PLANS).join(', ')})`);
    const value = Number(share);
    if (!Number.isFinite(value) || value < 0) fail(`--plan-mix: ${plan} needs a non-negative share, got ${share}`);
    mix.set(plan as Plan, (mix.get(plan as Plan) ?? 0) + value);
    total += value;
  }
  if (total === 0) fail('--plan-mix shares sum to 0');
  for (const [plan, share] of mix) mix.set(plan, share / total);
  return mix;
}

function main(): void {
  const { values } = parseArgs({
    options: {
      orgs: { type: 'string' },
      rps: { type: 'string' },
      'plan-mix': { type: 'string' },
      endpoints: { type: 'string', default: '1' },
      results: { type: 'string', default: fileURLToPath(new URL('../results/latest.json', import.meta.url)) },
    },
  });
  const [orgs, rps] = [positive('orgs', values.orgs), positive('rps', values.rps)];
  const endpoints = positive('endpoints', values.endpoints);
  const mix = planMix(values['plan-mix']);
  const file = values.results;
  if (!existsSync(file)) fail(`${file} does not exist: run pnpm bench first`);
  const results = JSON.parse(readFileSync(file, 'utf8')) as Results;
  const find = (id: string): Measurement | undefined => results.measurements.find((m) => m.id === id);
  const standalone = find('redis/ratecard/256-in-flight');
  const cluster = find('cluster/ratecard/256-in-flight');
  const overLimit = find('redis/ratecard/over-limit');
  const perCpuWith = find('http/with-limiter')?.extra.requestsPerServerCpuSecond;
  const perCpuWithout = find('http/without-limiter')?.extra.requestsPerServerCpuSecond;
  if (standalone?.redis == null) fail(`${file} has no standalone Redis figures: run pnpm bench with Redis available`);

  const out: string[] = [
    `ratecard capacity sizing for ${human(orgs)} organizations at ${human(rps)} requests/s`,
    `from ${relative(process.cwd(), file) || file}`,
    `  measured by \`${results.command}\` at ${results.startedAt} (${results.mode} mode)`,
    `  on ${machineLine(results.machine)}`,
    '',
  ];

  // Redis CPU. A cluster batches differently from one server: past one shard, its own CPU figure applies.
  let cpu = standalone.redis.cpuMicrosPerDecision;
  let source = 'standalone, 256 in flight, admitted path';
  let shards = Math.max(1, Math.ceil((rps * cpu) / 1e6 / REDIS_CPU_BUDGET));
  if (shards > 1 && cluster?.redis != null) {
    cpu = cluster.redis.cpuMicrosPerDecision;
    source = '3-master cluster, 256 in flight, admitted path';
    shards = Math.max(2, Math.ceil((rps * cpu) / 1e6 / REDIS_CPU_BUDGET));
  }
  out.push(
    'Redis shards (CPU)',
    shards === 1
      ? '  1 shard: one Redis master (standalone)'
      : `  ${shards} shards: ${shards} masters in a Redis Cluster`,
    `  = ceil(${human(rps)} decisions/s × ${cpu} µs of redis-server CPU per decision / ${REDIS_CPU_BUDGET} core per shard)`,
    '  assumes: every request is one decision that reaches Redis (the worst case: no deny-cache hits);',
    `           CPU per decision as measured (${source}); each shard's main thread kept under ${REDIS_CPU_BUDGET * 100}% of a core;`,
    '           traffic spread evenly over the shards (organizations hash to slots; one huge organization is one slot)',
  );
  if (overLimit?.redis != null) {
    const hits = overLimit.redis.storeStats?.denyCacheHits ?? 0;
    const share = (hits / Math.max(1, overLimit.redis.admitted + overLimit.redis.denied)) * 100;
    out.push(
      `  note: in the over-limit run the deny cache answered ${sig(share)}% of decisions without Redis, at ` +
        `${overLimit.redis.cpuMicrosPerDecision} µs CPU per decision; denied traffic costs Redis less than this estimate`,
    );
  }
  if (shards > 1 && cluster?.redis == null)
    out.push('  note: no cluster figure here; the standalone CPU figure was used');

  // Redis memory.
  const perKey = Math.max(standalone.redis.bytesPerKey ?? 0, standalone.redis.usedMemoryPerKey ?? 0);
  const bytes = orgs * endpoints * perKey * FRAGMENTATION;
  out.push(
    '',
    'Redis memory',
    `  ${human(bytes / 2 ** 20)} MiB in total${shards > 1 ? `, about ${human(bytes / shards / 2 ** 20)} MiB per shard` : ''}`,
    `  = ${human(orgs * endpoints)} buckets × ${sig(perKey)} B per bucket × ${FRAGMENTATION} (allocator fragmentation, assumed)`,
    `  assumes: ${endpoints} rate-limited endpoint${endpoints === 1 ? '' : 's'} per organization (--endpoints), every organization active in the last`,
    '           60 s (a bucket key expires once its bucket is full again, at most 60 s after its last request;',
    '           see docs/redis.md);',
    `           bytes per bucket = the larger of MEMORY USAGE (${standalone.redis.bytesPerKey ?? '–'} B) and used_memory per key (${standalone.redis.usedMemoryPerKey ?? '–'} B) measured`,
    '           with 10-character organization ids and the key prefix "r0000:" (6 characters); add 1 B per extra character;',
    '           replicas (for failover) each need the same again',
    '',
    'Limiter replicas',
  );

  const limiterMicros = standalone.opsPerSecond === null ? null : 1e6 / standalone.opsPerSecond;
  if (perCpuWithout === undefined || limiterMicros === null) {
    out.push('  not computed: these results have no HTTP figures (the HTTP suite did not run)');
  } else {
    const appMicros = 1e6 / perCpuWithout;
    const replicas = Math.max(2, Math.ceil((rps * (appMicros + limiterMicros)) / 1e6 / REPLICA_CPU_BUDGET));
    out.push(
      `  ${replicas} replicas (one Node process each, one core each)`,
      `  = max(2, ceil(${human(rps)} requests/s × (${sig(appMicros)} µs app + ${sig(limiterMicros)} µs limiter) / ${REPLICA_CPU_BUDGET} core))`,
      `  assumes: the app costs what the reference service's POST /browsers costs without a limiter (${human(perCpuWithout)} requests per CPU-second);`,
      '           the limiter on Redis costs at most 1 / (standalone decisions/s at 256 in flight) of Node CPU per decision (that',
      '           process also ran the load loop, so this overstates it); each replica planned at 60% of a core; at least 2 for',
      '           availability. Your handlers are not the reference service: scale the app share by your own profile.',
    );
    const scale = `  for scale: with the in-process memory store the reference service served ${human(perCpuWith)} requests per CPU-second`;
    if (perCpuWith !== undefined) out.push(`${scale} (${human(perCpuWithout)} without the limiter)`);
  }

  // What the plans let through.
  let [burst, parts] = [0, [] as string[]];
  for (const [plan, share] of mix) {
    burst += orgs * share * PLANS[plan];
    parts.push(`${plan} ${sig(share * 100)}% (${PLANS[plan]}/min)`);
  }
  const sustained = burst / 60;
  out.push(
    '',
    'What the plans admit',
    `  plan mix: ${parts.join(', ')}${values['plan-mix'] === undefined ? ' (assumed; pass --plan-mix)' : ''}`,
    `  at most ${human(sustained)} requests/s per enforced endpoint can be admitted sustained (Σ organizations × limit / 60), after a burst of up to ${human(burst)}`,
  );
  const denied = `at least ${human(rps - sustained)}/s are denied once buckets drain (if every organization sends at this rate)`;
  if (rps > sustained) out.push(`  at ${human(rps)} requests/s ${denied}`);
  out.push('  assumes: trial organizations and overrides are not modelled; all traffic on enforced endpoints');
  process.stdout.write(`${out.join('\n')}\n`);
}

main();
