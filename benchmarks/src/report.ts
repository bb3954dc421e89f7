import { type Chart, renderChart } from './charts.js';
import { machineLine } from './machine.js';
import type { Measurement, Results, Suite } from './results.js';
import { human, sig } from './stats.js';

function cell(value: number | string | null | undefined): string {
  if (value === null || value === undefined || (typeof value === 'number' && !Number.isFinite(value))) return '–';
  return typeof value === 'number' ? String(value) : value.replace(/\|/g, '\\|');
}

/** Exact counts with thousands separators. */
function count(n: number | null | undefined): string {
  return n === null || n === undefined ? '–' : n.toLocaleString('en-US');
}

function table(header: string[], rows: (number | string | null | undefined)[][]): string {
  return [
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((row) => `| ${row.map(cell).join(' | ')} |`),
  ].join('\n');
}

function of(results: Results, suite: Suite): Measurement[] {
  return results.measurements.filter((m) => m.suite === suite);
}

function methods(measurements: readonly Measurement[]): string {
  if (measurements.length === 0) return '';
  const lines = measurements.map(
    (m) => `- \`${m.id}\`: ${m.method}.${m.notes.length > 0 ? ` Notes: ${m.notes.join('; ')}.` : ''}`,
  );
  return `\nHow each figure was measured:\n\n${lines.join('\n')}\n`;
}

function verdict(pass: boolean | null): string {
  return pass === null ? 'not measured' : pass ? '**pass**' : '**FAIL**';
}

function storeStats(m: Measurement): string {
  const stats = m.redis?.storeStats;
  if (stats === null || stats === undefined) return '–';
  const parts = [
    `script calls ${count(stats.batches)}`,
    `calls sent ${count(stats.sent)}`,
    `deny-cache hits ${count(stats.denyCacheHits)}`,
  ];
  if (typeof stats.largestBatch === 'number') parts.push(`largest batch ${stats.largestBatch}`);
  return parts.join(', ');
}

function redisTable(measurements: readonly Measurement[]): string {
  return table(
    [
      'Library',
      'Run',
      'Decisions/s',
      'p50 µs',
      'p99 µs',
      'Redis CPU µs/decision',
      'Bytes/key (MEMORY USAGE)',
      'used_memory/key',
      'Admitted',
      'Denied',
      'Over-admitted',
      'Not from Redis',
      'Errors',
      'Store stats',
    ],
    measurements.map((m) => [
      m.library,
      m.id.split('/').slice(2).join('/'),
      human(m.opsPerSecond),
      m.p50Micros,
      m.p99Micros,
      m.redis?.cpuMicrosPerDecision,
      m.redis?.bytesPerKey ?? '–',
      m.redis?.usedMemoryPerKey ?? '–',
      count(m.admitted),
      count(m.denied),
      m.redis?.overAdmitted,
      m.redis?.notFromStore,
      m.redis?.errors,
      storeStats(m),
    ]),
  );
}

/** latest.md: targets first, then every suite's table and how each figure was measured. */
export function renderMarkdown(results: Results, charts: readonly string[]): string {
  const out: string[] = [];
  const seconds = (Date.parse(results.finishedAt) - Date.parse(results.startedAt)) / 1000;
  out.push(`# ratecard benchmarks: ${results.mode} run`);
  out.push('');
  out.push(`Produced by \`${results.command}\` at ${results.startedAt} in ${Math.round(seconds)} s.`);
  out.push('');
  out.push(`Machine: ${machineLine(results.machine)}.`);
  out.push('');
  const load = results.machine.loadAverage;
  out.push(
    `Load average (1 min) at the start ${load.start}, at the end ${load.end ?? '–'}, on ${results.machine.cores} cores: ` +
      'anything else running on the machine moves these figures.',
  );
  out.push('');
  out.push('## Targets (issue 6 §3)');
  out.push('');
  out.push(
    table(
      ['Target', 'Measured', 'Threshold', 'Result', 'Note'],
      results.targets.map((t) => [t.target, t.measured, t.threshold, verdict(t.pass), t.note]),
    ),
  );
  out.push('');
  for (const note of results.notes) out.push(`> ${note}\n`);

  const memory = of(results, 'memory');
  if (memory.length > 0) {
    out.push('## Memory store, in process');
    out.push('');
    out.push(
      'ratecard’s memory store reads `Date.now()` once per event-loop turn by default (`packages/memory/src/turn-clock.ts`): ' +
        `all calls of one turn share one clock read. In these loops a turn is ${results.config.memory.chunk.toLocaleString('en-US')} calls. The \`per-call-clock\` rows ` +
        'give the store `now: () => Date.now()`, so every call reads the clock, as the other libraries do.',
    );
    out.push('');
    out.push(
      table(
        ['Case', 'Library', 'Call', 'ns/op', 'Ops/s', 'p50 µs', 'p99 µs', 'Admitted', 'Denied'],
        memory.map((m) => [
          `\`${m.id.slice('memory/'.length)}\``,
          m.library,
          m.subject,
          m.nsPerOp,
          human(m.opsPerSecond),
          m.p50Micros,
          m.p99Micros,
          count(m.admitted),
          count(m.denied),
        ]),
      ),
    );
    out.push(methods(memory));
  }

  const heap = of(results, 'heap');
  if (heap.length > 0) {
    out.push('## Heap per tracked organization');
    out.push('');
    out.push(
      table(
        ['Library', 'What', 'Organizations', 'Bytes per organization'],
        heap.map((m) => [m.library, m.subject, m.calls.toLocaleString('en-US'), m.bytesPerOrganization]),
      ),
    );
    out.push(methods(heap));
  }

  const redis = of(results, 'redis');
  const latency = of(results, 'redis-latency');
  if (redis.length + latency.length > 0) {
    out.push('## Redis, standalone');
    out.push('');
    out.push(redisTable([...redis, ...latency]));
    out.push(methods([...redis, ...latency]));
  }
  const cluster = of(results, 'redis-cluster');
  if (cluster.length > 0) {
    out.push('## Redis Cluster, 3 masters');
    out.push('');
    out.push(redisTable(cluster));
    out.push(methods(cluster));
  }

  const http = of(results, 'http');
  if (http.length > 0) {
    out.push('## HTTP: the reference service');
    out.push('');
    out.push(
      table(
        ['Variant', 'What', 'Requests/s', 'Requests per server CPU-s', 'p50 µs', 'p99 µs', '201', '429'],
        http.map((m) => [
          m.id,
          m.subject,
          human(m.opsPerSecond),
          human(m.extra.requestsPerServerCpuSecond ?? null),
          m.p50Micros,
          m.p99Micros,
          count(m.admitted),
          count(m.denied),
        ]),
      ),
    );
    out.push(methods(http));
  }

  if (results.skipped.length > 0) {
    out.push('## Not run');
    out.push('');
    for (const skip of results.skipped) out.push(`- ${skip.suite}: ${skip.reason}`);
    out.push('');
  }
  if (charts.length > 0) {
    out.push('## Charts');
    out.push('');
    for (const chart of charts) out.push(`![${chart}](${chart})\n`);
  }
  return `${out.join('\n')}\n`;
}

/** A chart row's name: the id without its suite, rate-limiter-flexible shortened to rlflx (captions say so). */
function label(m: Measurement): string {
  return m.id.split('/').slice(1).join(' · ').replace('rate-limiter-flexible', 'rlflx');
}

/** Microseconds as µs, or as ms from 1 000 µs on. */
function micros(value: number): string {
  return value >= 1000 ? `${sig(value / 1000)} ms` : `${sig(value)} µs`;
}

/** The charts worth drawing from these results, by file name. */
export function renderCharts(results: Results): Record<string, string> {
  const files: Record<string, string> = {};
  const machine = machineLine(results.machine);
  const { config } = results;
  const count = (n: number): string => n.toLocaleString('en-US');
  const memory = of(results, 'memory');
  if (memory.length > 0) {
    const chart: Chart = {
      title: 'Memory store: throughput and latency per call',
      caption: [
        `1 call in flight, ${count(config.memory.organizations)} organizations round-robin, ${count(config.memory.chunk)} calls per event-loop turn; ` +
          'ratecard default clock = one Date.now per turn; rlflx = rate-limiter-flexible.',
        machine,
      ],
      left: {
        title: 'Throughput (calls/s, more is better)',
        unit: '/s',
        series: ['median of rounds'],
        rows: memory.map((m) => ({ label: label(m), library: m.library, values: [m.opsPerSecond] })),
      },
      right: {
        title: 'Latency per call (less is better)',
        unit: '',
        format: micros,
        series: ['p50', 'p99'],
        rows: memory.map((m) => ({ label: label(m), library: m.library, values: [m.p50Micros, m.p99Micros] })),
      },
    };
    files['memory-store.svg'] = renderChart(chart);
  }
  const redis = [...of(results, 'redis'), ...of(results, 'redis-cluster')];
  const latency = of(results, 'redis-latency');
  if (redis.length > 0) {
    files['redis.svg'] = renderChart({
      title: `Redis: decisions per second (${config.redis.inFlight} in flight) and latency (1 in flight)`,
      caption: [
        `${count(config.redis.organizations)} organizations round-robin; standalone and 3-master cluster on this machine; ` +
          'rlflx = rate-limiter-flexible.',
        machine,
      ],
      left: {
        title: `Decisions/s at ${config.redis.inFlight} in flight (more is better)`,
        unit: '/s',
        series: ['decisions per second'],
        rows: redis.map((m) => ({ label: `${m.suite} · ${label(m)}`, library: m.library, values: [m.opsPerSecond] })),
      },
      right: {
        title: 'Latency at 1 in flight (less is better)',
        unit: '',
        format: micros,
        series: ['p50', 'p99'],
        rows: latency.map((m) => ({ label: label(m), library: m.library, values: [m.p50Micros, m.p99Micros] })),
      },
    });
    files['redis-cost.svg'] = renderChart({
      title: 'Redis: server CPU per decision and memory per key',
      caption: [
        'INFO cpu deltas / decisions; MEMORY USAGE averaged over sampled keys; rlflx = rate-limiter-flexible.',
        machine,
      ],
      left: {
        title: 'redis-server CPU per decision (µs, less is better)',
        unit: ' µs',
        series: ['CPU per decision'],
        rows: redis.map((m) => ({
          label: `${m.suite} · ${label(m)}`,
          library: m.library,
          values: [m.redis?.cpuMicrosPerDecision ?? null],
        })),
      },
      right: {
        title: 'Bytes per key (less is better)',
        unit: ' B',
        series: ['MEMORY USAGE', 'used_memory freed per key'],
        rows: redis
          .filter((m) => m.redis?.bytesPerKey !== null)
          .map((m) => ({
            label: `${m.suite} · ${label(m)}`,
            library: m.library,
            values: [m.redis?.bytesPerKey ?? null, m.redis?.usedMemoryPerKey ?? null],
          })),
      },
    });
  }
  const heap = of(results, 'heap');
  if (heap.length > 0 && memory.length > 0) {
    const denied = memory.filter((m) => m.id.endsWith('/denied'));
    files['footprint.svg'] = renderChart({
      title: 'Heap per tracked organization, and the denied path',
      caption: [
        `${heap[0]?.calls.toLocaleString('en-US')} organizations for the heap; the denied path drains 10/min buckets first.`,
        machine,
      ],
      left: {
        title: 'Heap bytes per tracked organization (less is better)',
        unit: ' B',
        series: ['bytes'],
        rows: heap.map((m) => ({ label: label(m), library: m.library, values: [m.bytesPerOrganization] })),
      },
      right: {
        title: 'Denied path: ns per call (less is better)',
        unit: ' ns',
        series: ['ns per call'],
        rows: denied.map((m) => ({ label: label(m), library: m.library, values: [m.nsPerOp] })),
      },
    });
  }
  const http = of(results, 'http');
  if (http.length > 0) {
    files['http.svg'] = renderChart({
      title: 'Reference service POST /browsers: with and without the limiter',
      caption: [
        '64 keep-alive connections from a node:http load generator on 127.0.0.1; server in its own process.',
        machine,
      ],
      left: {
        title: 'Requests per second (more is better)',
        unit: '',
        series: ['per second of wall time', 'per second of server CPU'],
        rows: http.map((m) => ({
          label: label(m),
          library: m.library,
          values: [m.opsPerSecond, m.extra.requestsPerServerCpuSecond ?? null],
        })),
      },
      right: {
        title: 'Latency per request (less is better)',
        unit: '',
        format: micros,
        series: ['p50', 'p99'],
        rows: http.map((m) => ({ label: label(m), library: m.library, values: [m.p50Micros, m.p99Micros] })),
      },
    });
  }
  return files;
}
