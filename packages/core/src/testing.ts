/**
 * Test helpers for store authors: the contract every Store must meet, the shared test vectors, and an exact model.
 * The suite is framework-neutral: pass `describe`, `it` (and optionally `afterEach`) from vitest, jest or node:test.
 */
import { strict as assert } from 'node:assert';
import vectorFile from '../vectors/token-bucket.json' with { type: 'json' };
import { UNITS_PER_TOKEN } from './bucket.js';
import type { Store } from './store.js';
import type { VectorFile } from './testing/vectors.js';

export { ExactBucketModel, type ExactDecision } from './testing/exact-model.js';
export { expectedSteps, type VectorCase, type VectorFile, type VectorStep } from './testing/vectors.js';

/** The committed test vectors that every implementation of the arithmetic (TypeScript, Lua) must reproduce. */
export const TEST_VECTORS: VectorFile = vectorFile as VectorFile;

export interface TestApi {
  describe(name: string, body: () => void): void;
  it(name: string, body: () => unknown, timeout?: number): void;
}

export interface StoreHarness {
  /** A store whose clock reads `now()` (epoch ms). Buckets may be shared with earlier stores: names are unique. */
  create(now: () => number): Store | Promise<Store>;
  /** Disposes of a store made by `create` (close clients and the like); default store.close(). */
  destroy?(store: Store): void | Promise<void>;
  /** Per-test timeout in ms handed to `it`. */
  timeout?: number;
}

const U = UNITS_PER_TOKEN;
const START = 1_700_000_000_000;

let runs = 0;

/** Runs the contract every Store must meet. */
export function storeContractSuite(name: string, harness: StoreHarness, api: TestApi): void {
  const { describe, it } = api;

  /** Runs `body` with a fresh store, a manual clock and a unique organization prefix, then disposes of the store. */
  function withStore(
    body: (store: Store, clock: { now: number }, org: (label: string) => string) => Promise<void>,
  ): () => Promise<void> {
    return async () => {
      const clock = { now: START };
      const store = await harness.create(() => clock.now);
      const prefix = `contract-${process.pid}-${Date.now()}-${runs++}`;
      try {
        await body(store, clock, (label) => `${prefix}-${label}`);
      } finally {
        if (harness.destroy !== undefined) await harness.destroy(store);
        else await store.close();
      }
    };
  }

  const test = (title: string, body: Parameters<typeof withStore>[0]) => it(title, withStore(body), harness.timeout);

  describe(`store contract: ${name}`, () => {
    test('declares whether it is shared', async (store) => {
      assert.equal(typeof store.shared, 'boolean');
    });

    test('treats a missing bucket as full', async (store, _clock, org) => {
      assert.equal(await store.consume(org('a'), 'POST /browsers', 10, 1), 9 * U);
      assert.equal(await store.peek(org('b'), 'POST /browsers', 10, 10), 0);
    });

    test('admits exactly the capacity in a burst, then limits without charging', async (store, _clock, org) => {
      for (let i = 9; i >= 0; i--) assert.equal(await store.consume(org('a'), 'POST /browsers', 10, 1), i * U);
      assert.equal(await store.consume(org('a'), 'POST /browsers', 10, 1), -1);
      assert.equal(await store.consume(org('a'), 'POST /browsers', 10, 1), -1);
    });

    test('refills limit units per millisecond, to the millisecond', async (store, clock, org) => {
      assert.equal(await store.consume(org('a'), 'e', 10, 10), 0);
      clock.now += 5_999;
      assert.equal(await store.consume(org('a'), 'e', 10, 1), -1 - 59_990);
      clock.now += 1;
      assert.equal(await store.consume(org('a'), 'e', 10, 1), 0);
      clock.now += 60_000 * 5;
      assert.equal(await store.consume(org('a'), 'e', 10, 1), 9 * U);
    });

    test('peek reports the consume outcome and charges nothing', async (store, clock, org) => {
      await store.consume(org('a'), 'e', 25, 20);
      clock.now += 1_000;
      const held = 5 * U + 25 * 1_000;
      assert.equal(await store.peek(org('a'), 'e', 25, 3), held - 3 * U);
      assert.equal(await store.peek(org('a'), 'e', 25, 25), -1 - held);
      assert.equal(await store.consume(org('a'), 'e', 25, 3), held - 3 * U);
    });

    test('reset makes a bucket full again', async (store, _clock, org) => {
      await store.consume(org('a'), 'e', 10, 10);
      await store.reset(org('a'), 'e');
      assert.equal(await store.consume(org('a'), 'e', 10, 1), 9 * U);
      await store.reset(org('never-seen'), 'e');
    });

    test('keeps one bucket per organization and endpoint, whatever the names hold', async (store, _clock, org) => {
      const names = ['a}b', '{x}', 'a:b', '%7B', 'a b', '\u{1F600}'.repeat(128), `${'é'.repeat(255)}x`, ':', '{', '}'];
      const endpoints = ['POST /browsers', 'PUT /browser-pools/:id', 'e:{x}', '%', 'e'];
      for (const n of names) for (const e of endpoints) assert.equal(await store.consume(org(n), e, 10, 1), 9 * U);
      for (const n of names) for (const e of endpoints) assert.equal(await store.peek(org(n), e, 10, 1), 8 * U);
      // Pairs that a naive "org:endpoint" join would merge.
      assert.equal(await store.consume(org('x:y'), 'z', 10, 1), 9 * U);
      assert.equal(await store.consume(org('x'), 'y:z', 10, 1), 9 * U);
    });

    test('refills at the old rate and caps at the new capacity after a plan change', async (store, clock, org) => {
      await store.consume(org('down'), 'e', 250, 100);
      assert.equal(await store.consume(org('down'), 'e', 10, 1), 9 * U);
      await store.consume(org('up'), 'e', 10, 10);
      clock.now += 6_000;
      // 6 s at the Developer rate refilled one token; the Enterprise rate applies only from now on.
      assert.equal(await store.consume(org('up'), 'e', 250, 1), 0);
      clock.now += 240;
      assert.equal(await store.consume(org('up'), 'e', 250, 1), 0);
    });

    test('refills nothing when the clock goes backwards, and never twice', async (store, clock, org) => {
      await store.consume(org('a'), 'e', 10, 10);
      clock.now += 6_000;
      assert.equal(await store.consume(org('a'), 'e', 10, 1), 0);
      clock.now -= 3_000;
      assert.equal(await store.consume(org('a'), 'e', 10, 1), -1);
      clock.now += 3_000;
      assert.equal(await store.consume(org('a'), 'e', 10, 1), -1);
      clock.now += 6_000;
      assert.equal(await store.consume(org('a'), 'e', 10, 1), 0);
    });

    test('answers calls made together in the order they were made, each bucket atomically', async (store, _clock, org) => {
      const outcomes = await Promise.all([
        store.consume(org('a'), 'e', 10, 6),
        store.consume(org('a'), 'e', 10, 6),
        store.consume(org('b'), 'e', 25, 25),
        store.consume(org('a'), 'e', 10, 4),
      ]);
      assert.deepEqual(outcomes, [4 * U, -1 - 4 * U, 0, 0]);
    });

    test('charges nothing for a call it refuses because its budget has run out', async (store, _clock, org) => {
      let charged: boolean;
      try {
        charged = (await store.consume(org('late'), 'e', 10, 1, 0)) >= 0;
      } catch {
        charged = false;
      }
      assert.equal(await store.peek(org('late'), 'e', 10, 1), charged ? 8 * U : 9 * U);
    });

    test('admits exactly the capacity among concurrent calls on one bucket', async (store, _clock, org) => {
      const outcomes = await Promise.all(
        Array.from({ length: 250 }, () => store.consume(org('hot'), 'POST /browsers', 100, 1)),
      );
      assert.equal(outcomes.filter((outcome) => outcome >= 0).length, 100);
      assert.deepEqual(
        outcomes.filter((outcome) => outcome >= 0).sort((a, b) => b - a),
        Array.from({ length: 100 }, (_, i) => (99 - i) * U),
      );
    });

    test('handles the largest limit and years of idle time exactly', async (store, clock, org) => {
      const big = 1_000_000_000;
      assert.equal(await store.consume(org('a'), 'e', big, big), 0);
      clock.now += 1;
      assert.equal(await store.consume(org('a'), 'e', big, 1), big - U);
      clock.now += 10 * 365 * 24 * 3_600_000;
      assert.equal(await store.consume(org('a'), 'e', big, big), 0);
    });

    test(`reproduces the ${TEST_VECTORS.cases.length} shared test vectors`, async (store, clock, org) => {
      for (const [index, vector] of TEST_VECTORS.cases.entries()) {
        const organization = org(`vector-${index}`);
        for (const [stepIndex, step] of vector.steps.entries()) {
          clock.now = step.at;
          const where = `vector "${vector.name}", step ${stepIndex}`;
          if (step.op === 'reset') {
            await store.reset(organization, 'vector');
            continue;
          }
          const outcome =
            step.op === 'consume'
              ? await store.consume(organization, 'vector', step.limit, step.cost)
              : await store.peek(organization, 'vector', step.limit, step.cost);
          assert.equal(outcome, step.outcome, where);
        }
      }
    });
  });
}
