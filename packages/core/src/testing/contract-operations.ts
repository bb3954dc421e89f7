import { strict as assert } from 'node:assert';
import { concurrency, inPeriod, type Limit, perMinute, quota } from '../limits.js';
import type { ContractTest } from './contract-support.js';

/** U = 6 000, R = 1. */
const tenPerMinute = perMinute(10);
const sessions = concurrency(2, { name: 'sessions' });
const daily = quota(5, { per: 'day', name: 'daily' });
const BUDGET = 60_000;

/**
 * The store contract of the operators' calls: `inspect` answers what a key holds as the store keeps it, writing
 * nothing; `blocks` makes and lifts blocks and answers those in force by the store's clock.
 */
export function operationsContract(test: ContractTest): void {
  test('inspects a key: its buckets as written, its leases, the store clock', async (store, clock, org) => {
    const o = org('a');
    const day = inPeriod([daily], clock.now)[0] as Limit;
    assert.deepEqual(await store.inspect(o, 'e'), { now: clock.now, buckets: [], leases: [] });
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute, day], [3, 2], BUDGET), [7 * 6_000, 3]);
    assert.deepEqual(await store.consume(o, 'e', [tenPerMinute, sessions], [1, 1], BUDGET, { id: 'a', ms: 5_000 }), [
      6 * 6_000,
      1,
    ]);
    clock.now += 1_000;
    const state = await store.inspect(o, 'e');
    assert.equal(state.now, clock.now);
    const byName = Object.fromEntries(state.buckets.map((bucket) => [bucket.name, bucket]));
    assert.deepEqual(Object.keys(byName).sort(), ['1m', 'daily']);
    assert.deepEqual(
      { ...byName['1m'] },
      { name: '1m', units: 7 * 6_000, updatedAt: clock.now - 1_000, capacity: 10, unitsPerToken: 6_000, unitsPerMs: 1 },
    );
    assert.deepEqual(
      { ...byName.daily },
      { name: 'daily', units: 3, updatedAt: day.periodEnd, capacity: 5, unitsPerToken: 1, unitsPerMs: 0 },
    );
    assert.equal(state.leases.length, 1);
    const lease = state.leases[0] as (typeof state.leases)[number];
    assert.equal(lease.id, 'a');
    assert.equal(lease.expiresAt, clock.now - 1_000 + 5_000);
    assert.deepEqual(
      [...lease.holds].map((hold) => ({ ...hold })).sort((a, b) => a.name.localeCompare(b.name)),
      [
        { name: '1m', amount: 1 },
        { name: 'sessions', amount: 1 },
      ],
    );
    // Inspecting wrote nothing: the same again, and the buckets decide as before.
    assert.deepEqual(await store.inspect(o, 'e'), state);
    assert.deepEqual(await store.peek(o, 'e', [tenPerMinute], 6), [1_000]);
    assert.deepEqual(await store.inspect(org('other'), 'e'), { now: clock.now, buckets: [], leases: [] });
  });

  test('keeps blocks until they end, lifts them, and answers them by the store clock', async (store, clock, org) => {
    const a = org('a');
    const b = org('b');
    const mine = (answer: { blocks: readonly { organization: string }[] }) =>
      answer.blocks.filter((block) => block.organization === a || block.organization === b);
    assert.deepEqual(mine(await store.blocks()), []);
    await store.blocks({ organization: a, endpoint: '*', ms: 10_000, reason: 'abuse report 17' });
    const made = await store.blocks({ organization: b, endpoint: 'POST /x', ms: 20_000, reason: '' });
    assert.equal(made.now, clock.now);
    assert.deepEqual(
      mine(made)
        .map((block) => ({ ...block }))
        .sort((x, y) => x.organization.localeCompare(y.organization)),
      [
        { organization: a, endpoint: '*', until: clock.now + 10_000, reason: 'abuse report 17' },
        { organization: b, endpoint: 'POST /x', until: clock.now + 20_000, reason: '' },
      ],
    );
    clock.now += 10_000;
    assert.deepEqual(
      mine(await store.blocks()).map((block) => block.organization),
      [b],
    );
    await store.blocks({ organization: b, endpoint: 'POST /x', ms: 0, reason: '' });
    assert.deepEqual(mine(await store.blocks()), []);
  });
}
