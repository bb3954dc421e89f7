import { describe, expect, it } from 'vitest';
import { limitFor, MAX_LIMIT, PLANS, type Plan, RateLimitError } from '../src/index.js';

describe('plans', () => {
  it('gives the spec requests per minute for each plan', () => {
    expect(PLANS).toEqual({ developer: 10, hobbyist: 25, startup: 100, enterprise: 250 });
  });

  it('gives a trial organization the Start-Up limit whatever its plan', () => {
    for (const plan of Object.keys(PLANS) as Plan[]) expect(limitFor({ plan, trial: true })).toBe(100);
  });

  it('lets an override win over plan and trial', () => {
    expect(limitFor({ plan: 'developer', trial: true, override: 1_000 })).toBe(1_000);
    expect(limitFor({ plan: 'enterprise', override: 1 })).toBe(1);
  });

  it('treats a null override or trial as absent', () => {
    expect(limitFor({ plan: 'hobbyist', trial: null, override: null })).toBe(25);
  });

  it.each(['free', 'toString', '__proto__', 'constructor', '', 'Developer'])(
    'rejects the plan %j as unknown_plan',
    (plan) => {
      expect(() => limitFor({ plan: plan as Plan })).toThrowError(
        expect.objectContaining({ code: 'unknown_plan', name: 'RateLimitError' }),
      );
    },
  );

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, MAX_LIMIT + 1, '100'])(
    'rejects the override %s as invalid_argument, naming it',
    (override) => {
      let error: unknown;
      try {
        limitFor({ plan: 'developer', override: override as number });
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(RateLimitError);
      expect((error as RateLimitError).code).toBe('invalid_argument');
      expect((error as RateLimitError).message).toMatch(/^ratecard: override must be/);
    },
  );
});
