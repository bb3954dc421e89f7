import { strict as assert } from 'node:assert';
import { DEBT_OFFSET, refusal } from '../bucket.js';
import { concurrency, type Limit, perMinute, tokenBucket } from '../limits.js';
import type { Lease } from '../store.js';
import type { ContractTest } from './contract-support.js';
import { ExactBucketModel, type ExactMultiDecision } from './exact-model.js';

/** U = 6 000, R = 1: a token every 6 s. */
const tenPerMinute = perMinute(10);
/** U = 600, R = 1. */
const tokens = perMinute(100, { name: 'tokens' });
/** U = 1 000, R = 1: a token a second, 10 at most. */
const tenPerTenSeconds = tokenBucket({ capacity: 10, refill: 10, intervalMs: 10_000, name: 'ten' });
const sessions = concurrency(2, { name: 'sessions' });
const one = concurrency(1, { name: 'one' });

const BUDGET = 60_000;
const lease = (id: string, ms = 60_000): Lease => ({ id, ms });

/**
 * The store contract of leases (docs/stores.md, "Leases"): concurrency limits, costs set aside and settled, cancel,
 * extend, expiry in order, debt, reset; and a seeded schedule of all of them against ExactBucketModel.
 */
export function leasesContract(test: ContractTest): void {
  test('holds at most n leases of a concurrency limit, and frees a slot when one settles', async (store, _c, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [sessions], [1], BUDGET, lease('a')), [1]);
    assert.deepEqual(await store.consume(o, 'e', [sessions], [1], BUDGET, lease('b')), [0]);
    assert.deepEqual(await store.consume(o, 'e', [sessions], [1], BUDGET, lease('c')), [-1]);
    assert.deepEqual(await store.peek(o, 'e', [sessions], [1]), [-1]);
    assert.equal(await store.settle(o, 'e', [sessions], { id: 'a', actual: [1] }, BUDGET), true);
    assert.equal(await store.settle(o, 'e', [sessions], { id: 'a', actual: [1] }, BUDGET), false);
    assert.deepEqual(await store.consume(o, 'e', [sessions], [1], BUDGET, lease('c')), [0]);
    // Another organization, and another endpoint, hold slots of their own.
    assert.deepEqual(await store.consume(org('b'), 'e', [sessions], [1], BUDGET, lease('a')), [1]);
    assert.deepEqual(await store.consume(o, 'f', [sessions], [1], BUDGET, lease('a')), [1]);
  });

  test('takes several slots of a lease that asks for them', async (store, _c, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [sessions], [2], BUDGET, lease('a')), [0]);
    assert.deepEqual(await store.consume(o, 'e', [sessions], [1], BUDGET, lease('b')), [-1]);
    assert.equal(await store.settle(o, 'e', [sessions], { id: 'a', actual: 0 }, BUDGET), true);
    assert.deepEqual(await store.consume(o, 'e', [sessions], [1], BUDGET, lease('b')), [1]);
  });

  test('frees the slots of a lease at its expiry, and settles it no more', async (store, clock, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [one], [1], BUDGET, lease('a', 1_000)), [0]);
    clock.now += 999;
    assert.deepEqual(await store.consume(o, 'e', [one], [1], BUDGET, lease('b')), [-1]);
    clock.now += 1;
    assert.deepEqual(await store.consume(o, 'e', [one], [1], BUDGET, lease('b')), [0]);
    assert.equal(await store.settle(o, 'e', [one], { id: 'a', actual: [1] }, BUDGET), false);
  });

  test('extends a lease from now', async (store, clock, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [one], [1], BUDGET, lease('a', 1_000)), [0]);
    clock.now += 900;
    assert.equal(await store.settle(o, 'e', [one], { id: 'a', holdMs: 1_000 }, BUDGET), true);
    clock.now += 999;
    assert.deepEqual(await store.consume(o, 'e', [one], [1], BUDGET, lease('b')), [-1]);
    clock.now += 1;
    assert.deepEqual(await store.consume(o, 'e', [one], [1], BUDGET, lease('b')), [0]);
    assert.equal(await store.settle(o, 'e', [one], { id: 'a', holdMs: 1_000 }, BUDGET), false);
  });

  test('sets a reserved cost aside, and settles the actual cost in its place', async (store, _c, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], [4], BUDGET, lease('a')), [6 * 6_000]);
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], 7, BUDGET), [-1 - 6 * 6_000]);
    assert.equal(await store.settle(o, 'e', [tenPerMinute], { id: 'a', actual: [1] }, BUDGET), true);
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], 7, BUDGET), [2 * 6_000]);
  });

  test('settles only the lease it names: an id the key does not hold changes nothing', async (store, _c, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], [4], BUDGET, lease('a')), [6 * 6_000]);
    assert.equal(await store.settle(o, 'e', [tenPerMinute], { id: 'b', actual: [1] }, BUDGET), false);
    assert.equal(await store.settle(o, 'e', [tenPerMinute], { id: 'b', holdMs: 1_000 }, BUDGET), false);
    assert.deepEqual(await store.peek(o, 'e', [tenPerMinute], 7), [-1 - 6 * 6_000]);
    assert.equal(await store.settle(o, 'e', [tenPerMinute], { id: 'a', actual: [1] }, BUDGET), true);
    assert.deepEqual(await store.peek(o, 'e', [tenPerMinute], 9), [0]);
  });

  test('gives every reserved token back on a cancel', async (store, _c, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], [4], BUDGET, lease('a')), [6 * 6_000]);
    assert.equal(await store.settle(o, 'e', [tenPerMinute], { id: 'a', actual: 0 }, BUDGET), true);
    assert.deepEqual(await store.peek(o, 'e', [tenPerMinute], 10), [0]);
  });

  test('never gives back more than the bucket could have held had the request cost its actual', async (store, clock, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [tenPerTenSeconds], [5], BUDGET, lease('a')), [5_000]);
    // Full meanwhile had the lease cost nothing: the 5 set aside are not refilled under it.
    clock.now += 5_000;
    assert.deepEqual(await store.consume(o, 'e', [tenPerTenSeconds], 6, BUDGET), [-1 - 5_000]);
    assert.deepEqual(await store.consume(o, 'e', [tenPerTenSeconds], 5, BUDGET), [0]);
    assert.equal(await store.settle(o, 'e', [tenPerTenSeconds], { id: 'a', actual: 0 }, BUDGET), true);
    // Had the request cost 0, the bucket would hold 10 − 5 = 5 now: a refund on top of a refilled bucket would give 10.
    assert.deepEqual(await store.peek(o, 'e', [tenPerTenSeconds], 6), [-1 - 5_000]);
    assert.deepEqual(await store.peek(o, 'e', [tenPerTenSeconds], 5), [0]);
  });

  test('takes an overrun below empty, down to minus the capacity, and refills it before admitting', async (store, clock, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], [2], BUDGET, lease('a')), [8 * 6_000]);
    assert.equal(await store.settle(o, 'e', [tenPerMinute], { id: 'a', actual: [25] }, BUDGET), true);
    // 10 − 25 = −15 tokens, floored at −10.
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], 1, BUDGET), [refusal(-60_000)]);
    assert.equal(refusal(-60_000), -60_000 - 1 - DEBT_OFFSET);
    clock.now += 60_000;
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], 1, BUDGET), [-1]);
    clock.now += 6_000;
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], 1, BUDGET), [0]);
  });

  test('keeps the charge of a lease that expires, refilled to its instant', async (store, clock, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], 5, BUDGET), [5 * 6_000]);
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute], [4], BUDGET, lease('a', 30_000)), [6_000]);
    // At 30 s the bucket has refilled 5 tokens (capped at 10) and the lease's 4 are charged: 6 then, 7 at 36 s.
    clock.now += 36_000;
    assert.deepEqual(await store.peek(o, 'e', [tenPerMinute], 7), [0]);
    assert.deepEqual(await store.peek(o, 'e', [tenPerMinute], 8), [-1 - 7 * 6_000]);
    assert.equal(await store.settle(o, 'e', [tenPerMinute], { id: 'a', actual: [0] }, BUDGET), false);
  });

  test('charges all or nothing across buckets and concurrency limits, with a cost per limit', async (store, _c, org) => {
    const o = org('a');
    const limits: readonly Limit[] = [tenPerMinute, tokens, one];
    assert.deepEqual(await store.consume(o, 'e', limits, [1, 40, 1], BUDGET, lease('a')), [9 * 6_000, 60 * 600, 0]);
    // Refused by the concurrency limit: nothing set aside, nothing charged.
    assert.deepEqual(await store.consume(o, 'e', limits, [1, 40, 1], BUDGET, lease('b')), [
      -1 - 9 * 6_000,
      -1 - 60 * 600,
      -1,
    ]);
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute, tokens], [1, 60], BUDGET), [8 * 6_000, 0]);
    assert.equal(await store.settle(o, 'e', limits, { id: 'a', actual: [1, 10, 1] }, BUDGET), true);
    assert.deepEqual(await store.peek(o, 'e', [tenPerMinute, tokens], [8, 30]), [0, 0]);
  });

  test('forgets the holds of reset limits with their buckets', async (store, _c, org) => {
    const o = org('a');
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute, one], [3, 1], BUDGET, lease('a')), [7 * 6_000, 0]);
    await store.reset(o, 'e', [one], BUDGET);
    assert.deepEqual(await store.consume(o, 'e', [one], [1], BUDGET, lease('b')), [0]);
    // The lease still holds its 3 tokens of the bucket, and settles them.
    assert.deepEqual(await store.peek(o, 'e', [tenPerMinute], 7), [0]);
    assert.equal(await store.settle(o, 'e', [tenPerMinute, one], { id: 'a', actual: [1, 1] }, BUDGET), true);
    assert.deepEqual(await store.peek(o, 'e', [tenPerMinute], 9), [0]);
    await store.reset(o, 'e', [tenPerMinute, one], BUDGET);
    assert.equal(await store.settle(o, 'e', [one], { id: 'b', actual: [1] }, BUDGET), false);
  });

  test('matches the exact model over a seeded schedule of reserves, settles, cancels, extends and consumes', async (store, clock, org) => {
    const o = org('a');
    const model = new ExactBucketModel();
    const limits: readonly Limit[] = [tenPerMinute, tokens, sessions];
    let seed = 20_261_127;
    const random = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    const open: string[] = [];
    for (let step = 0; step < 300; step++) {
      clock.now += [0, 1, 250, 1_000, 6_000, 20_000][random(6)] as number;
      const at = clock.now;
      const what = random(10);
      if (what < 4) {
        const id = `l${step}`;
        const ms = [500, 5_000, 60_000][random(3)] as number;
        const cost = [1 + random(2), 1 + random(30), 1];
        const expected = model.reserve(o, at, limits, cost, id, ms);
        const outcomes = await store.consume(o, 'e', limits, cost, BUDGET, lease(id, ms));
        assert.deepEqual(outcomes, outcomesOf(expected), `step ${step}: reserve`);
        if (!expected.limited) open.push(id);
      } else if (what < 7 && open.length > 0) {
        const id = open.splice(random(open.length), 1)[0] as string;
        const actual = random(4) === 0 ? [0, 0, 0] : [random(4), random(60), 1];
        const held = model.settle(o, at, limits, id, actual);
        assert.equal(await store.settle(o, 'e', limits, { id, actual }, BUDGET), held, `step ${step}: settle ${id}`);
      } else if (what < 8 && open.length > 0) {
        const id = open[random(open.length)] as string;
        const holdMs = [1_000, 30_000][random(2)] as number;
        const held = model.extend(o, at, id, holdMs);
        assert.equal(await store.settle(o, 'e', limits, { id, holdMs }, BUDGET), held, `step ${step}: extend ${id}`);
      } else {
        const plain = [tenPerMinute, tokens];
        const cost = [1, 1 + random(20)];
        const expected = model.consumeAll(o, at, plain, cost);
        const outcomes = await store.consume(o, 'e', plain, cost, BUDGET);
        assert.deepEqual(outcomes, outcomesOf(expected), `step ${step}: consume`);
      }
    }
  });
}

/** The outcomes a store gives for a model decision: the units after it, or, refused, the refusal of what is held. */
function outcomesOf(decision: ExactMultiDecision): number[] {
  return decision.limits.map((each) => (decision.limited ? refusal(each.units) : each.units));
}
