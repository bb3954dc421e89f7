/** Percentile of an ascending array by the nearest-rank method (no interpolation: every value is one we saw). */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** p50 and p99 in microseconds of latencies recorded in milliseconds (performance.now() deltas). */
export function latencyMicros(samplesMs: Float64Array, count: number): { p50: number; p99: number } {
  const sorted = samplesMs.slice(0, count).sort();
  return { p50: percentile(sorted, 50) * 1000, p99: percentile(sorted, 99) * 1000 };
}

/** 3 significant digits, as figures are printed everywhere. */
export function sig(value: number, digits = 3): number {
  if (!Number.isFinite(value) || value === 0) return value;
  return Number(value.toPrecision(digits));
}

/** 1234567 → '1.23 M'. */
export function human(value: number | null, unit = ''): string {
  if (value === null || !Number.isFinite(value)) return '–';
  const abs = Math.abs(value);
  const [scaled, prefix] =
    abs >= 1e9
      ? [value / 1e9, ' G']
      : abs >= 1e6
        ? [value / 1e6, ' M']
        : abs >= 1e4
          ? [value / 1e3, ' k']
          : [value, ' '];
  const text = String(sig(scaled));
  return `${text}${unit === '' ? prefix.trimEnd() : `${prefix}${unit}`}`;
}
