import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MAX_BUCKET_UNITS, tokenBucket } from '../src/index.js';
import { ExactBucketModel, TEST_VECTORS } from '../src/testing.js';
import { generateVectors } from './vector-cases.js';

const file = new URL('../vectors/token-bucket.json', import.meta.url);

/** One step per line: readable in a diff, a tenth of the size of indented JSON. */
function formatVectors(vectors: ReturnType<typeof generateVectors>): string {
  const cases = vectors.cases.map(
    (vector) =>
      `  {\n   "name": ${JSON.stringify(vector.name)},\n   "steps": [\n${vector.steps.map((step) => `    ${JSON.stringify(step)}`).join(',\n')}\n   ]\n  }`,
  );
  return `{\n "description": ${JSON.stringify(vectors.description)},\n "unit": ${JSON.stringify(vectors.unit)},\n "cases": [\n${cases.join(',\n')}\n ]\n}\n`;
}

const steps = TEST_VECTORS.cases.flatMap((vector) => vector.steps);
/** The steps of token buckets (quota steps state a period instead of a refill). */
const buckets = steps.filter((step) => step.limit.periodEnd === undefined);

describe('test vectors', () => {
  it('match what the arithmetic generates today (regenerate with UPDATE_VECTORS=1)', () => {
    const generated = formatVectors(generateVectors());
    if (process.env.UPDATE_VECTORS === '1') writeFileSync(file, generated);
    expect(readFileSync(file, 'utf8')).toBe(generated);
  });

  it('agree step by step with the exact rational model', () => {
    let compared = 0;
    for (const vector of TEST_VECTORS.cases) {
      const model = new ExactBucketModel();
      for (const step of vector.steps) {
        if (step.op === 'reset') {
          model.reset('b');
          continue;
        }
        // A quota step states its period's end: the model's quota.
        const limit = step.limit.periodEnd === undefined ? step.limit : { ...step.limit, kind: 'quota' as const };
        const expected =
          step.op === 'consume'
            ? model.consume('b', step.at, limit, step.cost)
            : model.peek('b', step.at, limit, step.cost);
        expect(
          {
            limited: step.limited,
            units: step.outcome === undefined || step.outcome >= 0 ? step.outcome : -1 - step.outcome,
            remaining: step.remaining,
            retryAfter: step.retryAfter,
            resetAfter: step.resetAfter,
          },
          `${vector.name} at ${step.at}`,
        ).toEqual(expected);
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(1_500);
  });

  it('cover every plan, both outcomes and intervals from 7 ms to a day', () => {
    for (const rpm of [10, 25, 100, 250]) {
      expect(
        steps.some(({ limit }) => limit.capacity === rpm && limit.refill === rpm && limit.intervalMs === 60_000),
      ).toBe(true);
    }
    expect(steps.some((step) => step.limited === true)).toBe(true);
    expect(steps.some((step) => step.limited === false)).toBe(true);
    for (const intervalMs of [7, 250, 1_000, 60_000, 3_600_000, 86_400_000]) {
      expect(steps.some((step) => step.limit.intervalMs === intervalMs)).toBe(true);
    }
  });

  it('cover quotas: a period used up, the next one full, a call a period behind, a capacity changed', () => {
    const quotas = TEST_VECTORS.cases.filter((vector) =>
      vector.steps.every((step) => step.limit.periodEnd !== undefined),
    );
    expect(quotas.length).toBeGreaterThanOrEqual(3);
    const quotaSteps = quotas.flatMap((vector) => vector.steps);
    expect(quotaSteps.some((step) => step.limited === true)).toBe(true);
    expect(new Set(quotaSteps.map((step) => step.limit.periodEnd)).size).toBeGreaterThan(1);
  });

  it('cover bursts above and below the rate, costs above one and the largest bucket', () => {
    expect(steps.some(({ limit }) => limit.capacity > limit.refill)).toBe(true);
    expect(steps.some(({ limit }) => limit.capacity < limit.refill)).toBe(true);
    expect(steps.some((step) => step.cost > 1 && step.limited === false)).toBe(true);
    expect(steps.some((step) => step.cost > 1 && step.limited === true)).toBe(true);
    const units = buckets.map(({ limit }) => tokenBucket(limit)).map((l) => l.capacity * l.unitsPerToken);
    expect(Math.max(...units)).toBeGreaterThan(MAX_BUCKET_UNITS * 0.99);
    expect(Math.max(...units)).toBeLessThanOrEqual(MAX_BUCKET_UNITS);
  });

  it('cover limit changes that change the unit, in both directions', () => {
    const unitOf = (limit: (typeof steps)[number]['limit']) => tokenBucket(limit).unitsPerToken;
    let finer = 0;
    let coarser = 0;
    for (const vector of TEST_VECTORS.cases) {
      if (vector.steps.some((step) => step.limit.periodEnd !== undefined)) continue;
      for (let i = 1; i < vector.steps.length; i++) {
        const before = unitOf((vector.steps[i - 1] as (typeof steps)[number]).limit);
        const after = unitOf((vector.steps[i] as (typeof steps)[number]).limit);
        if (after > before) finer++;
        if (after < before) coarser++;
      }
    }
    expect(finer).toBeGreaterThan(3);
    expect(coarser).toBeGreaterThan(3);
  });
});
