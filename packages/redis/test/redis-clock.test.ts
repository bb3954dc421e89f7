import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEndpointValue, endpointKey, redisStore } from '../src/index.js';
import { consumeRpm, peekRpm, rpmValue, U } from './support/limits.js';
import { connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

async function redisTimeMs(client: Redis): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

describe.skipIf(REDIS_URL === null)('the default clock, Redis TIME', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  it('stamps a bucket with the server time in ms', async () => {
    const org = uniqueOrg('time');
    const before = await redisTimeMs(client);
    await consumeRpm(redisStore({ client }), org, 'e', 10, 1);
    const after = await redisTimeMs(client);
    const value = (await client.getBuffer(endpointKey(org, 'e'))) as Buffer;
    const updatedAt = decodeEndpointValue(value)?.[0]?.updatedAt;
    expect(updatedAt).toBeGreaterThanOrEqual(before);
    expect(updatedAt).toBeLessThanOrEqual(after);
  });

  it('ignores this process clock', async () => {
    const org = uniqueOrg('skew');
    const store = redisStore({ client });
    const realNow = Date.now;
    Date.now = () => realNow() + 3_600_000;
    try {
      expect(await consumeRpm(store, org, 'e', 10, 10)).toBe(0);
      // An hour ahead locally refills nothing in Redis.
      expect(await consumeRpm(store, org, 'e', 10, 1)).toBeLessThan(0);
    } finally {
      Date.now = realNow;
    }
  });

  it('refills as the server time passes', async () => {
    const store = redisStore({ client });
    const org = uniqueOrg('refill');
    // 60 000 per minute: a token per ms.
    expect(await consumeRpm(store, org, 'e', 60_000, 60_000)).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(await peekRpm(store, org, 'e', 60_000, 20)).toBeGreaterThanOrEqual(10 * U);
  });

  // Redis' own clock cannot be stepped from a test; a bucket stamped an hour ahead of it is what a host clock stepped
  // back an hour after the write leaves, and the script must treat it the same way with TIME as with a client clock.
  it('neither refills nor admits when the server clock is behind the stored time, and counts on from it', async () => {
    const store = redisStore({ client });
    const org = uniqueOrg('time-back');
    const key = endpointKey(org, 'e');
    const ahead = (await redisTimeMs(client)) + 3_600_000;
    await client.set(key, rpmValue(0, ahead, 10), 'PX', 4_000_000);
    expect(await peekRpm(store, org, 'e', 10, 1)).toBe(-1);
    expect(await consumeRpm(store, org, 'e', 10, 1)).toBe(-1);
    await client.set(key, rpmValue(2 * U, ahead, 10), 'PX', 4_000_000);
    const outcome = await consumeRpm(store, org, 'e', 10, 1);
    expect(outcome).toBe(U);
    // Written at the stored time, not Redis' now, and kept until the bucket is full counted from there.
    expect(await client.get(key)).toBe(rpmValue(U, ahead, 10));
    // Nine tokens short of full, at 10 per minute: 54 s.
    expect(await client.pexpiretime(key)).toBe(ahead + 54_000);
  });
});
