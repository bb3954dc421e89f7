/**
 * `pnpm bench:size --orgs <n> --rps <r> [--plan-mix developer=..,hobbyist=..] [--endpoints <k>] [--results <file>]`:
 * what a deployment needs, from the figures of the latest `pnpm bench` run, with every assumption printed.
 */
import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PLANS, type Plan } from '@ratecard/core';
import { machineLine } from './machine.js';
import type { Measurement, Results } from './results.js';
import { human, sig } from './stats.js';

/** Share of one core Redis' main thread may use before its latency suffers; the rest is headroom. */
const REDIS_CPU_BUDGET = 0.5;
/** Share of one core a limiter replica (one Node process) is planned to use at the given load. */
const REPLICA_CPU_BUDGET = 0.6;
/** Allocator fragmentation and overhead on top of what the keys weigh. */
const FRAGMENTATION = 1.2;

const DEFAULT_RESULTS = fileURLToPath(new URL('../results/latest.json', import.meta.url));

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
  if (text === undefined) {
    mix.set('developer', 1);
    return mix;
  }
  let total = 0;
  for (const part of text.split(',')) {
    const [plan, share] = part.split('=');
    if (plan === undefined || !Object.hasOwn(PLANS, plan)) {
      fail(`--plan-mix: unknown plan ${JSON.stringify(plan)} (plans: ${Object.keys(PLANS).join(', ')})`);
    }
    const value = Number(share);
    if (!Number.isFinite(value) || value < 0) fail(`--plan-mix: ${plan} needs a non-negative share, got ${share}`);
    mix.set(plan as Plan, (mix.get(plan as Plan) ?? 0) + value);
    total += value;
  }
  if (total === 0) fail('--plan-mix shares sum to 0');
  for (const [plan, share] of mix) mix.set(plan, share / total);
  return mix;
}

function find(results: Results, id: string): Measurement | undefined {
  return results.measurements.find((m) => m.id === id);
}

function main(): void {
  const { values } = parseArgs({
    options: {
      orgs: { type: 'string' },
      rps: { type: 'string' },
      'plan-mix': { type: 'string' },
      endpoints: { type: 'string', default: '1' },
      results: { type: 'string', default: DEFAULT_RESULTS },
    },
    strict: true,
  });
  const orgs = positive('orgs', values.orgs);
  const rps = positive('rps', values.rps);
  const endpoints = positive('endpoints', values.endpoints);
  const mix = planMix(values['plan-mix']);
  const file = values.results;
  if (!existsSync(file)) fail(`${file} does not exist: run pnpm bench first`);
  const results = JSON.parse(readFileSync(file, 'utf8')) as Results;

  const standalone = find(results, 'redis/ratecard/256-in-flight');
  const cluster = find(results, 'redis-cluster/ratecard/256-in-flight');
  const overLimit = find(results, 'redis/ratecard/over-limit');
  const httpWith = find(results, 'http/ratecard/with-limiter');
  const httpWithout = find(results, 'http/baseline/without-limiter');
  if (standalone?.redis == null) fail(`${file} has no standalone Redis figures: run pnpm bench with Redis available`);

  const lines: string[] = [];
  const say = (line = ''): void => {
    lines.push(line);
  };
  say(`ratecard capacity sizing for ${human(orgs)} organizations at ${human(rps)} requests/s`);
  say(`from ${relative(process.cwd(), file) || file}`);
  say(`  measured by \`${results.command}\` at ${results.startedAt} (${results.mode} mode)`);
  say(`  on ${machineLine(results.machine)}`);
  say();

  // Redis CPU.
  const standaloneCpu = standalone.redis.cpuMicrosPerDecision;
  const clusterCpu = cluster?.redis?.cpuMicrosPerDecision ?? null;
  const coresStandalone = (rps * standaloneCpu) / 1e6;
  let shards = Math.max(1, Math.ceil(coresStandalone / REDIS_CPU_BUDGET));
  let cpuUsed = standaloneCpu;
  let cpuSource = 'standalone, 256 in flight, admitted path';
  if (shards > 1 && clusterCpu !== null) {
    // A cluster batches per hash slot, so its CPU per decision is its own figure, not the standalone one.
    cpuUsed = clusterCpu;
    cpuSource = '3-master cluster, 256 in flight, admitted path';
    shards = Math.max(2, Math.ceil((rps * clusterCpu) / 1e6 / REDIS_CPU_BUDGET));
  }
  say('Redis shards (CPU)');
  say(
    shards === 1
      ? '  1 shard: one Redis master (standalone)'
      : `  ${shards} shards: ${shards} masters in a Redis Cluster`,
  );
  say(
    `  = ceil(${human(rps)} decisions/s × ${cpuUsed} µs of redis-server CPU per decision / ${REDIS_CPU_BUDGET} core per shard)`,
  );
  say(`  assumes: every request is one decision that reaches Redis (the worst case: no deny-cache hits);`);
  say(
    `           CPU per decision as measured (${cpuSource}); each shard's main thread kept under ${REDIS_CPU_BUDGET * 100}% of a core;`,
  );
  say(
    '           traffic spread evenly over the shards (organizations hash to slots; one huge organization is one slot)',
  );
  if (overLimit?.redis != null && overLimit.admitted !== null && overLimit.denied !== null) {
    const decisions = overLimit.admitted + overLimit.denied;
    const hits = overLimit.redis.storeStats?.denyCacheHits ?? 0;
    say(
      `  note: in the over-limit run the deny cache answered ${sig((hits / Math.max(1, decisions)) * 100)}% of decisions without Redis, ` +
        `at ${overLimit.redis.cpuMicrosPerDecision} µs CPU per decision; denied traffic costs Redis less than this estimate`,
    );
  }
  if (clusterCpu === null && shards > 1)
    say('  note: no cluster figure in these results; the standalone CPU figure was used');
  say();

  // Redis memory.
  const perKey = Math.max(standalone.redis.bytesPerKey ?? 0, standalone.redis.usedMemoryPerKey ?? 0);
  const buckets = orgs * endpoints;
  const bytes = buckets * perKey * FRAGMENTATION;
  say('Redis memory');
  say(
    `  ${human(bytes / 2 ** 20)} MiB in total${shards > 1 ? `, about ${human(bytes / shards / 2 ** 20)} MiB per shard` : ''}`,
  );
  say(
    `  = ${human(buckets)} buckets × ${sig(perKey)} B per bucket × ${FRAGMENTATION} (allocator fragmentation, assumed)`,
  );
  say(
    `  assumes: ${endpoints} rate-limited endpoint${endpoints === 1 ? '' : 's'} per organization (--endpoints), every organization active in the last`,
  );
  say('           70 s (a bucket key expires at most 70 s after its last request: 60 s to refill, then up to 10 s');
  say('           more for a compact key, whose expiry waits for a multiple of 10 s; see docs/redis.md);');
  say(
    `           bytes per bucket = the larger of MEMORY USAGE (${standalone.redis.bytesPerKey ?? '–'} B) and used_memory per key (${standalone.redis.usedMemoryPerKey ?? '–'} B) measured`,
  );
  say(
    '           with 10-character organization ids and the key prefix "rc-r000:" (8 characters); add 1 B per extra character;',
  );
  say('           replicas (for failover) each need the same again');
  say();

  // Limiter replicas.
  say('Limiter replicas');
  const perCpuWithout = httpWithout?.extra.requestsPerServerCpuSecond;
  const nodeRedisPerDecision = standalone.opsPerSecond === null ? null : 1e6 / standalone.opsPerSecond;
  if (perCpuWithout === undefined || nodeRedisPerDecision === null) {
    say('  not computed: these results have no HTTP figures (the reference service was not built when they ran)');
  } else {
    const appMicros = 1e6 / perCpuWithout;
    const perRequest = appMicros + nodeRedisPerDecision;
    const replicas = Math.max(2, Math.ceil((rps * perRequest) / 1e6 / REPLICA_CPU_BUDGET));
    say(`  ${replicas} replicas (one Node process each, one core each)`);
    say(
      `  = max(2, ceil(${human(rps)} requests/s × (${sig(appMicros)} µs app + ${sig(nodeRedisPerDecision)} µs limiter) / ${REPLICA_CPU_BUDGET} core))`,
    );
    say(
      `  assumes: the app costs what the reference service's POST /browsers costs without a limiter (${human(perCpuWithout)} requests per CPU-second);`,
    );
    say(
      '           the limiter on Redis costs at most 1 / (standalone decisions/s at 256 in flight) of Node CPU per decision (that',
    );
    say(
      '           process also ran the load loop, so this overstates it); each replica planned at 60% of a core; at least 2 for',
    );
    say(
      '           availability. Your handlers are not the reference service: scale the app share by your own profile.',
    );
    if (httpWith?.extra.requestsPerServerCpuSecond !== undefined) {
      say(
        `  for scale: with the in-process memory store the reference service served ${human(httpWith.extra.requestsPerServerCpuSecond)} requests per CPU-second (${human(perCpuWithout)} without the limiter)`,
      );
    }
  }
  say();

  // Plan mix: what the limits let through.
  say('What the plans admit');
  let sustained = 0;
  let burst = 0;
  const parts: string[] = [];
  for (const [plan, share] of mix) {
    sustained += (orgs * share * PLANS[plan]) / 60;
    burst += orgs * share * PLANS[plan];
    parts.push(`${plan} ${sig(share * 100)}% (${PLANS[plan]}/min)`);
  }
  say(`  plan mix: ${parts.join(', ')}${values['plan-mix'] === undefined ? ' (assumed; pass --plan-mix)' : ''}`);
  say(
    `  at most ${human(sustained)} requests/s per enforced endpoint can be admitted sustained (Σ organizations × limit / 60), after a burst of up to ${human(burst)}`,
  );
  if (rps > sustained) {
    say(
      `  at ${human(rps)} requests/s at least ${human(rps - sustained)}/s are denied once buckets drain (if every organization sends at this rate)`,
    );
  }
  say('  assumes: trial organizations and overrides are not modelled; all traffic on enforced endpoints');
  process.stdout.write(`${lines.join('\n')}\n`);
}

main();
