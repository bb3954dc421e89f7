/** latest.md, the charts (Vega-Lite specs rendered to SVG by Vega, headless), and the terminal summary. */
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { human, type Measurement, machineLine, type Results, type Suite } from './results.js';

type Value = (m: Measurement) => number | null | undefined;

/** Grouped horizontal bars: one row per label, one bar per contender, each value printed at the bar's end. */
function barChart(title: string, axis: string, measurements: Measurement[], value: Value): Promise<string> {
  const values = measurements.map((m) => {
    const id = m.id.split('/');
    // Redis runs group by shape, contender beside contender; every other figure is a row of its own.
    const label = id[0] === 'redis' || id[0] === 'cluster' ? `${id[0]} ${id[2]}` : id.slice(1).join('/');
    return { label, contender: m.contender, value: value(m) ?? 0, text: human(value(m)) };
  });
  const grouped = new Set(values.map((row) => row.label)).size < values.length;
  const encoding = {
    y: { field: 'label', type: 'nominal', title: null, sort: null, axis: { labelLimit: 300 } },
    ...(grouped ? { yOffset: { field: 'contender', sort: null } } : {}),
    x: { field: 'value', type: 'quantitative', title: axis },
  } as const;
  const spec: TopLevelSpec = {
    title,
    width: 480,
    data: { values },
    layer: [
      { mark: 'bar', encoding: { ...encoding, color: { field: 'contender', title: null, sort: null } } },
      { mark: { type: 'text', align: 'left', dx: 3, fontSize: 9 }, encoding: { ...encoding, text: { field: 'text' } } },
    ],
    config: { legend: { orient: 'bottom', labelLimit: 300 }, font: 'sans-serif' },
  };
  return new View(parse(compile(spec).spec), { renderer: 'none' }).toSVG();
}

export async function renderCharts(results: Results): Promise<Record<string, string>> {
  const of = (...suites: Suite[]): Measurement[] => results.measurements.filter((m) => suites.includes(m.suite));
  // biome-ignore format: a table, one chart a line
  const charts: [string, string, string, Measurement[], Value][] = [
    ['memory.svg', 'In process: calls/s, one in flight', 'calls per second', of('memory'), (m) => m.opsPerSecond],
    ['redis.svg', 'Redis: decisions/s', 'decisions per second', of('redis', 'cluster'), (m) => m.opsPerSecond],
    ['redis-cpu.svg', 'Redis: server CPU per decision', 'µs of redis-server CPU', of('redis', 'cluster'), (m) => m.redis?.cpuMicrosPerDecision],
    ['http.svg', 'POST /browsers: requests per server CPU-second', 'requests per CPU-second', of('http'), (m) => m.extra.requestsPerServerCpuSecond],
  ];
  const out: Record<string, string> = {};
  for (const [file, title, axis, measurements, value] of charts)
    if (measurements.length > 0) out[file] = await barChart(`${title} (median of rounds)`, axis, measurements, value);
  return out;
}

type Column = [string, (m: Measurement) => string | number | null | undefined];
const count = (n: number | undefined): string => n?.toLocaleString('en-US') ?? '–';
// biome-ignore format: a table, one column a line
const REDIS: Column[] = [
  ['Contender', (m) => m.contender], ['Run', (m) => m.id.split('/')[2]], ['Decisions/s', (m) => human(m.opsPerSecond)],
  ['CPU µs/decision', (m) => m.redis?.cpuMicrosPerDecision], ['p50 µs', (m) => m.p50Micros], ['p99 µs', (m) => m.p99Micros],
  ['Admitted', (m) => count(m.redis?.admitted)], ['Denied', (m) => count(m.redis?.denied)],
  ['Over-admitted', (m) => m.redis?.overAdmitted], ['Not from Redis', (m) => m.redis?.notFromStore], ['Errors', (m) => m.redis?.errors],
  ['B/key', (m) => m.redis?.bytesPerKey], ['used_memory/key', (m) => m.redis?.usedMemoryPerKey],
];
// biome-ignore format: a table, one suite a row
const SECTIONS: [Suite, string, Column[]][] = [
  ['memory', 'In process', [
    ['Case', (m) => `\`${m.id.slice('memory/'.length)}\``], ['Call', (m) => m.subject], ['Calls/s', (m) => human(m.opsPerSecond)],
    ['ns/call', (m) => m.extra.nsPerCall], ['Rounds (calls/s)', (m) => m.rounds.map(human).join(', ')],
  ]],
  ['heap', 'Heap per tracked organization', [
    ['Contender', (m) => m.contender], ['What', (m) => m.subject], ['Bytes per organization', (m) => m.bytesPerOrganization],
  ]],
  ['redis', 'Redis, standalone', REDIS],
  ['script', 'Redis instructions per lone decision (callgrind)', [
    ['Script', (m) => m.contender], ['What', (m) => m.subject], ['Instructions per decision', (m) => count(m.extra.instructionsPerDecision)],
  ]],
  ['cluster', 'Redis Cluster, 3 masters', REDIS],
  ['http', 'Reference service over HTTP', [
    ['Variant', (m) => m.contender], ['App', (m) => m.subject], ['Requests/s', (m) => human(m.opsPerSecond)],
    ['Per server CPU-s', (m) => human(m.extra.requestsPerServerCpuSecond)], ['Rounds (per CPU-s)', (m) => m.rounds.map(human).join(', ')],
    ['p50 µs', (m) => m.p50Micros], ['p99 µs', (m) => m.p99Micros], ['Not 201', (m) => count(m.extra.notCreated)],
  ]],
];

function table(header: string[], rows: (string | number | null | undefined)[][]): string[] {
  const cell = (value: string | number | null | undefined): string =>
    value == null ? '–' : String(value).replace(/\|/g, '\\|');
  return [
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((row) => `| ${row.map(cell).join(' | ')} |`),
  ];
}

export function renderMarkdown(results: Results, charts: string[]): string {
  const { machine } = results;
  const out = [
    '# ratecard benchmarks',
    '',
    `Produced by \`${results.command}\` at ${results.startedAt} in ${results.seconds} s (${results.mode} mode).`,
    '',
    `Machine: ${machineLine(machine)}. Load average (1 min) at the start ${machine.loadAverage.start}, at the end ` +
      `${machine.loadAverage.end ?? '–'}, on ${machine.cores} cores. Every ratio compares figures measured side by side ` +
      'in this run, contenders alternating round by round; absolute figures move with whatever else the machine runs.',
    '',
    '## Targets',
    '',
    ...table(
      ['Figure', 'Target', 'Measured', 'Result'],
      results.targets.map((t) => [t.figure, t.target, t.measured, t.verdict === 'met' ? 'met' : `**${t.verdict}**`]),
    ),
  ];
  for (const [suite, title, columns] of SECTIONS) {
    const measured = results.measurements.filter((m) => m.suite === suite);
    if (measured.length === 0) continue;
    const [header, rows] = [columns.map(([name]) => name), measured.map((m) => columns.map(([, value]) => value(m)))];
    out.push('', `## ${title}`, '', ...table(header, rows), '');
    for (const method of new Set(measured.map((m) => m.method))) out.push(`- How: ${method}.`);
    for (const m of measured) {
      const stats = Object.entries(m.redis?.storeStats ?? {}).map(([name, value]) => `${name} ${count(value)}`);
      if (stats.length > 0) out.push(`- \`${m.id}\` store counters: ${stats.join(', ')}.`);
    }
  }
  if (results.skipped.length > 0) out.push('', '## Not measured', '', ...results.skipped.map((line) => `- ${line}`));
  if (charts.length > 0) out.push('', '## Charts', '', ...charts.map((file) => `![${file}](${file})\n`));
  return `${out.join('\n').trimEnd()}\n`;
}

/** Words in lines of at most 80 columns; every line after the first starts with `indent`. */
function wrap(text: string, indent: string): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line.length + word.length >= 80 && line.trim() !== '') {
      lines.push(line.trimEnd());
      line = indent;
    }
    line += `${word} `;
  }
  return [...lines, line.trimEnd()];
}

/** The targets for an 80-column terminal: the verdict and the figure, then what was measured. */
export function summary(results: Results): string {
  const lines = ['', 'Targets:'];
  for (const t of results.targets) {
    lines.push(...wrap(`${t.verdict.padEnd(13)}${t.figure.replace(/`/g, '')} (${t.target})`, ' '.repeat(13)));
    lines.push(...wrap(`${' '.repeat(15)}${t.measured.replace(/`/g, '')}`, ' '.repeat(15)));
  }
  return `${lines.join('\n')}\n`;
}
