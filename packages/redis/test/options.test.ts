import { RateLimitError } from '@ratecard/core';
import { Cluster, Redis } from 'ioredis';
import { Cluster as ValkeyCluster } from 'iovalkey';
import { describe, expect, it } from 'vitest';
import { type RedisClient, type RedisStoreOptions, redisStore } from '../src/index.js';
import { consumeRpm } from './support/limits.js';

const client: RedisClient = {
  status: 'ready',
  callBuffer: () => Promise.resolve([]),
};

function refusal(options: unknown): RateLimitError {
  try {
    redisStore(options as RedisStoreOptions);
  } catch (error) {
    if (error instanceof RateLimitError) return error;
    throw error;
  }
  throw new Error('redisStore accepted the options');
}

describe('redisStore options', () => {
  it('needs an options object', () => {
    expect(refusal(undefined).message).toBe('ratecard: redisStore needs an options object, got undefined');
  });

  it('needs a client it knows: ioredis or iovalkey, node-redis client, cluster or sentinel', () => {
    for (const client of [{ status: 'ready' }, { sendCommand: () => undefined }, 'redis://localhost', null]) {
      const error = refusal({ client });
      expect(error.code).toBe('invalid_option');
      expect(error.message).toMatch(
        /^ratecard: client must be an ioredis or iovalkey Redis or Cluster, or a node-redis/,
      );
    }
  });

  it('refuses a prefix with braces, which would take the hash tag from the organization', () => {
    const error = refusal({ client, prefix: 'app{1}:' });
    expect(error.code).toBe('invalid_option');
    expect(error.message).toContain('got "app{1}:" (7 characters)');
  });

  it('refuses an ioredis or iovalkey Cluster with a keyPrefix, which would give one bucket two keys', () => {
    const nodes = [{ host: '127.0.0.1', port: 1 }];
    const clusters = [
      new Cluster(nodes, { keyPrefix: 'app:', lazyConnect: true }),
      new Cluster(nodes, { redisOptions: { keyPrefix: 'app:' }, lazyConnect: true }),
      new ValkeyCluster(nodes, { keyPrefix: 'app:', lazyConnect: true }),
    ];
    for (const cluster of clusters) {
      const error = refusal({ client: cluster });
      expect(error.code).toBe('invalid_option');
      expect(error.message).toMatch(/^ratecard: an ioredis or iovalkey Cluster with a keyPrefix is not supported/);
      expect(error.message).toContain('got keyPrefix "app:" (4 characters)');
      cluster.disconnect();
    }
  });

  it('takes a standalone ioredis client with a keyPrefix, and a Cluster without one', () => {
    // Standalone, every call names its keys in KEYS, which the client prefixes alike.
    const standalone = new Redis({ keyPrefix: 'app:', lazyConnect: true });
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    expect(redisStore({ client: standalone }).shared).toBe(true);
    expect(redisStore({ client: cluster }).shared).toBe(true);
    standalone.disconnect();
    cluster.disconnect();
  });

  it('knows only the clocks redis and client', () => {
    expect(refusal({ client, clock: 'local' }).message).toBe(
      `ratecard: clock must be 'redis' or 'client', got "local" (5 characters)`,
    );
  });

  it('refuses now with the Redis clock, where it would be ignored', () => {
    expect(refusal({ client, now: () => 0 }).code).toBe('invalid_option');
  });

  it('refuses a now that is not a function', () => {
    expect(refusal({ client, clock: 'client', now: 5 }).message).toBe(
      'ratecard: now must be a function returning epoch milliseconds, got 5',
    );
  });

  it('needs a non-negative whole denyCacheSize', () => {
    expect(refusal({ client, denyCacheSize: -1 }).message).toBe(
      'ratecard: denyCacheSize must be a non-negative integer, got -1',
    );
  });

  it('takes every option of RedisStoreOptions', () => {
    const every: Required<RedisStoreOptions> = {
      client,
      prefix: 'app:',
      clock: 'client',
      now: () => 0,
      denyCacheSize: 0,
    };
    expect(redisStore(every).stats().denyCacheSize).toBe(0);
  });

  it.each([
    ['clinet', 'client', { clinet: client }],
    ['denyCachSize', 'denyCacheSize', { client, denyCachSize: undefined }],
  ])('refuses the unknown option %s, even set to undefined, naming the option meant, %s', (key, meant, options) => {
    const error = refusal(options);
    expect(error.code).toBe('invalid_option');
    expect(error.message).toBe(
      `ratecard: redisStore got an unknown option "${key}"; did you mean "${meant}"? It takes client, prefix, clock, now, denyCacheSize`,
    );
  });

  it('declares a shared store', () => {
    expect(redisStore({ client }).shared).toBe(true);
  });

  it('refuses an empty organization, whose key Redis and the slot hash would place apart', async () => {
    const store = redisStore({ client });
    const error = await consumeRpm(store, '', 'e', 10, 1).catch((reason: unknown) => reason);
    expect((error as RateLimitError).code).toBe('invalid_argument');
  });

  it('rejects a call when the client clock returns no usable time', async () => {
    const store = redisStore({ client, clock: 'client', now: () => Number.NaN });
    const error = await Promise.resolve(consumeRpm(store, 'org', 'e', 10, 1)).catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).message).toBe('ratecard: now() must return epoch milliseconds, got NaN');
  });

  it('rejects calls with store_closed once closed', async () => {
    const store = redisStore({ client });
    store.close();
    const error = await Promise.resolve(consumeRpm(store, 'org', 'e', 10, 1)).catch((reason: unknown) => reason);
    expect((error as RateLimitError).code).toBe('store_closed');
  });

  it('drops the calls still queued when it is closed, and sends none of them', async () => {
    let sent = 0;
    const counting: RedisClient = { status: 'ready', callBuffer: () => Promise.resolve(++sent && []) };
    const store = redisStore({ client: counting });
    const queued = Array.from({ length: 5 }, (_, i) => consumeRpm(store, `org-${i}`, 'e', 10, 1));
    store.close();
    const outcomes = await Promise.allSettled(queued);
    expect(outcomes.map((o) => (o.status === 'rejected' ? o.reason.code : o.status))).toEqual(
      Array(5).fill('store_closed'),
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(sent).toBe(0);
  });
});
