import { createLimiter, type Decision, RateLimitError } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { parseItem, parseList } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { INTERNAL_ERROR, RATE_LIMIT_EXCEEDED } from '../src/body.js';
import { rateLimitHeaders } from '../src/headers.js';

function decision(fields: Partial<Decision>): Decision {
  return {
    mode: 'enforce',
    allowed: true,
    limited: false,
    limit: 10,
    remaining: 9,
    retryAfter: 0,
    resetAfter: 6,
    source: 'store',
    rule: 'POST /browsers',
    ...fields,
  };
}

const DENIED = decision({ allowed: false, limited: true, remaining: 0, retryAfter: 6, resetAfter: 60 });

describe('rateLimitHeaders', () => {
  it('gives an allowed enforced decision the limit and what remains', () => {
    expect(rateLimitHeaders(decision({}))).toEqual({ 'X-RateLimit-Limit': '10', 'X-RateLimit-Remaining': '9' });
  });

  it('gives a denial remaining 0 and Retry-After in whole seconds', () => {
    expect(rateLimitHeaders(DENIED)).toEqual({
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '0',
      'Retry-After': '6',
    });
  });

  it('never sends a Retry-After below 1 second', () => {
    expect(rateLimitHeaders({ ...DENIED, retryAfter: 0 })['Retry-After']).toBe('1');
  });

  it('sends nothing for an unlimited decision, even with every option on', () => {
    const unlimited = decision({ mode: 'unlimited', limit: Infinity, remaining: Infinity, rule: null, source: 'none' });
    expect(rateLimitHeaders(unlimited, { ietf: true, shadowHeaders: true })).toEqual({});
  });

  it('sends nothing for a shadow decision unless shadowHeaders, and never Retry-After', () => {
    const shadow = decision({ mode: 'shadow', limited: true, remaining: 0, retryAfter: 6, allowed: true });
    expect(rateLimitHeaders(shadow)).toEqual({});
    expect(rateLimitHeaders(shadow, { shadowHeaders: true })).toEqual({
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '0',
    });
  });

  it('returns a fresh plain record each time', () => {
    const first = rateLimitHeaders(decision({}));
    first['X-RateLimit-Limit'] = 'changed';
    expect(rateLimitHeaders(decision({}))['X-RateLimit-Limit']).toBe('10');
  });

  it('matches what a real limiter decides for each plan', async () => {
    const limiter = createLimiter({ store: memoryStore({ now: () => 0 }) });
    const headersFor = async (
      plan: 'developer' | 'hobbyist' | 'startup' | 'enterprise',
      trial = false,
    ): Promise<Record<string, string>> =>
      rateLimitHeaders(
        await limiter.consume({ organization: `${plan}-${trial}`, endpoint: 'POST /browsers', plan, trial }),
      );
    expect((await headersFor('developer'))['X-RateLimit-Limit']).toBe('10');
    expect((await headersFor('hobbyist'))['X-RateLimit-Limit']).toBe('25');
    expect((await headersFor('startup'))['X-RateLimit-Limit']).toBe('100');
    expect((await headersFor('enterprise'))['X-RateLimit-Limit']).toBe('250');
    expect((await headersFor('developer', true))['X-RateLimit-Limit']).toBe('100');
  });
});

describe('rateLimitHeaders with ietf', () => {
  it('adds RateLimit-Policy and RateLimit as RFC 9651 lists named after the rule', () => {
    const headers = rateLimitHeaders(decision({}), { ietf: true });
    expect(headers['RateLimit-Policy']).toBe('"POST /browsers";q=10;w=60');
    expect(headers.RateLimit).toBe('"POST /browsers";r=9;t=6');
    const [policy] = parseList(headers['RateLimit-Policy'] as string);
    expect(policy?.[0]).toBe('POST /browsers');
    expect([...(policy?.[1] ?? [])]).toEqual([
      ['q', 10],
      ['w', 60],
    ]);
  });

  it('makes t equal Retry-After on a denial', () => {
    const headers = rateLimitHeaders(DENIED, { ietf: true });
    expect(headers.RateLimit).toBe('"POST /browsers";r=0;t=6');
    expect(headers['Retry-After']).toBe('6');
  });

  it('escapes quotes and backslashes in a policy name so it parses back unchanged', () => {
    const name = 'tier "gold" \\ eu';
    const headers = rateLimitHeaders(decision({}), { ietf: true, policy: name });
    expect(parseItem(headers['RateLimit-Policy'] as string)[0]).toBe(name);
    expect(parseItem(headers.RateLimit as string)[0]).toBe(name);
  });

  it('rejects a policy name that cannot be an RFC 9651 string', () => {
    for (const policy of ['', 'café', 'line\nbreak', 'tab\there', 'x'.repeat(257)]) {
      expect(() => rateLimitHeaders(decision({}), { ietf: true, policy })).toThrow(RateLimitError);
    }
  });

  it('percent-encodes a rule key outside printable ASCII when it names the policy', () => {
    const headers = rateLimitHeaders(decision({ rule: 'POST /café' }), { ietf: true });
    expect(parseList(headers['RateLimit-Policy'] as string)[0]?.[0]).toBe('POST /caf%C3%A9');
  });
});

describe('error bodies', () => {
  it('are the spec Error shapes, code and message only', () => {
    expect(JSON.stringify(RATE_LIMIT_EXCEEDED)).toBe(
      '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}',
    );
    expect(JSON.stringify(INTERNAL_ERROR)).toBe('{"code":"internal_error","message":"Internal server error."}');
    expect(Object.isFrozen(RATE_LIMIT_EXCEEDED)).toBe(true);
  });
});
