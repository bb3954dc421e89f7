import { createLimiter, type Decision, type LimitRequest, PLANS, type Plan } from '@ratecard/core';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Call } from './closed-loop.js';
import type { RedisTarget } from './redis-servers.js';
import type { Library } from './results.js';

/** One limiter on its own Redis connection, ready to be driven by the closed loop. */
export interface Contender {
  library: Library;
  subject: string;
  /** SCAN pattern matching every key this contender writes, and nothing else. */
  keyPattern: string;
  keysPerBucket: number;
  call: Call;
  /** Decisions not answered by Redis itself (ratecard's fallback or failure policy). */
  notFromStore(): number;
  storeStats(): Record<string, number> | null;
  close(): Promise<void>;
}

export type ContenderFactory = (
  target: RedisTarget,
  runId: string,
  plan: Plan,
  organizations: readonly string[],
) => Promise<Contender>;

type RedisStoreModule = typeof import('@ratecard/redis');

/** Loaded at run time, so the memory suites run (and the Redis suites are skipped) before @ratecard/redis is built. */
export async function loadRedisStore(): Promise<RedisStoreModule> {
  return import('@ratecard/redis');
}

const ENDPOINT = 'POST /browsers';

function numericStats(stats: object): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, value] of Object.entries(stats)) if (typeof value === 'number') out[name] = value;
  return out;
}

export const ratecardContender: ContenderFactory = async (target, runId, plan, organizations) => {
  const { redisStore } = await loadRedisStore();
  const client = await target.connect();
  const prefix = `rc-${runId}:`;
  const store = redisStore({ client, prefix });
  const limiter = createLimiter({ store });
  const requests: LimitRequest[] = organizations.map((organization) => ({ organization, endpoint: ENDPOINT, plan }));
  let notFromStore = 0;
  const allowed = (decision: Decision): boolean => {
    if (decision.source !== 'store') notFromStore++;
    return decision.allowed;
  };
  return {
    library: 'ratecard',
    subject: '`await limiter.consume(request)` on `redisStore({ client })` (defaults: auto-batching, deny cache)',
    keyPattern: `${prefix}*`,
    keysPerBucket: 1,
    call: (org) => limiter.consume(requests[org] as LimitRequest).then(allowed),
    notFromStore: () => notFromStore,
    storeStats: () => numericStats(store.stats()),
    close: async () => {
      await limiter.close();
      await client.quit();
    },
  };
};

export const flexibleContender: ContenderFactory = async (target, runId, plan, organizations) => {
  const client = await target.connect();
  // Same prefix length as ratecard's, and the key names the same bucket (organization and endpoint).
  const keyPrefix = `rl-${runId}`;
  const keys = organizations.map((organization) => `${organization}:${ENDPOINT}`);
  const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix, points: PLANS[plan], duration: 60 });
  const admitted = (): boolean => true;
  const denied = (reason: unknown): boolean => {
    if (reason instanceof RateLimiterRes) return false;
    throw reason;
  };
  return {
    library: 'rate-limiter-flexible',
    subject:
      '`await RateLimiterRedis.consume(key)` (points = the plan’s limit, duration 60 s, defaults otherwise; ' +
      'key `<organization>:POST /browsers`)',
    keyPattern: `${keyPrefix}:*`,
    keysPerBucket: 1,
    call: (org) => limiter.consume(keys[org] as string).then(admitted, denied),
    notFromStore: () => 0,
    storeStats: () => null,
    close: async () => {
      await client.quit();
    },
  };
};
