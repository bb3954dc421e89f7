import type { Plan } from '@ratecard/core';
import { PLANS } from '@ratecard/core';
import { type ClosedLoopResult, closedLoop, overAdmitted } from './closed-loop.js';
import type { BenchConfig } from './config.js';
import { progress } from './progress.js';
import { type Contender, type ContenderFactory, flexibleContender, ratecardContender } from './redis-contenders.js';
import { cpuSeconds, forget, memoryAndKeys, memoryPerKey, type RedisTarget, redisTime } from './redis-servers.js';
import { type Library, type Measurement, measurement, type Suite } from './results.js';
import { human, latencyMicros, sig } from './stats.js';

const CONTENDERS: readonly { name: Library; factory: ContenderFactory }[] = [
  { name: 'ratecard', factory: ratecardContender },
  { name: 'rate-limiter-flexible', factory: flexibleContender },
];

let runs = 0;

function runId(kind: 'w' | 'r'): string {
  return `${kind}${String(runs++).padStart(3, '0')}`;
}

function organizationNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `org_${i.toString(36).padStart(6, '0')}`);
}

interface RunShape {
  id: string;
  suite: Suite;
  plan: Plan;
  organizations: number;
  inFlight: number;
  /** Rounds alternate between the contenders, so a burst of other work on the machine hits both alike. */
  rounds: number;
  roundMs: number;
  maxCallsPerRound: number;
  recordLatency: boolean;
  sampleMemory: boolean;
  /** Words for the method text: what this run shows. */
  purpose: string;
}

/** One round of one contender, on buckets of its own: the closed loop's counts, and what Redis said of them. */
interface Round extends Omit<ClosedLoopResult, 'admittedPerOrganization'> {
  cpuSeconds: number;
  windowSeconds: number;
  overAdmitted: number;
  notFromStore: number;
  memory: { bytes: number | null; keys: number };
  usedMemoryPerKey: number | null;
  storeStats: Record<string, number> | null;
  contender: Pick<Contender, 'subject' | 'keysPerBucket'>;
}

async function warmUp(
  target: RedisTarget,
  config: BenchConfig,
  factory: ContenderFactory,
  shape: RunShape,
): Promise<void> {
  // On keys of its own: loads the scripts and lets the JIT settle without touching any measured bucket.
  const organizations = organizationNames(shape.organizations);
  const warm = await factory(target, runId('w'), shape.plan, organizations);
  await closedLoop(warm.call, {
    inFlight: shape.inFlight,
    organizations: organizations.length,
    durationMs: config.redis.warmupMs,
    maxCalls: 1_000_000,
    recordLatency: false,
  });
  await warm.close();
  await forget(target, warm.keyPattern);
}

async function runRound(
  target: RedisTarget,
  config: BenchConfig,
  factory: ContenderFactory,
  shape: RunShape,
  sampleMemory: boolean,
): Promise<Round> {
  const organizations = organizationNames(shape.organizations);
  const contender = await factory(target, runId('r'), shape.plan, organizations);
  const cpuBefore = await cpuSeconds(target.masters);
  const timeBefore = await redisTime(target.masters);
  const result = await closedLoop(contender.call, {
    inFlight: shape.inFlight,
    organizations: organizations.length,
    durationMs: shape.roundMs,
    maxCalls: shape.maxCallsPerRound,
    recordLatency: shape.recordLatency,
  });
  const timeAfter = await redisTime(target.masters);
  const cpuAfter = await cpuSeconds(target.masters);
  const windowSeconds = timeAfter - timeBefore;
  const memory = sampleMemory
    ? await memoryPerKey(target.masters, contender.keyPattern, config.redis.memorySample)
    : { bytes: null, keys: 0 };
  const storeStats = contender.storeStats();
  const notFromStore = contender.notFromStore();
  await contender.close();
  // On a server of its own the harness can also weigh the keys whole: used_memory before and after deleting them.
  let usedMemoryPerKey: number | null = null;
  if (sampleMemory && target.owned) {
    const before = await memoryAndKeys(target.masters);
    await forget(target, contender.keyPattern);
    const after = await memoryAndKeys(target.masters);
    const keys = before.keys - after.keys;
    if (keys > 0) usedMemoryPerKey = sig((before.usedMemory - after.usedMemory) / keys);
  } else {
    await forget(target, contender.keyPattern);
  }
  const { admittedPerOrganization, ...counts } = result;
  return {
    ...counts,
    cpuSeconds: cpuAfter - cpuBefore,
    windowSeconds,
    overAdmitted: overAdmitted(admittedPerOrganization, PLANS[shape.plan], windowSeconds),
    notFromStore,
    memory,
    usedMemoryPerKey,
    storeStats,
    contender: { subject: contender.subject, keysPerBucket: contender.keysPerBucket },
  };
}

/** Counters of several stores added up; the two that are not counts take the largest. */
function addStats(all: (Record<string, number> | null)[]): Record<string, number> | null {
  const present = all.filter((stats): stats is Record<string, number> => stats !== null);
  if (present.length === 0) return null;
  const out: Record<string, number> = {};
  for (const stats of present) {
    for (const [name, value] of Object.entries(stats)) {
      const largest = name === 'largestBatch' || name === 'denyCacheSize';
      out[name] = largest ? Math.max(out[name] ?? 0, value) : (out[name] ?? 0) + value;
    }
  }
  return out;
}

function concat(parts: readonly Float64Array[]): Float64Array {
  const out = new Float64Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

function summarize(
  target: RedisTarget,
  config: BenchConfig,
  name: Library,
  shape: RunShape,
  rounds: Round[],
): Measurement {
  const first = rounds[0] as Round;
  const sum = (pick: (round: Round) => number): number => rounds.reduce((total, round) => total + pick(round), 0);
  const admitted = sum((r) => r.admitted);
  const denied = sum((r) => r.denied);
  const decisions = admitted + denied;
  const elapsedMs = sum((r) => r.elapsedMs);
  const errors = sum((r) => r.errors);
  const latency = shape.recordLatency
    ? latencyMicros(
        concat(rounds.map((r) => r.latencies)),
        sum((r) => r.latencies.length),
      )
    : null;
  const capacity = PLANS[shape.plan];
  const where = target.kind === 'cluster' ? `${target.masters.length}-master Redis Cluster` : 'standalone Redis';
  const windows = rounds.map((r) => sig(r.windowSeconds)).join(', ');
  const method =
    `${shape.inFlight} call${shape.inFlight === 1 ? '' : 's'} in flight (closed loop; one event-loop turn per ` +
    `1 024 calls, as a server’s socket reads give), ${shape.organizations.toLocaleString('en-US')} organizations ` +
    `round-robin on the ${shape.plan} plan (C = ${capacity}/min); ${rounds.length} round${rounds.length === 1 ? '' : 's'} ` +
    `of ${shape.roundMs} ms (or ${shape.maxCallsPerRound.toLocaleString('en-US')} calls) alternating with the other ` +
    `library, fresh buckets each round, after ${config.redis.warmupMs} ms of warm-up on other keys; ${where}; client ` +
    `and limiter in one Node process with a connection of their own; ${shape.purpose}; Redis CPU from INFO cpu ` +
    `(used_cpu_user + used_cpu_sys) deltas${target.masters.length > 1 ? ' summed over the masters' : ''}; exactness bound ` +
    `C + C·T/60 per bucket with T from Redis TIME around each round (${windows} s)` +
    (latency === null ? '' : '; every call timed with performance.now(), percentiles over all rounds') +
    (shape.sampleMemory ? `; MEMORY USAGE over up to ${config.redis.memorySample} keys after the first round` : '');
  const notes: string[] = [];
  if (errors > 0) notes.push(`${errors} calls failed; first: ${rounds.find((r) => r.firstError !== null)?.firstError}`);
  const storeStats = addStats(rounds.map((r) => r.storeStats));
  if (storeStats !== null && typeof storeStats.batches === 'number' && decisions > 0) {
    notes.push(`Redis script calls per decision: ${sig(storeStats.batches / decisions)}`);
  }
  if (name === 'rate-limiter-flexible') {
    notes.push('fixed 60 s window per key (its Redis algorithm); the window starts at the key’s first call');
  }
  return measurement({
    id: `${shape.suite}/${name}/${shape.id}`,
    suite: shape.suite,
    library: name,
    subject: first.contender.subject,
    method,
    calls: sum((r) => r.calls),
    durationMs: sig(elapsedMs, 4),
    opsPerSecond: sig((decisions / elapsedMs) * 1000),
    p50Micros: latency === null ? null : sig(latency.p50),
    p99Micros: latency === null ? null : sig(latency.p99),
    admitted,
    denied,
    redis: {
      cpuMicrosPerDecision: decisions === 0 ? Number.NaN : sig((sum((r) => r.cpuSeconds) * 1e6) / decisions),
      bytesPerKey: first.memory.bytes === null ? null : sig(first.memory.bytes),
      keysSampled: first.memory.keys,
      usedMemoryPerKey: first.usedMemoryPerKey,
      keysPerBucket: first.contender.keysPerBucket,
      overAdmitted: sum((r) => r.overAdmitted),
      windowSeconds: sig(
        sum((r) => r.windowSeconds),
        4,
      ),
      notFromStore: sum((r) => r.notFromStore),
      errors,
      storeStats,
    },
    notes,
  });
}

async function runShape(target: RedisTarget, config: BenchConfig, shape: RunShape): Promise<Measurement[]> {
  const rounds = new Map<Library, Round[]>(CONTENDERS.map(({ name }) => [name, []]));
  for (const { factory } of CONTENDERS) await warmUp(target, config, factory, shape);
  for (let round = 0; round < shape.rounds; round++) {
    // Who goes first alternates too.
    const order = round % 2 === 0 ? CONTENDERS : [...CONTENDERS].reverse();
    for (const { name, factory } of order) {
      rounds.get(name)?.push(await runRound(target, config, factory, shape, shape.sampleMemory && round === 0));
    }
  }
  const out: Measurement[] = [];
  for (const { name } of CONTENDERS) {
    const figure = summarize(target, config, name, shape, rounds.get(name) ?? []);
    out.push(figure);
    progress(
      `${shape.suite}: ${name.padEnd(22)} ${shape.id.padEnd(14)} ${human(figure.opsPerSecond, 'decisions/s')}` +
        `  CPU ${figure.redis?.cpuMicrosPerDecision} µs/decision` +
        (figure.p50Micros === null ? '' : `  p50 ${figure.p50Micros} µs p99 ${figure.p99Micros} µs`) +
        (figure.redis?.bytesPerKey == null ? '' : `  ${figure.redis.bytesPerKey} B/key`) +
        (figure.redis?.usedMemoryPerKey == null ? '' : ` (used_memory ${figure.redis.usedMemoryPerKey} B/key)`) +
        `  admitted ${figure.admitted} denied ${figure.denied} over-admitted ${figure.redis?.overAdmitted}` +
        ((figure.redis?.errors ?? 0) > 0 ? `  errors ${figure.redis?.errors}` : '') +
        ((figure.redis?.notFromStore ?? 0) > 0 ? `  not from Redis ${figure.redis?.notFromStore}` : ''),
    );
  }
  return out;
}

function throughputShapes(suite: Suite, config: BenchConfig): RunShape[] {
  const r = config.redis;
  return [
    {
      id: `${r.inFlight}-in-flight`,
      suite,
      plan: 'enterprise',
      organizations: r.organizations,
      inFlight: r.inFlight,
      rounds: r.rounds,
      roundMs: r.roundMs,
      // Never more calls than the buckets hold, so every call is admitted and reaches Redis.
      maxCallsPerRound: r.organizations * PLANS.enterprise,
      recordLatency: false,
      sampleMemory: true,
      purpose: 'admitted path: the calls never exceed the buckets’ capacity, so every decision is made in Redis',
    },
    {
      id: 'over-limit',
      suite,
      plan: 'developer',
      // Few enough that even a slow run drains every bucket early in the round (10 tokens each).
      organizations: r.overLimitOrganizations,
      inFlight: r.inFlight,
      rounds: r.rounds,
      roundMs: r.limitedRoundMs,
      maxCallsPerRound: 10_000_000,
      recordLatency: false,
      sampleMemory: false,
      purpose:
        'over the limit: 10 per minute per organization, so after the first 10 calls of each most are denied ' +
        '(ratecard’s deny cache answers many of those without Redis)',
    },
  ];
}

/** Standalone: 256 in flight (admitted and over-the-limit shapes), then 1 in flight for latency. */
export async function redisStandaloneSuite(target: RedisTarget, config: BenchConfig): Promise<Measurement[]> {
  const r = config.redis;
  const shapes: RunShape[] = [
    ...throughputShapes('redis', config),
    {
      id: '1-in-flight',
      suite: 'redis-latency',
      plan: 'enterprise',
      organizations: r.organizations,
      inFlight: 1,
      rounds: r.latencyRounds,
      roundMs: r.latencyRoundMs,
      maxCallsPerRound: r.latencyMaxCalls,
      recordLatency: true,
      sampleMemory: false,
      purpose: 'one call at a time: the latency of a lone decision, admitted path',
    },
  ];
  const out: Measurement[] = [];
  for (const shape of shapes) out.push(...(await runShape(target, config, shape)));
  return out;
}

/** The 3-master cluster: the same 256-in-flight shapes as standalone. */
export async function redisClusterSuite(target: RedisTarget, config: BenchConfig): Promise<Measurement[]> {
  const out: Measurement[] = [];
  for (const shape of throughputShapes('redis-cluster', config)) out.push(...(await runShape(target, config, shape)));
  return out;
}
