import type { Inspection, KeptBlock, KeptBlocks } from '@ratecard/core';
import { UsageError } from './connect.js';

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A duration as typed: whole numbers with units, as `90s`, `15m`, `2h`, `1d`, `1h30m`; in ms. */
export function parseDuration(text: string): number {
  const parts = /^(?:\d+(?:ms|s|m|h|d))+$/.test(text) ? [...text.matchAll(/(\d+)(ms|s|m|h|d)/g)] : [];
  const ms = parts.reduce((sum, [, n, unit]) => sum + Number(n) * UNIT_MS[unit as keyof typeof UNIT_MS], 0);
  if (parts.length === 0 || ms < 1 || ms > 366 * UNIT_MS.d) {
    throw new UsageError(
      `ratecard: --for takes a duration from 1ms to 366d like 90s, 15m, 2h, 1d or 1h30m, got ${text}`,
    );
  }
  return ms;
}

/** How far `at` is from `now`, in the two largest units: `in 4m 05s`, `2h 10m ago`, `now`. */
export function relative(at: number, now: number): string {
  const gap = Math.abs(at - now);
  if (gap < 1_000) return 'now';
  const seconds = Math.round(gap / 1_000);
  const [d, h, m, s] = [
    Math.floor(seconds / 86_400),
    Math.floor(seconds / 3_600) % 24,
    Math.floor(seconds / 60) % 60,
    seconds % 60,
  ];
  const two = (n: number) => String(n).padStart(2, '0');
  const text = d > 0 ? `${d}d ${h}h` : h > 0 ? `${h}h ${two(m)}m` : m > 0 ? `${m}m ${two(s)}s` : `${s}s`;
  return at > now ? `in ${text}` : `${text} ago`;
}

/** An instant on the store's clock as ISO time and relative to the store's now. */
export function when(at: number, now: number): string {
  return `${new Date(at).toISOString()} (${relative(at, now)})`;
}

/** `every endpoint` for '*', else the endpoint key. */
export function endpointText(endpoint: string): string {
  return endpoint === '*' ? 'every endpoint' : endpoint;
}

/** Rows of cells as aligned columns, two spaces apart. */
function columns(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) =>
    row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  '),
  );
}

/** What `ratecard inspect` prints: each limit's tokens, capacity and when it is full, then the leases held. */
export function inspectionText(inspection: Inspection): string {
  const { organization, endpoint, at, limits, leases } = inspection;
  const lines = [`${organization} on ${endpoint}, at ${new Date(at).toISOString()} (the store's clock)`];
  if (limits.length === 0 && leases.length === 0) return `${lines[0]}\nnothing stored: every limit is full\n`;
  const rows = [['limit', 'kind', 'tokens', 'capacity', 'reserved', 'full again']];
  for (const limit of limits) {
    const full =
      limit.kind === 'concurrency'
        ? 'when its leases end'
        : limit.kind === 'quota'
          ? `period ends ${when(limit.fullAt, at)}`
          : limit.fullAt <= at
            ? 'full now'
            : when(limit.fullAt, at);
    rows.push([
      limit.name,
      limit.kind,
      limit.kind === 'concurrency' ? `${limit.reserved} held` : String(limit.tokens),
      limit.kind === 'concurrency' ? '-' : String(limit.capacity),
      String(limit.reserved),
      full,
    ]);
  }
  lines.push(...columns(rows).map((row) => `  ${row}`));
  lines.push(`leases held: ${leases.length}`);
  for (const lease of leases) {
    const holds = Object.entries(lease.holds).map(([name, amount]) => `${name}=${amount}`);
    lines.push(`  ${lease.id}  expires ${when(lease.expiresAt, at)}  ${holds.join(' ')}`);
  }
  return `${lines.join('\n')}\n`;
}

/** What `ratecard blocks` prints: each block in force, its end and reason. */
export function blocksText({ now, blocks }: KeptBlocks): string {
  if (blocks.length === 0) return 'no blocks in force\n';
  const sorted = [...blocks].sort((a, b) => a.until - b.until);
  const rows = [['organization', 'endpoint', 'until', 'reason']];
  for (const block of sorted)
    rows.push([block.organization, endpointText(block.endpoint), when(block.until, now), block.reason]);
  return `${columns(rows).join('\n')}\n`;
}

/** One block as a sentence. */
export function blockText(block: KeptBlock, now: number): string {
  const reason = block.reason === '' ? '' : ` (${block.reason})`;
  return `${block.organization} is blocked on ${endpointText(block.endpoint)} until ${when(block.until, now)}${reason}`;
}
