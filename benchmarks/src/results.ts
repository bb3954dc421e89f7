/** The shape of results/latest.json: every figure with the words that say how it was measured. */
import type { BenchConfig } from './config.js';

export type Library = 'ratecard' | 'rate-limiter-flexible' | 'limiter' | 'baseline';

export type Suite = 'memory' | 'memory-latency' | 'heap' | 'redis' | 'redis-latency' | 'redis-cluster' | 'http';

export interface Machine {
  /** os.cpus()[0].model */
  cpu: string;
  cores: number;
  node: string;
  platform: string;
  totalMemoryGiB: number;
  /** INFO server redis_version of the server the Redis suites ran against; null when none ran. */
  redis: string | null;
  /** Where that server came from: started by the harness, or REDIS_URL. */
  redisSource: string | null;
  /** os.loadavg()[0] when the run started and when it ended: other work on the machine moves every figure. */
  loadAverage: { start: number; end: number | null };
}

/** Redis-side figures of one run. */
export interface RedisFigures {
  /** (used_cpu_user + used_cpu_sys) delta over the run, summed over every master, divided by decisions. */
  cpuMicrosPerDecision: number;
  /** MEMORY USAGE averaged over sampled keys written by this limiter. */
  bytesPerKey: number | null;
  keysSampled: number;
  /**
   * INFO memory used_memory released when the run's keys were deleted, divided by those keys: what a key really
   * costs the server (expiry entry and allocator rounding included). Null when the harness does not own the server.
   */
  usedMemoryPerKey: number | null;
  /** Keys this limiter holds per bucket (so bytes per bucket = bytesPerKey × keysPerBucket). */
  keysPerBucket: number;
  /** Admitted beyond C + C·T/60 in some bucket, summed over buckets; T from Redis TIME around the run. */
  overAdmitted: number;
  /** T in seconds, from Redis TIME before the first call and after the last answer. */
  windowSeconds: number;
  /** Decisions not answered by the Redis store itself (fallback or failure policy); should be 0. */
  notFromStore: number;
  /** Calls that failed (rejected with an error, not a denial). */
  errors: number;
  /** The store's own counters (ratecard only): deny-cache hits, batches, … */
  storeStats: Record<string, number> | null;
}

export interface Measurement {
  /** Stable id, e.g. 'memory/ratecard/consumeSync'. */
  id: string;
  suite: Suite;
  library: Library;
  /** What was called, e.g. '`await limiter.consume(request)`'. */
  subject: string;
  /** How it was measured: loop shape, calls in flight, organizations, duration, clock. */
  method: string;
  /** Calls timed. */
  calls: number;
  durationMs: number;
  opsPerSecond: number | null;
  nsPerOp: number | null;
  p50Micros: number | null;
  p99Micros: number | null;
  admitted: number | null;
  denied: number | null;
  /** Heap bytes per tracked organization (heap suite only). */
  bytesPerOrganization: number | null;
  redis: RedisFigures | null;
  /** Suite-specific figures, named in words (e.g. the HTTP server's requests per CPU second). */
  extra: Record<string, number>;
  notes: string[];
}

export interface TargetResult {
  id: string;
  /** The target as issue 6 §3 states it. */
  target: string;
  /** What was compared, in words with the measured figures. */
  measured: string;
  /** The measured ratio or value the threshold applies to; null when not measured. */
  value: number | null;
  threshold: string;
  /** null: could not be measured in this run (see note). */
  pass: boolean | null;
  note: string;
}

export interface Results {
  version: 1;
  startedAt: string;
  finishedAt: string;
  /** The command line that produced this file. */
  command: string;
  mode: 'full' | 'quick';
  /** Sizes and durations every suite ran with. */
  config: BenchConfig;
  machine: Machine;
  measurements: Measurement[];
  targets: TargetResult[];
  /** Suites not run, with the reason. */
  skipped: { suite: string; reason: string }[];
  notes: string[];
}

/** A measurement with every optional figure empty; suites fill in what they measured. */
export function measurement(
  base: Pick<Measurement, 'id' | 'suite' | 'library' | 'subject' | 'method' | 'calls' | 'durationMs'> &
    Partial<Measurement>,
): Measurement {
  return {
    opsPerSecond: null,
    nsPerOp: null,
    p50Micros: null,
    p99Micros: null,
    admitted: null,
    denied: null,
    bytesPerOrganization: null,
    redis: null,
    extra: {},
    notes: [],
    ...base,
  };
}
