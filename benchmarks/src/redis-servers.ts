import { Cluster, Redis } from 'ioredis';
import { onCleanup } from './cleanup.js';
import { progress } from './progress.js';

/** A Redis deployment the suites can run against: standalone or a cluster, started here or given by the user. */
export interface RedisTarget {
  kind: 'standalone' | 'cluster';
  /** 'started by the harness on 127.0.0.1:<port>' or 'REDIS_URL'. */
  source: string;
  /** A new client connection, for one contender alone (so no contender shares a socket or a defined command). */
  connect(): Promise<Redis | Cluster>;
  /** One admin connection per master, for INFO, TIME, SCAN and MEMORY USAGE. */
  masters: Redis[];
  /** Whether the harness owns the server(s) and may FLUSHALL them. */
  owned: boolean;
  stop(): Promise<void>;
}

type RedisTesting = typeof import('@ratecard/redis/testing');

/** Loaded when first needed, so the memory suites run before @ratecard/redis is built. */
export async function loadTesting(): Promise<RedisTesting> {
  return import('@ratecard/redis/testing');
}

function whenReady(client: Redis | Cluster, what: string): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: not ready within 15 s`)), 15_000);
    client.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Keeps a loopback target loopback: the harness never sends load anywhere else unless the user points it there. */
function loopbackOnly(host: string): string {
  if (host !== '127.0.0.1' && host !== 'localhost' && host !== '::1') {
    throw new Error(`the harness only loads loopback addresses; the test helper gave ${host}`);
  }
  return host;
}

async function admin(url: string): Promise<Redis> {
  const client = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: true });
  await whenReady(client, url);
  return client;
}

async function closeAll(clients: readonly (Redis | Cluster)[]): Promise<void> {
  await Promise.all(clients.map((client) => client.quit().catch(() => client.disconnect())));
}

/** The standalone target: REDIS_URL when set, else a redis-server started here. */
export async function standaloneTarget(): Promise<RedisTarget> {
  const given = process.env.REDIS_URL;
  if (given !== undefined && given !== '') {
    const master = await admin(given);
    const stop = onCleanup('REDIS_URL admin connection', () => closeAll([master]));
    return {
      kind: 'standalone',
      source: 'REDIS_URL',
      owned: false,
      masters: [master],
      connect: async () => {
        const client = new Redis(given);
        await whenReady(client, 'REDIS_URL');
        return client;
      },
      stop,
    };
  }
  const testing = await loadTesting();
  const server = await testing.startRedis();
  const stopServer = onCleanup(`redis-server :${server.port}`, () => server.stop());
  const url = `redis://${loopbackOnly(server.host)}:${server.port}`;
  const master = await admin(url);
  const stopAdmin = onCleanup('standalone admin connection', () => closeAll([master]));
  progress(`redis: started redis-server on ${url}`);
  return {
    kind: 'standalone',
    source: `redis-server started by the harness on ${url}`,
    owned: true,
    masters: [master],
    connect: async () => {
      const client = new Redis(url);
      await whenReady(client, url);
      return client;
    },
    stop: async () => {
      await stopAdmin();
      await stopServer();
    },
  };
}

function parseNode(node: string): { host: string; port: number } {
  const url = new URL(node.includes('://') ? node : `redis://${node}`);
  return { host: url.hostname, port: Number(url.port || 6379) };
}

/**
 * The 3-master cluster: REDIS_CLUSTER_NODES (comma-separated host:port) when set, else one started here. With
 * REDIS_URL set and no REDIS_CLUSTER_NODES the cluster suite is skipped rather than started beside the user's Redis.
 */
export async function clusterTarget(): Promise<RedisTarget | string> {
  const givenNodes = process.env.REDIS_CLUSTER_NODES;
  let nodes: { host: string; port: number }[];
  let owned = false;
  let stopServers: () => Promise<void> = async () => {};
  let source: string;
  if (givenNodes !== undefined && givenNodes !== '') {
    nodes = givenNodes.split(',').map((node) => parseNode(node.trim()));
    source = 'REDIS_CLUSTER_NODES';
  } else if (process.env.REDIS_URL !== undefined && process.env.REDIS_URL !== '') {
    return 'REDIS_URL is set and REDIS_CLUSTER_NODES is not: the harness does not start a cluster beside your Redis';
  } else {
    const testing = await loadTesting();
    const cluster = await testing.startRedisCluster({ masters: 3 });
    nodes = cluster.nodes.map((node) => ({ host: node.host, port: node.port }));
    for (const node of nodes) loopbackOnly(node.host);
    stopServers = onCleanup('redis cluster', () => cluster.stop());
    owned = true;
    source = `3-master cluster started by the harness on ${nodes.map((node) => `${node.host}:${node.port}`).join(', ')}`;
    progress(`redis: started ${source.replace(' started by the harness', '')}`);
  }
  const probe = new Cluster(nodes);
  const stopProbe = onCleanup('cluster probe connection', () => closeAll([probe]));
  await whenReady(probe, 'cluster');
  const masterNodes = probe.nodes('master');
  const masters = await Promise.all(
    masterNodes.map((node) => admin(`redis://${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`)),
  );
  await stopProbe();
  const stopAdmins = onCleanup('cluster admin connections', () => closeAll(masters));
  return {
    kind: 'cluster',
    source,
    owned,
    masters,
    connect: async () => {
      const client = new Cluster(nodes);
      await whenReady(client, 'cluster');
      return client;
    },
    stop: async () => {
      await stopAdmins();
      await stopServers();
    },
  };
}

/** INFO field of one section, as a number. */
async function infoNumber(client: Redis, section: string, field: string): Promise<number> {
  const text = await client.info(section);
  const line = text.split('\r\n').find((entry) => entry.startsWith(`${field}:`));
  if (line === undefined) throw new Error(`INFO ${section} has no ${field}`);
  return Number(line.slice(field.length + 1));
}

export async function redisVersion(client: Redis): Promise<string> {
  const text = await client.info('server');
  const line = text.split('\r\n').find((entry) => entry.startsWith('redis_version:'));
  return line?.slice('redis_version:'.length) ?? 'unknown';
}

/** Seconds of CPU (user + sys, every thread) the server process has used, summed over the masters. */
export async function cpuSeconds(masters: readonly Redis[]): Promise<number> {
  const each = await Promise.all(
    masters.map(
      async (master) =>
        (await infoNumber(master, 'cpu', 'used_cpu_user')) + (await infoNumber(master, 'cpu', 'used_cpu_sys')),
    ),
  );
  return each.reduce((sum, value) => sum + value, 0);
}

/** INFO memory used_memory and DBSIZE, summed over the masters. */
export async function memoryAndKeys(masters: readonly Redis[]): Promise<{ usedMemory: number; keys: number }> {
  let usedMemory = 0;
  let keys = 0;
  for (const master of masters) {
    usedMemory += await infoNumber(master, 'memory', 'used_memory');
    keys += await master.dbsize();
  }
  return { usedMemory, keys };
}

/** Redis TIME of the first master, in seconds. */
export async function redisTime(masters: readonly Redis[]): Promise<number> {
  const [seconds, micros] = await (masters[0] as Redis).time();
  return Number(seconds) + Number(micros) / 1e6;
}

/** Average MEMORY USAGE over up to `sample` keys matching `pattern`, gathered from every master. */
export async function memoryPerKey(
  masters: readonly Redis[],
  pattern: string,
  sample: number,
): Promise<{ bytes: number | null; keys: number }> {
  const perMaster = Math.ceil(sample / masters.length);
  let total = 0;
  let keys = 0;
  for (const master of masters) {
    let cursor = '0';
    let taken = 0;
    // Bounded: stops at the sample size or after 10 000 SCAN pages, whichever comes first.
    for (let page = 0; page < 10_000 && taken < perMaster; page++) {
      const [next, found] = await master.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      for (const key of found.slice(0, perMaster - taken)) {
        const bytes = (await master.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number | null;
        if (bytes === null) continue; // expired between SCAN and MEMORY USAGE
        total += bytes;
        keys++;
        taken++;
      }
      cursor = next;
      if (cursor === '0') break;
    }
  }
  return { bytes: keys === 0 ? null : total / keys, keys };
}

/** Removes what a run wrote: FLUSHALL on servers the harness owns, else SCAN + UNLINK of the run's own prefix. */
export async function forget(target: RedisTarget, pattern: string): Promise<void> {
  if (target.owned) {
    await Promise.all(target.masters.map((master) => master.flushall()));
    return;
  }
  for (const master of target.masters) {
    let cursor = '0';
    for (let page = 0; page < 100_000; page++) {
      const [next, found] = await master.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      // One key per UNLINK: a cluster refuses multi-key commands across slots.
      if (found.length > 0) await found.reduce((batch, key) => batch.unlink(key), master.pipeline()).exec();
      cursor = next;
      if (cursor === '0') break;
    }
  }
}
