import { strict as assert } from 'node:assert';
import type { Outcome } from '../bucket.js';
import { perDay, perHour, perSecond, tokenBucket } from '../limits.js';
import type { ContractTest } from './contract-support.js';

// Units per token (U) and per ms (R) of each limit, from g = gcd(refill, intervalMs): U = intervalMs / g, R = refill / g.
/** U = 200, R = 1: a token every 200 ms, 2 000 units full. */
const burstAbove = perSecond(5, { burst: 10 });
/** U = 200, R = 1: 400 units full. */
const burstBelow = perSecond(5, { burst: 2 });
/** U = 8 640, R = 1: a token every 8.64 s. */
const daily = perDay(10_000);
/** U = 1 000, R = 7: a token in 142.857… ms. */
const sevenPerSecond = tokenBucket({ capacity: 7, refill: 7, intervalMs: 1_000 });
/** U = 100, R = 1. */
const tenPerSecond = perSecond(10);
/** U = 3 600, R = 1. */
const thousandPerHour = perHour(1_000);
/** U = 180 000, R = 1: a token every 3 minutes. */
const twentyPerHour = perHour(20);

/** The store contract of the general limit model: any token bucket, several limits per call, all or nothing. */
export function limitsContract(test: ContractTest): void {
  test('admits a per-second burst above the rate at once, then one token every 200 ms', async (store, clock, org) => {
    for (let i = 9; i >= 0; i--) assert.deepEqual(await store.consume(org('a'), 'e', [burstAbove], 1), [i * 200]);
    assert.deepEqual(await store.consume(org('a'), 'e', [burstAbove], 1), [-1]);
    clock.now += 199;
    assert.deepEqual(await store.consume(org('a'), 'e', [burstAbove], 1), [-1 - 199]);
    clock.now += 1;
    assert.deepEqual(await store.consume(org('a'), 'e', [burstAbove], 1), [0]);
    clock.now += 1_000;
    assert.deepEqual(await store.consume(org('a'), 'e', [burstAbove], 5), [0]);
  });

  test('holds no more than a burst below the rate, however long the bucket idles', async (store, clock, org) => {
    assert.deepEqual(await store.consume(org('a'), 'e', [burstBelow], 2), [0]);
    assert.deepEqual(await store.consume(org('a'), 'e', [burstBelow], 1), [-1]);
    clock.now += 200;
    assert.deepEqual(await store.consume(org('a'), 'e', [burstBelow], 1), [0]);
    clock.now += 600_000;
    assert.deepEqual(await store.peek(org('a'), 'e', [burstBelow], 2), [0]);
    assert.deepEqual(await store.consume(org('a'), 'e', [burstBelow], 1), [200]);
    assert.deepEqual(await store.consume(org('a'), 'e', [burstBelow], 1), [0]);
    assert.deepEqual(await store.consume(org('a'), 'e', [burstBelow], 1), [-1]);
  });

  test('refills a per-day limit a token every 8.64 s, to the millisecond', async (store, clock, org) => {
    assert.deepEqual(await store.consume(org('a'), 'e', [daily], 10_000), [0]);
    clock.now += 8_639;
    assert.deepEqual(await store.consume(org('a'), 'e', [daily], 1), [-1 - 8_639]);
    clock.now += 1;
    assert.deepEqual(await store.consume(org('a'), 'e', [daily], 1), [0]);
    clock.now += 86_400_000;
    assert.deepEqual(await store.peek(org('a'), 'e', [daily], 10_000), [0]);
  });

  test('counts an odd interval exactly: 7 every 1 000 ms', async (store, clock, org) => {
    assert.deepEqual(await store.consume(org('a'), 'e', [sevenPerSecond], 7), [0]);
    clock.now += 142;
    assert.deepEqual(await store.consume(org('a'), 'e', [sevenPerSecond], 1), [-1 - 994]);
    clock.now += 1;
    assert.deepEqual(await store.consume(org('a'), 'e', [sevenPerSecond], 1), [1]);
    clock.now += 857;
    assert.deepEqual(await store.consume(org('a'), 'e', [sevenPerSecond], 6), [0]);
  });

  test('charges every limit of a call, answering one outcome per limit in their order', async (store, _clock, org) => {
    assert.deepEqual(await store.consume(org('a'), 'e', [tenPerSecond, thousandPerHour], 1), [900, 999 * 3_600]);
    assert.deepEqual(await store.consume(org('a'), 'e', [thousandPerHour, tenPerSecond], 2), [997 * 3_600, 700]);
    assert.deepEqual(await store.peek(org('a'), 'e', [tenPerSecond], 7), [0]);
  });

  test('charges nothing from the per-second bucket when the hourly one is empty', async (store, clock, org) => {
    assert.deepEqual(await store.consume(org('a'), 'e', [twentyPerHour], 20), [0]);
    assert.deepEqual(await store.consume(org('a'), 'e', [tenPerSecond, twentyPerHour], 1), [-1 - 1_000, -1]);
    assert.deepEqual(await store.peek(org('a'), 'e', [tenPerSecond], 10), [0]);
    clock.now += 180_000;
    assert.deepEqual(await store.consume(org('a'), 'e', [tenPerSecond, twentyPerHour], 1), [900, 0]);
  });

  test('charges nothing from the hourly bucket when the per-second one is empty', async (store, clock, org) => {
    assert.deepEqual(await store.consume(org('a'), 'e', [tenPerSecond], 10), [0]);
    assert.deepEqual(await store.consume(org('a'), 'e', [tenPerSecond, thousandPerHour], 1), [-1, -1 - 3_600_000]);
    assert.deepEqual(await store.peek(org('a'), 'e', [thousandPerHour], 1_000), [0]);
    clock.now += 100;
    assert.deepEqual(await store.consume(org('a'), 'e', [tenPerSecond, thousandPerHour], 1), [0, 999 * 3_600]);
  });

  test('peeks several limits as consume would answer, charging none of them', async (store, _clock, org) => {
    const both = [tenPerSecond, thousandPerHour];
    assert.deepEqual(await store.consume(org('a'), 'e', both, 4), [600, 996 * 3_600]);
    assert.deepEqual(await store.peek(org('a'), 'e', both, 6), [0, 990 * 3_600]);
    assert.deepEqual(await store.peek(org('a'), 'e', both, 7), [-1 - 600, -1 - 996 * 3_600]);
    assert.deepEqual(await store.consume(org('a'), 'e', both, 6), [0, 990 * 3_600]);
  });

  test('keeps the buckets of limits with different names apart, whatever their shapes', async (store, _clock, org) => {
    const a = perSecond(5, { name: 'a' });
    const b = perSecond(5, { name: 'b' });
    assert.deepEqual(await store.consume(org('o'), 'e', [a], 5), [0]);
    assert.deepEqual(await store.consume(org('o'), 'e', [b], 1), [800]);
    assert.deepEqual(await store.consume(org('o'), 'e', [a, b], 1), [-1, -1 - 800]);
    const minute = tokenBucket({ capacity: 10, refill: 10, intervalMs: 60_000 });
    const lookAlike = tokenBucket({ capacity: 10, refill: 10, intervalMs: 60_000, name: 'other' });
    assert.deepEqual(await store.consume(org('o'), 'e', [minute], 10), [0]);
    assert.deepEqual(await store.consume(org('o'), 'e', [lookAlike], 1), [9 * 6_000]);
  });

  test("reads a name character for character: '.' and '-' in it are no wildcards", async (store, _clock, org) => {
    // Under the names a pattern of 'a.b' or 'x-y' would match ('.' any character, '-' a repeat), the same shape,
    // emptied: the named limits' buckets are missing, so full. Two calls at once, as a store may batch them.
    const shape = { capacity: 5, refill: 5, intervalMs: 1_000 };
    const [o, p] = [org('o'), org('p')];
    assert.deepEqual(await store.consume(o, 'e', [tokenBucket({ ...shape, name: 'axb' })], 5), [0]);
    assert.deepEqual(await store.consume(p, 'e', [tokenBucket({ ...shape, name: 'y' })], 5), [0]);
    const dotted = tokenBucket({ ...shape, name: 'a.b' });
    const dashed = tokenBucket({ ...shape, name: 'x-y' });
    const both = await Promise.all([store.consume(o, 'e', [dotted], 1), store.consume(p, 'e', [dashed], 1)]);
    assert.deepEqual(both, [[800], [800]]);
  });

  test('keeps the tokens of a limit changed under its name, capped at the new capacity', async (store, clock, org) => {
    const ten = perSecond(10); // U = 100
    const twenty = perSecond(20); // U = 50
    const threeBurst = perSecond(5, { burst: 3 }); // U = 200
    assert.deepEqual(await store.consume(org('a'), 'e', [ten], 4), [6 * 100]);
    assert.deepEqual(await store.peek(org('a'), 'e', [twenty], 1), [5 * 50]);
    assert.deepEqual(await store.consume(org('a'), 'e', [twenty], 1), [5 * 50]);
    assert.deepEqual(await store.peek(org('a'), 'e', [threeBurst], 1), [2 * 200]);
    assert.deepEqual(await store.consume(org('a'), 'e', [threeBurst], 3), [0]);
    clock.now += 100;
    // Half a token at 5/s is 100 units of 200, and 50 units of 100 at 10/s.
    assert.deepEqual(await store.peek(org('a'), 'e', [ten], 1), [-1 - 50]);
  });

  test('rounds the part token down when a limit change changes the unit size', async (store, clock, org) => {
    const seven = tokenBucket({ capacity: 10, refill: 7, intervalMs: 1_000, name: 'x' }); // U = 1 000, R = 7
    const five = tokenBucket({ capacity: 10, refill: 5, intervalMs: 1_000, name: 'x' }); // U = 200, R = 1
    assert.deepEqual(await store.consume(org('a'), 'e', [seven], 10), [0]);
    clock.now += 1;
    assert.deepEqual(await store.peek(org('a'), 'e', [seven], 1), [-1 - 7]);
    // 7/1 000 token is 1.4 units of 1/200: 1.
    assert.deepEqual(await store.peek(org('a'), 'e', [five], 1), [-1 - 1]);
    clock.now += 142;
    // 1 001/1 000 token is 200.2 units of 1/200: 200, one whole token.
    assert.deepEqual(await store.consume(org('a'), 'e', [five], 1), [0]);
    const tenY = tokenBucket({ capacity: 10, refill: 10, intervalMs: 1_000, name: 'y' }); // U = 100
    const threeY = tokenBucket({ capacity: 10, refill: 3, intervalMs: 1_000, name: 'y' }); // U = 1 000
    assert.deepEqual(await store.consume(org('b'), 'e', [tenY], 10), [0]);
    clock.now += 150;
    // 150/100 tokens convert exactly to 1 500/1 000.
    assert.deepEqual(await store.consume(org('b'), 'e', [threeY], 1), [500]);
  });

  test('refills at the new rate from a refused call under a changed limit, as its Retry-After says', async (store, clock, org) => {
    // A drained 1-per-day quota becomes 1 per second under the same name: the refusal's Retry-After is 1 s at the
    // new rate, so the refused call must leave the bucket refilling at that rate (at the old one it would take a day).
    const oncePerDay = perDay(1, { name: 'q' });
    const oncePerSecond = perSecond(1, { name: 'q' });
    assert.deepEqual(await store.consume(org('a'), 'e', [oncePerDay], 1), [0]);
    assert.deepEqual(await store.consume(org('a'), 'e', [oncePerSecond], 1), [-1]);
    clock.now += 999;
    assert.deepEqual(await store.peek(org('a'), 'e', [oncePerSecond], 1), [-1 - 999]);
    clock.now += 1;
    assert.deepEqual(await store.consume(org('a'), 'e', [oncePerSecond], 1), [0]);
  });

  test('resets the bucket of each limit given, and of no other', async (store, _clock, org) => {
    const other = perSecond(5, { name: 'other' });
    const three = [tenPerSecond, thousandPerHour, other];
    assert.deepEqual(await store.consume(org('a'), 'e', three, 5), [500, 995 * 3_600, 0]);
    await store.reset(org('a'), 'e', [tenPerSecond, thousandPerHour]);
    assert.deepEqual(await store.peek(org('a'), 'e', three, 1), [-1 - 1_000, -1 - 3_600_000, -1]);
    assert.deepEqual(await store.peek(org('a'), 'e', [tenPerSecond, thousandPerHour], 1), [900, 999 * 3_600]);
    await store.reset(org('never-seen'), 'e', three);
  });

  test('admits exactly the smaller bound among concurrent calls on two limits', async (store, _clock, org) => {
    const admitted = async (organization: string, limits: Parameters<typeof store.consume>[2]) => {
      const outcomes = await Promise.all(
        Array.from({ length: 100 }, () => store.consume(organization, 'e', limits, 1) as Promise<Outcome[]>),
      );
      // All or nothing in every answer, under contention too.
      for (const each of outcomes) assert.ok(each.every((o) => o >= 0) || each.every((o) => o < 0), `${each}`);
      return outcomes.filter((each) => (each[0] as Outcome) >= 0).length;
    };
    const thirtyPerSecond = perSecond(30); // U = 100
    assert.equal(await admitted(org('a'), [thirtyPerSecond, twentyPerHour]), 20);
    assert.deepEqual(await store.peek(org('a'), 'e', [thirtyPerSecond], 1), [9 * 100]);
    const fortyPerHour = perHour(40); // U = 90 000
    assert.equal(await admitted(org('b'), [perSecond(15), fortyPerHour]), 15);
    assert.deepEqual(await store.peek(org('b'), 'e', [fortyPerHour], 1), [24 * 90_000]);
  });
}
