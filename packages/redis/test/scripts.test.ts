import { createHash } from 'node:crypto';
import { createLimiter } from '@ratecard/core';
import { TEST_VECTORS, VECTOR_ANCHOR, type VectorStep, vectorLimit } from '@ratecard/core/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisStore } from '../src/index.js';
import { CONSUME, CONSUME_ON_MASTER } from '../src/scripts/consume.js';
import { luaScript, normaliseLua } from '../src/scripts/lua-script.js';
import { RESET } from '../src/scripts/reset.js';
import { consumeRpm, peekRpm, resetRpm } from './support/limits.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';
import { runTraffic } from './support/traffic.js';

describe('script text', () => {
  it('is hashed after normalisation, with SHA1 computed at load', () => {
    for (const script of [CONSUME, CONSUME_ON_MASTER, RESET]) {
      expect(script.sha).toBe(createHash('sha1').update(script.text).digest('hex'));
      expect(normaliseLua(script.text)).toBe(script.text);
    }
  });

  it('keeps its SHA when re-indented or re-commented', () => {
    const tidy = luaScript('x', 'local a = 1 -- one\nreturn a\n');
    const messy = luaScript('x', '\n  -- a comment line\n    local  a =  1\t\t-- another\n\n  return a   \n');
    expect(messy.sha).toBe(tidy.sha);
  });
});

/** Function-valued own properties: where ioredis' defineCommand would put a command. */
function ownCommands(client: Redis | Cluster): string[] {
  return Object.getOwnPropertyNames(client).filter(
    (name) => typeof (client as unknown as Record<string, unknown>)[name] === 'function',
  );
}

describe.skipIf(REDIS_URL === null)('scripts on a standalone server', () => {
  let client: Redis;
  let admin: Redis;
  beforeAll(async () => {
    [client, admin] = await Promise.all([connectStandalone(), connectStandalone()]);
  });
  afterAll(() => {
    client.disconnect();
    admin.disconnect();
  });

  it('are loaded with EVAL only when Redis answers NOSCRIPT', async () => {
    await admin.script('FLUSH');
    const store = redisStore({ client });
    const org = uniqueOrg('noscript');
    await consumeRpm(store, org, 'e', 10, 1);
    await consumeRpm(store, org, 'e', 10, 1);
    await peekRpm(store, org, 'e', 10, 1);
    await peekRpm(store, org, 'e', 10, 1);
    // A peek is a call of the consume script that writes nothing.
    expect(store.stats().scriptReloads).toBe(1);
    expect(await admin.script('EXISTS', CONSUME.sha, RESET.sha)).toEqual([1, 0]);
  });

  it('define no command on the client', async () => {
    const before = ownCommands(client);
    const store = redisStore({ client });
    await consumeRpm(store, uniqueOrg('define'), 'e', 10, 1);
    await peekRpm(store, uniqueOrg('define'), 'e', 10, 1);
    await resetRpm(store, uniqueOrg('define'), 'e');
    expect(ownCommands(client)).toEqual(before);
  });

  it('survive SCRIPT FLUSH during traffic with zero failed calls', async () => {
    const store = redisStore({ client });
    const limiter = createLimiter({ store, onStoreError: 'throw', storeTimeoutMs: 2_000 });
    let flushing = true;
    let flushes = 0;
    const flusher = (async () => {
      while (flushing) {
        await admin.script('FLUSH');
        flushes++;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const orgs = Array.from({ length: 20 }, () => uniqueOrg('flush'));
    const { decisions, failures } = await runTraffic(limiter, orgs, 6_000, 64);
    flushing = false;
    await flusher;
    expect(failures).toEqual([]);
    expect(decisions.every((decision) => decision.source === 'store')).toBe(true);
    expect(flushes).toBeGreaterThan(3);
    expect(store.stats().scriptReloads).toBeGreaterThan(1);
  });
});

describe.skipIf(REDIS_URL === null)('the scripts against the shared test vectors', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  // Every step of every case, consume, peek and reset, on the step's limit at the step's time (clock 'client'): the
  // Lua must give core's outcome to the unit, whatever the shape, and across changes of shape under one name. The
  // empty anchor keeps the key from expiring in real time between two steps (see VECTOR_ANCHOR).
  it.each(TEST_VECTORS.cases.map((vector) => [vector.name, vector] as const))('reproduce %s', async (_name, vector) => {
    let now = (vector.steps[0] as VectorStep).at;
    const store = redisStore({ client, clock: 'client', now: () => now, denyCacheSize: 0 });
    const org = uniqueOrg('vector');
    expect(await store.consume(org, 'e', [VECTOR_ANCHOR], VECTOR_ANCHOR.capacity)).toEqual([0]);
    const seen: unknown[] = [];
    for (const step of vector.steps) {
      now = step.at;
      const limits = [vectorLimit(step.limit)];
      if (step.op === 'reset') {
        await store.reset(org, 'e', limits);
        continue;
      }
      const [outcome] = await (step.op === 'consume' ? store.consume : store.peek).call(
        store,
        org,
        'e',
        limits,
        step.cost,
      );
      seen.push({ at: step.at, op: step.op, outcome });
    }
    const expected = vector.steps
      .filter((step) => step.op !== 'reset')
      .map((step) => ({ at: step.at, op: step.op, outcome: step.outcome }));
    expect(seen).toEqual(expected);
  });
});

describe.skipIf(CLUSTER_NODES === null)('scripts on a cluster', () => {
  let client: Cluster;
  beforeAll(async () => {
    client = await connectCluster();
  });
  afterAll(() => client.disconnect());

  it('are loaded on each master that lacks them', async () => {
    await Promise.all(client.nodes('master').map((node) => node.script('FLUSH')));
    const store = redisStore({ client });
    // Enough organizations to reach every master, sent twice.
    const orgs = Array.from({ length: 60 }, () => uniqueOrg('per-node'));
    await Promise.all(orgs.map((org) => consumeRpm(store, org, 'e', 10, 1)));
    const reloads = store.stats().scriptReloads;
    expect(reloads).toBeGreaterThanOrEqual(3);
    await Promise.all(orgs.map((org) => consumeRpm(store, org, 'e', 10, 1)));
    expect(store.stats().scriptReloads).toBe(reloads);
    // A cluster sends consume calls to each master as the per-master script.
    for (const node of client.nodes('master')) expect(await node.script('EXISTS', CONSUME_ON_MASTER.sha)).toEqual([1]);
  });

  it('survive SCRIPT FLUSH on every master during traffic with zero failed calls', async () => {
    const store = redisStore({ client });
    const limiter = createLimiter({ store, onStoreError: 'throw', storeTimeoutMs: 2_000 });
    let flushing = true;
    const flusher = (async () => {
      while (flushing) {
        await Promise.all(client.nodes('master').map((node) => node.script('FLUSH')));
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const orgs = Array.from({ length: 40 }, () => uniqueOrg('cluster-flush'));
    const { decisions, failures } = await runTraffic(limiter, orgs, 6_000, 64);
    flushing = false;
    await flusher;
    expect(failures).toEqual([]);
    expect(decisions.every((decision) => decision.source === 'store')).toBe(true);
    expect(store.stats().scriptReloads).toBeGreaterThan(3);
  });
});
