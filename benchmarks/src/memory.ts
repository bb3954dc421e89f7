/** In-process limiters side by side (tinybench), and heap per tracked organization (a fresh process per library). */
import { createLimiter } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { Bench } from 'tinybench';
import { nextMessage, startWorker } from './child.js';
import { say, step } from './progress.js';
import { human, type Measurement, measurement, median, organizationNames, sig } from './results.js';

const ENDPOINT = 'POST /browsers';
/** 10 000 per minute: no bucket runs out during a run, and none is full again between two calls to it. */
const ROOMY = 10_000;
/** The Developer plan's 10 per minute: drained during warm-up, so the timed calls are denials. */
const TIGHT = 10;
/** Calls per tinybench iteration: one timer read per call would weigh as much as the fastest calls. */
const BATCH = 1000;

/** A contender, what it calls, and a builder of one call on organization number `org`. */
type MemoryCase = [
  contender: string,
  subject: string,
  build: (organizations: readonly string[]) => (org: number) => Promise<unknown>,
];

function ratecard(denied: boolean): MemoryCase[2] {
  return (organizations) => {
    const limiter = createLimiter({ store: memoryStore() });
    const requests = organizations.map((organization) =>
      denied
        ? { organization, endpoint: ENDPOINT, plan: 'developer' as const }
        : { organization, endpoint: ENDPOINT, plan: 'enterprise' as const, override: ROOMY },
    );
    return (org) => limiter.consume(requests[org] as (typeof requests)[number]);
  };
}

function flexible(points: number): MemoryCase[2] {
  return (organizations) => {
    const limiter = new RateLimiterMemory({ points, duration: 60 });
    return (org) => limiter.consume(organizations[org] as string);
  };
}

/** By id; the memory target compares the first with the second. */
// biome-ignore format: a table, one case a line
export const MEMORY_CASES: Readonly<Record<string, MemoryCase>> = {
  'ratecard/consume': ['ratecard', '`await limiter.consume(request)` on `memoryStore()` (its clock: Date.now on every call)', ratecard(false)],
  'rate-limiter-flexible/consume': ['rate-limiter-flexible', '`await RateLimiterMemory.consume(key)`', flexible(ROOMY)],
  'baseline/await': ['baseline', '`await Promise.resolve(true)`: the cost of an await alone', () => () => Promise.resolve(true)],
  'ratecard/consume-denied': ['ratecard', '`await limiter.consume(request)` on `memoryStore()`, every call denied', ratecard(true)],
  'rate-limiter-flexible/consume-denied': ['rate-limiter-flexible', '`await RateLimiterMemory.consume(key)`, every call denied (it rejects; caught)', flexible(TIGHT)],
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

/**
 * Every case in one process, round by round: each round is one tinybench run over all cases, in reversed order every
 * other round, so a burst of other work on the machine lands on every contender alike. A case's figure is the median
 * over rounds of 1 / (the median batch's time per call).
 */
export async function memorySuite(config: MemoryConfig): Promise<Measurement[]> {
  const organizations = organizationNames(config.organizations);
  const names = Object.keys(MEMORY_CASES);
  const tasks = new Map(names.map((name) => [name, task(MEMORY_CASES[name] as MemoryCase, organizations)]));
  const rounds = new Map<string, number[]>(names.map((name) => [name, []]));
  for (let round = 0; round < config.rounds; round++) {
    step(`memory round ${round + 1}/${config.rounds}`);
    const bench = new Bench({ time: config.roundMs, iterations: 1, warmupTime: config.warmupMs, warmupIterations: 1 });
    for (const name of round % 2 === 0 ? names : [...names].reverse())
      bench.add(name, tasks.get(name) as () => Promise<object>);
    await bench.run();
    for (const added of bench.tasks) {
      const result = added.result;
      if (result.state !== 'completed') throw new Error(`memory case ${added.name}: ${result.state}`);
      rounds.get(added.name)?.push(1000 / result.latency.p50);
    }
  }
  const method =
    `one call in flight, ${config.organizations.toLocaleString('en-US')} organizations round-robin, batches of ` +
    `${BATCH} calls timed whole (a new event-loop turn between batches); tinybench, ${config.rounds} rounds of ` +
    `${config.roundMs} ms per case after ${config.warmupMs} ms of warm-up, cases alternating round by round in one ` +
    `process; ops/s = median over rounds of 1 / the median batch's time per call; admitted path: ${ROOMY}/min, denied: ` +
    `${TIGHT}/min drained in warm-up`;
  return names.map((name) => {
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
  const out: Measurement[] = [];
  for (const name of Object.keys(HEAP_SUBJECTS)) {
    step(`heap ${name}`);
    const child = startWorker({ kind: 'heap', case: name, organizations: config.heapOrganizations });
    const bytes = (await nextMessage(child, 120_000)) as number;
    say(`heap   ${name.padEnd(38)} ${sig(bytes)} B per organization`);
    out.push(
      measurement({
        id: `heap/${name}`,
        suite: 'heap',
        contender: name,
        subject: HEAP_SUBJECTS[name] as string,
        method:
          `${config.heapOrganizations.toLocaleString('en-US')} organizations in a fresh \`node --expose-gc\` process; ` +
          '(heapUsed + arrayBuffers) after minus before, gc() twice at each end, divided by the organizations; the ' +
          'names exist before the first reading, so they are not counted',
        bytesPerOrganization: sig(bytes),
      }),
    );
  }
  return out;
}
