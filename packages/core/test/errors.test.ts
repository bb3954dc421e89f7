import { describe, expect, it } from 'vitest';
import { createLimiter, describeValue, perSecond, RateLimitError } from '../src/index.js';
import { ScriptedStore } from './scripted-store.js';

describe('describeValue', () => {
  it('says "1 character" for a string of one', () => {
    expect(describeValue('5')).toBe('"5" (1 character)');
    expect(describeValue('')).toBe('"" (0 characters)');
  });

  it('counts code points, as the bounds on names do, and never cuts a character in half', () => {
    const crabs = '🦀'.repeat(41);
    expect(describeValue(crabs)).toBe(`"${'🦀'.repeat(40)}…" (41 characters)`);
  });
});

describe('error messages', () => {
  it('name a one-character string in the singular', () => {
    const error = (() => {
      try {
        perSecond('5' as unknown as number);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).message).toBe(
      'ratecard: perSecond must be a whole number from 1 to 1000000000000, got "5" (1 character)',
    );
  });

  it('give an organization over the bound the length the bound counts: 257 emoji are 257 characters', async () => {
    const store = new ScriptedStore();
    const limiter = createLimiter({ store, fallback: new ScriptedStore() });
    const request = { organization: '🦀'.repeat(257), endpoint: 'POST /browsers', plan: 'developer' };
    const error = await limiter.consume(request).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).code).toBe('invalid_argument');
    expect((error as RateLimitError).message).toMatch(/ \(257 characters\)$/);
    expect(store.calls).toBe(0);
  });
});
