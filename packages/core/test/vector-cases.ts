import { PLANS } from '../src/plans.js';
import { expectedSteps, type VectorCase, type VectorFile, type VectorStep } from '../src/testing/vectors.js';

type Step = Pick<VectorStep, 'at' | 'op' | 'limit' | 'cost'>;

const T0 = 1_700_000_000_000;

/** A small deterministic PRNG (mulberry32) so the committed file regenerates byte for byte. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function burstThenOne(limit: number): Step[] {
  return [
    ...Array.from({ length: limit }, () => ({ at: T0, op: 'consume' as const, limit, cost: 1 })),
    { at: T0, op: 'consume', limit, cost: 1 },
  ];
}

function handPicked(): { name: string; steps: Step[] }[] {
  const cases: { name: string; steps: Step[] }[] = [];
  for (const [plan, limit] of Object.entries(PLANS)) {
    cases.push({ name: `${plan}: a full burst at one instant, then one more`, steps: burstThenOne(limit) });
  }
  cases.push({
    name: 'developer: the refill boundary, one millisecond either side',
    steps: [
      { at: T0, op: 'consume', limit: 10, cost: 10 },
      { at: T0 + 5_999, op: 'peek', limit: 10, cost: 1 },
      { at: T0 + 5_999, op: 'consume', limit: 10, cost: 1 },
      { at: T0 + 6_000, op: 'consume', limit: 10, cost: 1 },
      { at: T0 + 6_000, op: 'consume', limit: 10, cost: 1 },
      { at: T0 + 11_999, op: 'consume', limit: 10, cost: 1 },
    ],
  });
  cases.push({
    name: 'hobbyist: costs above one, a limited request charges nothing',
    steps: [
      { at: T0, op: 'consume', limit: 25, cost: 20 },
      { at: T0 + 1, op: 'consume', limit: 25, cost: 6 },
      { at: T0 + 1, op: 'consume', limit: 25, cost: 5 },
      { at: T0 + 2_400, op: 'consume', limit: 25, cost: 1 },
      { at: T0 + 60_000, op: 'peek', limit: 25, cost: 25 },
      { at: T0 + 62_400, op: 'consume', limit: 25, cost: 25 },
    ],
  });
  cases.push({
    name: 'plan change: upgrade refills at the old rate until the change, downgrade caps',
    steps: [
      { at: T0, op: 'consume', limit: 10, cost: 10 },
      { at: T0 + 6_000, op: 'consume', limit: 250, cost: 1 },
      { at: T0 + 6_240, op: 'consume', limit: 250, cost: 2 },
      { at: T0 + 60_000, op: 'consume', limit: 250, cost: 100 },
      { at: T0 + 60_000, op: 'consume', limit: 10, cost: 10 },
      { at: T0 + 60_000, op: 'consume', limit: 10, cost: 1 },
    ],
  });
  cases.push({
    name: 'clock going backwards refills nothing, and never twice',
    steps: [
      { at: T0 + 10_000, op: 'consume', limit: 100, cost: 100 },
      { at: T0 + 5_000, op: 'consume', limit: 100, cost: 1 },
      { at: T0 + 10_599, op: 'consume', limit: 100, cost: 1 },
      { at: T0 + 10_600, op: 'consume', limit: 100, cost: 1 },
    ],
  });
  cases.push({
    name: 'reset in the middle of a drained bucket',
    steps: [
      { at: T0, op: 'consume', limit: 25, cost: 25 },
      { at: T0 + 1, op: 'consume', limit: 25, cost: 1 },
      { at: T0 + 2, op: 'reset', limit: 25, cost: 1 },
      { at: T0 + 2, op: 'consume', limit: 25, cost: 25 },
    ],
  });
  cases.push({
    name: 'override near the maximum limit after years of idle time',
    steps: [
      { at: T0, op: 'consume', limit: 1_000_000_000, cost: 1_000_000_000 },
      { at: T0 + 1, op: 'consume', limit: 1_000_000_000, cost: 1 },
      { at: T0 + 315_360_000_000, op: 'consume', limit: 1_000_000_000, cost: 999_999_999 },
      { at: T0 + 315_360_000_000, op: 'consume', limit: 1_000_000_000, cost: 2 },
    ],
  });
  cases.push({
    name: 'odd override: 7 per minute, refill of 7 units per millisecond',
    steps: [
      { at: T0, op: 'consume', limit: 7, cost: 7 },
      { at: T0 + 8_571, op: 'consume', limit: 7, cost: 1 },
      { at: T0 + 8_572, op: 'consume', limit: 7, cost: 1 },
      { at: T0 + 8_572, op: 'peek', limit: 7, cost: 1 },
    ],
  });
  return cases;
}

function randomCase(seed: number): { name: string; steps: Step[] } {
  const next = random(seed);
  const limits = [...Object.values(PLANS), 1, 3, 7, 1_000, 59_999];
  let limit = limits[Math.floor(next() * limits.length)] as number;
  let at = T0;
  const steps: Step[] = [];
  for (let i = 0; i < 40; i++) {
    const roll = next();
    if (roll < 0.05) limit = limits[Math.floor(next() * limits.length)] as number;
    at += roll < 0.5 ? 0 : Math.floor(next() * (roll < 0.9 ? 3_000 : 90_000));
    const op = roll < 0.03 ? 'reset' : roll < 0.15 ? 'peek' : 'consume';
    const cost = 1 + Math.floor(next() ** 3 * limit);
    steps.push({ at, op, limit, cost });
  }
  return { name: `random schedule, seed ${seed}`, steps };
}

export function generateVectors(): VectorFile {
  const cases: VectorCase[] = [...handPicked(), ...Array.from({ length: 24 }, (_, i) => randomCase(i + 1))].map(
    ({ name, steps }) => ({ name, steps: expectedSteps(steps) }),
  );
  return {
    description:
      'ratecard token-bucket test vectors. Each case starts from a missing (full) bucket; at is epoch ms, outcome is the ' +
      'store Outcome (>= 0: admitted, units left; < 0: limited, -1 - units held). Generated by ' +
      'UPDATE_VECTORS=1 pnpm --filter @ratecard/core exec vitest run test/vectors.test.ts',
    unitsPerToken: 60_000,
    cases,
  };
}
