import { describe, expect, it } from 'vitest';
import { checkOptionKeys, RateLimitError } from '../src/index.js';

const ACCEPTED = { store: true, plans: true, storeTimeoutMs: true, log: true, now: true } as const;

/** The message checkOptionKeys throws for `options`, which must be an invalid_option RateLimitError. */
function refusal(options: object): string {
  let error: unknown;
  try {
    checkOptionKeys(options, ACCEPTED, 'makeThing');
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(RateLimitError);
  expect((error as RateLimitError).code).toBe('invalid_option');
  return (error as RateLimitError).message;
}

describe('checkOptionKeys', () => {
  it('accepts every accepted key, none of them, and keys set to undefined', () => {
    expect(() => checkOptionKeys({}, ACCEPTED, 'makeThing')).not.toThrow();
    expect(() =>
      checkOptionKeys({ store: 1, plans: 2, storeTimeoutMs: 3, log: 4, now: undefined }, ACCEPTED, 'makeThing'),
    ).not.toThrow();
  });

  it('names the unknown key, the key it most likely meant and every accepted key', () => {
    expect(refusal({ plan: {} })).toBe(
      'ratecard: makeThing got an unknown option "plan"; did you mean "plans"? It takes store, plans, storeTimeoutMs, log, now',
    );
  });

  it('refuses a misspelt key whose value is undefined', () => {
    expect(refusal({ plan: undefined })).toMatch(/unknown option "plan"; did you mean "plans"\?/);
  });

  it.each([
    ['STORE', 'store'],
    ['storetimeoutms', 'storeTimeoutMs'],
    ['plan', 'plans'],
    ['stores', 'store'],
    ['storeTimeout', 'storeTimeoutMs'],
    ['sotre', 'store'],
    ['stroeTimoutMs', 'storeTimeoutMs'],
    ['lgo', 'log'],
  ])('suggests the close key for %j: %j', (key, meant) => {
    expect(refusal({ [key]: 1 })).toContain(`"${key}"; did you mean "${meant}"?`);
  });

  it.each([
    'timeout',
    'limits',
    // Two edits from "now" and from "log": a key of up to 4 characters is allowed one edit only.
    'nag',
  ])('suggests nothing for %j, which is close to no accepted key', (key) => {
    expect(refusal({ [key]: 1 })).toBe(
      `ratecard: makeThing got an unknown option "${key}"; it takes store, plans, storeTimeoutMs, log, now`,
    );
  });

  it('names every unknown key, each with its suggestion', () => {
    expect(refusal({ store: 1, plan: 1, other: 1, storeTimeout: 1 })).toBe(
      'ratecard: makeThing got unknown options "plan" (did you mean "plans"?), "other", "storeTimeout" (did you mean "storeTimeoutMs"?); it takes store, plans, storeTimeoutMs, log, now',
    );
  });

  it('cuts a long key short in the message', () => {
    expect(refusal({ ['x'.repeat(100_000)]: 1 })).toMatch(/unknown option "x{40}…" \(100000 characters\); it takes/);
  });

  it('reads own keys only, so an options object may be a class instance with getters or inherit defaults', () => {
    class Settings {
      store = 1;
      get plans(): number {
        return 2;
      }
    }
    expect(() => checkOptionKeys(new Settings(), ACCEPTED, 'makeThing')).not.toThrow();
    expect(() => checkOptionKeys(Object.create({ store: 1 }), ACCEPTED, 'makeThing')).not.toThrow();
  });

  it('treats a key named like an Object.prototype member as unknown', () => {
    expect(refusal({ constructor: 1 })).toMatch(/unknown option "constructor"/);
    expect(refusal(JSON.parse('{"__proto__": 1}'))).toMatch(/unknown option "__proto__"/);
  });
});
