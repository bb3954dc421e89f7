import { createServer } from 'node:net';
import { createLimiter, type Decision, type Limiter, perSecond, RateLimitError } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { Cluster, Redis } from 'ioredis';
import { Redis as ValkeyRedis } from 'iovalkey';
import { createClient as createClient6, createCluster } from 'redis';
import { createClient as createClient5 } from 'redis5';
import { afterEach, describe, expect, it } from 'vitest';
import { type RedisClient, type RedisStore, redisStore } from '../src/index.js';
import { canStartRedis, type RedisServer, redisCommand, startRedis } from '../src/testing.js';
import { until } from './support/outage.js';
import { REDIS_EXTERNAL, REDIS_URL, uniqueOrg } from './support/redis.js';

/**
 * A client whose Redis has never answered since it was made (nothing listening on its port, or a password it does not
 * give) is refused by the store at once, as one that lost its connection is: the limiter's policy answers every call
 * after the client's first failed attempt, the log says once that the client has not connected, and decisions come
 * from Redis once it can connect. Each test starts its own redis-server.
 */
const canSpawn = REDIS_URL !== null && (!REDIS_EXTERNAL || canStartRedis('@ratecard/redis never-connected tests'));

const HOST = '127.0.0.1';
/** What the server requires at first, and what the client gives. */
const SERVER_PASSWORD = 'the-servers';
const CLIENT_PASSWORD = 'the-clients';
/**
 * The limiter's budget here: no call can be answered by a deadline within a test (20 s at most), so a call answered by
 * the policy was refused by the store, not timed out.
 */
const BUDGET_MS = 60_000;
const NOT_CONNECTED = 'has not connected to Redis since it was made (its first attempt failed';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, HOST, () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

interface Connecting {
  client: RedisClient;
  /** How many 'error' and 'reconnecting' listeners the client has (node-redis). */
  listeners?(): { error: number; reconnecting: number };
  close(): Promise<void>;
}

interface Kind {
  name: string;
  /**
   * A client of the server at `port`, giving `password` if any, told to connect now as an application does at startup;
   * it retries 20 ms apart.
   */
  connect(port: number, password?: string): Connecting;
}

/** What a test needs of an ioredis or iovalkey `Redis`. */
interface IoredisHandle {
  on(event: 'error', listener: () => void): unknown;
  disconnect(): void;
}

const ioredisLike = (
  name: string,
  Client: new (options: {
    host: string;
    port: number;
    password: string | undefined;
    retryStrategy: () => number;
  }) => IoredisHandle,
): Kind => ({
  name,
  connect(port, password) {
    const client = new Client({ host: HOST, port, password, retryStrategy: () => 20 });
    // The application's listener: unheard, ioredis prints every failed attempt.
    client.on('error', () => {});
    return { client: client as unknown as RedisClient, close: async () => client.disconnect() };
  },
});

/** What a test needs of a node-redis 5 or 6 `createClient()`. */
interface NodeRedisHandle {
  on(event: 'error', listener: () => void): unknown;
  connect(): Promise<unknown>;
  listenerCount(event: string): number;
  destroy(): void;
}

const nodeRedis = (
  name: string,
  createClient: (options: {
    password: string | undefined;
    socket: { host: string; port: number; reconnectStrategy: () => number };
  }) => NodeRedisHandle,
): Kind => ({
  name,
  connect(port, password) {
    const client = createClient({ password, socket: { host: HOST, port, reconnectStrategy: () => 20 } });
    // The application's listener, which node-redis needs (unheard, an 'error' ends the process).
    client.on('error', () => {});
    // Not awaited: it settles once the client is ready, or when it is destroyed.
    client.connect().catch(() => {});
    return {
      client: client as unknown as RedisClient,
      listeners: () => ({ error: client.listenerCount('error'), reconnecting: client.listenerCount('reconnecting') }),
      close: async () => client.destroy(),
    };
  },
});

const KINDS: readonly Kind[] = [
  ioredisLike('ioredis', Redis),
  ioredisLike('iovalkey', ValkeyRedis),
  nodeRedis('node-redis 6', (options) => createClient6(options) as unknown as NodeRedisHandle),
  nodeRedis('node-redis 5', (options) => createClient5(options) as unknown as NodeRedisHandle),
];

interface Fault {
  name: string;
  /** The password the client gives, if any. */
  password?: string;
  /** The port of a Redis the client cannot use yet. */
  start(): Promise<number>;
  /** Makes it usable. */
  repair(): Promise<void>;
}

function nothingListening(): Fault {
  let port = 0;
  return {
    name: 'nothing listening on the port',
    async start() {
      port = await freePort();
      return port;
    },
    async repair() {
      servers.push(await startRedis({ port }));
    },
  };
}

function wrongPassword(): Fault {
  let server: RedisServer | undefined;
  return {
    name: 'a server requiring a password other than the one the client gives',
    password: CLIENT_PASSWORD,
    async start() {
      server = await requiringPassword();
      return server.port;
    },
    async repair() {
      await setPassword(server as RedisServer, SERVER_PASSWORD, CLIENT_PASSWORD);
    },
  };
}

/** A server that requires SERVER_PASSWORD. */
async function requiringPassword(): Promise<RedisServer> {
  const server = await startRedis();
  servers.push(server);
  // Set after the start: startRedis waits for an unauthenticated PING.
  await redisCommand(server, ['CONFIG', 'SET', 'requirepass', SERVER_PASSWORD]);
  return server;
}

async function setPassword(server: RedisServer, from: string, to: string): Promise<void> {
  const admin = new Redis({ host: HOST, port: server.port, password: from, retryStrategy: () => null });
  try {
    await admin.config('SET', 'requirepass', to);
  } finally {
    admin.disconnect();
  }
}

const servers: RedisServer[] = [];
/** Limiters and clients a test made, closed after it, the last made first. */
const closing: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

function limiterOn(
  client: RedisClient,
  storeTimeoutMs = BUDGET_MS,
): { store: RedisStore; limiter: Limiter; lines: string[] } {
  const lines: string[] = [];
  const store = redisStore({ client });
  const limiter = createLimiter({
    store,
    fallback: memoryStore(),
    storeTimeoutMs,
    log: (line) => lines.push(line),
  });
  closing.push(() => limiter.close());
  return { store, limiter, lines };
}

/** A request of an organization on a plan no test here exhausts: every decision is a call to Redis. */
function requestOf(organization: string) {
  return { organization, endpoint: 'POST /browsers', plan: 'enterprise' } as const;
}

describe.skipIf(!canSpawn)('a client that has not connected since it was made', () => {
  for (const kind of KINDS) {
    for (const fault of [nothingListening, wrongPassword]) {
      it(`is refused at once after its first failed attempt, says so once, and answers from Redis once it connects: ${kind.name}, ${fault().name}`, async () => {
        const broken = fault();
        const port = await broken.start();
        const connecting = kind.connect(port, broken.password);
        closing.push(connecting.close);
        const { store, limiter, lines } = limiterOn(connecting.client);
        const request = requestOf(uniqueOrg('never'));

        // The first call, made as the client starts, may wait for its first attempt: it is answered by the policy
        // when that attempt fails, long before the budget.
        expect((await limiter.consume(request)).source).toBe('fallback');

        // Every call after it is refused when it is made: nothing is queued, nothing sent.
        const before = store.stats();
        const pending: Promise<Decision>[] = [];
        for (let i = 0; i < 50; i++) pending.push(limiter.consume(request));
        expect(store.stats()).toMatchObject({ unavailable: before.unavailable + 50, queued: 0, sent: 0 });
        const decisions = await Promise.all(pending);
        expect(new Set(decisions.map((decision) => decision.source))).toEqual(new Set(['fallback']));
        expect(store.stats()).toMatchObject({ expired: 0, sent: 0 });

        // Under 'throw' a caller sees why.
        const thrower = createLimiter({ store, onStoreError: 'throw', storeTimeoutMs: BUDGET_MS, log: () => {} });
        closing.push(() => thrower.close());
        const error = await thrower.consume(request).then(
          () => undefined,
          (reason: unknown) => reason,
        );
        expect(error).toBeInstanceOf(RateLimitError);
        expect((error as RateLimitError).code).toBe('store_unavailable');
        expect(((error as RateLimitError).cause as Error).message).toBe(
          `ratecard: the ${kind.name.startsWith('node-redis') ? 'node-redis' : 'ioredis'} client ${NOT_CONNECTED}, or outlasted a call's budget); calls are refused at once until it connects`,
        );

        await broken.repair();
        await until('a decision from Redis', async () => (await limiter.consume(request)).source === 'store');
        const after = await Promise.all(Array.from({ length: 10 }, () => limiter.consume(request)));
        expect(new Set(after.map((decision) => decision.source))).toEqual(new Set(['store']));

        const failed = lines.filter((line) => line.includes('the store failed'));
        expect(failed).toHaveLength(1);
        expect(failed[0]).toContain(`(store_unavailable: ratecard: the `);
        expect(failed[0]).toContain(NOT_CONNECTED);
        if (connecting.listeners !== undefined) {
          // The store never listens for 'error' (node-redis ends the process on an unheard one), and stops listening
          // for 'reconnecting' once the client is ready.
          expect(connecting.listeners()).toEqual({ error: 1, reconnecting: 0 });
        }
      });
    }
  }

  it('waits for a client that connects at startup, and answers from Redis', async () => {
    const server = await startRedis();
    servers.push(server);
    for (const kind of KINDS) {
      const connecting = kind.connect(server.port);
      closing.push(connecting.close);
      const { store, limiter, lines } = limiterOn(connecting.client);
      const decisions = await Promise.all(
        Array.from({ length: 10 }, () => limiter.consume(requestOf(uniqueOrg('up')))),
      );
      expect(decisions.map((decision) => decision.source)).toEqual(Array(10).fill('store'));
      expect(store.stats()).toMatchObject({ unavailable: 0, expired: 0, sent: 10 });
      expect(lines).toEqual([]);
    }
  });

  it('answers by policy in a round trip when a client that sends no handshake connects without a password', async () => {
    // node-redis 5 under RESP2 sends no command while it connects, so it is ready without the password the server
    // requires, and Redis refuses its calls (NOAUTH, or a protocol error for a long command, on which it closes the
    // connection): the calls are sent and answered by the error, none waits out its budget.
    const server = await requiringPassword();
    const connecting = KINDS[3]?.connect(server.port) as Connecting;
    closing.push(connecting.close);
    const { store, limiter, lines } = limiterOn(connecting.client);
    const request = requestOf(uniqueOrg('no-password'));
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.consume(request)));
    expect(new Set(decisions.map((decision) => decision.source))).toEqual(new Set(['fallback']));
    // The limiter's first decisions wait for its read of the blocks, which is sent and answered by the error: it
    // answers them all, and no consume is sent.
    expect(store.stats()).toMatchObject({ unavailable: 0, expired: 0 });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('(store_unavailable: ratecard: Redis failed: ');
    await setPassword(server, SERVER_PASSWORD, '');
    await until('a decision from Redis', async () => (await limiter.consume(request)).source === 'store');
  });

  it('stops listening to a node-redis client when the store is closed', async () => {
    const port = await freePort();
    const client = createClient6({ socket: { host: HOST, port, reconnectStrategy: () => 60_000 } });
    client.on('error', () => {});
    client.connect().catch(() => {});
    closing.push(async () => client.destroy());
    const store = redisStore({ client: client as unknown as RedisClient });
    expect(client.listenerCount('reconnecting')).toBe(1);
    store.close();
    expect(client.listenerCount('reconnecting')).toBe(0);
    expect(client.listenerCount('error')).toBe(1);
  });

  it('refuses an ioredis Cluster at once once no startup node has answered', async () => {
    const port = await freePort();
    const client = new Cluster([{ host: HOST, port }], { clusterRetryStrategy: () => 20 });
    client.on('error', () => {});
    closing.push(async () => client.disconnect());
    const { store, limiter, lines } = limiterOn(client as unknown as RedisClient);
    const request = requestOf(uniqueOrg('never-cluster'));
    expect((await limiter.consume(request)).source).toBe('fallback');
    const before = store.stats();
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.consume(request)));
    expect(new Set(decisions.map((decision) => decision.source))).toEqual(new Set(['fallback']));
    expect(store.stats()).toMatchObject({ unavailable: before.unavailable + 20, expired: 0, sent: 0 });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`ratecard: the ioredis client ${NOT_CONNECTED}`);
  });

  it('refuses a node-redis cluster whose connect() found no root node, and says to connect it', async () => {
    const port = await freePort();
    const client = createCluster({ rootNodes: [{ url: `redis://${HOST}:${port}` }] });
    client.on('error', () => {});
    await expect(client.connect()).rejects.toThrow();
    const { store, limiter, lines } = limiterOn(client as unknown as RedisClient);
    const request = requestOf(uniqueOrg('never-node-cluster'));
    // The first decision waits for the limiter's read of the blocks, refused at once (and not counted: the stats count
    // consume calls); the next ones, within the half second the failed read counts for, are consume calls.
    expect((await limiter.consume(request)).source).toBe('fallback');
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.consume(request)));
    expect(new Set(decisions.map((decision) => decision.source))).toEqual(new Set(['fallback']));
    expect(store.stats()).toMatchObject({ unavailable: 20, expired: 0, sent: 0 });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(
      'ratecard: the node-redis cluster client is not open: connect it with `await client.connect()` (a cluster whose connect() failed stays closed until it is called again)',
    );
  });

  it('refuses a Sentinel-managed ioredis client that finds no sentinel, once a call has waited its budget', async () => {
    // Such a client stays 'connecting' while it retries its sentinels: only a call's budget tells.
    const port = await freePort();
    const client = new Redis({ sentinels: [{ host: HOST, port }], name: 'ratecard', sentinelRetryStrategy: () => 20 });
    client.on('error', () => {});
    closing.push(async () => client.disconnect());
    const { store, limiter, lines } = limiterOn(client as unknown as RedisClient, 200);
    const request = requestOf(uniqueOrg('never-sentinel'));
    // A fresh limiter's first decision waits for its read of the blocks, which waits for the client's first
    // connection: the limiter's budget passes, and its policy answers.
    expect((await limiter.consume(request)).source).toBe('fallback');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('(store_timeout: ');
    // A consume waits its budget for the connection, and then the client counts as not connected.
    const waited = await store.consume(request.organization, 'POST /browsers', [perSecond(1)], 1, 200).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect((waited as RateLimitError).message).toContain(
      "ratecard: the ioredis client has not connected to Redis within a call's budget since it was made",
    );
    expect(store.stats()).toMatchObject({ expired: 1, unavailable: 0, sent: 0 });
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.consume(request)));
    expect(new Set(decisions.map((decision) => decision.source))).toEqual(new Set(['fallback']));
    expect(store.stats()).toMatchObject({ expired: 1, unavailable: 20, sent: 0 });
    expect(lines).toHaveLength(1);
  });
});
