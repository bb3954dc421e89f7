/**
 * Every Redis client the store supports, each able to connect to a standalone server, to a cluster and to a master
 * found through Sentinel, so that the same suites run on all of them. node-redis runs under both protocols it speaks
 * (RESP2 and RESP3).
 */

import { Cluster as IoredisCluster, Redis as IoredisRedis } from 'ioredis';
import { Cluster as IovalkeyCluster, Redis as IovalkeyRedis } from 'iovalkey';
import {
  createClient as createClient6,
  createCluster as createCluster6,
  createSentinel as createSentinel6,
} from 'redis';
import {
  createClient as createClient5,
  createCluster as createCluster5,
  createSentinel as createSentinel5,
} from 'redis5';
import type { RedisClient } from '../../src/index.js';

export interface Connected {
  client: RedisClient;
  close(): Promise<void>;
}

/** Where a client finds its master through Sentinel: the sentinels' addresses and the master's name. */
export interface SentinelOptions {
  sentinels: { host: string; port: number }[];
  name: string;
  /** ioredis and iovalkey: reconnect as Sentinel announces a failover (node-redis always does). */
  failoverDetector?: boolean;
}

export interface ClientKind {
  readonly name: string;
  standalone(url: string): Promise<Connected>;
  cluster(nodes: readonly { host: string; port: number }[]): Promise<Connected>;
  /** A client that finds its master through Sentinel: ioredis' `Redis`, node-redis' `createSentinel()`. */
  sentinel(options: SentinelOptions): Promise<Connected>;
}

/** The events an ioredis-shaped client (ioredis, iovalkey) emits while it connects. */
interface Connecting {
  readonly status: string;
  once(event: 'ready' | 'end', listener: () => void): unknown;
  on(event: 'error', listener: () => void): unknown;
}

/** Resolves once an ioredis-shaped client is ready. */
function ready(client: Connecting): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('end', () => reject(new Error('the client ended before it was ready')));
  });
}

/** ioredis and iovalkey, which share one API: their `Redis` (from a URL, or Sentinel options) and `Cluster`. */
function ioredisLike(
  name: string,
  Standalone: {
    new (url: string): Connecting & { disconnect(): void };
    new (options: SentinelOptions): Connecting & { disconnect(): void };
  },
  Cluster: new (nodes: { host: string; port: number }[]) => Connecting & { disconnect(): void },
): ClientKind {
  const open = async (client: Connecting & { disconnect(): void }): Promise<Connected> => {
    // Errors reach the store through its calls; unheard, the event would be printed.
    client.on('error', () => {});
    await ready(client);
    return { client: client as unknown as RedisClient, close: async () => client.disconnect() };
  };
  return {
    name,
    standalone: (url) => open(new Standalone(url)),
    cluster: (nodes) => open(new Cluster([...nodes])),
    sentinel: (options) => open(new Standalone(options)),
  };
}

/** What the test needs of node-redis' createClient, createCluster and createSentinel, the same in versions 5 and 6. */
interface NodeRedisHandle {
  on(event: 'error', listener: () => void): unknown;
  connect(): Promise<unknown>;
  destroy(): void;
}

function nodeRedis(
  version: 5 | 6,
  RESP: 2 | 3,
  createClient: (options: { url: string; RESP: 2 | 3 }) => unknown,
  createCluster: (options: { rootNodes: { url: string }[]; RESP: 2 | 3 }) => unknown,
  createSentinel: (options: {
    name: string;
    sentinelRootNodes: { host: string; port: number }[];
    RESP: 2 | 3;
  }) => unknown,
): ClientKind {
  const open = async (handle: NodeRedisHandle): Promise<Connected> => {
    // Errors reach the store through its calls; unheard, the event would be printed.
    handle.on('error', () => {});
    await handle.connect();
    return { client: handle as unknown as RedisClient, close: async () => handle.destroy() };
  };
  return {
    name: `node-redis ${version} RESP${RESP}`,
    standalone: (url) => open(createClient({ url, RESP }) as NodeRedisHandle),
    cluster: (nodes) =>
      open(
        createCluster({
          rootNodes: nodes.map((node) => ({ url: `redis://${node.host}:${node.port}` })),
          RESP,
        }) as NodeRedisHandle,
      ),
    sentinel: ({ sentinels, name }) =>
      open(createSentinel({ name, sentinelRootNodes: sentinels, RESP }) as NodeRedisHandle),
  };
}

export const CLIENTS: readonly ClientKind[] = [
  ioredisLike('ioredis 6', IoredisRedis, IoredisCluster),
  ioredisLike('iovalkey', IovalkeyRedis, IovalkeyCluster),
  nodeRedis(6, 3, createClient6, createCluster6, createSentinel6),
  nodeRedis(6, 2, createClient6, createCluster6, createSentinel6),
  nodeRedis(5, 3, createClient5, createCluster5, createSentinel5),
  nodeRedis(5, 2, createClient5, createCluster5, createSentinel5),
];

/**
 * One client of each library (ioredis, whose code iovalkey forks, and node-redis): where a slow suite runs every client
 * on a standalone server, it runs these on a cluster, whose routing is each library's own code, so that `pnpm test`
 * stays within its time on 2 cores.
 */
export const FAMILIES: readonly ClientKind[] = CLIENTS.filter((kind) =>
  ['ioredis 6', 'node-redis 6 RESP3'].includes(kind.name),
);

export function clientKind(name: string): ClientKind {
  const kind = CLIENTS.find((candidate) => candidate.name === name);
  if (kind === undefined) throw new Error(`no client kind named ${JSON.stringify(name)}`);
  return kind;
}
