import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { canStartRedis, redisCommand, redisForTests, startRedis } from '../src/testing.js';
import { CLUSTER_NODES, REDIS_EXTERNAL, REDIS_URL } from './support/redis.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const canSpawn = REDIS_URL !== null && (!REDIS_EXTERNAL || canStartRedis('@ratecard/redis harness tests'));

describe.skipIf(!canSpawn)('startRedis', () => {
  it('leaves no process behind once stopped', async () => {
    const server = await startRedis();
    const pid = server.pid as number;
    expect(await redisCommand(server, ['PING'])).toBe('PONG');
    await server.stop();
    expect(alive(pid)).toBe(false);
  });

  it('restarts a killed server on the same port, without the old data', async () => {
    const server = await startRedis();
    try {
      await redisCommand(server, ['SET', 'k', 'v']);
      await server.kill();
      await server.restart();
      expect(await redisCommand(server, ['EXISTS', 'k'])).toBe('0');
    } finally {
      await server.stop();
    }
  });

  it('runs without persistence', async () => {
    const server = await startRedis();
    const client = new Redis(server.url);
    try {
      expect(await client.config('GET', 'save')).toEqual(['save', '']);
      expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
});

describe.skipIf(CLUSTER_NODES === null)('startRedisCluster', () => {
  it('made a cluster of 3 masters with every slot served', async () => {
    const [node] = CLUSTER_NODES ?? [];
    if (node === undefined) throw new Error('no cluster node');
    const info = await redisCommand(node, ['CLUSTER', 'INFO']);
    expect(info).toContain('cluster_state:ok');
    expect(info).toContain('cluster_slots_assigned:16384');
    expect(info).toContain('cluster_size:3');
  });
});

describe('redisForTests', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('refuses a REDIS_URL that does not parse without printing it', async () => {
    vi.stubEnv('REDIS_URL', 'redis://default:Zm9v/YmFy+cXV4@redis.internal:6379');
    const error = await redisForTests('a suite').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe(
      'a suite: REDIS_URL is not a valid URL (write / ? # @ in a password as %2F %3F %23 %40)',
    );
    expect(JSON.stringify({ ...(error as object) })).not.toContain('YmFy');
  });
});
