import {
  type BucketShape,
  ceilDiv,
  remainingTokens,
  resetAfterSeconds,
  retryAfterSeconds,
  sameShape,
  take,
  unitsAt,
  writtenAt,
} from '../bucket.js';
import { type Limit, quota, tokenBucket } from '../limits.js';

/** A limit's three numbers, as a step states them: `tokenBucket({ capacity, refill, intervalMs })`. */
export interface VectorLimit {
  /** Most tokens the bucket holds. */
  capacity: number;
  /** Tokens added every `intervalMs`. */
  refill: number;
  /** The refill period in ms. */
  intervalMs: number;
  /**
   * A quota's step: the end of the period the step falls in (epoch ms); refill and intervalMs are 0. The bucket holds
   * `capacity` per period, nothing refills within one, and a later period starts full.
   */
  periodEnd?: number;
}

/** One operation on a bucket at a time `at` (epoch ms), with what must come of it. */
export interface VectorStep {
  /** The store's clock at this step, epoch ms. */
  at: number;
  /** What the step asks of the store. */
  op: 'consume' | 'peek' | 'reset';
  /** The limit in force for this step; a case's steps all share one bucket (one limit name), whatever its shape. */
  limit: VectorLimit;
  /** Tokens asked for. */
  cost: number;
  /** The store's Outcome (see bucket.ts), in units of this step's limit; absent for reset. */
  outcome?: number;
  /** The bucket lacked `cost` tokens; absent for reset. */
  limited?: boolean;
  /** Whole tokens left after the step, 0 when limited; absent for reset. */
  remaining?: number;
  /** Whole seconds until the bucket holds `cost` tokens, 0 when admitted; absent for reset. */
  retryAfter?: number;
  /** Whole seconds until the bucket is full; absent for reset. */
  resetAfter?: number;
}

/** A sequence of operations on one bucket, starting from a missing (full) bucket. */
export interface VectorCase {
  /** What the case exercises, e.g. 'random schedule, seed 20'. */
  name: string;
  /** The operations, in order. */
  steps: VectorStep[];
}

/** The shared test vectors, `@ratecard/core/vectors/token-bucket.json`, as the contract suite reads them. */
export interface VectorFile {
  /** What the file is and how it was made. */
  description: string;
  /** How a step's outcome counts: in units of that step's limit (the formula, in words). */
  unit: string;
  /** Every case, each on a bucket of its own. */
  cases: VectorCase[];
}

/** The name a vector's limits share, so that a change of shape within a case stays one bucket. */
export const VECTOR_LIMIT_NAME = 'vector';

/** A day quota for vector steps: the period comes with each step (periodEnd), so its time zone is never read. */
const DAY_QUOTAS = new Map<number, Limit>();

/** The core limit of a step: its shape under the name every step of a case shares. */
export function vectorLimit(shape: VectorLimit): Limit {
  const { capacity, refill, intervalMs, periodEnd } = shape;
  if (periodEnd === undefined) return tokenBucket({ capacity, refill, intervalMs, name: VECTOR_LIMIT_NAME });
  let made = DAY_QUOTAS.get(capacity);
  if (made === undefined) {
    made = quota(capacity, { per: 'day', name: VECTOR_LIMIT_NAME });
    DAY_QUOTAS.set(capacity, made);
  }
  return Object.freeze({ ...made, periodStart: periodEnd - 86_400_000, periodEnd });
}

/**
 * A second limit to empty on a case's endpoint at its first step's time, before that step: a token a day, 36 500
 * days to fill, past the last step of any case (ten years after its first). A store may expire an endpoint's buckets
 * by a TTL counted in real time from the clock it was given (Redis' PX): a bucket 3 ms from full, read 1 ms later by
 * the test's clock, is gone if a loaded machine took 3 real ms between the two calls. With the anchor not full, the
 * key outlives the test; the steps do not name it, so their outcomes are the same.
 */
export const VECTOR_ANCHOR: Limit = tokenBucket({
  capacity: 36_500,
  refill: 1,
  intervalMs: 86_400_000,
  name: 'anchor',
});

/** Runs a case through core's arithmetic, filling in every step's expected results. */
export function expectedSteps(steps: readonly Pick<VectorStep, 'at' | 'op' | 'limit' | 'cost'>[]): VectorStep[] {
  let bucket: { units: number; at: number; shape: BucketShape } | undefined;
  return steps.map(({ at, op, limit: shape, cost }) => {
    const step = {
      at,
      op,
      limit: { capacity: shape.capacity, refill: shape.refill, intervalMs: shape.intervalMs },
      cost,
    };
    if (shape.periodEnd !== undefined) Object.assign(step.limit, { periodEnd: shape.periodEnd });
    if (op === 'reset') {
      bucket = undefined;
      return step;
    }
    const limit = vectorLimit(shape);
    const held =
      bucket === undefined
        ? limit.capacity * limit.unitsPerToken
        : unitsAt(bucket.units, bucket.at, bucket.shape, at, limit);
    const outcome = take(held, cost, limit);
    if (op === 'consume' && bucket !== undefined && (outcome >= 0 || !sameShape(bucket.shape, limit))) {
      // Admitted: charged. Refused under a changed shape: nothing charged, the held units take the new shape.
      bucket = { units: outcome >= 0 ? outcome : held, at: writtenAt(bucket.at, at, limit), shape: limit };
    } else if (op === 'consume' && outcome >= 0) {
      bucket = { units: outcome, at: writtenAt(0, at, limit), shape: limit };
    }
    // A quota's waits count to its period's end from the step, not from this process's clock.
    const untilEnd = limit.periodEnd === undefined ? 0 : Math.max(0, ceilDiv(limit.periodEnd - at, 1000));
    return {
      ...step,
      outcome,
      limited: outcome < 0,
      remaining: remainingTokens(outcome, limit),
      retryAfter:
        limit.periodEnd === undefined
          ? retryAfterSeconds(outcome, limit, cost)
          : outcome < 0
            ? Math.max(1, untilEnd)
            : 0,
      resetAfter: limit.periodEnd === undefined ? resetAfterSeconds(outcome, limit) : untilEnd,
    };
  });
}
