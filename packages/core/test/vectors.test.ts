import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ExactBucketModel, TEST_VECTORS } from '../src/testing.js';
import { generateVectors } from './vector-cases.js';

const file = new URL('../vectors/token-bucket.json', import.meta.url);

/** One step per line: readable in a diff, a tenth of the size of indented JSON. */
function formatVectors(vectors: ReturnType<typeof generateVectors>): string {
  const cases = vectors.cases.map(
    (vector) =>
      `  {\n   "name": ${JSON.stringify(vector.name)},\n   "steps": [\n${vector.steps.map((step) => `    ${JSON.stringify(step)}`).join(',\n')}\n   ]\n  }`,
  );
  return `{\n "description": ${JSON.stringify(vectors.description)},\n "unitsPerToken": ${vectors.unitsPerToken},\n "cases": [\n${cases.join(',\n')}\n ]\n}\n`;
}

describe('test vectors', () => {
  it('match what the arithmetic generates today (regenerate with UPDATE_VECTORS=1)', () => {
    const generated = formatVectors(generateVectors());
    if (process.env.UPDATE_VECTORS === '1') writeFileSync(file, generated);
    expect(readFileSync(file, 'utf8')).toBe(generated);
  });

  it('agree step by step with the exact rational model', () => {
    let steps = 0;
    for (const vector of TEST_VECTORS.cases) {
      const model = new ExactBucketModel();
      for (const step of vector.steps) {
        if (step.op === 'reset') {
          model.reset('b');
          continue;
        }
        const expected =
          step.op === 'consume'
            ? model.consume('b', step.at, step.limit, step.cost)
            : model.peek('b', step.at, step.limit, step.cost);
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
        steps++;
      }
    }
    expect(steps).toBeGreaterThan(900);
  });

  it('cover every plan and both outcomes', () => {
    const all = TEST_VECTORS.cases.flatMap((vector) => vector.steps);
    for (const limit of [10, 25, 100, 250]) expect(all.some((step) => step.limit === limit)).toBe(true);
    expect(all.some((step) => step.limited === true)).toBe(true);
    expect(all.some((step) => step.limited === false)).toBe(true);
  });
});
