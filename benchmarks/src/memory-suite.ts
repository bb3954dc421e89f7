import { runJob } from './child.js';
import type { BenchConfig } from './config.js';
import { MEMORY_CASES, ROOMY_LIMIT, TIGHT_LIMIT } from './memory-cases.js';
import { progress } from './progress.js';
import { type Measurement, measurement } from './results.js';
import { human, median, sig } from './stats.js';
import type { MemoryJobResult } from './worker.js';

const PATHS: Readonly<Record<'admitted' | 'denied', string>> = {
  admitted: `a limit of ${ROOMY_LIMIT} per minute: no bucket runs out, none is full again between two calls to it`,
  denied: `a limit of ${TIGHT_LIMIT} per minute, drained during warm-up`,
};

/** A case normally takes 1 to 3 s; far beyond that, something is broken, and the run must still end in time. */
const CASE_TIMEOUT_MS = 30_000;

/**
 * Every memory case, each pass in a fresh child process. Passes go through the whole list in turn, so a burst of
 * other work on the machine lands on several cases rather than on every round of one.
 */
export async function memorySuite(config: BenchConfig, failures: string[]): Promise<Measurement[]> {
  const m = config.memory;
  const passes = new Map<string, MemoryJobResult[]>();
  const failed = new Set<string>();
  for (let pass = 0; pass < m.passes; pass++) {
    for (const name of Object.keys(MEMORY_CASES)) {
      if (failed.has(name)) continue;
      let result: MemoryJobResult;
      try {
        result = await runJob(
          {
            kind: 'memory',
            name,
            organizations: m.organizations,
            warmupCalls: m.warmupCalls,
            rounds: m.rounds,
            shape: { organizations: m.organizations, calls: m.callsPerRound, maxMs: m.maxRoundMs, chunk: m.chunk },
            latencyCalls: m.latencyCalls,
          },
          CASE_TIMEOUT_MS,
        );
      } catch (error) {
        // One broken case must not cost the others: it is reported and left out of later passes.
        failed.add(name);
        failures.push(`memory/${name}: ${error instanceof Error ? error.message : String(error)}`);
        progress(`memory: ${name} FAILED: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      passes.set(name, [...(passes.get(name) ?? []), result]);
      progress(
        `memory: pass ${pass + 1}/${m.passes} ${name.padEnd(46)} ${sig(median(result.roundsNsPerOp)).toString().padStart(6)} ns/op  ` +
          `p50 ${sig(result.p50Micros)} µs  p99 ${sig(result.p99Micros)} µs`,
      );
    }
  }
  const out: Measurement[] = [];
  for (const [name, chosen] of Object.entries(MEMORY_CASES)) {
    const results = passes.get(name) ?? [];
    if (failed.has(name) || results.length === 0) continue;
    const rounds = results.flatMap((r) => r.roundsNsPerOp);
    const nsPerOp = median(rounds);
    const latencyCalls = results.reduce((sum, r) => sum + r.latencyCalls, 0);
    const method =
      `one call in flight (${chosen.loop === 'sync' ? 'synchronous loop' : 'each call awaited before the next'}), ` +
      `${m.organizations.toLocaleString('en-US')} organizations round-robin, ${m.chunk.toLocaleString('en-US')} calls per ` +
      `event-loop turn (setImmediate between), ${chosen.path} path (${PATHS[chosen.path]}), request objects built ` +
      'before the loop; ' +
      `${m.passes} pass${m.passes === 1 ? '' : 'es'} over all cases, each a fresh Node process with ` +
      `${m.warmupCalls.toLocaleString('en-US')} warm-up calls then ${m.rounds} rounds of up to ` +
      `${m.callsPerRound.toLocaleString('en-US')} calls (or ${m.maxRoundMs} ms) timed whole with hrtime: throughput is ` +
      `the median of the ${rounds.length} rounds; latency: ${(latencyCalls / Math.max(1, results.length)).toLocaleString('en-US')} ` +
      `further calls per pass each timed with performance.now(), median over passes of each pass’s p50 and p99; ` +
      `clock: ${chosen.clock}`;
    out.push(
      measurement({
        id: `memory/${name}`,
        suite: 'memory',
        library: chosen.library,
        subject: chosen.subject,
        method,
        calls: results.reduce((sum, r) => sum + r.callsPerRound.reduce((a, b) => a + b, 0), 0),
        durationMs: sig(
          results.reduce((sum, r) => sum + r.durationMs, 0),
          4,
        ),
        opsPerSecond: sig(1e9 / nsPerOp),
        nsPerOp: sig(nsPerOp),
        p50Micros: sig(median(results.map((r) => r.p50Micros))),
        p99Micros: sig(median(results.map((r) => r.p99Micros))),
        admitted: results.reduce((sum, r) => sum + r.admitted, 0),
        denied: results.reduce((sum, r) => sum + r.denied, 0),
        notes: [`rounds (ns/op): ${rounds.map((ns) => sig(ns)).join(', ')}`],
      }),
    );
    progress(`memory: ${name.padEnd(46)} median ${sig(nsPerOp)} ns/op = ${human(1e9 / nsPerOp, 'calls/s')}`);
  }
  return out;
}
