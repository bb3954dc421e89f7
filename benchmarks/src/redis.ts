// Limiters on Redis side by side: a redis-server or a 3-master cluster started here (`@ratecard/redis/testing`),
// contenders alternating round by round on the same servers, each on a connection of its own.

import { type ChildProcess, execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Limit, LimitRequest, Plan } from '@ratecard/core';
import { createLimiter, PLANS, perHour, perSecond, SPEC_PLANS } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { type RedisClient, redisStore } from '@ratecard/redis';
import { type RedisAddress, startRedis, startRedisCluster } from '@ratecard/redis/testing';
import * as hdr from 'hdr-histogram-js';
import { Cluster, Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { createClient, createCluster } from 'redis';
import { type Job, nextMessage, startWorker } from './child.js';
import { say, step } from './progress.js';
import { human, type Measurement, measurement, median, organizationNames, type RedisFigures, sig } from './results.js';

const ENDPOINT = 'POST /browsers';
export const ONE_SERVER = 'ratecard-one-server';

export interface RedisTarget {
  kind: 'redis' | 'cluster';
  nodes: RedisAddress[];
  /** One admin connection per master: INFO, TIME, SCAN, MEMORY USAGE, FLUSHALL. */
  masters: Redis[];
  /** Beside a cluster, one redis-server: ratecard's rounds there (ONE_SERVER) alternate with the cluster's. */
  alongside?: RedisTarget;
  stop(): Promise<void>;
}

/** One contender's limiter, opened for one round on keys and a connection of its own. */
interface Opened {
  call(org: number): Promise<boolean>;
  /** Closes; says how many decisions Redis did not make (ratecard's fallback store), and the store's counters. */
  close(): Promise<{ notFromStore: number; stats: Record<string, number> | null }>;
}

export interface Contender {
  name: string;
  subject: string;
  /** A request's limits on a plan, when not the plan's one limit: the over-admission bound checks each. */
  limits?: (plan: Plan) => Limit[];
  /** The only `<suite>/<shape>` runs it takes part in, when not every one. */
  only?: string[];
  /** Its rounds run on the redis-server beside the cluster. */
  beside?: boolean;
  /** Each call a `limiter.reserve` and, once it answers, the Reservation's `settle()`: a decision is both. */
  reserve?: boolean;
  open(target: RedisTarget, prefix: string, plan: Plan, organizations: readonly string[]): Promise<Opened>;
}

async function ioredis(target: RedisTarget): Promise<Redis | Cluster> {
  const client = target.kind === 'cluster' ? new Cluster(target.nodes) : new Redis(target.nodes[0] as RedisAddress);
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  return client;
}

/** A client for a target, and the function that disconnects it. */
type Connect = (target: RedisTarget) => Promise<[RedisClient, () => Promise<unknown>]>;

/** ratecard as a user would write it, on a client `connect` makes; a request carries its plan, or `options.limits`. */
function ratecardOn(name: string, clientName: string, connect: Connect, options: Partial<Contender> = {}): Contender {
  return {
    name,
    subject: `\`limiter.consume()\`, \`createLimiter({ store: redisStore({ client }), fallback: memoryStore() })\`, ${clientName}`,
    ...options,
    async open(target, prefix, plan, organizations) {
      const [client, disconnect] = await connect(target);
      const store = redisStore({ client, prefix: `${prefix}:` });
      const limiter = createLimiter({ store, fallback: memoryStore() });
      const limits = options.limits?.(plan);
      const request = (organization: string): LimitRequest =>
        limits === undefined
          ? { organization, endpoint: ENDPOINT, plan }
          : { organization, endpoint: ENDPOINT, limits };
      const requests = organizations.map(request);
      let notFromStore = 0;
      const reserveAndSettle = (request: LimitRequest) =>
        limiter.reserve(request).then(async (reservation) => {
          if (reservation.allowed) await reservation.settle();
          return reservation;
        });
      return {
        call: (org) =>
          (options.reserve === true ? reserveAndSettle : (each: LimitRequest) => limiter.consume(each))(
            requests[org] as LimitRequest,
          ).then((decision) => {
            if (decision.source !== 'store') notFromStore++;
            return decision.allowed;
          }),
        close: async () => {
          const stats = { ...store.stats() };
          await limiter.close();
          await disconnect();
          return { notFromStore, stats };
        },
      };
    },
  };
}

const onIoredis: Connect = (target) => ioredis(target).then((client) => [client, () => client.quit()]);

const onNodeRedis: Connect = async (target) => {
  const urls = target.nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }));
  const client = target.kind === 'cluster' ? createCluster({ rootNodes: urls }) : createClient(urls[0]);
  await client.connect();
  return [client as unknown as RedisClient, () => client.close()];
};

const flexible: Contender = {
  name: 'rate-limiter-flexible',
  subject: '`RateLimiterRedis.consume(key)`, points = the plan’s limit, duration 60 s, ioredis',
  async open(target, prefix, plan, organizations) {
    const client = await ioredis(target);
    const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix: prefix, points: PLANS[plan], duration: 60 });
    const keys = organizations.map((organization) => `${organization}:${ENDPOINT}`);
    const denied = (reason: unknown): boolean => {
      if (reason instanceof RateLimiterRes) return false;
      throw reason;
    };
    return {
      call: (org) => limiter.consume(keys[org] as string).then(() => true, denied),
      close: async () => {
        await client.quit();
        return { notFromStore: 0, stats: null };
      },
    };
  },
};

/** Two limits per request, both charged or neither, as roomy as the plan's one (C): no shape needs more. */
function twoLimits(plan: Plan): Limit[] {
  return [perSecond(Math.ceil(PLANS[plan] / 10), { burst: PLANS[plan] }), perHour(60 * PLANS[plan])];
}

/** In every run of both suites unless `only` names its runs; ONE_SERVER is the cluster's CPU target's standalone. */
// biome-ignore format: a table, one contender a line
export const REDIS_CONTENDERS: readonly Contender[] = [
  ratecardOn('ratecard', 'ioredis', onIoredis),
  flexible,
  ratecardOn('ratecard-node-redis', 'node-redis 6 (RESP3)', onNodeRedis),
  ratecardOn(ONE_SERVER, 'ioredis, on a redis-server beside the cluster', onIoredis, { beside: true, only: ['cluster/256-in-flight'] }),
  ratecardOn('ratecard-reserve', 'ioredis; `limiter.reserve(request)`, then the Reservation\'s `settle()`', onIoredis, { reserve: true, only: ['redis/256-in-flight'] }),
  ratecardOn('ratecard-2-limits', 'ioredis; `limits: [perSecond(⌈C/10⌉, { burst: C }), perHour(60·C)]`', onIoredis, { limits: twoLimits, only: ['redis/256-in-flight', 'redis/over-limit'] }),
];

/** The contenders of a run, in the order they alternate. */
export const contendersIn = (kind: RedisTarget['kind'], shape: string): Contender[] =>
  REDIS_CONTENDERS.filter((contender) => contender.only?.includes(`${kind}/${shape}`) ?? true);

export async function startTarget(kind: RedisTarget['kind']): Promise<RedisTarget> {
  const cluster = kind === 'cluster' ? await startRedisCluster({ masters: 3 }) : undefined;
  const servers = cluster?.masters ?? [await startRedis()];
  const nodes = servers.map(({ host, port }) => ({ host, port }));
  const masters = nodes.map((node) => new Redis(node));
  const alongside = cluster === undefined ? undefined : await startTarget('redis');
  return {
    ...{ kind, nodes, masters, alongside },
    stop: async () => {
      await Promise.all(masters.map((master) => master.quit()));
      await (cluster ?? (servers[0] as { stop(): Promise<void> })).stop();
      await alongside?.stop();
    },
  };
}

/** An INFO field summed over the masters. */
async function info(target: RedisTarget, section: string, ...fields: string[]): Promise<number> {
  let sum = 0;
  for (const master of target.masters) {
    const text = await master.info(section);
    for (const field of fields) sum += Number(new RegExp(`^${field}:(.*)$`, 'm').exec(text)?.[1]);
  }
  return sum;
}

export async function redisVersion(target: RedisTarget): Promise<string> {
  return /^redis_version:(.*)$/m.exec(await (target.masters[0] as Redis).info('server'))?.[1]?.trim() ?? 'unknown';
}

async function redisTime(target: RedisTarget): Promise<number> {
  const [seconds, micros] = await (target.masters[0] as Redis).time();
  return Number(seconds) + Number(micros) / 1e6;
}

/** MEMORY USAGE averaged over a sample of keys, and used_memory freed per key by FLUSHALL (which every round ends with). */
async function weighAndFlush(target: RedisTarget, sample: number) {
  let [total, weighed, keys] = [0, 0, 0];
  for (const master of target.masters) {
    const [, found] =
      sample === 0 ? ['0', []] : await master.scan('0', 'COUNT', Math.ceil(sample / target.masters.length));
    for (const key of found) {
      const bytes = (await master.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number | null;
      if (bytes !== null) [total, weighed] = [total + bytes, weighed + 1];
    }
    keys += await master.dbsize();
  }
  const before = await info(target, 'memory', 'used_memory');
  await Promise.all(target.masters.map((master) => master.flushall()));
  const freed = before - (await info(target, 'memory', 'used_memory'));
  return { bytes: weighed === 0 ? null : total / weighed, used: keys === 0 ? null : freed / keys };
}

/** A load shape; `maxCalls` bounds a round (the 256-in-flight shape never asks more than its buckets hold). */
export interface Shape {
  name: string;
  plan: Plan;
  organizations: number;
  inFlight: number;
  rounds: number;
  roundMs: number;
  warmupMs: number;
  maxCalls: number;
  purpose: string;
}

/** Calls started before the workers wait one event-loop turn, as a server's socket reads give. */
const CALLS_PER_TURN = 1024;
let prefixes = 0;
type RoundResult = Awaited<ReturnType<typeof runRound>>;

/**
 * One round of one contender on fresh keys: `inFlight` workers, each starting its next call when the last answers,
 * call n to organization n mod count; then what Redis says of it.
 */
async function runRound(target: RedisTarget, contender: Contender, shape: Shape, ms: number, prefix: string) {
  const opened = await contender.open(target, prefix, shape.plan, organizationNames(shape.organizations));
  const admittedPer = new Int32Array(shape.organizations);
  let [started, admitted, denied, errors, sinceTurn] = [0, 0, 0, 0, 0];
  let turn: Promise<void> | undefined;
  const [cpuBefore, timeBefore] = [await info(target, 'cpu', 'used_cpu_user', 'used_cpu_sys'), await redisTime(target)];
  const t0 = performance.now();
  async function worker(): Promise<void> {
    while (started < shape.maxCalls && performance.now() < t0 + ms) {
      if (sinceTurn >= CALLS_PER_TURN) {
        // Without this, calls answered locally (a deny cache) would chain as microtasks and starve the socket reads.
        turn ??= new Promise((resolve) =>
          setImmediate(() => {
            sinceTurn = 0;
            turn = undefined;
            resolve();
          }),
        );
        await turn;
        continue;
      }
      sinceTurn++;
      const org = started++ % shape.organizations;
      try {
        if (await opened.call(org)) [admitted, admittedPer[org]] = [admitted + 1, (admittedPer[org] as number) + 1];
        else denied++;
      } catch {
        errors++;
      }
    }
  }
  await Promise.all(Array.from({ length: shape.inFlight }, worker));
  const elapsedMs = performance.now() - t0;
  const [timeAfter, cpuAfter] = [await redisTime(target), await info(target, 'cpu', 'used_cpu_user', 'used_cpu_sys')];
  const { stats, notFromStore } = await opened.close();
  // The most an exact token bucket of capacity C refilling r per interval I admits in T: C + r·T/I; every limit of
  // a request is charged on admission, so none may pass its own bound.
  const [span, limits] = [(timeAfter - timeBefore) * 1000, contender.limits?.(shape.plan) ?? [SPEC_PLANS[shape.plan]]];
  const bound = Math.min(...limits.map((l) => Math.floor(l.capacity + (l.refill * span) / l.intervalMs)));
  let overAdmitted = 0;
  for (const count of admittedPer) overAdmitted += Math.max(0, count - bound);
  const weight = await weighAndFlush(target, shape.name === '256-in-flight' ? 2000 : 0);
  const [decisions, cpuSeconds] = [admitted + denied, cpuAfter - cpuBefore];
  const counts = { admitted, denied, errors, overAdmitted, notFromStore };
  return {
    perSecond: (decisions / elapsedMs) * 1000,
    cpuMicros: (cpuSeconds * 1e6) / Math.max(1, decisions),
    counts,
    stats,
    weight,
  };
}

/** In a fresh process (worker.ts), as in a server: a contender's warm-up round, then its measured round. */
export async function redisRound(job: Extract<Job, { kind: 'redis' }>): Promise<unknown> {
  const [shape, masters] = [job.shape as Shape, job.on.nodes.map((node) => new Redis(node))];
  const target = { ...job.on, masters, stop: async () => {} };
  const contender = REDIS_CONTENDERS[job.contender] as Contender;
  await runRound(target, contender, shape, shape.warmupMs, `${job.prefix}w`);
  return runRound(target, contender, shape, shape.roundMs, `${job.prefix}m`);
}

/** One shape: rounds, contenders alternating, each round a fresh process with a warm-up on keys of its own; medians. */
export async function runShape(target: RedisTarget, shape: Shape): Promise<Measurement[]> {
  const { rounds, warmupMs } = shape;
  const runs = contendersIn(target.kind, shape.name).map((contender) => {
    const on = (contender.beside === true ? target.alongside : target) as RedisTarget;
    return { name: contender.name, on, contender };
  });
  const results = new Map(runs.map((run) => [run.name, [] as RoundResult[]]));
  for (let round = 0; round < rounds; round++) {
    for (const { name, on, contender } of round % 2 === 0 ? runs : [...runs].reverse()) {
      step(`${target.kind} ${shape.name} ${name} ${round + 1}/${rounds}`);
      // Prefixes of one length for every contender, so their keys weigh alike.
      const prefix = `r${String(prefixes++).padStart(4, '0')}`;
      const at = { kind: on.kind, nodes: on.nodes };
      const job = { kind: 'redis', on: at, contender: REDIS_CONTENDERS.indexOf(contender), shape, prefix } as const;
      const result = (await nextMessage(startWorker(job), shape.roundMs + warmupMs + 60_000)) as RoundResult;
      results.get(name)?.push(result);
    }
  }
  const where = target.kind === 'cluster' ? `a ${target.masters.length}-master Redis Cluster` : 'a redis-server';
  const method =
    `${shape.inFlight} in flight (closed loop, an event-loop turn every ${CALLS_PER_TURN} calls), ` +
    `${shape.organizations.toLocaleString('en-US')} organizations round-robin on the ${shape.plan} plan ` +
    `(C = ${PLANS[shape.plan]}/min); ${shape.purpose}; rounds: ${rounds} of ${shape.roundMs} ms per contender, ` +
    `alternating, each in a fresh process after ${warmupMs} ms of warm-up there, fresh keys each; ${where} started ` +
    'by the harness on 127.0.0.1; ' +
    'decisions/s and redis-server CPU per decision (INFO cpu used_cpu_user + used_cpu_sys, summed over the masters) ' +
    'are medians of rounds; over-admitted: admitted beyond C + r·T/I per organization for each of its limits ' +
    '(capacity C, r per interval I: C + C·T/60 for a plan), T from Redis TIME around the round';
  return runs.map(({ name, contender }) => {
    const all = results.get(name) ?? [];
    const sum = (key: keyof RoundResult['counts']): number => all.reduce((total, r) => total + r.counts[key], 0);
    const summed: Record<string, number> = {};
    for (const [stat, value] of all.flatMap((r) => Object.entries(r.stats ?? {})))
      summed[stat] = stat === 'largestBatch' ? Math.max(summed[stat] ?? 0, value) : (summed[stat] ?? 0) + value;
    const [ops, weight] = [median(all.map((r) => r.perSecond)), all[0]?.weight];
    const m = measurement({
      id: `${target.kind}/${name}/${shape.name}`,
      suite: target.kind,
      contender: name,
      subject: contender.subject,
      method,
      rounds: all.map((r) => sig(r.perSecond)),
      opsPerSecond: sig(ops),
      redis: {
        cpuMicrosPerDecision: sig(median(all.map((r) => r.cpuMicros))),
        ...{ admitted: sum('admitted'), denied: sum('denied'), overAdmitted: sum('overAdmitted') },
        ...{ notFromStore: sum('notFromStore'), errors: sum('errors') },
        bytesPerKey: weight?.bytes == null ? null : sig(weight.bytes),
        usedMemoryPerKey: weight?.used == null ? null : sig(weight.used),
        storeStats: Object.keys(summed).length === 0 ? null : summed,
      },
    });
    const line = `${target.kind.padEnd(8)}${shape.name.padEnd(14)}${name.padEnd(22)}`;
    say(`${line}${human(ops).padStart(7)}/s ${m.redis?.cpuMicrosPerDecision} µs CPU`);
    return m;
  });
}

type RedisSizes = Record<'organizations' | 'rounds' | 'roundMs' | 'overLimitMs' | 'warmupMs', number>;

export function shapesFor(c: RedisSizes): Shape[] {
  const [admittedCalls, common] = [c.organizations * PLANS.enterprise, { rounds: c.rounds, warmupMs: c.warmupMs }];
  // biome-ignore format: a table, one shape a line
  return [
    { ...common, name: '256-in-flight', plan: 'enterprise', organizations: c.organizations, inFlight: 256, roundMs: c.roundMs, maxCalls: admittedCalls, purpose: 'never more calls than the buckets hold, so every decision is an admission made in Redis' },
    // 2 000 organizations of 10 tokens: every bucket drains early in a round, even on a slow run.
    { ...common, name: 'over-limit', plan: 'developer', organizations: 2000, inFlight: 256, roundMs: c.overLimitMs, maxCalls: Number.MAX_SAFE_INTEGER, purpose: 'buckets drain early in the round, so most decisions are denials and exactness is put to the test' },
  ];
}

/** Lone decisions: one call in flight, one limit, on 1 000 organizations whose keys the warm-up makes. */
const LONE = { organizations: 1000, plan: 'enterprise', shape: '1-in-flight' } as const;
export type LoneSizes = Record<'rounds' | 'calls', number>;
type LoneRound = { perSecond: number; latency: string; cpuMicros: number };

/**
 * A contender's lone worker (worker.ts): opens it, calls each organization once, says it is ready, then at each
 * message runs that many lone calls, each timed, and at 0 closes. No organization nears its capacity in a run, so
 * none can be over-admitted; a lone run is for latency and what Redis spends on a lone call.
 */
export async function loneWorker(
  job: Extract<Job, { kind: 'lone' }>,
  send: (value: unknown) => Promise<void>,
): Promise<void> {
  const target = { ...job.on, masters: [], stop: async () => {} };
  const names = organizationNames(LONE.organizations);
  const opened = await (REDIS_CONTENDERS[job.contender] as Contender).open(target, job.prefix, LONE.plan, names);
  const counts = { admitted: 0, denied: 0, errors: 0, overAdmitted: 0 };
  let org = 0;
  const round = async (calls: number): Promise<Omit<LoneRound, 'cpuMicros'>> => {
    const latency = hdr.build({ highestTrackableValue: 1e10 });
    const t0 = performance.now();
    for (let i = 0; i < calls; i++, org = (org + 1) % LONE.organizations) {
      const callStart = performance.now();
      await opened.call(org).then(
        (allowed) => void counts[allowed ? 'admitted' : 'denied']++,
        () => void counts.errors++,
      );
      latency.recordValue(Math.round((performance.now() - callStart) * 1e6));
    }
    return { perSecond: (calls / (performance.now() - t0)) * 1000, latency: hdr.encodeIntoCompressedBase64(latency) };
  };
  await round(LONE.organizations);
  process.on('message', (calls: number) => {
    if (calls > 0) return void round(calls).then(send);
    void opened
      .close()
      .then(({ notFromStore, stats }) =>
        send({ ...counts, notFromStore, storeStats: stats, bytesPerKey: null, usedMemoryPerKey: null }),
      );
  });
  await send('ready');
}

/**
 * Lone decisions in alternating paired rounds on the redis-server: a process per contender, opened and warmed once,
 * then round by round each runs its calls while the others wait, in reverse order every other round, so that a slow
 * minute lands on one round of each contender rather than on one contender.
 */
export async function loneSuite(target: RedisTarget, sizes: LoneSizes): Promise<Measurement[]> {
  const contenders = contendersIn('redis', LONE.shape);
  const workers = contenders.map((contender) => {
    const [on, prefix] = [{ kind: target.kind, nodes: target.nodes }, `r${String(prefixes++).padStart(4, '0')}`];
    return startWorker({ kind: 'lone', on, contender: REDIS_CONTENDERS.indexOf(contender), prefix });
  });
  await Promise.all(workers.map((worker) => nextMessage(worker, 60_000)));
  const rounds = contenders.map((): LoneRound[] => []);
  const cpu = () => info(target, 'cpu', 'used_cpu_user', 'used_cpu_sys');
  for (let round = 0; round < sizes.rounds; round++) {
    for (const i of round % 2 === 0 ? contenders.keys() : [...contenders.keys()].reverse()) {
      step(`redis lone ${contenders[i]?.name} ${round + 1}/${sizes.rounds}`);
      const [worker, before] = [workers[i] as ChildProcess, await cpu()];
      worker.send(sizes.calls);
      const result = (await nextMessage(worker, 60_000)) as LoneRound;
      rounds[i]?.push({ ...result, cpuMicros: ((await cpu()) - before) * (1e6 / sizes.calls) });
    }
  }
  const method =
    `1 in flight, one limit (the ${LONE.plan} plan, C = ${PLANS[LONE.plan]}/min), ${LONE.organizations} ` +
    'organizations round-robin, each called once in warm-up so that every decision reads a bucket; a process per ' +
    `contender, opened once; ${sizes.rounds} alternating rounds of ${sizes.calls} calls per contender (reverse ` +
    "order every other round) on the harness' redis-server; every call timed into an HdrHistogram; p50 and p99 of " +
    "all rounds pooled; the targets take the median over rounds of one round's percentile over the peer's in the " +
    'same round; decisions/s and redis-server CPU per decision (INFO cpu) are medians of rounds';
  const micros = (histogram: hdr.Histogram, p: number) => sig(histogram.getValueAtPercentile(p) / 1000);
  return Promise.all(
    contenders.map(async (contender, i) => {
      const [all, worker] = [rounds[i] ?? [], workers[i] as ChildProcess];
      worker.send(0);
      const counts = (await nextMessage(worker, 60_000)) as Omit<RedisFigures, 'cpuMicrosPerDecision'>;
      worker.kill();
      const histograms = all.map((r) => hdr.decodeFromCompressedBase64(r.latency));
      const pooled = hdr.build({ highestTrackableValue: 1e10 });
      for (const histogram of histograms) pooled.add(histogram);
      const m = measurement({
        ...{ id: `${target.kind}/${contender.name}/${LONE.shape}`, suite: target.kind, contender: contender.name },
        ...{ subject: contender.subject, method, rounds: all.map((r) => sig(r.perSecond)) },
        opsPerSecond: sig(median(all.map((r) => r.perSecond))),
        ...{ p50Micros: micros(pooled, 50), p99Micros: micros(pooled, 99) },
        latencyRounds: {
          p50Micros: histograms.map((histogram) => micros(histogram, 50)),
          p99Micros: histograms.map((histogram) => micros(histogram, 99)),
        },
        redis: { cpuMicrosPerDecision: sig(median(all.map((r) => r.cpuMicros))), ...counts },
      });
      say(`redis   lone ${contender.name.padEnd(22)} p50 ${m.p50Micros} µs, p99 ${m.p99Micros} µs`);
      return m;
    }),
  );
}

const REDIS_PACKAGE = fileURLToPath(new URL('../../packages/redis/', import.meta.url));

/** Whether callgrind can count redis-server's instructions here. */
export const hasValgrind = (): boolean => spawnSync('valgrind', ['--version']).status === 0;

/**
 * Instructions redis-server spends on a lone one-limit decision of the store's script and of the floor script, in
 * one run of `script-cost consume --lone` (packages/redis/test/support/script-cost.ts): callgrind counts repeat where
 * timings do not.
 */
export async function scriptCostSuite(calls: number): Promise<Measurement[]> {
  step('script-cost consume --lone (callgrind)');
  const script = ['--import', 'tsx', 'test/support/script-cost.ts', 'consume', '--lone', `--calls=${calls}`, '--json'];
  const { stdout } = await promisify(execFile)(process.execPath, script, { cwd: REDIS_PACKAGE, timeout: 600_000 });
  const figures = JSON.parse(stdout) as { consume: number; floor: number };
  const method =
    `\`pnpm --filter @ratecard/redis script-cost consume --lone --calls=${calls}\`: redis-server under valgrind ` +
    `--tool=callgrind, 2 000 buckets written half full, 32 calls of warm-up, then ${calls.toLocaleString('en-US')} ` +
    "calls of one key and one limit on Redis' clock, instructions per call; the floor script after the store's, on " +
    'the same buckets written half full again';
  // biome-ignore format: a table, one script a line
  const scripts: [string, string, number][] = [
    ['ratecard', "the store's consume script, a lone call as the store sends it", figures.consume],
    ['floor', 'the floor script (test/support/floor-script.ts): TIME, GET, one entry matched, the refill, SET PXAT, the packed reply', figures.floor],
  ];
  return scripts.map(([contender, subject, instructions]) => {
    say(`script  lone ${contender.padEnd(22)} ${human(instructions)} instructions`);
    const extra = { instructionsPerDecision: Math.round(instructions) };
    return measurement({ id: `script/${contender}/lone`, suite: 'script', contender, subject, method, extra });
  });
}
