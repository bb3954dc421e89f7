import { strict as assert } from 'node:assert';
import { inPeriod, type Limit, perMinute, quota } from '../limits.js';
import type { ContractTest } from './contract-support.js';

const daily = quota(3, { per: 'day', name: 'daily' });
/** U = 6 000, R = 1. */
const tenPerMinute = perMinute(10);
const BUDGET = 60_000;

/** The limit a store is given for a quota at `now`: the quota of the period `now` falls in. */
const at = (limit: Limit, now: number): Limit => inPeriod([limit], now)[0] as Limit;

/**
 * The store contract of quotas: a bucket that never refills within its period and is full again when a later period
 * starts (the limit a store is given carries `periodEnd`); a call of an earlier period counts in the stored one.
 */
export function quotasContract(test: ContractTest): void {
  test('admits a quota per period, refills nothing within it, and starts full in the next', async (store, clock, org) => {
    const o = org('a');
    const today = at(daily, clock.now);
    for (let i = 2; i >= 0; i--) assert.deepEqual(await store.consume(o, 'e', [today], 1, BUDGET), [i]);
    assert.deepEqual(await store.consume(o, 'e', [today], 1, BUDGET), [-1]);
    clock.now = (today.periodEnd as number) - 1;
    assert.deepEqual(await store.consume(o, 'e', [at(daily, clock.now)], 1, BUDGET), [-1]);
    clock.now += 1;
    const tomorrow = at(daily, clock.now);
    assert.equal(tomorrow.periodStart, today.periodEnd);
    assert.deepEqual(await store.peek(o, 'e', [tomorrow], 3), [0]);
    assert.deepEqual(await store.consume(o, 'e', [tomorrow], 2, BUDGET), [1]);
  });

  test('counts a call of an earlier period in the stored later one', async (store, clock, org) => {
    const o = org('a');
    const today = at(daily, clock.now);
    const tomorrow = at(daily, today.periodEnd as number);
    assert.deepEqual(await store.consume(o, 'e', [tomorrow], 2, BUDGET), [1]);
    // A process whose clock is behind still asks for today: it is charged in tomorrow's bucket, which was written.
    assert.deepEqual(await store.consume(o, 'e', [today], 1, BUDGET), [0]);
    assert.deepEqual(await store.consume(o, 'e', [tomorrow], 1, BUDGET), [-1]);
  });

  test('charges a quota all or nothing beside a token bucket, and holds it for a lease', async (store, clock, org) => {
    const o = org('a');
    const limits = [tenPerMinute, at(daily, clock.now)];
    assert.deepEqual(await store.consume(o, 'e', limits, [1, 2], BUDGET), [9 * 6_000, 1]);
    assert.deepEqual(await store.consume(o, 'e', limits, [1, 2], BUDGET), [-1 - 9 * 6_000, -1 - 1]);
    assert.deepEqual(await store.consume(o, 'e', limits, [1, 1], BUDGET, { id: 'a', ms: 60_000 }), [8 * 6_000, 0]);
    assert.deepEqual(await store.peek(o, 'e', limits, [1, 1]), [-1 - 8 * 6_000, -1]);
    assert.equal(await store.settle(o, 'e', limits, { id: 'a', actual: [1, 0] }, BUDGET), true);
    assert.deepEqual(await store.peek(o, 'e', limits, [1, 1]), [7 * 6_000, 0]);
  });

  test('keeps a quota bucket until its period ends, and no longer', async (store, clock, org) => {
    const o = org('a');
    const today = at(daily, clock.now);
    assert.deepEqual(await store.consume(o, 'e', [today], 3, BUDGET), [0]);
    clock.now = (today.periodEnd as number) + 86_400_000 * 3;
    assert.deepEqual(await store.consume(o, 'e', [at(daily, clock.now)], 3, BUDGET), [0]);
  });
}
