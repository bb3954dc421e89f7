import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { inject } from 'vitest';

/** The shared standalone server, or null when Redis suites skip (global-setup has warned). */
export const REDIS_URL: string | null = inject('redisUrl');
/** The shared cluster's nodes, or null when cluster suites skip. */
export const CLUSTER_NODES: { host: string; port: number }[] | null = inject('clusterNodes');
export const REDIS_EXTERNAL: boolean = inject('redisExternal');

/** Resolves once the client can take commands. */
export function ready(client: Redis | Cluster): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('end', () => reject(new Error('the Redis client ended before it was ready')));
  });
}

export async function connectStandalone(url: string | null = REDIS_URL, options: RedisOptions = {}): Promise<Redis> {
  if (url === null) throw new Error('no Redis for this suite');
  const client = new Redis(url, options);
  await ready(client);
  return client;
}

export async function connectCluster(): Promise<Cluster> {
  if (CLUSTER_NODES === null) throw new Error('no Redis Cluster for this suite');
  const client = new Cluster(CLUSTER_NODES);
  await ready(client);
  return client;
}

let names = 0;

/** An organization id no other test (nor an earlier run against a shared server) uses. */
export function uniqueOrg(label: string): string {
  return `${label}-${process.pid}-${Date.now().toString(36)}-${names++}`;
}

/** Every key under `pattern` on one node, by SCAN. */
export async function scanKeys(client: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/** Waits until the next tick has run, i.e. until the store's auto-batcher has flushed. */
export function nextTick(): Promise<void> {
  return new Promise((resolve) => process.nextTick(resolve));
}
