import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey, type RedisStore, redisStore } from '../src/index.js';
import { consumeRpm, minute, peekRpm, U } from './support/limits.js';
import { CLUSTER_NODES, connectCluster, connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

// A frozen clock, so that the second look sees exactly what the first left.
const T0 = 1_700_000_000_000;
const HOSTILE = [
  'a}b',
  '{x}',
  'a:b',
  '%7B',
  '%',
  '}',
  '{',
  ':',
  'a b',
  '\u{1F600}'.repeat(128),
  'ü'.repeat(256),
  '\uD800',
];

function hostileOrgs(): string[] {
  const base = uniqueOrg('hostile');
  // Each id is put inside and around a unique name, so a broken encoding would merge two of them.
  return HOSTILE.flatMap((id) => [`${base}${id}`, `${id}${base}`, `${base}${id}${base}`]).concat(
    `${base}\uDBFF`,
    `${base}\uFFFD`,
  );
}

async function expectDistinctBuckets(store: RedisStore, orgs: string[]): Promise<void> {
  // All at once, so that they travel in the same batch (one script call per slot in a cluster).
  const first = await Promise.all(orgs.map((org, i) => consumeRpm(store, org, 'POST /browsers', 10, 1 + (i % 10))));
  expect(first).toEqual(orgs.map((_, i) => (10 - 1 - (i % 10)) * U));
  const seen = await Promise.all(orgs.map((org) => peekRpm(store, org, 'POST /browsers', 10, 1)));
  expect(seen).toEqual(first.map((units) => (units >= U ? units - U : -1 - units)));
}

describe.skipIf(REDIS_URL === null)('hostile organization ids on a standalone server', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  it('each get a bucket of their own', async () => {
    await expectDistinctBuckets(redisStore({ client, clock: 'client', now: () => T0 }), hostileOrgs());
  });

  it('become keys that hold nothing but the prefix, the encoded names and the separators', async () => {
    const org = `${uniqueOrg('raw')}{x}:%7B`;
    await redisStore({ client }).consume(org, 'e:{y}', minute(10), 1);
    expect(await client.exists(`ratecard:{${org.replace('{x}:%7B', '%7Bx%7D%3A%257B')}}:e%3A%7By%7D`)).toBe(1);
  });
});

describe.skipIf(CLUSTER_NODES === null)('hostile organization ids on a cluster', () => {
  let client: Cluster;
  beforeAll(async () => {
    client = await connectCluster();
  });
  afterAll(() => client.disconnect());

  it('each get a bucket of their own, with no CROSSSLOT error', async () => {
    await expectDistinctBuckets(redisStore({ client, clock: 'client', now: () => T0 }), hostileOrgs());
  });

  it('land in the slot of their own hash tag', async () => {
    for (const org of hostileOrgs()) {
      const key = endpointKey(org, 'POST /browsers');
      expect(await client.cluster('KEYSLOT', key)).toBe(
        calculateSlot(key.slice(key.indexOf('{') + 1, key.indexOf('}'))),
      );
    }
  });

  it('share one slot for every endpoint of an organization', async () => {
    const org = `${uniqueOrg('slot')}a}b`;
    const slots = await Promise.all(
      ['POST /browsers', 'POST /browser-pools', 'PUT /browser-pools/:id', '{other}'].map((endpoint) =>
        client.cluster('KEYSLOT', endpointKey(org, endpoint)),
      ),
    );
    expect(new Set(slots).size).toBe(1);
  });
});
