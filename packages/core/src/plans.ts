import { describeValue, RateLimitError } from './errors.js';

/** Requests per minute of each plan, as the spec's rate-limit table gives them. */
export const PLANS: { readonly developer: 10; readonly hobbyist: 25; readonly startup: 100; readonly enterprise: 250 } =
  Object.freeze({ developer: 10, hobbyist: 25, startup: 100, enterprise: 250 });

export type Plan = keyof typeof PLANS;

/**
 * The largest limit (requests per minute) ratecard accepts. Bucket state is kept in units of 1/60 000 token, so a
 * full bucket holds limit × 60 000 units; this bound keeps that, and every intermediate sum, an exact integer in a
 * double (and in Redis' Lua, whose numbers are doubles too).
 */
export const MAX_LIMIT = 1_000_000_000;

/** Who is asking: an organization, and what sets its limit. */
export interface Identity {
  organization: string;
  plan: Plan;
  /** A trial organization gets the Start-Up limit whatever its plan. */
  trial?: boolean | null;
  /** A custom limit in requests per minute; it wins over plan and trial. */
  override?: number | null;
}

/** The plan's limit; a switch on interned strings is the cheapest lookup and immune to prototype keys. */
function planLimit(plan: unknown): number {
  switch (plan) {
    case 'developer':
      return PLANS.developer;
    case 'hobbyist':
      return PLANS.hobbyist;
    case 'startup':
      return PLANS.startup;
    case 'enterprise':
      return PLANS.enterprise;
    default:
      throw unknownPlan(plan);
  }
}

function unknownPlan(plan: unknown): RateLimitError {
  return new RateLimitError(
    'unknown_plan',
    `ratecard: plan must be one of ${Object.keys(PLANS).join(', ')}, got ${describeValue(plan)}`,
  );
}

function badOverride(override: unknown): RateLimitError {
  return new RateLimitError(
    'invalid_argument',
    `ratecard: override must be a whole number of requests per minute from 1 to ${MAX_LIMIT}, got ${describeValue(override)}`,
  );
}

/** The limit (requests per minute, = bucket capacity) of an organization: override, else trial, else plan. */
export function limitFor(org: Pick<Identity, 'plan' | 'trial' | 'override'>): number {
  // Checking the plan even when an override wins keeps a typo in the plan from hiding behind the override.
  const limit = planLimit(org.plan);
  const override = org.override;
  if (override !== undefined && override !== null) {
    if (!Number.isSafeInteger(override) || override < 1 || override > MAX_LIMIT) throw badOverride(override);
    return override;
  }
  const trial = org.trial;
  if (trial === true) return PLANS.startup;
  if (trial !== undefined && trial !== null && trial !== false) {
    throw new RateLimitError('invalid_argument', `ratecard: trial must be a boolean, got ${describeValue(trial)}`);
  }
  return limit;
}
