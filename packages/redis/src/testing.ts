/**
 * Real Redis for tests and benchmarks: spawns `redis-server` from PATH on free loopback ports, in temporary
 * directories, without persistence, and makes sure nothing outlives the process. `redisForTests()` and
 * `redisClusterForTests()` honour a server given in the environment and decide what a suite does without one: fail
 * under CI=true, elsewhere skip with a loud warning.
 *
 * @module @ratecard/redis/testing
 */
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

const HOST = '127.0.0.1';

/** Where a Redis node listens. */
export interface RedisAddress {
  /** The host name or address; `127.0.0.1` for a server started here. */
  host: string;
  /** The TCP port. */
  port: number;
}

/** A redis-server this process started. */
export interface RedisServer extends RedisAddress {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** The running process's id; undefined while the server is down. */
  readonly pid: number | undefined;
  /** Kills the server at once (SIGKILL), as a crash would. */
  kill(): Promise<void>;
  /** Starts a killed server again on the same port, empty (no persistence), and waits until it answers. */
  restart(): Promise<void>;
  /** Stops the server for good (SIGTERM, then SIGKILL) and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
}

/** Options of `startRedis`; both have defaults. */
export interface StartRedisOptions {
  /** Port to listen on; default a free one. */
  port?: number;
  /** Extra redis-server arguments, e.g. `['--maxmemory', '10mb']`. */
  args?: readonly string[];
}

/** A Redis Cluster this process started, every node a `redis-server` of its own. */
export interface RedisCluster {
  /** Every node, masters first: give them to `new Cluster(nodes)`. */
  readonly nodes: RedisAddress[];
  /** The master nodes' servers. */
  readonly masters: RedisServer[];
  /** Every server, masters first. */
  readonly servers: RedisServer[];
  /** Stops every node and removes their directories. */
  stop(): Promise<void>;
}

/** Options of `startRedisCluster`; both have defaults. */
export interface StartRedisClusterOptions {
  /** Master nodes, at least 3 (redis-cli's minimum); default 3. */
  masters?: number;
  /** Replicas per master; default 0. */
  replicas?: 0 | 1;
}

/** What a Redis suite runs against: a server started here, or one named by the environment. */
export interface RedisTarget extends RedisAddress {
  /** The server's URL: REDIS_URL as given, or `redis://127.0.0.1:<port>`. */
  url: string;
  /** The server was given by REDIS_URL: it is shared, so a test must not kill it or flush it. */
  external: boolean;
  /** Stops a server started here; does nothing to an external one. */
  stop(): Promise<void>;
}

/** What a Redis Cluster suite runs against: a cluster started here, or one named by the environment. */
export interface RedisClusterTarget {
  /** Every node: give them to `new Cluster(nodes)`. */
  nodes: RedisAddress[];
  /** The cluster was given by REDIS_CLUSTER_NODES. */
  external: boolean;
  /** Stops a cluster started here; does nothing to an external one. */
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------------------
// Processes: every child is tracked and SIGKILLed when this process exits or is told to stop.

const live = new Set<ChildProcess>();
let exitHooked = false;

function killAll(): void {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

function onSignal(signal: NodeJS.Signals): void {
  killAll();
  // Registered with once(): if nobody else listens, let the signal do what it would have done without us.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  // A forgotten server must not keep the process alive; the exit hook still kills it.
  child.unref();
  if (!exitHooked) {
    exitHooked = true;
    process.once('exit', killAll);
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, onSignal);
  }
}

function exited(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Sends one command to a server over a fresh ioredis connection and returns its reply as text. */
export async function redisCommand(address: RedisAddress, args: readonly string[], timeoutMs = 2_000): Promise<string> {
  const [command = 'PING', ...rest] = args;
  const client = new Redis({
    host: address.host,
    port: address.port,
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // Failures reach the caller through the rejected promise; the event would only be printed.
  client.on('error', () => {});
  try {
    await client.connect();
    return String(await client.call(command, ...rest));
  } finally {
    client.disconnect();
  }
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // Not yet.
    }
    if (Date.now() > deadline) throw new Error(`ratecard: timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Ports and servers.

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** A free loopback port; with `busOffset`, `port + busOffset` is free too (a cluster node's bus port). */
async function freePort(busOffset?: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, HOST, () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
      });
    });
    if (busOffset === undefined) return port;
    if (port + busOffset <= 65_535 && (await portIsFree(port + busOffset))) return port;
  }
  throw new Error('ratecard: found no free port pair for a Redis Cluster node');
}

class SpawnedRedis implements RedisServer {
  readonly host = HOST;
  private child: ChildProcess | undefined;
  private stopped = false;

  constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly args: readonly string[],
  ) {}

  get url(): string {
    return `redis://${this.host}:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        HOST,
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.dir,
        '--logfile',
        join(this.dir, 'redis.log'),
        '--daemonize',
        'no',
        ...this.args,
      ],
      { stdio: 'ignore' },
    );
    this.child = child;
    track(child);
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    try {
      await Promise.race([
        waitFor(`redis-server on port ${this.port}`, 10_000, async () => {
          if (child.exitCode !== null) throw new Error('exited');
          return (await redisCommand(this, ['PING'], 500)) === 'PONG';
        }),
        spawnError.then((error) => Promise.reject(error)),
      ]);
    } catch (error) {
      const log = await readFile(join(this.dir, 'redis.log'), 'utf8').catch(() => '');
      child.kill('SIGKILL');
      const detail = error instanceof Error ? error.message : String(error);
      throw new Error(`ratecard: redis-server did not start on port ${this.port}: ${detail}\n${log.slice(-2_000)}`);
    }
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    this.child = undefined;
    child.kill('SIGKILL');
    await exited(child, 5_000);
  }

  async restart(): Promise<void> {
    if (this.stopped) throw new Error('ratecard: this Redis server was stopped for good');
    await this.kill();
    await this.start();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const child = this.child;
    this.child = undefined;
    if (child !== undefined) {
      // A server paused with SIGSTOP takes no SIGTERM until it runs again.
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      if (!(await exited(child, 3_000))) {
        child.kill('SIGKILL');
        await exited(child, 3_000);
      }
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Starts a standalone redis-server on a free port (or `options.port`) and waits until it answers PING. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  const port = options.port ?? (await freePort());
  const dir = await mkdtemp(join(tmpdir(), 'ratecard-redis-'));
  const server = new SpawnedRedis(port, dir, options.args ?? []);
  try {
    await server.start();
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return server;
}

function run(command: string, args: readonly string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error) reject(new Error(`ratecard: ${command} ${args.join(' ')} failed: ${error.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/**
 * Starts a Redis Cluster: `masters × (1 + replicas)` nodes with `--cluster-enabled yes`, joined by
 * `redis-cli --cluster create`, and waits until every node's CLUSTER INFO says `cluster_state:ok`.
 */
export async function startRedisCluster(options: StartRedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 0;
  if (!Number.isSafeInteger(masters) || masters < 3) {
    throw new Error(`ratecard: a Redis Cluster needs at least 3 masters, got ${masters}`);
  }
  const servers: RedisServer[] = [];
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      servers.push(
        await startRedis({
          port: await freePort(10_000),
          args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'],
        }),
      );
    }
    const addresses = servers.map((server) => `${server.host}:${server.port}`);
    await run(
      'redis-cli',
      ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'],
      60_000,
    );
    await waitFor('the cluster to be ok on every node', 30_000, async () => {
      for (const server of servers) {
        const info = await redisCommand(server, ['CLUSTER', 'INFO']);
        if (!info.includes('cluster_state:ok') || !info.includes(`cluster_known_nodes:${servers.length}`)) {
          return false;
        }
      }
      // The state is ok as soon as the masters cover every slot; replicas attach (and sync) a moment later, and
      // every node must have heard of it.
      for (const server of servers.slice(masters)) {
        const replication = await redisCommand(server, ['INFO', 'replication']);
        if (!replication.includes('role:slave') || !replication.includes('master_link_status:up')) return false;
      }
      for (const server of servers) {
        const nodes = await redisCommand(server, ['CLUSTER', 'NODES']);
        if ((nodes.match(/ (?:myself,)?slave /g) ?? []).length !== masters * replicas) return false;
      }
      return true;
    });
  } catch (error) {
    await Promise.all(servers.map((server) => server.stop()));
    throw error;
  }
  // redis-cli makes the first `masters` addresses masters.
  return {
    nodes: servers.map((server) => ({ host: server.host, port: server.port })),
    masters: servers.slice(0, masters),
    servers,
    stop: async () => {
      await Promise.all(servers.map((server) => server.stop()));
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Targets for test suites.

function onPath(command: string): boolean {
  const result = spawnSync(command, ['--version'], { stdio: 'ignore' });
  return result.error === undefined && result.status === 0;
}

/**
 * Whether redis-server and redis-cli can be started here. When they cannot: under CI=true this throws (a Redis suite
 * must not pass by skipping), elsewhere it warns loudly and returns false so the suite can skip.
 */
export function canStartRedis(suite: string): boolean {
  if (onPath('redis-server') && onPath('redis-cli')) return true;
  const message = `${suite}: redis-server and redis-cli are not on PATH. Install Redis (apt-get install redis-server) or set REDIS_URL.`;
  if (process.env.CI === 'true') throw new Error(`ratecard: CI=true and no Redis to test against. ${message}`);
  console.warn(`\n${'!'.repeat(100)}\n!! SKIPPING ${message}\n${'!'.repeat(100)}\n`);
  return false;
}

/** The server at REDIS_URL when set, else one started here; undefined (after a loud warning) when neither can be. */
export async function redisForTests(suite = 'Redis tests'): Promise<RedisTarget | undefined> {
  const given = process.env.REDIS_URL;
  if (given !== undefined && given !== '') {
    // Not `new URL(given)` bare: its ERR_INVALID_URL carries the whole URL, password included, as `input`.
    if (!URL.canParse(given)) {
      throw new Error(`${suite}: REDIS_URL is not a valid URL (write / ? # @ in a password as %2F %3F %23 %40)`);
    }
    const url = new URL(given);
    return {
      url: given,
      host: url.hostname,
      port: Number(url.port || 6379),
      external: true,
      stop: async () => {},
    };
  }
  if (!canStartRedis(suite)) return undefined;
  const server = await startRedis();
  return { url: server.url, host: server.host, port: server.port, external: false, stop: () => server.stop() };
}

/**
 * The cluster named by REDIS_CLUSTER_NODES (`host:port,host:port,…`) when set, else a 3-master cluster started here;
 * undefined (after a loud warning) when neither can be.
 */
export async function redisClusterForTests(
  suite = 'Redis Cluster tests',
  options: StartRedisClusterOptions = {},
): Promise<RedisClusterTarget | undefined> {
  const given = process.env.REDIS_CLUSTER_NODES;
  if (given !== undefined && given !== '') {
    const nodes = given.split(',').map((entry) => {
      const [host = HOST, port = '6379'] = entry.trim().split(':');
      return { host, port: Number(port) };
    });
    return { nodes, external: true, stop: async () => {} };
  }
  if (!canStartRedis(suite)) return undefined;
  const cluster = await startRedisCluster(options);
  return { nodes: cluster.nodes, external: false, stop: () => cluster.stop() };
}
