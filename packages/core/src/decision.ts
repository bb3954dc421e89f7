import { costAt, type Outcome, remainingTokens, resetAfterSeconds, retryAfterSeconds, unitsAfter } from './bucket.js';
import type { EndpointMode, EndpointRule } from './endpoints.js';
import type { Limit } from './limits.js';

/** Who answered a decision. */
export type DecisionSource =
  /** the configured store */
  | 'store'
  /** the fallback store, because the store failed or was over budget */
  | 'fallback'
  /** nobody: the store failed and the policy is 'allow' */
  | 'fail-open'
  /** nobody: the store failed and the policy is 'deny' */
  | 'fail-closed'
  /** nobody needed to: the endpoint has no rule */
  | 'none'
  /** an operator's block (`limiter.block`): the store was not asked */
  | 'block';

/** The limiter's answer to one request: admitted or not, and what the rate-limit headers report. */
export interface Decision {
  /** 'unlimited': the endpoint has no rule and no bucket was touched. */
  mode: EndpointMode | 'unlimited';
  /** False only when mode is 'enforce' and the request is limited. */
  allowed: boolean;
  /** The bucket lacked `cost` tokens (reported in shadow mode too). */
  limited: boolean;
  /**
   * The most restrictive limit's capacity (its burst; under the spec's plans, the requests per minute); Infinity
   * when unlimited. The most restrictive limit is the one that waits longest when limited, else the one with the
   * fewest tokens left.
   */
  limit: number;
  /** Whole tokens the most restrictive limit has left after this request; 0 when limited (Infinity when unlimited). */
  remaining: number;
  /** Whole seconds: 0 when not limited, else until every limit holds `cost` tokens (at least 1). */
  retryAfter: number;
  /** Whole seconds until the most restrictive limit's bucket is full again. */
  resetAfter: number;
  /** The limits that applied, in order; empty when unlimited. `limitStates(decision)` gives the figures of each. */
  limits: readonly Limit[];
  /** The store's outcome for each limit, in the same order (docs/algorithm.md). */
  outcomes: readonly Outcome[];
  /**
   * Tokens the request asked of each limit: one number for every limit, or one per limit in order (a request whose
   * `cost` named limits, or that carries a concurrency limit, which takes one slot unless named); `costAt(cost, i)`.
   */
  cost: number | readonly number[];
  /** Who answered. */
  source: DecisionSource;
  /** The endpoint rule key that applied, or null when none did. */
  rule: string | null;
  /** Set when an operator's block refused the request (`limiter.block`): why, and until when (epoch ms). */
  block?: {
    /** Why, as the operator said. */
    readonly reason: string;
    /** Epoch ms on this process's clock. */
    readonly until: number;
  };
}

/** The figures of one limit of a decision (limitStates). */
export interface LimitState {
  /** The limit this state is about. */
  limit: Limit;
  /** This limit's bucket lacked `cost` tokens. */
  limited: boolean;
  /**
   * Whole tokens this limit's bucket holds after the request: on a refusal, what it still holds (another limit may
   * have refused; nothing was charged). The decision's own `remaining` is 0 on a refusal, as the spec's header says.
   */
  remaining: number;
  /** Whole seconds until this limit's bucket holds `cost` tokens; 0 when it does. */
  retryAfter: number;
  /** Whole seconds until this limit's bucket is full again (0 for a concurrency limit). */
  resetAfter: number;
}

/** Each limit's figures in a decision, in order (for headers and metrics); empty when unlimited. */
export function limitStates(decision: Decision): LimitState[] {
  const { limits, outcomes, cost } = decision;
  return limits.map((limit, i) => {
    const outcome = outcomes[i] as Outcome;
    const retryAfter = retryAfterSeconds(outcome, limit, costAt(cost, i));
    return {
      limit,
      limited: retryAfter > 0,
      remaining: Math.max(0, Math.floor(unitsAfter(outcome) / limit.unitsPerToken)),
      retryAfter,
      resetAfter: resetAfterSeconds(outcome, limit),
    };
  });
}

/**
 * Which limit is the most restrictive: when the request is limited, the one that waits longest (its wait is the
 * request's: then every limit admits it); when admitted, the one with the fewest whole tokens left. Ties go to the
 * first.
 */
function mostRestrictive(
  outcomes: readonly Outcome[],
  limits: readonly Limit[],
  cost: number | readonly number[],
  limited: boolean,
): number {
  let most = 0;
  let best = -1;
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i] as Limit;
    const outcome = outcomes[i] as Outcome;
    // Minus the tokens left, so that for both a larger figure is more restrictive.
    const figure = limited ? retryAfterSeconds(outcome, limit, costAt(cost, i)) : -remainingTokens(outcome, limit);
    if (i === 0 || figure > best) {
      most = i;
      best = figure;
    }
  }
  return most;
}

/** The decision from one outcome per limit; `limit`, `remaining`, `retryAfter` and `resetAfter` are the most restrictive limit's. */
export function decide(
  outcomes: readonly Outcome[],
  rule: EndpointRule,
  limits: readonly Limit[],
  cost: number | readonly number[],
  source: DecisionSource,
): Decision {
  const limited = (outcomes[0] as Outcome) < 0;
  // One limit is its own most restrictive: the search is not even called (nor compiled into the caller).
  const most = limits.length === 1 ? 0 : mostRestrictive(outcomes, limits, cost, limited);
  const limit = limits[most] as Limit;
  const outcome = outcomes[most] as Outcome;
  return {
    mode: rule.mode,
    allowed: !limited || rule.mode === 'shadow',
    limited,
    limit: limit.capacity,
    remaining: remainingTokens(outcome, limit),
    retryAfter: retryAfterSeconds(outcome, limit, costAt(cost, most)),
    resetAfter: resetAfterSeconds(outcome, limit),
    limits,
    outcomes,
    cost,
    source,
    rule: rule.key,
  };
}

/** The decision when the store failed and the policy answers without it. */
export function decideWithoutStore(
  policy: 'allow' | 'deny',
  rule: EndpointRule,
  limits: readonly Limit[],
  cost: number | readonly number[],
): Decision {
  if (policy === 'allow') {
    const full = limits.map((limit, i) => (limit.capacity - costAt(cost, i)) * limit.unitsPerToken);
    return decide(full, rule, limits, cost, 'fail-open');
  }
  // Denying as if every bucket were empty: retry in the time one request's tokens take to refill.
  return decide(
    limits.map(() => -1),
    rule,
    limits,
    cost,
    'fail-closed',
  );
}
