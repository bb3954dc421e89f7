/**
 * Child-process entry: runs one case in a fresh V8 so no case inherits another's JIT state or heap, and sends its
 * figures to the parent over IPC. Usage (by bench.ts only): node worker.js '<job json>'.
 */
import { HEAP_CASES } from './heap-cases.js';
import { type HttpServerJob, serveReferenceApp } from './http-server.js';
import { type LoopShape, latencyLoop, nextTurn, timeLoop } from './loops.js';
import { MEMORY_CASES } from './memory-cases.js';
import { latencyMicros } from './stats.js';

export interface MemoryJob {
  kind: 'memory';
  name: string;
  organizations: number;
  warmupCalls: number;
  rounds: number;
  shape: LoopShape;
  latencyCalls: number;
}

export interface MemoryJobResult {
  /** ns per call of each timed round. */
  roundsNsPerOp: number[];
  callsPerRound: number[];
  durationMs: number;
  admitted: number;
  denied: number;
  latencyCalls: number;
  p50Micros: number;
  p99Micros: number;
}

export interface HeapJob {
  kind: 'heap';
  name: string;
  organizations: number;
}

export interface HeapJobResult {
  bytesPerOrganization: number;
  heapDeltaBytes: number;
  arrayBuffersDeltaBytes: number;
  trackMs: number;
  check: string;
}

export type Job = MemoryJob | HeapJob | HttpServerJob;

function organizationNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `org_${i.toString(36).padStart(6, '0')}`);
}

async function runMemory(job: MemoryJob): Promise<MemoryJobResult> {
  const chosen = MEMORY_CASES[job.name];
  if (chosen === undefined) throw new Error(`unknown memory case ${job.name}`);
  const operation = chosen.build(organizationNames(job.organizations));
  // Warm-up: lets the JIT settle, creates every bucket, and drains them on the denied path.
  await timeLoop(operation, { ...job.shape, calls: job.warmupCalls });
  const roundsNsPerOp: number[] = [];
  const callsPerRound: number[] = [];
  let durationNs = 0;
  let admitted = 0;
  let denied = 0;
  for (let round = 0; round < job.rounds; round++) {
    const result = await timeLoop(operation, job.shape);
    roundsNsPerOp.push(result.ns / result.calls);
    callsPerRound.push(result.calls);
    durationNs += result.ns;
    admitted += result.admitted;
    denied += result.denied;
  }
  const samples = await latencyLoop(operation, { ...job.shape, calls: job.latencyCalls });
  const { p50, p99 } = latencyMicros(samples, samples.length);
  return {
    roundsNsPerOp,
    callsPerRound,
    durationMs: durationNs / 1e6,
    admitted,
    denied,
    latencyCalls: samples.length,
    p50Micros: p50,
    p99Micros: p99,
  };
}

function collect(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('the heap suite needs node --expose-gc');
  gc();
  gc();
}

function heapNow(): { heap: number; arrayBuffers: number } {
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, arrayBuffers: usage.arrayBuffers };
}

async function runHeap(job: HeapJob): Promise<HeapJobResult> {
  const chosen = HEAP_CASES[job.name];
  if (chosen === undefined) throw new Error(`unknown heap case ${job.name}`);
  // The names exist before the baseline and stay alive after it: only what the limiter adds is counted.
  const organizations = organizationNames(job.organizations);
  await nextTurn();
  collect();
  const before = heapNow();
  const started = performance.now();
  const { keep, check } = await chosen.track(organizations);
  const trackMs = performance.now() - started;
  await nextTurn();
  collect();
  const after = heapNow();
  // Keep both alive past the measurement.
  if (keep === null || organizations.length !== job.organizations) throw new Error('unreachable');
  const heapDelta = after.heap - before.heap;
  const arrayBuffersDelta = after.arrayBuffers - before.arrayBuffers;
  return {
    bytesPerOrganization: (heapDelta + arrayBuffersDelta) / job.organizations,
    heapDeltaBytes: heapDelta,
    arrayBuffersDeltaBytes: arrayBuffersDelta,
    trackMs,
    check,
  };
}

async function main(): Promise<void> {
  // An interrupted parent must not leave a child behind (a server child would otherwise listen forever).
  process.on('disconnect', () => process.exit(1));
  const job = JSON.parse(process.argv[2] ?? '{}') as Job;
  if (job.kind === 'http-server') {
    // Serves until the parent says stop.
    await serveReferenceApp(job, (message) => process.send?.(message));
    return;
  }
  const result = job.kind === 'memory' ? await runMemory(job) : await runHeap(job);
  reply({ ok: true, result }, 0);
}

/** Sends the answer, then exits: some libraries leave timers behind (one per key) that would keep the child alive. */
function reply(message: unknown, code: number): void {
  if (process.send === undefined) {
    process.stdout.write(`${JSON.stringify(message)}\n`);
    process.exit(code);
  }
  process.send(message, () => process.exit(code));
}

main().catch((error: unknown) => {
  reply({ ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }, 1);
});
