import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canStartRedis, type RedisServer, redisCommand, startRedis } from '../../src/testing.js';
import { sleep } from '../faults/fleet.js';
import { REDIS_EXTERNAL, REDIS_URL } from './redis.js';

/**
 * Redis under Sentinel for the suites that need it, which start their own: a master, a replica and a sentinel on
 * free loopback ports (the shared servers of global-setup are not watched by any sentinel).
 */

/** The name the sentinels know the master by: a client gives it as `name`. */
export const MASTER_NAME = 'ratecard';
export const HOST = '127.0.0.1';

/** Whether a suite can start its own servers: not when Redis suites skip, nor without redis-server on PATH. */
export function canStartSentinel(suite: string): boolean {
  return REDIS_URL !== null && (!REDIS_EXTERNAL || canStartRedis(suite));
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, HOST, () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** Waits until `check` resolves true; a check that rejects counts as false. */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

export interface Sentinel {
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * A sentinel watching the master on `master.port` (running or not) under MASTER_NAME, in a directory of its own
 * (Sentinel rewrites its config file).
 */
export async function startSentinel(master: { port: number }): Promise<Sentinel> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'ratecard-sentinel-'));
  const config = join(dir, 'sentinel.conf');
  await writeFile(
    config,
    [
      `port ${port}`,
      `bind ${HOST}`,
      `dir ${dir}`,
      `sentinel monitor ${MASTER_NAME} ${HOST} ${master.port} 1`,
      `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
      `sentinel failover-timeout ${MASTER_NAME} 10000`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn('redis-server', [config, '--sentinel'], { stdio: 'ignore' });
  await until(
    `a sentinel on port ${port}`,
    async () => (await redisCommand({ host: HOST, port }, ['PING'], 500)) === 'PONG',
  );
  return {
    port,
    stop: async () => {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A master, a replica in sync with it, and a sentinel watching the master. */
export interface SentinelSetup {
  readonly master: RedisServer;
  readonly replica: RedisServer;
  readonly sentinel: Sentinel;
  /** Stops all three; safe after a partial start. */
  stop(): Promise<void>;
}

export async function startSentinelSetup(): Promise<SentinelSetup> {
  const started: { stop(): Promise<void> }[] = [];
  const stop = async () => {
    for (const server of [...started].reverse()) await server.stop();
  };
  try {
    const master = await startRedis();
    started.push(master);
    const replica = await startRedis({ args: ['--replicaof', HOST, String(master.port)] });
    started.push(replica);
    await until('the replica to sync', async () =>
      (await redisCommand(replica, ['INFO', 'replication'])).includes('master_link_status:up'),
    );
    const sentinel = await startSentinel(master);
    started.push(sentinel);
    return { master, replica, sentinel, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
