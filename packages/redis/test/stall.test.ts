import { execFileSync } from 'node:child_process';
import { createLimiter, type Decision, type Limit, perHour, type StoreErrorPolicy } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey, redisStore } from '../src/index.js';
import { CLIENTS, type ClientKind, type Connected } from './support/clients.js';
import { CLUSTER_NODES, REDIS_URL, uniqueOrg } from './support/redis.js';
import { canStartSentinel, HOST, MASTER_NAME, type SentinelSetup, startSentinelSetup } from './support/sentinel.js';

/** Longer than the default budget (500 ms), as the issue asks: a stall of up to a second changes nothing. */
const STALL_MS = 1_000;
/** How long the stall goes on once Redis has run the script, for its reply to reach this process's socket. */
const AFTER_RUN_MS = 50;

const LIMITS: readonly Limit[] = Object.freeze([perHour(10)]);

/** The key's value, read with redis-cli: a synchronous call, so that this thread stays stalled meanwhile. */
function valueOf(port: number, key: string, cluster: boolean): string {
  return execFileSync('redis-cli', [...(cluster ? ['-c'] : []), '-p', String(port), 'GET', key], { encoding: 'utf8' });
}

/**
 * Blocks this thread (its event loop stalls: no timer runs, no socket is read) for STALL_MS at least, and until Redis
 * has run the calls' script (the key's value has changed) AFTER_RUN_MS ago: the reply then waits in this process's
 * socket, unread, past the budget.
 */
function stallUntilRun(port: number, key: string, cluster: boolean, before: string): void {
  const from = performance.now();
  let ranAt: number | undefined;
  for (;;) {
    const now = performance.now();
    if (ranAt === undefined && valueOf(port, key, cluster) !== before) ranAt = now;
    if (ranAt !== undefined && now - from >= STALL_MS && now - ranAt >= AFTER_RUN_MS) return;
    if (ranAt === undefined && now - from > 10_000) throw new Error('the calls never reached Redis during the stall');
  }
}

/**
 * Promise jobs to let run before asking for the check phase: a node-redis RedisSentinel hands a command to its master
 * connection (which then asks for the check phase to write it) a few awaits after it was sent.
 */
const HANDOFF_JOBS = 50;

/**
 * Runs `stall` right after the calls just made are written to Redis, before this process can read a reply: in the
 * tick after the store's flush (ioredis writes in it), or, for a client that writes at the next turn (node-redis),
 * in the same check phase just after that write.
 */
function afterWrite(writesNextTurn: boolean, stall: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const run = () => {
      try {
        stall();
        resolve();
      } catch (error) {
        reject(error);
      }
    };
    const afterHandoff = async () => {
      for (let job = 0; job < HANDOFF_JOBS; job++) await null;
      setImmediate(run);
    };
    process.nextTick(() => (writesNextTurn ? void afterHandoff() : run()));
  });
}

/** Where the calls go: a Redis, and the clients that reach it. */
interface Target {
  readonly name: string;
  readonly available: boolean;
  /** Read the key with `redis-cli -c`. */
  readonly cluster: boolean;
  readonly clients: readonly ClientKind[];
  /** Starts the servers only this target uses, once before its first client connects; resolves to their stop. */
  start?(): Promise<() => Promise<void>>;
  /** The port redis-cli reads the key on: the master the calls go to. */
  port(): number;
  connect(kind: ClientKind): Promise<Connected>;
}

/** A master, a replica and a sentinel of this file's own; the clients that find a master through Sentinel. */
function sentinelTarget(): Target {
  let setup: SentinelSetup | undefined;
  const started = (): SentinelSetup => {
    if (setup === undefined) throw new Error('the Sentinel setup was not started');
    return setup;
  };
  return {
    name: 'a master found through Sentinel',
    available: canStartSentinel('@ratecard/redis stall tests under Sentinel'),
    cluster: false,
    clients: CLIENTS,
    start: async () => {
      const running = await startSentinelSetup();
      setup = running;
      return () => running.stop();
    },
    port: () => started().master.port,
    connect: (kind) =>
      kind.sentinel({
        sentinels: [{ host: HOST, port: started().sentinel.port }],
        name: MASTER_NAME,
      }),
  };
}

const TARGETS: readonly Target[] = [
  {
    name: 'standalone',
    available: REDIS_URL !== null,
    cluster: false,
    clients: CLIENTS,
    port: () => Number(new URL(REDIS_URL as string).port),
    connect: (kind) => kind.standalone(REDIS_URL as string),
  },
  {
    name: 'a 3-master cluster',
    available: CLUSTER_NODES !== null,
    cluster: true,
    clients: CLIENTS,
    port: () => (CLUSTER_NODES?.[0] as { port: number }).port,
    connect: (kind) => kind.cluster(CLUSTER_NODES as { host: string; port: number }[]),
  },
  sentinelTarget(),
];

const POLICIES: StoreErrorPolicy[] = ['fallback', 'deny', 'allow'];

for (const target of TARGETS)
  describe.skipIf(!target.available)(`a stall of this process after a batch was written, ${target.name}`, () => {
    const start = target.start;
    if (start !== undefined) {
      let stop: (() => Promise<void>) | undefined;
      beforeAll(async () => {
        stop = await start();
      }, 60_000);
      afterAll(() => stop?.());
    }
    for (const kind of target.clients) {
      describe(kind.name, () => {
        let connected: Connected;
        beforeAll(async () => {
          connected = await target.connect(kind);
        });
        afterAll(() => connected.close());

        for (const policy of POLICIES) {
          it(`changes no decision and charges nothing twice, policy '${policy}'`, async () => {
            const store = redisStore({ client: connected.client });
            const fallback = memoryStore();
            const lines: string[] = [];
            const limiter = createLimiter({
              store,
              ...(policy === 'fallback' ? { fallback } : { onStoreError: policy }),
              log: (line) => lines.push(line),
            });
            const organization = uniqueOrg(`stall-${policy}`);
            const request = { organization, endpoint: 'POST /browsers', limits: LIMITS };
            // One call first, so that the store knows Redis' clock (as a running application's store does).
            expect((await limiter.consume(request)).allowed).toBe(true);
            const key = endpointKey(organization, 'POST /browsers');
            // The first call wrote the key; the batch's run is seen by its new value.
            const before = valueOf(target.port(), key, target.cluster);
            const calls: Promise<Decision>[] = Array.from({ length: 19 }, () => limiter.consume(request));
            await afterWrite(kind.name.startsWith('node-redis'), () =>
              stallUntilRun(target.port(), key, target.cluster, before),
            );
            const decisions = await Promise.all(calls);
            expect(decisions.map((decision) => decision.source)).toEqual(Array(19).fill('store'));
            expect(decisions.filter((decision) => decision.allowed)).toHaveLength(9);
            // Redis charged each admitted call once, and the fallback nothing.
            const [held] = await store.peek(organization, 'POST /browsers', LIMITS, 1);
            expect(held).toBeLessThan(0);
            expect(Math.floor((-1 - (held as number)) / (LIMITS[0] as Limit).unitsPerToken)).toBe(0);
            const [untouched] = await fallback.peek(organization, 'POST /browsers', LIMITS, 1);
            expect(untouched).toBe(9 * (LIMITS[0] as Limit).unitsPerToken);
            expect(lines).toEqual([]);
            expect(store.stats()).toMatchObject({ expired: 0, late: 0, unavailable: 0 });
            await limiter.close();
          }, 30_000);
        }
      });
    }
  });
