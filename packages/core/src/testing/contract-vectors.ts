import { strict as assert } from 'node:assert';
import type { ContractTest } from './contract-support.js';
import { type VectorFile, vectorLimit } from './vectors.js';

/** Every shared test vector, step by step, each case on a bucket of its own (limit name 'vector'). */
export function vectorContract(test: ContractTest, vectors: VectorFile): void {
  test(`reproduces the ${vectors.cases.length} shared test vectors`, async (store, clock, org) => {
    for (const [index, vector] of vectors.cases.entries()) {
      const organization = org(`vector-${index}`);
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
