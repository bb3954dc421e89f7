import { strict as assert } from 'node:assert';
import type { Outcome } from '../bucket.js';
import { type Limit, perMinute } from '../limits.js';
import type { Store } from '../store.js';
import type { ContractTest } from './contract-support.js';

/** The classic tests count in 1/60 000 token, a unit every per-minute limit divides. */
const U = 60_000;

const specLimits = new Map<number, Limit>();

/** `perMinute(rpm)`, made once per rpm. */
function spec(rpm: number): Limit {
  let limit = specLimits.get(rpm);
  if (limit === undefined) {
    limit = perMinute(rpm);
    specLimits.set(rpm, limit);
  }
  return limit;
}

/** The outcome of a one-limit call on `perMinute(rpm)`, rescaled to 1/60 000 token (exact: U divides 60 000). */
async function one(answer: Outcome[] | Promise<Outcome[]>, rpm: number): Promise<Outcome> {
  const outcomes = await answer;
  assert.equal(outcomes.length, 1);
  const outcome = outcomes[0] as Outcome;
  const scale = U / spec(rpm).unitsPerToken;
  return outcome >= 0 ? outcome * scale : -1 - (-1 - outcome) * scale;
}

const consume = (store: Store, organization: string, endpoint: string, rpm: number, cost: number, budgetMs?: number) =>
  one(store.consume(organization, endpoint, [spec(rpm)], cost, budgetMs), rpm);
const peek = (store: Store, organization: string, endpoint: string, rpm: number, cost: number) =>
  one(store.peek(organization, endpoint, [spec(rpm)], cost), rpm);
const reset = (store: Store, organization: string, endpoint: string, budgetMs?: number) =>
  store.reset(organization, endpoint, [spec(10)], budgetMs);

/**
 * The spec's contract: one per-minute limit per call (a plan in requests per minute), outcomes rescaled to
 * 1/60 000 token so that every plan's figures read in one unit.
 */
export function classicContract(test: ContractTest): void {
  test('declares whether it is shared', async (store) => {
    assert.equal(typeof store.shared, 'boolean');
  });

  test('treats a missing bucket as full', async (store, _clock, org) => {
    assert.equal(await consume(store, org('a'), 'POST /browsers', 10, 1), 9 * U);
    assert.equal(await peek(store, org('b'), 'POST /browsers', 10, 10), 0);
  });

  test('admits exactly the capacity in a burst, then limits without charging', async (store, _clock, org) => {
    for (let i = 9; i >= 0; i--) assert.equal(await consume(store, org('a'), 'POST /browsers', 10, 1), i * U);
    assert.equal(await consume(store, org('a'), 'POST /browsers', 10, 1), -1);
    assert.equal(await consume(store, org('a'), 'POST /browsers', 10, 1), -1);
  });

  test('refills limit units per millisecond, to the millisecond', async (store, clock, org) => {
    assert.equal(await consume(store, org('a'), 'e', 10, 10), 0);
    clock.now += 5_999;
    assert.equal(await consume(store, org('a'), 'e', 10, 1), -1 - 59_990);
    clock.now += 1;
    assert.equal(await consume(store, org('a'), 'e', 10, 1), 0);
    clock.now += 60_000 * 5;
    assert.equal(await consume(store, org('a'), 'e', 10, 1), 9 * U);
  });

  test('peek reports the consume outcome and charges nothing', async (store, clock, org) => {
    await consume(store, org('a'), 'e', 25, 20);
    clock.now += 1_000;
    const held = 5 * U + 25 * 1_000;
    assert.equal(await peek(store, org('a'), 'e', 25, 3), held - 3 * U);
    assert.equal(await peek(store, org('a'), 'e', 25, 25), -1 - held);
    assert.equal(await consume(store, org('a'), 'e', 25, 3), held - 3 * U);
  });

  test('reset makes a bucket full again', async (store, _clock, org) => {
    await consume(store, org('a'), 'e', 10, 10);
    await reset(store, org('a'), 'e');
    assert.equal(await consume(store, org('a'), 'e', 10, 1), 9 * U);
    await reset(store, org('never-seen'), 'e');
  });

  test('keeps one bucket per organization and endpoint, whatever the names hold', async (store, _clock, org) => {
    const names = ['a}b', '{x}', 'a:b', '%7B', 'a b', '\u{1F600}'.repeat(128), `${'é'.repeat(255)}x`, ':', '{', '}'];
    const endpoints = ['POST /browsers', 'PUT /browser-pools/:id', 'e:{x}', '%', 'e'];
    for (const n of names) for (const e of endpoints) assert.equal(await consume(store, org(n), e, 10, 1), 9 * U);
    for (const n of names) for (const e of endpoints) assert.equal(await peek(store, org(n), e, 10, 1), 8 * U);
    // Pairs that a naive "org:endpoint" join would merge.
    assert.equal(await consume(store, org('x:y'), 'z', 10, 1), 9 * U);
    assert.equal(await consume(store, org('x'), 'y:z', 10, 1), 9 * U);
  });

  test('refills at the old rate and caps at the new capacity after a plan change', async (store, clock, org) => {
    await consume(store, org('down'), 'e', 250, 100);
    assert.equal(await consume(store, org('down'), 'e', 10, 1), 9 * U);
    await consume(store, org('up'), 'e', 10, 10);
    clock.now += 6_000;
    // 6 s at the Developer rate refilled one token; the Enterprise rate applies only from now on.
    assert.equal(await consume(store, org('up'), 'e', 250, 1), 0);
    clock.now += 240;
    assert.equal(await consume(store, org('up'), 'e', 250, 1), 0);
  });

  test('refills nothing when the clock goes backwards, and never twice', async (store, clock, org) => {
    await consume(store, org('a'), 'e', 10, 10);
    clock.now += 6_000;
    assert.equal(await consume(store, org('a'), 'e', 10, 1), 0);
    clock.now -= 3_000;
    assert.equal(await consume(store, org('a'), 'e', 10, 1), -1);
    clock.now += 3_000;
    assert.equal(await consume(store, org('a'), 'e', 10, 1), -1);
    clock.now += 6_000;
    assert.equal(await consume(store, org('a'), 'e', 10, 1), 0);
  });

  test('answers calls made together in the order they were made, each bucket atomically', async (store, _clock, org) => {
    const outcomes = await Promise.all([
      consume(store, org('a'), 'e', 10, 6),
      consume(store, org('a'), 'e', 10, 6),
      consume(store, org('b'), 'e', 25, 25),
      consume(store, org('a'), 'e', 10, 4),
    ]);
    assert.deepEqual(outcomes, [4 * U, -1 - 4 * U, 0, 0]);
  });

  test('charges nothing for a call it refuses because its budget has run out', async (store, _clock, org) => {
    let charged: boolean;
    try {
      charged = (await consume(store, org('late'), 'e', 10, 1, 0)) >= 0;
    } catch {
      charged = false;
    }
    assert.equal(await peek(store, org('late'), 'e', 10, 1), charged ? 8 * U : 9 * U);
  });

  test('forgets the bucket for a reset made within its budget', async (store, _clock, org) => {
    assert.equal(await consume(store, org('a'), 'e', 10, 10), 0);
    await reset(store, org('a'), 'e', 60_000);
    assert.equal(await peek(store, org('a'), 'e', 10, 1), 9 * U);
  });

  test('forgets nothing for a reset it rejects because its budget has run out', async (store, _clock, org) => {
    assert.equal(await consume(store, org('late'), 'e', 10, 10), 0);
    let forgot: boolean;
    try {
      await reset(store, org('late'), 'e', 0);
      forgot = true;
    } catch {
      forgot = false;
    }
    assert.equal(await peek(store, org('late'), 'e', 10, 1), forgot ? 9 * U : -1);
  });

  test('admits exactly the capacity among concurrent calls on one bucket', async (store, _clock, org) => {
    const outcomes = await Promise.all(
      Array.from({ length: 250 }, () => consume(store, org('hot'), 'POST /browsers', 100, 1)),
    );
    assert.equal(outcomes.filter((outcome) => outcome >= 0).length, 100);
    assert.deepEqual(
      outcomes.filter((outcome) => outcome >= 0).sort((a, b) => b - a),
      Array.from({ length: 100 }, (_, i) => (99 - i) * U),
    );
  });

  test('handles the largest limit and years of idle time exactly', async (store, clock, org) => {
    const big = 1_000_000_000;
    assert.equal(await consume(store, org('a'), 'e', big, big), 0);
    clock.now += 1;
    assert.equal(await consume(store, org('a'), 'e', big, 1), big - U);
    clock.now += 10 * 365 * 24 * 3_600_000;
    assert.equal(await consume(store, org('a'), 'e', big, big), 0);
  });
}
