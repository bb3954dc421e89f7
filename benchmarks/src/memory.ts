/** In-process limiters side by side (tinybench), and heap per tracked organization (a fresh process per library). */
import { createLimiter, type LimitRequest, perDay, perHour, perMinute, perSecond } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { Bench } from 'tinybench';
import { type Job, nextMessage, startWorker } from './child.js';
import { say, step } from './progress.js';
import { human, type Measurement, measurement, median, organizationNames, sig } from './results.js';

const ENDPOINT = 'POST /browsers';
/** 10 000 per minute: no bucket runs out during a run, and none is full again between two calls to it. */
const ROOMY = 10_000;
/** The Developer plan's 10 per minute: drained during warm-up, so the timed calls are denials. */
const TIGHT = 10;
/** Calls per tinybench iteration: one timer read per call would weigh as much as the fastest calls. */
const BATCH = 1000;

/** A contender, what it calls, a builder of one call on organization number `org`, and whether it runs `alone`. */
export type MemoryCase = [
  contender: string,
  subject: string,
  build: (organizations: readonly string[]) => (org: number) => Promise<unknown>,
  alone?: 'alone',
];

/**
 * ratecard on the memory store, each organization's request built before the loop by `request`; with `reserve`, a
 * call is a `limiter.reserve` and its Reservation's `settle()`.
 */
function ratecard(request: (organization: string) => LimitRequest, reserve = false): MemoryCase[2] {
  return (organizations) => {
    const limiter = createLimiter({ store: memoryStore({ maxBuckets: Math.max(1_000_000, organizations.length) }) });
    const requests = organizations.map((organization) => request(organization));
    if (reserve) return (org) => limiter.reserve(requests[org] as LimitRequest).then((lease) => lease.settle());
    return (org) => limiter.consume(requests[org] as LimitRequest);
  };
}

/** Requests carrying `limits` made once, as a server makes them at start; each as roomy as ROOMY is. */
const own = (limits: LimitRequest['limits']) =>
  ratecard((organization) => ({ organization, endpoint: ENDPOINT, limits }));
const CONSUME = '`await limiter.consume(request)` on `memoryStore()`';

function flexible(points: number): MemoryCase[2] {
  return (organizations) => {
    const limiter = new RateLimiterMemory({ points, duration: 60 });
    return (org) => limiter.consume(organizations[org] as string);
  };
}

/** By id; the memory target compares the first with the second. */
// biome-ignore format: a table, one case a line
export const MEMORY_CASES: Readonly<Record<string, MemoryCase>> = {
  'ratecard/consume': ['ratecard', `${CONSUME} (its clock: Date.now on every call)`, ratecard((organization) => ({ organization, endpoint: ENDPOINT, plan: 'enterprise', override: ROOMY }))],
  'rate-limiter-flexible/consume': ['rate-limiter-flexible', '`await RateLimiterMemory.consume(key)`', flexible(ROOMY)],
  'baseline/await': ['baseline', '`await Promise.resolve(true)`: the cost of an await alone', () => () => Promise.resolve(true)],
  'ratecard/reserve-settle': ['ratecard', '`await (await limiter.reserve(request)).settle()` on `memoryStore()`', ratecard((organization) => ({ organization, endpoint: ENDPOINT, plan: 'enterprise', override: ROOMY }), true)],
  'ratecard/consume-denied': ['ratecard', `${CONSUME}, every call denied`, ratecard((organization) => ({ organization, endpoint: ENDPOINT, plan: 'developer' }))],
  'rate-limiter-flexible/consume-denied': ['rate-limiter-flexible', '`await RateLimiterMemory.consume(key)`, every call denied (it rejects; caught)', flexible(TIGHT)],
  'ratecard/consume-2-limits': ['ratecard', `${CONSUME}, \`limits: [perSecond(100, { burst: 10000 }), perHour(100000)]\`, both charged`, own([perSecond(100, { burst: ROOMY }), perHour(100_000)]), 'alone'],
  'ratecard/consume-per-day': ['ratecard', `${CONSUME}, \`limits: perDay(10000)\` (a token is 8640 units)`, own(perDay(ROOMY)), 'alone'],
  // gcd(10 001, 60 000) = 1: a token is 60 000 units, a full bucket 6·10^9, past V8's small integers (2^31).
  'ratecard/consume-large-units': ['ratecard', `${CONSUME}, \`limits: perMinute(10001, { burst: 100000 })\` (6·10^9 units when full)`, own(perMinute(ROOMY + 1, { burst: 100_000 })), 'alone'],
};

export type MemoryConfig = Record<'organizations' | 'rounds' | 'roundMs' | 'warmupMs' | 'heapOrganizations', number>;

/** One tinybench task: a batch of calls round-robin over the organizations, then a new event-loop turn. */
function task([, , build]: MemoryCase, organizations: readonly string[]): () => Promise<object> {
  const call = build(organizations);
  const count = organizations.length;
  let org = 0;
  return async () => {
    const started = performance.now();
    for (let i = 0; i < BATCH; i++) {
      try {
        await call(org);
      } catch {
        // rate-limiter-flexible rejects a denial
      }
      if (++org === count) org = 0;
    }
    const ms = performance.now() - started;
    // As between two requests of a server: timers and the turn clock see a new turn.
    await new Promise((resolve) => setImmediate(resolve));
    return { overriddenDuration: ms / BATCH, overriddenIterationCost: ms };
  };
}

/** The cases by process: a library's (and the baseline) together, an `alone` case by itself. */
const processOf = (name: string): string => (MEMORY_CASES[name]?.[3] === 'alone' ? name : `${MEMORY_CASES[name]?.[0]}`);
export const MEMORY_GROUPS: readonly string[][] = [...new Set(Object.keys(MEMORY_CASES).map(processOf))].map((group) =>
  Object.keys(MEMORY_CASES).filter((name) => processOf(name) === group),
);

/** One round of some cases in this process (a worker's job, in a fresh process): calls per second, in order. */
export async function memoryRound(job: Extract<Job, { kind: 'memory' }>): Promise<number[]> {
  const organizations = organizationNames(job.organizations);
  const bench = new Bench({ time: job.roundMs, iterations: 1, warmupTime: job.warmupMs, warmupIterations: 1 });
  for (const name of job.names) bench.add(name, task(MEMORY_CASES[name] as MemoryCase, organizations));
  await bench.run();
  return bench.tasks.map(({ name, result }) => {
    if (result.state !== 'completed') throw new Error(`memory case ${name}: ${result.state}`);
    return 1000 / result.latency.p50;
  });
}

/**
 * Round by round, each library's cases in a fresh process of its own, in reverse order every other round (libraries
 * and cases alike): as in a server, one library's code runs in a process, not two libraries' sharing its call sites
 * (in one process both ran at about half speed, and the ratio moved from process to process). A case's figure is the
 * median over rounds, that is over processes, of 1 / (the median batch's time per call).
 */
export async function memorySuite(config: MemoryConfig): Promise<Measurement[]> {
  const rounds = new Map<string, number[]>(MEMORY_GROUPS.flat().map((name) => [name, []]));
  for (let round = 0; round < config.rounds; round++) {
    const turn = <T>(list: readonly T[]): T[] => (round % 2 === 0 ? [...list] : [...list].reverse());
    for (const names of turn(MEMORY_GROUPS).map(turn)) {
      step(`memory ${names[0]} ${round + 1}/${config.rounds}`);
      const perSecond = (await nextMessage(startWorker({ kind: 'memory', names, ...config }), 60_000)) as number[];
      names.forEach((name, i) => rounds.get(name)?.push(perSecond[i] as number));
    }
  }
  const method =
    `one call in flight, ${config.organizations.toLocaleString('en-US')} organizations round-robin, batches of ` +
    `${BATCH} calls timed whole (a new event-loop turn between batches); tinybench, ${config.rounds} rounds of ` +
    `${config.roundMs} ms per case after ${config.warmupMs} ms of warm-up; each round runs each library's cases in a ` +
    'fresh process of its own (and each case with limits of its own alone), processes alternating; ops/s = median ' +
    "over rounds of 1 / the median batch's time per call; " +
    `admitted path: ${ROOMY}/min, denied: ${TIGHT}/min drained in warm-up`;
  return Object.keys(MEMORY_CASES).map((name) => {
    const [contender, subject] = MEMORY_CASES[name] as MemoryCase;
    const perRound = rounds.get(name) ?? [];
    const ops = median(perRound);
    say(`memory ${name.padEnd(38)} ${human(ops).padStart(7)}/s ${String(sig(1e9 / ops)).padStart(5)} ns`);
    return measurement({
      id: `memory/${name}`,
      suite: 'memory',
      contender,
      subject,
      method,
      rounds: perRound.map((value) => sig(value)),
      opsPerSecond: sig(ops),
      extra: { nsPerCall: sig(1e9 / ops) },
    });
  });
}

export const HEAP_SUBJECTS: Readonly<Record<string, string>> = {
  ratecard: '`memoryStore()` behind `createLimiter`, one `consume` per organization',
  'rate-limiter-flexible': '`RateLimiterMemory({ points: 10, duration: 60 })`, one `consume(key)` per organization',
};

/** Heap per tracked organization, each library in a fresh `node --expose-gc` process (worker.ts). */
export async function heapSuite(config: MemoryConfig): Promise<Measurement[]> {
  const method =
    `${config.heapOrganizations.toLocaleString('en-US')} organizations in a fresh \`node --expose-gc\` process; ` +
    '(heapUsed + arrayBuffers) after minus before, gc() twice at each end, divided by the organizations; the ' +
    'names exist before the first reading, so they are not counted';
  const out: Measurement[] = [];
  for (const [name, subject] of Object.entries(HEAP_SUBJECTS)) {
    step(`heap ${name}`);
    const child = startWorker({ kind: 'heap', case: name, organizations: config.heapOrganizations });
    const bytesPerOrganization = sig((await nextMessage(child, 120_000)) as number);
    say(`heap   ${name.padEnd(38)} ${bytesPerOrganization} B per organization`);
    out.push(
      measurement({ id: `heap/${name}`, suite: 'heap', contender: name, subject, method, bytesPerOrganization }),
    );
  }
  return out;
}
