import { perHour } from '@ratecard/core';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSUME, HEADER_SIZE, packCall, packedSize, packHeader } from '../src/scripts/consume.js';
import { FLOOR, floorArgs } from './support/floor-script.js';
import { connectStandalone, REDIS_URL, uniqueOrg } from './support/redis.js';

// The floor script is only a floor if it decides: on one limit it admits and refuses as the store's script does.
describe.skipIf(REDIS_URL === null)('the floor script of script-cost --lone', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectStandalone();
  });
  afterAll(() => client.disconnect());

  // 5 an hour: a token is 720 000 units at 1 a ms, so the few ms between the two scripts' calls never refill one.
  const limit = perHour(5);

  /** Tokens left (admitted) or held (refused) and whether admitted, from either script's packed reply. */
  const decision = (reply: Buffer) => {
    const outcome = reply.readDoubleLE(8);
    const admitted = outcome >= 0;
    return { admitted, tokens: Math.floor((admitted ? outcome : -1 - outcome) / limit.unitsPerToken) };
  };

  it('admits, refuses and writes the value as the consume script does', async () => {
    const [ours, floor] = [uniqueOrg('consume'), uniqueOrg('floor')];
    const admitted: boolean[] = [];
    for (const cost of [1, 2, 1, 3, 1, 1, 1]) {
      const packed = Buffer.alloc(HEADER_SIZE + packedSize([limit]));
      packCall(packed, packHeader(packed, undefined, undefined, false), [limit], cost);
      const consumed = (await client.callBuffer('eval', CONSUME.text, 1, ours, packed)) as Buffer;
      const floored = (await client.callBuffer('eval', FLOOR.text, 1, floor, ...floorArgs(limit, cost))) as Buffer;
      expect(decision(floored)).toEqual(decision(consumed));
      admitted.push(decision(floored).admitted);
      // The same entry but for the few ms between the two writes, expiring within a few ms of each other.
      const entry = async (key: string) => {
        const [name, units, , shape] = ((await client.get(key)) ?? '').split(' ');
        return [name, Math.floor(Number(units) / limit.unitsPerToken), shape];
      };
      expect(await entry(floor)).toEqual(await entry(ours));
      const [at, bt] = [await client.pexpiretime(ours), await client.pexpiretime(floor)];
      expect(Math.abs(at - bt)).toBeLessThan(100);
    }
    expect(admitted).toEqual([true, true, true, false, true, false, false]);
  });
});
