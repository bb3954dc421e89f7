import { runJob } from './child.js';
import type { BenchConfig } from './config.js';
import { HEAP_CASES } from './heap-cases.js';
import { progress } from './progress.js';
import { type Measurement, measurement } from './results.js';
import { sig } from './stats.js';
import type { HeapJobResult } from './worker.js';

/** Tracking a million organizations takes 1 to 4 s; a minute means something is broken. */
const CASE_TIMEOUT_MS = 60_000;

/** Heap per tracked organization, each library in its own `node --expose-gc` child. */
export async function heapSuite(config: BenchConfig, failures: string[]): Promise<Measurement[]> {
  const out: Measurement[] = [];
  const organizations = config.heap.organizations;
  for (const [name, chosen] of Object.entries(HEAP_CASES)) {
    let result: HeapJobResult;
    try {
      result = await runJob({ kind: 'heap', name, organizations }, CASE_TIMEOUT_MS);
    } catch (error) {
      failures.push(`heap/${name}: ${error instanceof Error ? error.message : String(error)}`);
      progress(`heap: ${name} FAILED: ${error instanceof Error ? error.message : String(error)}`);
      continue;
    }
    const method =
      `${organizations.toLocaleString('en-US')} organizations, one request each, in a fresh \`node --expose-gc\` process; ` +
      'gc() twice before and after; (heapUsed + arrayBuffers) after minus before, divided by organizations; ' +
      'the organization name strings are created before the baseline and held by the harness in both measurements, ' +
      'so they are not counted';
    out.push(
      measurement({
        id: `heap/${name}`,
        suite: 'heap',
        library: chosen.library,
        subject: chosen.subject,
        method,
        calls: organizations,
        durationMs: sig(result.trackMs, 4),
        bytesPerOrganization: sig(result.bytesPerOrganization),
        notes: [
          `heapUsed delta ${result.heapDeltaBytes} B, arrayBuffers delta ${result.arrayBuffersDeltaBytes} B`,
          ...(result.check === '' ? [] : [result.check]),
        ],
      }),
    );
    progress(`heap: ${name.padEnd(40)} ${sig(result.bytesPerOrganization)} bytes per organization`);
  }
  return out;
}
