import { strict as assert } from 'node:assert';
import type { ContractTest } from './contract-support.js';
import { VECTOR_ANCHOR, type VectorFile, type VectorStep, vectorLimit } from './vectors.js';

/**
 * Every shared test vector, step by step, each case on a bucket of its own (limit name 'vector'), beside an empty
 * VECTOR_ANCHOR so that a store's real-time expiry cannot drop a bucket the test's clock has not seen refill.
 */
export function vectorContract(test: ContractTest, vectors: VectorFile): void {
  test(`reproduces the ${vectors.cases.length} shared test vectors`, async (store, clock, org) => {
    for (const [index, vector] of vectors.cases.entries()) {
      const organization = org(`vector-${index}`);
      clock.now = (vector.steps[0] as VectorStep).at;
      assert.deepEqual(await store.consume(organization, 'vector', [VECTOR_ANCHOR], VECTOR_ANCHOR.capacity), [0]);
      for (const [stepIndex, step] of vector.steps.entries()) {
        clock.now = step.at;
        const limits = [vectorLimit(step.limit)];
        if (step.op === 'reset') {
          await store.reset(organization, 'vector', limits);
          continue;
        }
        const outcomes =
          step.op === 'consume'
            ? await store.consume(organization, 'vector', limits, step.cost)
            : await store.peek(organization, 'vector', limits, step.cost);
        assert.deepEqual(outcomes, [step.outcome], `vector "${vector.name}", step ${stepIndex}`);
      }
    }
  });
}
