/** The shape of results/latest.json, and the few numeric helpers every module shares. */
import { arch, cpus, loadavg, platform, release } from 'node:os';

export type Suite = 'memory' | 'heap' | 'redis' | 'script' | 'cluster' | 'http';

/** What Redis said of one contender's runs (each figure's method is in its Measurement); counts sum over rounds. */
export interface RedisFigures {
  cpuMicrosPerDecision: number;
  admitted: number;
  denied: number;
  overAdmitted: number;
  /** Decisions the limiter answered without Redis (its fallback store): a run with many measures less. */
  notFromStore: number;
  errors: number;
  /** MEMORY USAGE averaged over sampled keys, and used_memory freed per key by FLUSHALL, in the first round. */
  bytesPerKey: number | null;
  usedMemoryPerKey: number | null;
  /** The store's own counters (ratecard only). */
  storeStats: Record<string, number> | null;
}

export interface Measurement {
  /** `<suite>/<contender>/<shape>`, e.g. `redis/ratecard/256-in-flight`. */
  id: string;
  suite: Suite;
  contender: string;
  /** What was called, and how it was measured, in words. */
  subject: string;
  method: string;
  /** Operations per second of each round; the figure is their median. */
  rounds: number[];
  opsPerSecond: number | null;
  p50Micros: number | null;
  p99Micros: number | null;
  /** Each round's percentiles, in the order of the rounds: alternating rounds pair one contender's with another's. */
  latencyRounds: { p50Micros: number[]; p99Micros: number[] } | null;
  bytesPerOrganization: number | null;
  redis: RedisFigures | null;
  /** Suite-specific figures, named in words (e.g. the HTTP server's requests per CPU-second). */
  extra: Record<string, number>;
}

/** `measured`: the figures and their ratio, or `not measured: <the reason>`. */
export type TargetRow = {
  figure: string;
  target: string;
  measured: string;
  value: number | null;
  verdict: 'met' | 'not met' | 'not measured';
};

export type Machine = {
  cpu: string;
  cores: number;
  node: string;
  platform: string;
  redis: string | null;
  loadAverage: { start: number; end: number | null };
};

export interface Results {
  startedAt: string;
  seconds: number;
  command: string;
  mode: 'full' | 'quick';
  machine: Machine;
  measurements: Measurement[];
  targets: TargetRow[];
  /** Suites or contenders not run, with the reason. */
  skipped: string[];
}

export function measurement(
  base: Pick<Measurement, 'id' | 'suite' | 'contender' | 'subject' | 'method'> & Partial<Measurement>,
): Measurement {
  // biome-ignore format: the empty figures, one line
  return { rounds: [], opsPerSecond: null, p50Micros: null, p99Micros: null, latencyRounds: null, bytesPerOrganization: null, redis: null, extra: {}, ...base };
}

export function describeMachine(): Machine {
  const [cpu, platformName] = [cpus()[0]?.model.trim() ?? 'unknown', `${platform()} ${release()} ${arch()}`];
  const loadAverage = { start: oneMinuteLoad(), end: null };
  return { cpu, cores: cpus().length, node: process.version, platform: platformName, redis: null, loadAverage };
}

export function oneMinuteLoad(): number {
  return Math.round((loadavg()[0] ?? 0) * 100) / 100;
}

export function machineLine(machine: Machine): string {
  const redis = machine.redis === null ? '' : `, Redis ${machine.redis}`;
  return `${machine.cpu}, ${machine.cores} cores, Node ${machine.node}, ${machine.platform}${redis}`;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const [low, high] = [sorted[(sorted.length - 1) >> 1], sorted[sorted.length >> 1]];
  return low === undefined || high === undefined ? Number.NaN : (low + high) / 2;
}

/** 3 significant digits, as figures are printed everywhere. */
export function sig(value: number, digits = 3): number {
  return Number.isFinite(value) && value !== 0 ? Number(value.toPrecision(digits)) : value;
}

/** 1234567 → '1.23 M'. */
export function human(value: number | null | undefined): string {
  if (value == null || !Number.isFinite(value)) return '–';
  const [scale, suffix] = Math.abs(value) >= 1e6 ? [1e6, ' M'] : Math.abs(value) >= 1e4 ? [1e3, ' k'] : [1, ''];
  return `${sig(value / scale)}${suffix}`;
}

export function organizationNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `org_${i.toString(36).padStart(6, '0')}`);
}
