/** In-process limiters side by side in alternating rounds timed by CPU, and heap per tracked organization. */
import {
  createLimiter,
  type LimiterOptions,
  type LimitRequest,
  perDay,
  perHour,
  perMinute,
  perSecond,
} from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { type Job, nextMessage, startWorker } from './child.js';
import { say, step } from './progress.js';
import { human, type Measurement, measurement, median, organizationNames, sig } from './results.js';

const ENDPOINT = 'POST /browsers';
/**
 * 1 000 per minute: no bucket runs out during a run (a process makes some 120 calls per organization), and none is
 * full again between two calls to it (forgotten, then made again, which is not the path timed) unless a round over the
 * organizations takes more than a token's 60 ms: 6 µs a call. At 10 000 per minute (6 ms), a host that took 2 µs a
 * consume forgot every bucket between two calls to it.
 */
const ROOMY = 1_000;
/**
 * The reserve-settle case's limiter: ROOMY per hour as a plan of its own, under the same endpoint rule. A reserve and
 * its settle take about three consumes' time, so per minute a round over the organizations would come close to a
 * token's time on a slow host; per hour a token takes 3.6 s.
 */
const HOURLY: Omit<LimiterOptions, 'store'> = {
  plans: { roomy: perHour(ROOMY) },
  endpoints: { 'POST /browsers': 'enforce' },
};
/** The Developer plan's 10 per minute: drained during warm-up, so the timed calls are denials. */
const TIGHT = 10;
/** Calls between two event-loop turns, as between two requests of a server. */
const BATCH = 1000;

/**
 * A contender, what it calls, a builder of its loop (`calls` calls, one in flight, round-robin over the organizations)
 * and whether it runs `alone`. Each library's loop is a function of its own: one loop shared by every case is one call
 * site that sees every library's calls, which V8 optimises for none in particular (docs/benchmarks.md).
 */
type Loop = (calls: number) => Promise<void>;
export type MemoryCase = [
  contender: string,
  subject: string,
  build: (organizations: readonly string[]) => Loop,
  alone?: 'alone',
];

/**
 * ratecard on the memory store, each organization's request built before the loop by `request`; with `reserve`, a
 * call is a `limiter.reserve` and its Reservation's `settle()`, on a limiter made with `options`.
 */
function ratecard(
  request: (organization: string) => LimitRequest,
  reserve = false,
  options: Omit<LimiterOptions, 'store'> = {},
): MemoryCase[2] {
  return (organizations) => {
    const store = memoryStore({ maxBuckets: Math.max(1_000_000, organizations.length) });
    const limiter = createLimiter({ ...options, store });
    const requests = organizations.map((organization) => request(organization));
    let org = 0;
    return async (calls) => {
      for (let i = 0; i < calls; i++) {
        if (reserve) await (await limiter.reserve(requests[org] as LimitRequest)).settle();
        else await limiter.consume(requests[org] as LimitRequest);
        if (++org === requests.length) org = 0;
      }
    };
  };
}

/** Requests carrying `limits` made once, as a server makes them at start; each as roomy as ROOMY is. */
const own = (limits: LimitRequest['limits']) =>
  ratecard((organization) => ({ organization, endpoint: ENDPOINT, limits }));
const CONSUME = '`await limiter.consume(request)` on `memoryStore()`';

function flexible(points: number): MemoryCase[2] {
  return (organizations) => {
    const limiter = new RateLimiterMemory({ points, duration: 60 });
    let org = 0;
    return async (calls) => {
      for (let i = 0; i < calls; i++) {
        await limiter.consume(organizations[org] as string).catch(() => {}); // a denial rejects
        if (++org === organizations.length) org = 0;
      }
    };
  };
}

async function awaitAlone(calls: number): Promise<void> {
  for (let i = 0; i < calls; i++) await Promise.resolve(true);
}

/** By id; the memory target compares the first with the second, round by round. */
// biome-ignore format: a table, one case a line
export const MEMORY_CASES: Readonly<Record<string, MemoryCase>> = {
  'ratecard/consume': ['ratecard', `${CONSUME} (its clock: Date.now on every call)`, ratecard((organization) => ({ organization, endpoint: ENDPOINT, plan: 'enterprise', override: ROOMY }))],
  'rate-limiter-flexible/consume': ['rate-limiter-flexible', '`await RateLimiterMemory.consume(key)`', flexible(ROOMY)],
  'baseline/await': ['baseline', '`await Promise.resolve(true)`: the cost of an await alone', () => awaitAlone],
  'ratecard/reserve-settle': ['ratecard', '`await (await limiter.reserve(request)).settle()` on `memoryStore()`, own plan `perHour(1000)`: per hour, a token takes 3.6 s', ratecard((organization) => ({ organization, endpoint: ENDPOINT, plan: 'roomy' }), true, HOURLY), 'alone'],
  'ratecard/consume-denied': ['ratecard', `${CONSUME}, every call denied`, ratecard((organization) => ({ organization, endpoint: ENDPOINT, plan: 'developer' }))],
  'rate-limiter-flexible/consume-denied': ['rate-limiter-flexible', '`await RateLimiterMemory.consume(key)`, every call denied (it rejects; caught)', flexible(TIGHT)],
  'ratecard/consume-2-limits': ['ratecard', `${CONSUME}, \`limits: [perSecond(10, { burst: 1000 }), perHour(10000)]\`, both charged`, own([perSecond(10, { burst: ROOMY }), perHour(10_000)]), 'alone'],
  'ratecard/consume-per-day': ['ratecard', `${CONSUME}, \`limits: perDay(1000)\` (a token is 86 400 units)`, own(perDay(ROOMY)), 'alone'],
  // gcd(1 001, 60 000) = 1: a token is 60 000 units, a full bucket 6·10^9, past V8's small integers (2^31).
  'ratecard/consume-large-units': ['ratecard', `${CONSUME}, \`limits: perMinute(1001, { burst: 100000 })\` (6·10^9 units when full)`, own(perMinute(ROOMY + 1, { burst: 100_000 })), 'alone'],
};

export type MemoryConfig = Record<
  'organizations' | 'processes' | 'rounds' | 'calls' | 'warmupCalls' | 'heapOrganizations',
  number
>;

/** Nanoseconds of this process' CPU (user + system) per call over `calls` calls, a new event-loop turn every BATCH. */
async function cpuNsPerCall(run: Loop, calls: number): Promise<number> {
  const before = process.cpuUsage();
  for (let done = 0; done < calls; done += BATCH) {
    await run(BATCH);
    await new Promise((resolve) => setImmediate(resolve));
  }
  const { user, system } = process.cpuUsage(before);
  return ((user + system) * 1000) / calls;
}

/** Every case but those run `alone` shares one process: the two libraries side by side, round by round. */
const processOf = (name: string): string => (MEMORY_CASES[name]?.[3] === 'alone' ? name : 'libraries');
export const MEMORY_GROUPS: readonly string[][] = [...new Set(Object.keys(MEMORY_CASES).map(processOf))].map((group) =>
  Object.keys(MEMORY_CASES).filter((name) => processOf(name) === group),
);

/** A worker's job, in a fresh process: each case warmed up, then rounds of every case, in reverse order every other. */
export async function memoryRounds(job: Extract<Job, { kind: 'memory' }>): Promise<number[][]> {
  const organizations = organizationNames(job.organizations);
  const runs = job.names.map((name) => (MEMORY_CASES[name] as MemoryCase)[2](organizations));
  for (const run of runs) await cpuNsPerCall(run, job.warmupCalls);
  const nsPerCall = runs.map((): number[] => []);
  for (let round = 0; round < job.rounds; round++) {
    const order = runs.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) nsPerCall[i]?.push(await cpuNsPerCall(runs[i] as Loop, job.calls));
  }
  return nsPerCall;
}

/**
 * Processes in turn (the libraries' one, then each `alone` case's, in reverse order every other time), each running
 * its cases in alternating rounds. A case's figure is 1 / the median over every round of every process of its CPU
 * time per call; the memory target is the median of the rounds' ratios, each of two cases timed a moment apart.
 */
export async function memorySuite(config: MemoryConfig): Promise<Measurement[]> {
  const rounds = new Map<string, number[]>(MEMORY_GROUPS.flat().map((name) => [name, []]));
  for (let p = 0; p < config.processes; p++) {
    for (const names of p % 2 === 0 ? MEMORY_GROUPS : [...MEMORY_GROUPS].reverse()) {
      step(`memory ${names[0]} ${p + 1}/${config.processes}`);
      const job = { kind: 'memory', names, ...config } as const;
      const nsPerCall = (await nextMessage(startWorker(job), 120_000)) as number[][];
      names.forEach((name, i) => rounds.get(name)?.push(...(nsPerCall[i] ?? [])));
    }
  }
  const method =
    `one call in flight, ${config.organizations.toLocaleString('en-US')} organizations round-robin, a new ` +
    `event-loop turn every ${BATCH} calls; ${config.processes} fresh processes, each running both libraries' cases ` +
    `side by side (each case with limits of its own alone), each library's loop a function of its own; in each ` +
    `process ${config.warmupCalls.toLocaleString('en-US')} calls of warm-up per case, then ${config.rounds} rounds ` +
    `of ${config.calls.toLocaleString('en-US')} calls per case, cases in reverse order every other round, timed by ` +
    "the process' CPU time (user + system); calls/s = 1 / the median over rounds of CPU time per call; " +
    `admitted path: ${ROOMY}/min, denied: ${TIGHT}/min drained in warm-up`;
  return Object.keys(MEMORY_CASES).map((name) => {
    const [contender, subject] = MEMORY_CASES[name] as MemoryCase;
    const ns = median(rounds.get(name) ?? []);
    say(`memory ${name.padEnd(38)} ${human(1e9 / ns).padStart(7)}/s ${String(sig(ns)).padStart(5)} ns`);
    return measurement({
      id: `memory/${name}`,
      suite: 'memory',
      contender,
      subject,
      method,
      rounds: (rounds.get(name) ?? []).map((value) => sig(1e9 / value)),
      opsPerSecond: sig(1e9 / ns),
      extra: { nsPerCall: sig(ns) },
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
