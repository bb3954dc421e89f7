import type { TestProject } from 'vitest/node';
import { type RedisAddress, redisClusterForTests, redisForTests } from '../../src/testing.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The standalone server, or null when the suites must skip. */
    redisUrl: string | null;
    /** True when the standalone server is shared (REDIS_URL): tests must not kill or flush it. */
    redisExternal: boolean;
    /** The cluster's nodes, or null when the suites must skip. */
    clusterNodes: RedisAddress[] | null;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await redisForTests('@ratecard/redis tests');
  const cluster = await redisClusterForTests('@ratecard/redis cluster tests').catch(async (error: unknown) => {
    await redis?.stop();
    throw error;
  });
  project.provide('redisUrl', redis?.url ?? null);
  project.provide('redisExternal', redis?.external ?? false);
  project.provide('clusterNodes', cluster?.nodes ?? null);
  return async () => {
    await Promise.all([redis?.stop(), cluster?.stop()]);
  };
}
