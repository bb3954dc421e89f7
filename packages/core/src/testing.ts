/**
 * Test helpers for store authors: the contract every Store must meet, the shared test vectors, and an exact model.
 * The suite is framework-neutral: pass `describe` and `it` from vitest, jest or node:test.
 *
 * @module @ratecard/core/testing
 */
import vectorFile from '../vectors/token-bucket.json' with { type: 'json' };
import { classicContract } from './testing/contract-classic.js';
import { leasesContract } from './testing/contract-leases.js';
import { limitsContract } from './testing/contract-limits.js';
import { operationsContract } from './testing/contract-operations.js';
import { quotasContract } from './testing/contract-quotas.js';
import { type ContractBody, START, type StoreHarness, type TestApi } from './testing/contract-support.js';
import { vectorContract } from './testing/contract-vectors.js';
import type { VectorFile } from './testing/vectors.js';

export type { StoreHarness, TestApi } from './testing/contract-support.js';
export {
  ExactBucketModel,
  type ExactDecision,
  type ExactMultiDecision,
  type ModelLimit,
} from './testing/exact-model.js';
export {
  expectedSteps,
  VECTOR_ANCHOR,
  VECTOR_LIMIT_NAME,
  type VectorCase,
  type VectorFile,
  type VectorLimit,
  type VectorStep,
  vectorLimit,
} from './testing/vectors.js';

/** The committed test vectors that every implementation of the arithmetic (TypeScript, Lua) must reproduce. */
export const TEST_VECTORS: VectorFile = vectorFile as VectorFile;

let runs = 0;

/**
 * Runs the contract every Store must meet: the spec's per-minute buckets (contract-classic.ts), the general limit
 * model with several limits per call (contract-limits.ts), leases (contract-leases.ts), quotas (contract-quotas.ts), inspect and blocks (contract-operations.ts), and the shared test vectors
 * (contract-vectors.ts).
 */
export function storeContractSuite(name: string, harness: StoreHarness, api: TestApi): void {
  /** Runs `body` with a fresh store, a manual clock and a unique organization prefix, then disposes of the store. */
  const test = (title: string, body: ContractBody) =>
    api.it(
      title,
      async () => {
        const clock = { now: START };
        const store = await harness.create(() => clock.now);
        const prefix = `contract-${process.pid}-${Date.now()}-${runs++}`;
        try {
          await body(store, clock, (label) => `${prefix}-${label}`);
        } finally {
          if (harness.destroy !== undefined) await harness.destroy(store);
          else await store.close();
        }
      },
      harness.timeout,
    );

  api.describe(`store contract: ${name}`, () => {
    classicContract(test);
    limitsContract(test);
    leasesContract(test);
    quotasContract(test);
    operationsContract(test);
    vectorContract(test, TEST_VECTORS);
  });
}
