import type { LuaScript } from './scripts/lua-script.js';

/**
 * The clients `redisStore` accepts, described by the few members it uses, so that none of them is a dependency. The
 * store registers no command on a client and sends only EVALSHA and EVAL; its one listener is node-redis'
 * 'reconnecting', on a `createClient()` client while it has never been ready (see nodeRedisConnection).
 */

/** ioredis 5/6 `Redis` (standalone or Sentinel-managed) and `Cluster`, and iovalkey's, which share ioredis' API. */
export interface IoredisClient {
  /**
   * 'ready' when a command goes straight to Redis; 'wait' for a `lazyConnect` client; 'connecting' and 'connect'
   * while an attempt is under way; 'close' and 'reconnecting' (a `Cluster` also 'disconnecting') once one failed or a
   * connection was lost, until the next attempt; 'end' once closed.
   */
  readonly status: string;
  /** True for a `Cluster`. */
  readonly isCluster?: boolean;
  /** A `Cluster`'s slot map: per slot, the addresses ('host:port') of its master, then its replicas. */
  readonly slots?: readonly (readonly string[] | undefined)[];
  /** A `Cluster`'s connections to its nodes. */
  nodes?(role: 'master'): readonly IoredisNode[];
  /** One command with its arguments as they are; bulk string replies as Buffers. */
  callBuffer(command: string, args: (string | number | Buffer)[]): Promise<unknown>;
  /** Starts a `lazyConnect` client; the store calls it once. */
  connect?(): Promise<unknown>;
}

/** One of an ioredis `Cluster`'s node connections, a standalone client with its address. */
interface IoredisNode extends IoredisClient {
  readonly options: { host?: string; port?: number };
}

/** Options of a node-redis command: here only the RESP type mapping (blob strings as Buffers). */
interface NodeRedisCommandOptions {
  typeMapping: Record<number, unknown>;
}

/** node-redis 5/6 `createClient()` (RESP2 or RESP3), connected by the caller (`await client.connect()`). */
export interface NodeRedisClient {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  sendCommand(args: readonly (string | Buffer)[], options?: NodeRedisCommandOptions): Promise<unknown>;
  /** Emitted as the client starts an attempt after one failed or a connection was lost. */
  once?(event: 'reconnecting', listener: () => void): unknown;
  off?(event: 'reconnecting', listener: () => void): unknown;
}

/**
 * node-redis 5/6 `createSentinel()` (RESP2 or RESP3), connected by the caller: it sends each command to the master
 * Sentinel names, over a connection leased from its pool, and finds the new master after a failover.
 */
export interface NodeRedisSentinel {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  /** Leases one of its master connections; the store never calls it, but only a RedisSentinel has it. */
  acquire(): Promise<unknown>;
  /** `isReadonly` true may send the command to a replica: the store's scripts write, so it always sends false. */
  sendCommand(
    isReadonly: boolean | undefined,
    args: readonly (string | Buffer)[],
    options?: NodeRedisCommandOptions,
  ): Promise<unknown>;
}

/** A node in node-redis' slot map; `client` is its connection, once made. */
interface NodeRedisNode {
  readonly address: string;
  readonly client?: NodeRedisClient;
}

/** node-redis 5/6 `createCluster()`, connected by the caller. */
export interface NodeRedisCluster {
  readonly isOpen: boolean;
  readonly isReady?: boolean;
  readonly masters: readonly NodeRedisNode[];
  readonly slots: readonly ({ master: NodeRedisNode } | undefined)[];
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: readonly (string | Buffer)[],
    options?: NodeRedisCommandOptions,
  ): Promise<unknown>;
}

/**
 * The clients the store takes: an ioredis or iovalkey `Redis` or `Cluster`, or a node-redis 5/6 `createClient()`,
 * `createCluster()` or `createSentinel()`, connected by the caller. Only the few members typed here are used.
 */
export type RedisClient = IoredisClient | NodeRedisClient | NodeRedisCluster | NodeRedisSentinel;

/**
 * What the client can do now: send; wait (connecting for the first time, no attempt failed yet); nothing until it
 * reconnects (down: it was ready and lost its connection); nothing until it connects (unreached: it was never ready,
 * and an attempt failed or outlasted a call's budget); or nothing ever again (closed).
 */
export type ClientState = 'ready' | 'waiting' | 'down' | 'unreached' | 'closed';

/** The store's one port to Redis: each client gets a thin adapter of this shape (see `connectionTo`). */
export interface Connection {
  /** Which client this is, for messages. */
  readonly kind: string;
  /** A Redis Cluster: calls are grouped by master, or routed by key where the slot map names none. */
  readonly cluster: boolean;
  /**
   * The client writes a command at the event loop's next turn (setImmediate), together with every other command sent
   * until then, as node-redis does; ioredis writes each one as it is sent.
   */
  readonly writesNextTurn: boolean;
  state(): ClientState;
  /**
   * A call waited its whole budget for the client's first connection: the client counts as unreached from now until it
   * is ready, as after a failed attempt (some clients retry a first connection without showing it, see ioredisConnection).
   */
  waitedOut(): void;
  /** Takes back what the adapter put on the client (the store is closed). */
  release(): void;
  /** One command; bulk string replies as Buffers. In a cluster, `key` routes it to the node serving that key. */
  send(args: (string | Buffer)[], key: string | undefined): Promise<unknown>;
  /** In a cluster: the address of the master serving `slot` in the client's slot map, if it knows one. */
  masterOf?(slot: number): string | undefined;
  /**
   * In a cluster: one command to that master alone, never redirected. It rejects at once (sending nothing) when the
   * client has no ready connection to that address, so the call can go by key instead.
   */
  sendToMaster?(master: string, args: (string | Buffer)[]): Promise<unknown>;
}

/**
 * Why a master was not reached directly; nothing was sent. 'connecting': the client is connecting to it (ioredis
 * connects to a node on its first command), so the calls wait for it; 'down': its connection is broken (the master
 * failed or restarts); 'unknown': the client has no connection to that address, so the calls go by key.
 */
export type NoRoute = 'connecting' | 'down' | 'unknown';

export class NoDirectRoute extends Error {
  constructor(
    master: string,
    readonly why: NoRoute,
  ) {
    super(
      why === 'down'
        ? `ratecard: the client lost its connection to the cluster master ${master}; its calls are refused at once until it is back`
        : `ratecard: no ready connection to the cluster master ${master} (${why})`,
    );
  }
}

const noDirectRoute = (master: string, why: NoRoute): Promise<never> => Promise.reject(new NoDirectRoute(master, why));

/** RESP's blob string type (`$`), mapped to Buffer so packed replies arrive as bytes under RESP2 and RESP3. */
const BUFFERS: NodeRedisCommandOptions = { typeMapping: { 36: Buffer } };

/** Adapters before rememberingAttempts gives them what the store needs of a client's past. */
type Adapter = Omit<Connection, 'waitedOut'>;

function ioredisConnection(client: IoredisClient): Adapter {
  let connectAsked = false;
  const cluster = client.isCluster === true;
  /** Masters this client had a ready connection to: one it has dropped since (a connection that ended) is down. */
  const reached = new Set<string>();
  return {
    kind: 'ioredis',
    cluster,
    writesNextTurn: false,
    state() {
      const status = client.status;
      if (status === 'ready') return 'ready';
      if (status === 'end') return 'closed';
      // An attempt failed (refused, reset, AUTH refused) or the connection was lost: the client waits out its retry
      // delay in these, and is 'connecting' again only for the moment an attempt on a refused port takes. A
      // Sentinel-managed client that finds no sentinel stays 'connecting' throughout (see Connection.waitedOut).
      if (status === 'reconnecting' || status === 'close' || status === 'disconnecting') return 'down';
      if (status === 'wait' && !connectAsked && typeof client.connect === 'function') {
        // A lazyConnect client connects on its first command, and the store sends none before it is ready: ask.
        connectAsked = true;
        client.connect().then(undefined, () => undefined);
      }
      return 'waiting';
    },
    release: () => undefined,
    send: (args) => client.callBuffer(args[0] as string, args.slice(1)),
    ...(cluster && {
      masterOf: (slot: number) => client.slots?.[slot]?.[0],
      sendToMaster(master: string, args: (string | Buffer)[]) {
        const node = client.nodes?.('master').find((n) => `${n.options.host}:${n.options.port}` === master);
        // A node that is not ready would keep the command in its offline queue, past the caller's deadline.
        if (node === undefined) return noDirectRoute(master, reached.has(master) ? 'down' : 'unknown');
        if (node.status === 'wait') {
          // The cluster connects to a node on its first command, and the store sends none before it is ready: ask.
          node.connect?.().then(undefined, () => undefined);
          return noDirectRoute(master, 'connecting');
        }
        if (node.status === 'connecting' || node.status === 'connect') return noDirectRoute(master, 'connecting');
        if (node.status !== 'ready') return noDirectRoute(master, 'down');
        reached.add(master);
        return node.callBuffer(args[0] as string, args.slice(1));
      },
    }),
  };
}

/**
 * node-redis shows a failed attempt nowhere in its state (open and not ready from connect() until it is ready), and
 * tells of it with 'error' and, once its retry delay has passed, 'reconnecting'. The store listens for that one event,
 * only while the client has never been ready: an 'error' listener would change what an unheard error does (node-redis
 * ends the process on one, as its users expect).
 */
function nodeRedisConnection(client: NodeRedisClient): Adapter {
  let everReady = false;
  let retried = false;
  let listening = false;
  const onRetry = (): void => {
    retried = true;
    listening = false;
  };
  const stopListening = (): void => {
    if (!listening) return;
    listening = false;
    client.off?.('reconnecting', onRetry);
  };
  const adapter: Adapter = {
    kind: 'node-redis',
    cluster: false,
    writesNextTurn: true,
    state() {
      if (client.isReady) {
        everReady = true;
        stopListening();
        return 'ready';
      }
      if (!client.isOpen) return 'closed';
      if (retried) return 'down';
      if (!everReady && !listening && client.once !== undefined) {
        listening = true;
        client.once('reconnecting', onRetry);
      }
      return 'waiting';
    },
    release: stopListening,
    send: (args) => client.sendCommand(args, BUFFERS),
  };
  // Listening from now, for a client connecting already.
  adapter.state();
  return adapter;
}

/**
 * A RedisSentinel is ready once it has a connection to the master Sentinel names. node-redis 6 marks it not ready (and
 * emits 'reconnecting') only while it moves to a new master, and 5 not even then; neither tells of a failed first
 * attempt, since its connect() retries until it gives up and closes it. So the store listens for nothing here: a
 * RedisSentinel that is open and not ready counts as waiting, or as down once it was ready (see rememberingAttempts).
 */
function nodeRedisSentinelConnection(sentinel: NodeRedisSentinel): Adapter {
  return {
    kind: 'node-redis sentinel',
    cluster: false,
    writesNextTurn: true,
    state: () => (sentinel.isReady ? 'ready' : sentinel.isOpen ? 'waiting' : 'closed'),
    release: () => undefined,
    send: (args) => sentinel.sendCommand(false, args, BUFFERS),
  };
}

function nodeRedisClusterConnection(cluster: NodeRedisCluster): Adapter {
  return {
    kind: 'node-redis cluster',
    cluster: true,
    writesNextTurn: true,
    // A cluster is ready once its slot map is known; `isReady` is absent on some versions, where open means ready. One
    // whose connect() found no root node is closed again: it makes no attempt of its own until connect() is called.
    state: () => (!cluster.isOpen ? 'closed' : cluster.isReady === false ? 'waiting' : 'ready'),
    release: () => undefined,
    send: (args, key) => cluster.sendCommand(key, false, args, BUFFERS),
    masterOf: (slot) => cluster.slots[slot]?.master.address,
    sendToMaster(master, args) {
      const client = cluster.masters.find((node) => node.address === master)?.client;
      if (client === undefined) return noDirectRoute(master, 'unknown');
      if (!client.isReady) return noDirectRoute(master, client.isOpen ? 'down' : 'unknown');
      return client.sendCommand(args, BUFFERS);
    },
  };
}

/** The adapter for a client, chosen by its shape; undefined for anything that is no client the store knows. */
export function connectionTo(client: unknown): Connection | undefined {
  if (typeof client !== 'object' || client === null) return undefined;
  const candidate = client as Partial<IoredisClient & NodeRedisClient & NodeRedisCluster & NodeRedisSentinel>;
  if (typeof candidate.callBuffer === 'function' && typeof candidate.status === 'string') {
    return rememberingAttempts(ioredisConnection(client as IoredisClient));
  }
  if (typeof candidate.sendCommand === 'function' && typeof candidate.isOpen === 'boolean') {
    if (Array.isArray(candidate.masters))
      return rememberingAttempts(nodeRedisClusterConnection(client as NodeRedisCluster));
    // A RedisSentinel has a client's members, but its sendCommand takes whether the command only reads first.
    if (typeof candidate.acquire === 'function' && typeof candidate.isReady === 'boolean')
      return rememberingAttempts(nodeRedisSentinelConnection(client as NodeRedisSentinel));
    if (typeof candidate.isReady === 'boolean')
      return rememberingAttempts(nodeRedisConnection(client as NodeRedisClient));
  }
  return undefined;
}

/**
 * The adapter, with what the client's past says of its present: a client connecting at startup, no attempt failed yet,
 * is worth waiting for within the budget (it connects in about a millisecond). One that was ready and lost its
 * connection is not (down), nor one whose first attempt failed (unreached): either reconnects on its own schedule,
 * often seconds away, and every call would wait out its budget meanwhile. A client shows a failed attempt only until
 * its next one starts, so the adapter remembers it.
 */
function rememberingAttempts(adapter: Adapter): Connection {
  let wasReady = false;
  let failed = false;
  return {
    ...adapter,
    state() {
      const now = adapter.state();
      if (now === 'ready') wasReady = true;
      else if (now === 'waiting' || now === 'down') {
        if (wasReady) return 'down';
        if (now === 'down') failed = true;
        if (failed) return 'unreached';
      }
      return now;
    },
    waitedOut() {
      if (!wasReady) failed = true;
    },
  };
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * EVALSHA, and EVAL only when the node that got the call does not hold the script (after a restart, a failover or
 * SCRIPT FLUSH). In a cluster the EVAL goes where the EVALSHA went, so each node loads the script on first need.
 * NOSCRIPT means the script did not run, so sending it again charges nothing twice.
 */
export function runScript(
  connection: Connection,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | Buffer)[],
  onReload: () => void,
): Promise<unknown> {
  // Lower case: ioredis finds a command's keys (and so a cluster node) only under its lower-case name.
  const rest = [String(keys.length), ...keys, ...args];
  const send = (command: string[]): Promise<unknown> => connection.send([...command, ...rest], keys[0]);
  return retryWithText(send, script, onReload);
}

/** The same on one cluster master, the keys among the arguments (the script says where, see scripts/consume.ts). */
export function runScriptOnMaster(
  connection: Connection,
  master: string,
  script: LuaScript,
  args: readonly (string | Buffer)[],
  onReload: () => void,
): Promise<unknown> {
  const sendToMaster = connection.sendToMaster;
  if (sendToMaster === undefined) return noDirectRoute(master, 'unknown');
  return retryWithText((command) => sendToMaster(master, [...command, '0', ...args]), script, onReload);
}

function retryWithText(
  send: (command: string[]) => Promise<unknown>,
  script: LuaScript,
  onReload: () => void,
): Promise<unknown> {
  return send(['evalsha', script.sha]).then(undefined, (error: unknown) => {
    if (!isNoScript(error)) throw error;
    onReload();
    return send(['eval', script.text]);
  });
}
