import { canStartRedis, type RedisAddress, redisCommand, startRedis, startRedisCluster } from '@ratecard/redis/testing';
import type { TestProject } from 'vitest/node';
import { PASSWORD } from './run.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A standalone server, or null when the suites must skip (canStartRedis has warned). */
    redisUrl: string | null;
    /** A standalone server that asks for a password (requirepass), as `redis://:<password>@…`. */
    passwordUrl: string | null;
    /** A 3-master cluster's nodes. */
    clusterNodes: RedisAddress[] | null;
  }
}

// Servers of the command line's own, never REDIS_URL: the CLI reads REDIS_URL, and the tests set it themselves.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!canStartRedis('@ratecard/cli tests')) {
    project.provide('redisUrl', null);
    project.provide('passwordUrl', null);
    project.provide('clusterNodes', null);
    return async () => {};
  }
  const [plain, guarded, cluster] = await Promise.all([startRedis(), startRedis(), startRedisCluster()]);
  // Asked for once it runs: startRedis waits for a PING that a password would refuse.
  await redisCommand(guarded, ['CONFIG', 'SET', 'requirepass', PASSWORD]);
  project.provide('redisUrl', plain.url);
  project.provide('passwordUrl', `redis://:${PASSWORD}@${guarded.host}:${guarded.port}`);
  project.provide('clusterNodes', cluster.nodes);
  return async () => {
    await Promise.all([plain.stop(), guarded.stop(), cluster.stop()]);
  };
}
