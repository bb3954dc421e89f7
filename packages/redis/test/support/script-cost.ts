/**
 * Instructions redis-server spends per decision of a script, counted by callgrind: repeatable where timings are not,
 * so two versions of a script can be compared to a few tenths of a percent. Needs valgrind (Debian: valgrind).
 *
 *   pnpm --filter @ratecard/redis script-cost [consume|reserve-settle|empty|mget|mget-set-px] [--lone] [--limits 2] [--calls N] [--script FILE] [--json]
 *
 * Starts `valgrind --tool=callgrind redis-server` on a free port, writes 2 000 half-full buckets, runs 32 script calls
 * to warm up, zeroes the counters, runs 150 script calls of 128 keys each (clock 'client', 2 ms apart, limit 250,
 * cost 1: every call admitted, each written with SET … PX), dumps the counters and prints instructions per decision.
 * `--limits 2`: each decision charges two buckets (250 per minute and 10 000 per hour), both in its one key.
 * 'consume' is the store's script; the others are skeletons that show what its parts cost: an empty script (the
 * EVALSHA and its 128 keys), one MGET of the keys, then a SET … PX per key.
 *
 * 'reserve-settle': the store's script, each decision a reserve (a lease of 60 s) and, in the next script call, its
 * settle (actual 1): instructions per reserve plus its settle, beside one consume's. The key holds one lease between
 * the two, so the figure includes reading, expiring and writing a lease section.
 *
 * `--lone`: a decision at one call in flight instead, as the benchmark's 1-in-flight shape makes them: 4 800 script
 * calls of one key each, on Redis' clock (the script reads TIME and writes SET … PXAT). `consume --lone` of one limit
 * then measures the floor script (floor-script.ts) the same way on the same buckets, written half full again, and
 * prints the ratio of the two: issue 40's line. `--json`: the figures as one JSON object, for `pnpm bench`. `--calls N`:
 * N measured script calls instead (`pnpm bench --quick` measures 600 lone calls: its smoke test checks that the figures
 * come, not what they are). `--script FILE`: the Lua in FILE in place of the store's consume script, measured the same
 * way (a variant under study; the store's own text is `CONSUME.text` in src/scripts/consume.ts).
 *
 * Two runs of one build agree within a few tenths of a percent. They did not while the buckets started empty: a
 * bucket one token short of full expires a quarter of a second after its write, and whether valgrind came back to
 * it before that moved the count by several percent.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type Limit, perHour, perMinute } from '@ratecard/core';
import { Redis } from 'ioredis';
import { CONSUME, HEADER_SIZE, Op, packCall, packedSize, packHeader } from '../../src/scripts/consume.js';
import { FLOOR, floorArgs } from './floor-script.js';

const BUCKETS = 2_000;
const PER_CALL = 128;
const WARM_CALLS = 32;
const MEASURED_CALLS = 150;
/** Few enough that the half-full buckets stay below full on Redis' clock, which runs on while valgrind is slow. */
const LONE_CALLS = 4_800;

const SKELETONS: Readonly<Record<string, string>> = {
  empty: 'return 1',
  mget: "redis.call('MGET', unpack(KEYS)) return 1",
  'mget-set-px':
    "local v = redis.call('MGET', unpack(KEYS)) for i = 1, #KEYS do redis.call('SET', KEYS[i], v[i], 'PX', '600000') end return 1",
};

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

function callgrindControl(flag: string, pid: number): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('callgrind_control', [flag, String(pid)], (error) => (error ? reject(error) : resolve()));
  });
}

/** Instructions in the newest dump of `dir`: the `totals:` (or `summary:`) line callgrind writes. */
async function lastDumpTotal(dir: string): Promise<number> {
  const dumps = (await readdir(dir)).filter((name) => /^cg\.\d+\.\d+$/.test(name));
  dumps.sort((a, b) => Number(a.split('.')[2]) - Number(b.split('.')[2]));
  const newest = dumps.at(-1);
  if (newest === undefined) throw new Error('callgrind wrote no dump');
  const text = await readFile(join(dir, newest), 'utf8');
  const line = /^(?:totals|summary): (\d+)/m.exec(text);
  if (line === null) throw new Error(`no totals in ${newest}`);
  return Number(line[1]);
}

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      lone: { type: 'boolean' },
      limits: { type: 'string', default: '1' },
      calls: { type: 'string' },
      script: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const limits: Limit[] = [perMinute(250), perHour(10_000)].slice(0, Number(values.limits));
  const which = positionals[0] ?? 'consume';
  const lone = values.lone === true;
  const [perCall, defaultCalls] = lone ? [1, LONE_CALLS] : [PER_CALL, MEASURED_CALLS];
  const measuredCalls = values.calls === undefined ? defaultCalls : Number(values.calls);
  if (!Number.isInteger(measuredCalls) || measuredCalls < 1)
    throw new Error(`--calls takes a whole number; got ${values.calls}`);
  const skeleton = SKELETONS[which];
  const leases = which === 'reserve-settle';
  if (which !== 'consume' && !leases && skeleton === undefined) {
    throw new Error(`unknown script ${which}: consume, reserve-settle, ${Object.keys(SKELETONS).join(', ')}`);
  }
  const dir = await mkdtemp(join(tmpdir(), 'ratecard-callgrind-'));
  const port = await freePort();
  const server: ChildProcess = spawn(
    'valgrind',
    ['--tool=callgrind', `--callgrind-out-file=${join(dir, 'cg.%p')}`, 'redis-server', '--port', String(port)].concat([
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ]),
    { stdio: 'ignore' },
  );
  const client = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: null, retryStrategy: () => 200 });
  // Refused connections while valgrind starts the server are expected: the client retries until it answers.
  client.on('error', () => undefined);
  try {
    await client.ping();
    const pid = server.pid as number;
    const orgs = Array.from({ length: BUCKETS }, (_, i) => `cost:{org-${String(i).padStart(6, '0')}}:POST /browsers`);
    const text = values.script === undefined ? CONSUME.text : await readFile(values.script, 'utf8');
    const sha = (await client.script('LOAD', skeleton ?? text)) as string;
    // One call's limits and cost, shared by the batch, as the store packs them.
    const pair = Buffer.alloc(HEADER_SIZE + packedSize(limits));
    packCall(pair, HEADER_SIZE, limits, 1);
    let next = 0;
    let leaseCount = 0;
    let now = 0;
    /** One script call: a batch of consumes, or (reserve-settle) of reserves and then one of their settles. */
    const send = async (batch: string[], numbers: Buffer): Promise<void> => {
      now += 2;
      packHeader(numbers, lone ? undefined : now, undefined, false);
      await client.callBuffer('evalsha', [sha, batch.length, ...batch, numbers]);
    };
    const call = async (): Promise<void> => {
      const batch: string[] = [];
      for (let i = 0; i < perCall; i++) {
        batch.push(orgs[next] as string);
        next = (next + 1) % BUCKETS;
      }
      if (!leases) return send(batch, pair);
      // As long as core's lease ids: 16 characters of the process, '-', a counter in base 36.
      const ids = batch.map(() => `ProcessPart16Chr-${(leaseCount++).toString(36)}`);
      // As the store packs a batch of one plan's reserves or settles: the limits with the first call only.
      const pack = (op: Op, ms?: number) => {
        const sizes = ids.map((id, i) => packedSize(limits, id, i > 0));
        const numbers = Buffer.alloc(sizes.reduce((size, each) => size + each, HEADER_SIZE));
        ids.reduce((offset, id, i) => packCall(numbers, offset, limits, 1, op, id, ms, i > 0), HEADER_SIZE);
        return numbers;
      };
      await send(batch, pack(Op.reserve, 60_000));
      await send(batch, pack(Op.settle));
    };
    /** Instructions per decision of `calls`, each bucket half full first, as in a busy run. */
    const perDecision = async (calls: () => Promise<void>): Promise<number> => {
      // Near Redis' clock, so that on it (--lone) the buckets are half full too. A bucket near full expires within a
      // fraction of a second (its TTL is the time until it is full again), sooner than valgrind comes back to it: the
      // script would read missing keys and never decode a value.
      now = Date.now();
      const value = limits
        .map((limit) => {
          const half = Math.floor(limit.capacity / 2) * limit.unitsPerToken;
          return `${limit.name} ${half} ${now} ${limit.capacity}/${limit.unitsPerMs}/${limit.unitsPerToken}`;
        })
        .join(', ');
      for (const org of orgs) await client.set(org, value, 'PX', 600_000);
      for (let i = 0; i < WARM_CALLS; i++) await calls();
      await callgrindControl('-z', pid);
      for (let i = 0; i < measuredCalls; i++) await calls();
      await callgrindControl('-d', pid);
      return (await lastDumpTotal(dir)) / (measuredCalls * perCall);
    };
    const shape = `${limits.length} limit${limits.length === 1 ? '' : 's'}`;
    const figures: Record<string, number> = { [which]: await perDecision(call) };
    // The floor beside the store's script, on the same server and buckets: one key, one limit, on Redis' clock.
    if (lone && which === 'consume' && limits.length === 1) {
      const floorSha = (await client.script('LOAD', FLOOR.text)) as string;
      const args = floorArgs(limits[0] as Limit, 1);
      figures.floor = await perDecision(async () => {
        await client.evalsha(floorSha, 1, orgs[next] as string, ...args);
        next = (next + 1) % BUCKETS;
      });
    }
    if (values.json === true) console.log(JSON.stringify(figures));
    else
      for (const [name, figure] of Object.entries(figures))
        console.log(`${name}, ${shape}: ${Math.round(figure)} instructions per decision`);
    if (figures.floor !== undefined && values.json !== true)
      console.log(`${which} / floor: ${((figures[which] as number) / figures.floor).toFixed(3)}x`);
  } finally {
    client.disconnect();
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
