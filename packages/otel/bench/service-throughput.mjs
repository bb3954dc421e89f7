// The reference service's POST /browsers throughput with metrics off (no METRICS_PORT) and on (METRICS_PORT set: the
// limiter instrumented by @ratecard/otel, Prometheus exporter serving), side by side in one run.
//
//   pnpm build && pnpm --filter @ratecard/otel bench [-- --pairs 4 --rounds 6 --seconds 1 --connections 32]
//
// Several pairs of fresh services, metrics off and on (which starts first alternates: two processes that differ in
// nothing still differ by a few per cent, so one pair alone would not do). Each pair is warmed, then loaded with
// autocannon from this process in short bursts, off-on-on-off or on-off-off-on per round, so that whatever else the
// machine does hits both alike. Reported per round: requests per second and requests per server CPU-second (from
// /proc: what the service did with the CPU it got, the steadier figure on a shared machine); then the median over all
// rounds of the on/off ratio of each. Loopback only, bounded in time.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';

const { values } = parseArgs({
  options: {
    pairs: { type: 'string', default: '4' },
    rounds: { type: 'string', default: '6' },
    seconds: { type: 'string', default: '1' },
    connections: { type: 'string', default: '32' },
    organizations: { type: 'string', default: '100' },
  },
});
const PAIRS = Number(values.pairs);
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const ORGANIZATIONS = Number(values.organizations);
const WARMUP_SECONDS = 2;
/** Never reached in a run, and never full again between two requests of one organization: buckets live all run. */
const LIMIT = 10_000;
const CLOCK_TICKS_PER_SECOND = 100;

const main = fileURLToPath(new URL('../../reference-service/dist/main.js', import.meta.url));
if (!existsSync(main)) {
  console.error(`no ${main}: run pnpm build first`);
  process.exit(1);
}

const scratch = mkdtempSync(join(tmpdir(), 'ratecard-otel-bench-'));
const keysFile = join(scratch, 'keys.json');
const tokens = Array.from({ length: ORGANIZATIONS }, (_, i) => `bench_token_${i}`);
const keys = Object.fromEntries(
  tokens.map((token, i) => [
    token,
    { organization: `org_${i}`, plan: 'enterprise', override: LIMIT, scopes: ['browsers'] },
  ]),
);
writeFileSync(keysFile, JSON.stringify(keys));

/** user + system CPU seconds of a process, from /proc/<pid>/stat. */
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after "pid (comm) ".
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

async function startService(metrics) {
  const env = { PATH: process.env.PATH ?? '', PORT: '0', API_KEYS_FILE: keysFile };
  if (metrics) env.METRICS_PORT = '0';
  const child = spawn(process.execPath, [main], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk.toString('utf8');
  });
  for (let waited = 0; waited < 15_000; waited += 20) {
    const url = /listening on (http:\/\/\S+)/.exec(stdout)?.[1];
    const metricsUrl = /^metrics: (http:\/\/\S+)$/m.exec(stdout)?.[1];
    if (url !== undefined && (!metrics || metricsUrl !== undefined)) {
      return {
        url,
        metricsUrl,
        pid: child.pid,
        stop: () =>
          new Promise((resolve) => {
            child.once('exit', resolve);
            child.kill('SIGTERM');
          }),
      };
    }
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  child.kill('SIGKILL');
  throw new Error(`the reference service did not start; it printed: ${stdout}`);
}

function load(url, seconds) {
  let next = 0;
  return autocannon({
    url: `${url}/browsers`,
    method: 'POST',
    connections: CONNECTIONS,
    duration: seconds,
    body: '{"name":"bench"}',
    requests: [
      {
        setupRequest: (request) => ({
          ...request,
          headers: {
            ...request.headers,
            authorization: `Bearer ${tokens[next++ % tokens.length]}`,
            'content-type': 'application/json',
          },
        }),
      },
    ],
  });
}

/** The sum of ratecard_decisions_total over every attribute set, from the service's own exposition. */
async function decisionsCounted(metricsUrl) {
  const text = await (await fetch(metricsUrl)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('ratecard_decisions_total{')) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/** One burst of load on a started service: requests answered, and the server CPU seconds they took. */
async function burst(service, seconds) {
  const cpuBefore = cpuSeconds(service.pid);
  const result = await load(service.url, seconds);
  const cpu = cpuSeconds(service.pid) - cpuBefore;
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(
      `not every request was served 201: ${JSON.stringify(result.statusCodeStats)}, ${result.errors} errors`,
    );
  }
  const answered = result.requests.total;
  return { answered, cpu };
}

function median(numbers) {
  const sorted = [...numbers].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

const format = (n) => Math.round(n).toLocaleString('en-US').padStart(7);
const ratios = { perSecond: [], perCpuSecond: [] };
let running = [];
try {
  console.log(
    `reference service POST /browsers, ${ORGANIZATIONS} organizations round-robin (override ${LIMIT}/min: all 201), ` +
      `${CONNECTIONS} connections; ${PAIRS} pairs of services (metrics off, on), each warmed ${WARMUP_SECONDS} s, ` +
      `then ${ROUNDS} rounds per pair of ${SECONDS} s bursts, off-on-on-off or on-off-off-on`,
  );
  for (let pair = 1; pair <= PAIRS; pair++) {
    const onFirst = pair % 2 === 0;
    const a = await startService(onFirst);
    running.push(a);
    const b = await startService(!onFirst);
    running.push(b);
    const [off, on] = onFirst ? [b, a] : [a, b];
    await burst(a, WARMUP_SECONDS);
    await burst(b, WARMUP_SECONDS);
    let answeredOn = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      const totals = new Map([
        [off, { answered: 0, cpu: 0 }],
        [on, { answered: 0, cpu: 0 }],
      ]);
      for (const service of round % 2 === 1 ? [off, on, on, off] : [on, off, off, on]) {
        const result = await burst(service, SECONDS);
        const total = totals.get(service);
        total.answered += result.answered;
        total.cpu += result.cpu;
      }
      const figures = (total) => ({
        perSecond: total.answered / (2 * SECONDS),
        perCpuSecond: total.answered / total.cpu,
      });
      const [offFigures, onFigures] = [figures(totals.get(off)), figures(totals.get(on))];
      answeredOn += totals.get(on).answered;
      ratios.perSecond.push(onFigures.perSecond / offFigures.perSecond);
      ratios.perCpuSecond.push(onFigures.perCpuSecond / offFigures.perCpuSecond);
      console.log(
        `pair ${pair} round ${round}: off ${format(offFigures.perSecond)} req/s ${format(offFigures.perCpuSecond)} req/CPU-s | ` +
          `on ${format(onFigures.perSecond)} req/s ${format(onFigures.perCpuSecond)} req/CPU-s`,
      );
    }
    // Proof that the "on" service really counted every decision (autocannon may leave a few in flight uncounted).
    const counted = await decisionsCounted(on.metricsUrl);
    if (counted < answeredOn)
      throw new Error(`metrics counted ${counted} decisions for ${answeredOn} answered requests`);
    for (const service of running) await service.stop();
    running = [];
  }
  console.log(
    `median on/off over ${ratios.perSecond.length} rounds: ${(median(ratios.perSecond) * 100).toFixed(1)}% of ` +
      `requests per second, ${(median(ratios.perCpuSecond) * 100).toFixed(1)}% of requests per server CPU-second`,
  );
} finally {
  for (const service of running) await service.stop();
  rmSync(scratch, { recursive: true, force: true });
}
