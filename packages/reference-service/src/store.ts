import { type MemoryStore, memoryStore } from '@ratecard/memory';
import type { RedisStore } from '@ratecard/redis';
import { type Config, ConfigError, redactUrl } from './config.js';

/**
 * The store the limiter uses (typed by kind, so that its metrics know what to observe), what to call it in the start
 * banner, and how to let go of its connections.
 */
export type Backend = { description: string; close(): Promise<void> } & (
  | { kind: 'memory'; store: MemoryStore }
  | { kind: 'redis'; store: RedisStore }
);

/** How long start waits for Redis before giving up with a clear error. */
const CONNECT_TIMEOUT_MS = 10_000;

interface Connectable {
  readonly status: string;
  once(event: 'ready', listener: () => void): unknown;
  on(event: 'ready', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  off(event: 'ready', listener: () => void): unknown;
  off(event: 'error', listener: (error: Error) => void): unknown;
}

function whenReady(client: Connectable, target: string): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    let lastError: Error | undefined;
    const onError = (error: Error): void => {
      lastError = error;
    };
    const onReady = (): void => {
      clearTimeout(timer);
      client.off('error', onError);
      resolve();
    };
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      client.off('error', onError);
      const reason = lastError === undefined ? 'no answer' : lastError.message;
      reject(
        new ConfigError(
          `reference-service: cannot reach Redis at ${target} within ${CONNECT_TIMEOUT_MS / 1000} s (${reason})`,
        ),
      );
    }, CONNECT_TIMEOUT_MS);
    client.once('ready', onReady);
    client.on('error', onError);
  });
}

/**
 * One line when Redis fails and one when it is back, instead of ioredis' line per reconnect attempt (it prints every
 * unhandled error event).
 */
function reportOutages(client: Connectable, target: string): void {
  let down = false;
  client.on('error', (error) => {
    if (down) return;
    down = true;
    console.error(
      `reference-service: Redis at ${target} failed (${error.message}); limits come from the per-process fallback until it is back`,
    );
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    console.error(`reference-service: Redis at ${target} is back`);
  });
}

/** QUIT lets pending replies arrive; with Redis unreachable it would wait forever, so it gets 2 seconds. */
async function quit(client: { quit(): Promise<unknown>; disconnect(): void }): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, 2_000);
  });
  await Promise.race([client.quit().catch(() => {}), late]);
  clearTimeout(timer);
  client.disconnect();
}

/** A URL's username or password as ioredis wants it: decoded, or undefined when absent. */
function part(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : decodeURIComponent(value);
}

/**
 * The memory store, or with `REDIS_URL` / `REDIS_CLUSTER_NODES` the Redis store over an ioredis client (a Cluster
 * client for the nodes given, with the credentials and TLS of `REDIS_URL` when both are set). Redis modules load only
 * in Redis mode, so the memory mode starts without touching them.
 */
export async function openStore(config: Config): Promise<Backend> {
  if (config.redisUrl === undefined && config.clusterNodes === undefined) {
    return {
      kind: 'memory',
      store: memoryStore(),
      description: 'memory (limits hold per process)',
      close: async () => {},
    };
  }
  const [{ Redis, Cluster }, { redisStore }] = await Promise.all([import('ioredis'), import('@ratecard/redis')]);
  if (config.clusterNodes !== undefined) {
    const template = config.redisUrl === undefined ? undefined : new URL(config.redisUrl);
    const client = new Cluster(config.clusterNodes, {
      redisOptions: {
        username: part(template?.username),
        password: part(template?.password),
        tls: template?.protocol === 'rediss:' ? {} : undefined,
      },
    });
    const nodes = config.clusterNodes.map((node) => `${node.host}:${node.port}`).join(', ');
    await whenReady(client, nodes).catch((error: unknown) => {
      client.disconnect();
      throw error;
    });
    reportOutages(client, nodes);
    return {
      kind: 'redis',
      store: redisStore({ client }),
      description: `redis cluster (${nodes})`,
      close: () => quit(client),
    };
  }
  const url = config.redisUrl as string;
  // As docs/redis.md recommends: reconnect within half a second of Redis answering again (ioredis' own delays grow to
  // 5 s).
  const client = new Redis(url, { retryStrategy: (attempt) => Math.min(attempt * 50, 500) });
  await whenReady(client, redactUrl(url)).catch((error: unknown) => {
    client.disconnect();
    throw error;
  });
  reportOutages(client, redactUrl(url));
  return {
    kind: 'redis',
    store: redisStore({ client }),
    description: `redis (${redactUrl(url)})`,
    close: () => quit(client),
  };
}
