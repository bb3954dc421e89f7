// What a Redis outage costs a decision: under steady traffic, the Redis a limiter decides on (in a cluster, the
// master of the traffic's slot) is killed with SIGKILL, kept down, and started again on the same port (or, for
// ioredis-oom, given a maxmemory below what it holds, then the bound lifted). Per client and topology: how long
// decisions took while Redis was down, how long after Redis answered again the first decision came from Redis, and
// how many calls reached Redis after their caller had been answered (calls in flight when Redis was killed, sent
// again by the client once it reconnected; the script refuses them, so they charge nothing), with the limiter's log
// lines. The -never scenarios start the limiter on a client that has not connected since it was made (nothing
// listening on its port, or a server requiring a password other than the one it gives), with the clients' own
// reconnect delays as a new user has them, and make Redis reachable after the same time.
// docs/reliability.md ("What an outage costs") says how to read it.
//
//   pnpm --filter @ratecard/redis outage [--down-ms 2000] [--only <name>,...]
import { createServer } from 'node:net';
import { parseArgs } from 'node:util';
import { createLimiter, type Decision, type LimitRequest } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { type RedisClient, type RedisStore, redisStore } from '@ratecard/redis';
import { type RedisServer, redisCommand, startRedis, startRedisCluster } from '@ratecard/redis/testing';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';

/**
 * Reconnect delays that do not grow past half a second (the clients' own grow to 2 s and 5 s), as docs/redis.md
 * recommends: a client reconnects within that of Redis answering again.
 */
const capped = (attempt: number): number => Math.min(attempt * 50, 500);

interface Connected {
  client: RedisClient;
  close(): Promise<void>;
}

interface Scenario {
  name: string;
  cluster: boolean;
  /** 'oom' instead of a kill: Redis holding 4 MB given a maxmemory of 2 MB (noeviction), then the bound lifted. */
  oom?: boolean;
  connect(servers: readonly RedisServer[]): Promise<Connected>;
}

function ioredisReady(client: Redis | Cluster): Promise<Connected> {
  client.on('error', () => {});
  return new Promise((resolve) =>
    client.once('ready', () =>
      resolve({ client: client as unknown as RedisClient, close: async () => client.disconnect() }),
    ),
  );
}

async function nodeRedisReady(client: ReturnType<typeof createClient> | ReturnType<typeof createCluster>) {
  // node-redis crashes the process on an unheard 'error' event (docs/redis.md).
  client.on('error', () => {});
  await client.connect();
  return { client: client as unknown as RedisClient, close: async () => client.destroy() };
}

const SCENARIOS: Scenario[] = [
  {
    name: 'ioredis',
    cluster: false,
    connect: ([server]) => ioredisReady(new Redis({ port: server?.port, host: server?.host, retryStrategy: capped })),
  },
  {
    name: 'ioredis-defaults',
    cluster: false,
    connect: ([server]) => ioredisReady(new Redis({ port: server?.port, host: server?.host })),
  },
  {
    name: 'node-redis',
    cluster: false,
    connect: ([server]) => nodeRedisReady(createClient({ url: server?.url, socket: { reconnectStrategy: capped } })),
  },
  {
    name: 'ioredis-oom',
    cluster: false,
    oom: true,
    connect: ([server]) => ioredisReady(new Redis({ port: server?.port, host: server?.host, retryStrategy: capped })),
  },
  {
    name: 'ioredis-cluster',
    cluster: true,
    connect: (servers) => ioredisReady(new Cluster(servers.map((s) => ({ host: s.host, port: s.port })))),
  },
  {
    name: 'node-redis-cluster',
    cluster: true,
    connect: (servers) =>
      nodeRedisReady(
        createCluster({
          rootNodes: servers.map((s) => ({ url: s.url })),
          defaults: { socket: { reconnectStrategy: capped } },
        }),
      ),
  },
];

/** A Redis the client cannot use at first: nothing listening on its port, or a password other than the client's. */
interface NeverScenario {
  name: string;
  fault: 'refused' | 'password';
  /** A client of the server on `port`, giving `password` if any, connecting from now (not awaited). */
  connect(port: number, password: string | undefined): Connected;
}

const NEVER_SCENARIOS: NeverScenario[] = [
  {
    name: 'ioredis-never',
    fault: 'refused',
    connect: (port, password) => ioredisConnecting(new Redis({ host: '127.0.0.1', port, password })),
  },
  {
    name: 'ioredis-never-password',
    fault: 'password',
    connect: (port, password) => ioredisConnecting(new Redis({ host: '127.0.0.1', port, password })),
  },
  {
    name: 'node-redis-never',
    fault: 'refused',
    connect: (port, password) => nodeRedisConnecting(createClient({ password, socket: { host: '127.0.0.1', port } })),
  },
];

function ioredisConnecting(client: Redis): Connected {
  client.on('error', () => {});
  return { client: client as unknown as RedisClient, close: async () => client.disconnect() };
}

function nodeRedisConnecting(client: ReturnType<typeof createClient>): Connected {
  client.on('error', () => {});
  // Settles once the client is ready, or when it is destroyed.
  client.connect().catch(() => {});
  return { client: client as unknown as RedisClient, close: async () => client.destroy() };
}

const SERVER_PASSWORD = 'the-servers';
const CLIENT_PASSWORD = 'the-clients';

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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Call {
  start: number;
  end: number;
  source: Decision['source'];
}

/** 8 loops of consume calls, each a millisecond after the one before settled, until stopped. */
function traffic(consume: () => Promise<Decision>): { calls: Call[]; stop(): Promise<void> } {
  const calls: Call[] = [];
  let running = true;
  const loop = async (): Promise<void> => {
    while (running) {
      const start = performance.now();
      const decision = await consume();
      calls.push({ start, end: performance.now(), source: decision.source });
      await sleep(1);
    }
  };
  const loops = Promise.all(Array.from({ length: 8 }, loop));
  return {
    calls,
    stop: async () => {
      running = false;
      await loops;
    },
  };
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Puts 4 MB in a server, then bounds its memory well below that: every write is refused for want of memory. */
async function fill(server: RedisServer): Promise<void> {
  const client = new Redis({ port: server.port, host: server.host });
  try {
    for (let i = 0; i < 4; i++) await client.set(`filler:${i}`, 'x'.repeat(1_000_000));
    await client.config('SET', 'maxmemory', '2mb');
  } finally {
    client.disconnect();
  }
}

/** An organization whose slot the first master serves (redis-cli gives it slots 0..5460). */
async function organizationOn(master: RedisServer): Promise<string> {
  for (let i = 0; ; i++) {
    if (Number(await redisCommand(master, ['CLUSTER', 'KEYSLOT', `outage-${i}`])) <= 5460) return `outage-${i}`;
  }
}

async function run(scenario: Scenario, downMs: number): Promise<string> {
  const cluster = scenario.cluster ? await startRedisCluster({ masters: 3 }) : undefined;
  const servers = cluster?.masters ?? [
    await startRedis({ args: scenario.oom ? ['--maxmemory-policy', 'noeviction'] : [] }),
  ];
  const victim = servers[0] as RedisServer;
  const { client, close } = await scenario.connect(servers);
  const lines: { at: number; line: string }[] = [];
  const store: RedisStore = redisStore({ client });
  const limiter = createLimiter({
    store,
    fallback: memoryStore(),
    log: (line) => lines.push({ at: performance.now(), line }),
  });
  // A limit no traffic here exhausts, so that every decision is a call to Redis (no deny cache).
  const request: LimitRequest = {
    organization: scenario.cluster ? await organizationOn(victim) : 'outage',
    endpoint: 'POST /browsers',
    plan: 'enterprise',
    override: 1_000_000_000,
  };
  const load = traffic(() => limiter.consume(request));
  try {
    await sleep(1_000);
    let faultAt = performance.now();
    if (scenario.oom) {
      await fill(victim);
      faultAt = performance.now();
      await sleep(downMs);
      await redisCommand(victim, ['CONFIG', 'SET', 'maxmemory', '0']);
    } else {
      await victim.kill();
      await sleep(downMs);
      await victim.restart();
    }
    // restart() resolves once the server answers PING; a cluster node runs scripts once it sees the cluster ok again.
    while (scenario.cluster && !(await redisCommand(victim, ['CLUSTER', 'INFO'])).includes('cluster_state:ok')) {
      await sleep(5);
    }
    const backAt = performance.now();
    await sleep(3_000);
    await load.stop();
    const latency = (calls: readonly Call[]) => {
      const took = calls.map((call) => call.end - call.start).sort((a, b) => a - b);
      return `p50 ${percentile(took, 50).toFixed(2)} ms, p99 ${percentile(took, 99).toFixed(2)} ms, max ${percentile(took, 100).toFixed(1)} ms`;
    };
    const before = load.calls.filter((call) => call.start < faultAt);
    const down = load.calls.filter((call) => call.start >= faultAt && call.start < backAt);
    const byPolicy = down.filter((call) => call.source !== 'store').length;
    const firstFromRedis = load.calls
      .filter((call) => call.end >= backAt && call.source === 'store')
      .reduce((first, call) => Math.min(first, call.end), Number.POSITIVE_INFINITY);
    const stats = store.stats();
    return [
      `${scenario.name}:`,
      `  before the fault, ${before.length} decisions: ${latency(before)}`,
      `  while Redis was down, ${down.length} decisions (${byPolicy} by the policy): ${latency(down)}`,
      `  first decision from Redis ${(firstFromRedis - backAt).toFixed(0)} ms after it answered again`,
      `  calls that reached Redis after their caller was answered (stats().late): ${stats.late}`,
      `  store counters: unavailable ${stats.unavailable}, expired ${stats.expired}, rerouted ${stats.rerouted}`,
      ...lines.map(({ at, line }) => `  log at ${((at - faultAt) / 1000).toFixed(3)} s from the fault: ${line}`),
    ].join('\n');
  } finally {
    await load.stop();
    await limiter.close();
    await close();
    await (cluster?.stop() ?? victim.stop());
  }
}

/**
 * The limiter starts on a client that cannot connect, under the same traffic, for `downMs`; then Redis is started on
 * the client's port, or given the client's password.
 */
async function runNever(scenario: NeverScenario, downMs: number): Promise<string> {
  let server: RedisServer | undefined;
  let port: number;
  if (scenario.fault === 'password') {
    server = await startRedis();
    // Set after the start: startRedis waits for an unauthenticated PING.
    await redisCommand(server, ['CONFIG', 'SET', 'requirepass', SERVER_PASSWORD]);
    port = server.port;
  } else {
    port = await freePort();
  }
  const { client, close } = scenario.connect(port, scenario.fault === 'password' ? CLIENT_PASSWORD : undefined);
  const lines: { at: number; line: string }[] = [];
  const store: RedisStore = redisStore({ client });
  const limiter = createLimiter({
    store,
    fallback: memoryStore(),
    log: (line) => lines.push({ at: performance.now(), line }),
  });
  const request: LimitRequest = {
    organization: 'never',
    endpoint: 'POST /browsers',
    plan: 'enterprise',
    override: 1_000_000_000,
  };
  const startAt = performance.now();
  const load = traffic(() => limiter.consume(request));
  try {
    await sleep(downMs);
    if (server === undefined) {
      server = await startRedis({ port });
    } else {
      const admin = new Redis({ host: server.host, port, password: SERVER_PASSWORD });
      try {
        await admin.config('SET', 'requirepass', CLIENT_PASSWORD);
      } finally {
        admin.disconnect();
      }
    }
    const backAt = performance.now();
    await sleep(3_000);
    await load.stop();
    const latency = (calls: readonly Call[]) => {
      const took = calls.map((call) => call.end - call.start).sort((a, b) => a - b);
      return `p50 ${percentile(took, 50).toFixed(2)} ms, p99 ${percentile(took, 99).toFixed(2)} ms, max ${percentile(took, 100).toFixed(1)} ms`;
    };
    const unreached = load.calls.filter((call) => call.start < backAt);
    const byPolicy = unreached.filter((call) => call.source !== 'store').length;
    const firstFromRedis = load.calls
      .filter((call) => call.source === 'store')
      .reduce((first, call) => Math.min(first, call.end), Number.POSITIVE_INFINITY);
    const stats = store.stats();
    return [
      `${scenario.name}:`,
      `  before Redis could be reached, ${unreached.length} decisions (${byPolicy} by the policy): ${latency(unreached)}`,
      `  first decision from Redis ${(firstFromRedis - backAt).toFixed(0)} ms after it could be reached`,
      `  store counters: unavailable ${stats.unavailable}, expired ${stats.expired}, sent ${stats.sent}`,
      ...lines.map(({ at, line }) => `  log at ${((at - startAt) / 1000).toFixed(3)} s from the start: ${line}`),
    ].join('\n');
  } finally {
    await load.stop();
    await limiter.close();
    await close();
    await server?.stop();
  }
}

const { values } = parseArgs({
  options: { 'down-ms': { type: 'string', default: '2000' }, only: { type: 'string' } },
});
const downMs = Number(values['down-ms']);
const only = values.only?.split(',');
console.log(
  `Redis killed with SIGKILL (or, -oom, held to a maxmemory below what it holds; -never, not reachable since the client was made) under 8 loops of consume calls 1 ms apart, down ${downMs} ms, the default storeTimeoutMs (500 ms)`,
);
for (const scenario of SCENARIOS) {
  if (only !== undefined && !only.includes(scenario.name)) continue;
  console.log(await run(scenario, downMs));
}
for (const scenario of NEVER_SCENARIOS) {
  if (only !== undefined && !only.includes(scenario.name)) continue;
  console.log(await runNever(scenario, downMs));
}
