import { type Limit, type Outcome, perMinute } from '@ratecard/core';
import type { RedisStore } from '../../src/index.js';

/**
 * One-limit calls as the spec's plans make them, for tests written in requests per minute: `perMinute(rpm)` as a
 * list, and store calls whose outcomes are counted in 1/60 000 token (U), the unit every per-minute limit divides:
 * a bucket of 10 per minute charged once holds 9 × U. Scaling is exact: perMinute(rpm) counts a token as
 * 60 000 / gcd(rpm, 60 000) units, so its units are whole multiples of these.
 */
export const U = 60_000;

const lists = new Map<number, readonly Limit[]>();

/** `[perMinute(rpm)]`, the same list each time, as a plan's limits are. */
export function minute(rpm: number): readonly Limit[] {
  let list = lists.get(rpm);
  if (list === undefined) {
    list = Object.freeze([perMinute(rpm)]);
    lists.set(rpm, list);
  }
  return list;
}

/** An outcome of `perMinute(rpm)` in 1/60 000 token. */
export function inU(outcome: Outcome, rpm: number): Outcome {
  const scale = U / (minute(rpm)[0] as Limit).unitsPerToken;
  return outcome >= 0 ? outcome * scale : -1 - (-1 - outcome) * scale;
}

async function only(answer: Promise<Outcome[]>, rpm: number): Promise<Outcome> {
  const outcomes = await answer;
  if (outcomes.length !== 1) throw new Error(`one outcome expected, got ${outcomes.length}`);
  return inU(outcomes[0] as Outcome, rpm);
}

/** `store.consume` on `perMinute(rpm)` alone, the outcome in 1/60 000 token. */
export function consumeRpm(
  store: RedisStore,
  organization: string,
  endpoint: string,
  rpm: number,
  cost: number,
  budgetMs?: number,
): Promise<Outcome> {
  return only(store.consume(organization, endpoint, minute(rpm), cost, budgetMs), rpm);
}

/** `store.peek` on `perMinute(rpm)` alone, the outcome in 1/60 000 token. */
export function peekRpm(
  store: RedisStore,
  organization: string,
  endpoint: string,
  rpm: number,
  cost: number,
): Promise<Outcome> {
  return only(store.peek(organization, endpoint, minute(rpm), cost), rpm);
}

/** `store.reset` of the one bucket a per-minute limit has ('1m'). */
export function resetRpm(store: RedisStore, organization: string, endpoint: string): Promise<void> {
  return store.reset(organization, endpoint, minute(10));
}

/**
 * The Redis value of a `perMinute(rpm)` bucket holding `units` (in 1/60 000 token) at `updatedAt`:
 * `<units> <updatedAt> <capacity>/<unitsPerMs>/<unitsPerToken>` in the limit's own units.
 */
export function rpmValue(units: number, updatedAt: number, rpm: number): string {
  const limit = minute(rpm)[0] as Limit;
  const scale = U / limit.unitsPerToken;
  return `${limit.name} ${units / scale} ${updatedAt} ${limit.capacity}/${limit.unitsPerMs}/${limit.unitsPerToken}`;
}
