import type { EndpointRule } from './endpoints.js';
import { describeValue, RateLimitError } from './errors.js';
import { configuredLimits, type Limit, type Limits, limitList, perMinute } from './limits.js';

/** Requests per minute of each plan, as the spec's rate-limit table gives them. */
export const PLANS: {
  /** Developer, the free plan: 10 requests per minute. */
  readonly developer: 10;
  /** Hobbyist: 25 requests per minute. */
  readonly hobbyist: 25;
  /** Start-Up, and every trial organization: 100 requests per minute. */
  readonly startup: 100;
  /** Enterprise: 250 requests per minute. */
  readonly enterprise: 250;
} = Object.freeze({ developer: 10, hobbyist: 25, startup: 100, enterprise: 250 });

/** The name of one of the spec's four plans. */
export type Plan = keyof typeof PLANS;

/** The spec's plans as limits: `perMinute(rpm)` each. `createLimiter`'s default when no `plans` are given. */
export const SPEC_PLANS: Readonly<Record<Plan, Limit>> = Object.freeze({
  developer: perMinute(PLANS.developer),
  hobbyist: perMinute(PLANS.hobbyist),
  startup: perMinute(PLANS.startup),
  enterprise: perMinute(PLANS.enterprise),
});

/** Own plans: each plan name maps to one limit or several (all must admit a request). */
export type Plans = Readonly<Record<string, Limits>>;

/**
 * The largest limit (requests per minute) ratecard accepts. Bucket state is kept in units of 1/60 000 token, so a
 * full bucket holds limit × 60 000 units; this bound keeps that, and every intermediate sum, an exact integer in a
 * double (and in Redis' Lua, whose numbers are doubles too).
 */
export const MAX_LIMIT = 1_000_000_000;

/**
 * Who is asking, and what sets their limits. `organization` is whatever a bucket is kept per: an organization, a user,
 * an API key, an IP address.
 */
export interface Identity {
  /** Whose buckets: a non-empty name of at most 256 characters. */
  organization: string;
  /** A plan name: one of the limiter's `plans` (the spec's four by default). Not needed when `limits` are given. */
  plan?: Plan | (string & {});
  /** A trial organization is limited as the limiter's `trialPlan` (Start-Up under the spec's plans), whatever its plan. */
  trial?: boolean | null;
  /** A custom limit in requests per minute, `perMinute(override)`; it wins over plan and trial. */
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

function unknownPlan(plan: unknown, names: Iterable<string> = Object.keys(PLANS)): RateLimitError {
  const known = [...names].join(', ');
  // No plan at all is the likelier slip (a request with only trial or override): say what a request needs.
  const message =
    plan === undefined
      ? `ratecard: a request needs a plan (one of ${known}) or limits of its own, got neither`
      : `ratecard: plan must be one of ${known}, got ${describeValue(plan)}`;
  return new RateLimitError('unknown_plan', message);
}

function badOverride(override: unknown): RateLimitError {
  return new RateLimitError(
    'invalid_argument',
    `ratecard: override must be a whole number of requests per minute from 1 to ${MAX_LIMIT}, got ${describeValue(override)}`,
  );
}

/**
 * The spec's limit in requests per minute (= bucket capacity) of an organization on the spec's plans: override, else
 * trial, else plan.
 */
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

/** Override limits remembered, so that a request with an override makes no new limit; past this, each call makes one. */
const MAX_REMEMBERED_OVERRIDES = 1024;

function checkTrial(trial: unknown): boolean {
  if (trial === true) return true;
  if (trial !== undefined && trial !== null && trial !== false) {
    throw new RateLimitError('invalid_argument', `ratecard: trial must be a boolean, got ${describeValue(trial)}`);
  }
  return false;
}

/**
 * A limiter's plans, and which limits a request gets: its own `limits`, else the endpoint rule's limits for every
 * plan, else the rule's limits for its plan, else `override` (requests per minute), else its plan's limits. A trial
 * request's plan is `trialPlan`. Plan, trial and override are checked whenever they are given, so that a typo never
 * hides behind whatever wins.
 */
export class PlanBook {
  readonly names: ReadonlySet<string>;
  private readonly byName = new Map<string, readonly Limit[]>();
  private readonly trialPlan: string | undefined;
  private readonly overrides = new Map<number, readonly Limit[]>();

  constructor(plans: Plans | undefined, trialPlan: string | undefined) {
    if (plans !== undefined && (typeof plans !== 'object' || plans === null || Array.isArray(plans))) {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: plans must be an object of plan name to limits, got ${describeValue(plans)}`,
      );
    }
    for (const [name, limits] of Object.entries(plans ?? SPEC_PLANS)) {
      this.byName.set(name, configuredLimits(limits, `plan ${name}`));
    }
    if (this.byName.size === 0)
      throw new RateLimitError('invalid_option', 'ratecard: plans must name at least one plan');
    this.names = new Set(this.byName.keys());
    const trial = trialPlan ?? (plans === undefined ? 'startup' : undefined);
    if (trial !== undefined && !this.byName.has(trial)) {
      throw new RateLimitError(
        'unknown_plan',
        `ratecard: trialPlan must be one of ${[...this.names].join(', ')}, got ${describeValue(trialPlan)}`,
      );
    }
    this.trialPlan = trial;
  }

  /** The limits of a request that carries none of its own, on `rule` (undefined: an unlimited endpoint). */
  limitsFor(request: Identity, rule: EndpointRule | undefined): readonly Limit[] {
    const forAll = rule?.limits;
    if (forAll !== undefined) {
      this.check(request);
      return forAll;
    }
    const plan = request.plan;
    let limits = typeof plan === 'string' ? this.byName.get(plan) : undefined;
    if (limits === undefined) throw this.unknownPlan(plan);
    let effective = plan as string;
    if (checkTrial(request.trial)) {
      effective = this.trial();
      limits = this.byName.get(effective) as readonly Limit[];
    }
    const planLimits = rule?.planLimits;
    if (planLimits !== undefined) {
      const forPlan = planLimits.get(effective);
      if (forPlan !== undefined) return forPlan;
    }
    const override = request.override;
    return override === undefined || override === null ? limits : this.override(override);
  }

  /** A request's own limits, checked; its plan, trial and override are checked too when given. */
  ownLimits(request: Identity, limits: Limits): readonly Limit[] {
    this.check(request);
    return limitList(limits, 'limits', 'invalid_argument');
  }

  /** Every limit a request on `rule` may be limited by, one per name: what a reset forgets. */
  everyLimit(rule: EndpointRule | undefined): readonly Limit[] {
    const byName = new Map<string, Limit>();
    const add = (limits: readonly Limit[]) => {
      for (const limit of limits) if (!byName.has(limit.name)) byName.set(limit.name, limit);
    };
    if (rule?.limits !== undefined) add(rule.limits);
    for (const limits of rule?.planLimits?.values() ?? []) add(limits);
    for (const limits of this.byName.values()) add(limits);
    add(this.override(1));
    return [...byName.values()];
  }

  /** Checks plan, trial and override where a request gives them, for a request whose limits come from elsewhere. */
  private check(request: Identity): void {
    if (request.plan !== undefined || checkTrial(request.trial)) this.planOf(request);
    const override = request.override;
    if (override !== undefined && override !== null) this.override(override);
  }

  /** The plan a request is limited as: `trialPlan` for a trial, else its own; checked. */
  private planOf(request: Identity): string {
    const plan = request.plan;
    if (typeof plan !== 'string' || !this.byName.has(plan)) throw this.unknownPlan(plan);
    return checkTrial(request.trial) ? this.trial() : plan;
  }

  /** The plan trial requests are limited as; there is none under own plans without `trialPlan`. */
  private trial(): string {
    if (this.trialPlan === undefined) {
      throw new RateLimitError(
        'invalid_argument',
        'ratecard: a trial request needs createLimiter({ trialPlan }) under own plans: which plan is the trial limited as?',
      );
    }
    return this.trialPlan;
  }

  private unknownPlan(plan: unknown): RateLimitError {
    return unknownPlan(plan, this.names);
  }

  /** `perMinute(override)`, checked, as a list: made once per value (the first time, out of the decision's way). */
  private override(override: unknown): readonly Limit[] {
    return this.overrides.get(override as number) ?? this.newOverride(override);
  }

  private newOverride(override: unknown): readonly Limit[] {
    if (!Number.isSafeInteger(override) || (override as number) < 1 || (override as number) > MAX_LIMIT) {
      throw badOverride(override);
    }
    const limits = Object.freeze([perMinute(override as number)]);
    if (this.overrides.size < MAX_REMEMBERED_OVERRIDES) this.overrides.set(override as number, limits);
    return limits;
  }
}
