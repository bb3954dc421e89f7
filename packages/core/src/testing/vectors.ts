import { remainingTokens, resetAfterSeconds, retryAfterSeconds, take, unitsAt } from '../bucket.js';

/** One operation on a bucket at a time `at` (epoch ms), with what must come of it. */
export interface VectorStep {
  at: number;
  op: 'consume' | 'peek' | 'reset';
  limit: number;
  cost: number;
  /** The store's Outcome (see bucket.ts); absent for reset. */
  outcome?: number;
  limited?: boolean;
  remaining?: number;
  retryAfter?: number;
  resetAfter?: number;
}

/** A sequence of operations on one bucket, starting from a missing (full) bucket. */
export interface VectorCase {
  name: string;
  steps: VectorStep[];
}

export interface VectorFile {
  description: string;
  unitsPerToken: number;
  cases: VectorCase[];
}

/** Runs a case through core's arithmetic, filling in every step's expected results. */
export function expectedSteps(steps: readonly Pick<VectorStep, 'at' | 'op' | 'limit' | 'cost'>[]): VectorStep[] {
  let bucket: { units: number; at: number; limit: number } | undefined;
  return steps.map(({ at, op, limit, cost }) => {
    if (op === 'reset') {
      bucket = undefined;
      return { at, op, limit, cost };
    }
    const held = bucket === undefined ? limit * 60_000 : unitsAt(bucket.units, bucket.at, bucket.limit, at, limit);
    const outcome = take(held, cost);
    if (op === 'consume' && outcome >= 0) {
      bucket = { units: outcome, at: bucket === undefined || at > bucket.at ? at : bucket.at, limit };
    }
    return {
      at,
      op,
      limit,
      cost,
      outcome,
      limited: outcome < 0,
      remaining: remainingTokens(outcome),
      retryAfter: retryAfterSeconds(outcome, limit, cost),
      resetAfter: resetAfterSeconds(outcome, limit),
    };
  });
}
