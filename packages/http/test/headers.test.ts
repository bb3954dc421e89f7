import {
  createLimiter,
  type Decision,
  type Limit,
  perDay,
  perHour,
  perMinute,
  perSecond,
  quota,
  RateLimitError,
  tokenBucket,
} from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { parseItem, parseList } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { INTERNAL_ERROR, RATE_LIMIT_EXCEEDED } from '../src/body.js';
import { rateLimitHeaders } from '../src/headers.js';
import { readRateLimitFields } from '../src/rate-limit-fields.js';

/** The spec's Developer limit, 10 per minute: a token is 6 000 units, refilled 1 unit per ms. */
const DEVELOPER = perMinute(10);

function decision(fields: Partial<Decision>): Decision {
  return {
    mode: 'enforce',
    allowed: true,
    limited: false,
    limit: 10,
    remaining: 9,
    retryAfter: 0,
    resetAfter: 6,
    limits: [DEVELOPER],
    outcomes: [9 * 6000],
    cost: 1,
    source: 'store',
    rule: 'POST /browsers',
    ...fields,
  };
}

const DENIED = decision({
  allowed: false,
  limited: true,
  remaining: 0,
  retryAfter: 6,
  resetAfter: 60,
  outcomes: [-1],
});

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
  it('states a quota with its period as the window, and t until the next period', async () => {
    // 2026-03-29 is 23 hours long in London; at 22:00 UTC (23:00 there) an hour is left of it.
    const at = Date.parse('2026-03-29T22:00:00Z');
    const realNow = Date.now;
    Date.now = () => at;
    try {
      const limiter = createLimiter({
        store: memoryStore({ now: () => at }),
        plans: { p: [perMinute(60), quota(2, { per: 'day', timeZone: 'Europe/London' })] },
      });
      const request = { organization: 'o', endpoint: 'GET /x', plan: 'p' };
      await limiter.consume(request);
      await limiter.consume(request);
      const refused = rateLimitHeaders(await limiter.consume(request), { ietf: true });
      expect(refused['RateLimit-Policy']).toBe('"1m";q=60;w=60, "day";q=2;w=82800');
      expect(refused.RateLimit).toBe('"1m";r=58;t=2, "day";r=0;t=3600');
      expect(refused['Retry-After']).toBe('3600');
    } finally {
      Date.now = realNow;
    }
  });

  it('adds RateLimit-Policy and RateLimit as RFC 9651 lists, the item named after the limit', () => {
    const headers = rateLimitHeaders(decision({}), { ietf: true });
    expect(headers['RateLimit-Policy']).toBe('"1m";q=10;w=60');
    expect(headers.RateLimit).toBe('"1m";r=9;t=6');
    const [policy] = parseList(headers['RateLimit-Policy'] as string);
    expect(policy?.[0]).toBe('1m');
    expect([...(policy?.[1] ?? [])]).toEqual([
      ['q', 10],
      ['w', 60],
    ]);
  });

  it('makes t equal Retry-After on a denial', () => {
    const headers = rateLimitHeaders(DENIED, { ietf: true });
    expect(headers.RateLimit).toBe('"1m";r=0;t=6');
    expect(headers['Retry-After']).toBe('6');
  });

  it('keeps the classic headers of the spec default byte for byte, with or without the IETF fields', () => {
    const classic = { 'X-RateLimit-Limit': '10', 'X-RateLimit-Remaining': '0', 'Retry-After': '6' };
    expect(rateLimitHeaders(DENIED)).toEqual(classic);
    expect(rateLimitHeaders(DENIED, { ietf: true })).toEqual({
      ...classic,
      'RateLimit-Policy': '"1m";q=10;w=60',
      RateLimit: '"1m";r=0;t=6',
    });
  });

  it('names each item with the policy as a prefix, escaping quotes and backslashes so it parses back unchanged', () => {
    const name = 'tier "gold" \\ eu';
    const headers = rateLimitHeaders(decision({}), { ietf: true, policy: name });
    expect(parseItem(headers['RateLimit-Policy'] as string)[0]).toBe(`${name}:1m`);
    expect(parseItem(headers.RateLimit as string)[0]).toBe(`${name}:1m`);
  });

  it('rejects a policy name that cannot be an RFC 9651 string', () => {
    for (const policy of ['', 'café', 'line\nbreak', 'tab\there', 'x'.repeat(257)]) {
      expect(() => rateLimitHeaders(decision({}), { ietf: true, policy })).toThrow(RateLimitError);
    }
  });

  it('states w as the seconds to refill the whole capacity, rounded up', () => {
    const w = (limit: Limit): unknown =>
      parseItem(
        rateLimitHeaders(decision({ limits: [limit], outcomes: [0] }), { ietf: true })['RateLimit-Policy'] as string,
      )[1].get('w');
    expect(w(perSecond(5, { burst: 10 }))).toBe(2);
    expect(w(perSecond(10, { burst: 5 }))).toBe(1);
    expect(w(perHour(1000))).toBe(3600);
    expect(w(tokenBucket({ capacity: 7, refill: 3, intervalMs: 1000 }))).toBe(3);
    expect(w(tokenBucket({ capacity: 1, refill: 1000, intervalMs: 250 }))).toBe(1);
  });
});

describe('rateLimitHeaders for several limits', () => {
  const SECOND = perSecond(10);
  const HOUR = perHour(1000);

  async function twoLimits(): Promise<{ consume: (n?: number) => Promise<Decision> }> {
    const limiter = createLimiter({ store: memoryStore({ now: () => 0 }) });
    const consume = async (n = 1): Promise<Decision> => {
      let last: Decision | undefined;
      for (let i = 0; i < n; i++) {
        last = await limiter.consume({ organization: 'ip-1', endpoint: 'POST /upload', limits: [SECOND, HOUR] });
      }
      return last as Decision;
    };
    return { consume };
  }

  it('lists every limit as its own item, in order, with its own remaining and reset', async () => {
    const { consume } = await twoLimits();
    const headers = rateLimitHeaders(await consume(), { ietf: true });
    expect(headers).toEqual({
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '9',
      'RateLimit-Policy': '"1s";q=10;w=1, "1h";q=1000;w=3600',
      // The second's bucket is full again in 0.1 s, the hour's in 3.6 s: both rounded up.
      RateLimit: '"1s";r=9;t=1, "1h";r=999;t=4',
    });
    expect(parseList(headers.RateLimit as string).map(([name]) => name)).toEqual(['1s', '1h']);
  });

  it('on a denial by one limit, reports the other as holding what it held, since nothing was charged', async () => {
    const { consume } = await twoLimits();
    const denied = rateLimitHeaders(await consume(11), { ietf: true });
    expect(denied).toEqual({
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '0',
      'Retry-After': '1',
      'RateLimit-Policy': '"1s";q=10;w=1, "1h";q=1000;w=3600',
      RateLimit: '"1s";r=0;t=1, "1h";r=990;t=36',
    });
  });

  it('reports the limit that waits longest in the X- headers and Retry-After, and its t agrees', async () => {
    let now = 0;
    const limiter = createLimiter({ store: memoryStore({ now: () => now }) });
    const request = { organization: 'ip-1', endpoint: 'POST /upload', limits: [SECOND, perHour(12)] };
    for (let i = 0; i < 10; i++) await limiter.consume(request);
    now += 1000;
    for (let i = 0; i < 2; i++) await limiter.consume(request);
    // The hour holds 1/300 of a token now: 299 s to the next one. The second has 8 tokens.
    const headers = rateLimitHeaders(await limiter.consume(request), { ietf: true });
    expect(headers).toEqual({
      'X-RateLimit-Limit': '12',
      'X-RateLimit-Remaining': '0',
      'Retry-After': '299',
      'RateLimit-Policy': '"1s";q=10;w=1, "1h";q=12;w=3600',
      RateLimit: '"1s";r=8;t=1, "1h";r=0;t=299',
    });
  });
});

describe('rateLimitHeaders at the bounds of what a field can state', () => {
  it('states a count over 15 digits as 999 999 999 999 999, so the IETF fields still parse and are read', async () => {
    // The largest bucket a limit may be: 2^52 tokens, a trillion a millisecond.
    const huge = tokenBucket({ capacity: 2 ** 52, refill: 1_000_000_000_000, intervalMs: 1 });
    const limiter = createLimiter({ store: memoryStore({ now: () => 0 }) });
    const decided = await limiter.consume({ organization: 'o', endpoint: 'GET /x', limits: huge });
    const headers = rateLimitHeaders(decided, { ietf: true });
    expect(headers['X-RateLimit-Limit']).toBe('999999999999999');
    expect(headers['X-RateLimit-Remaining']).toBe('999999999999999');
    expect(headers['RateLimit-Policy']).toBe('"1ms";q=999999999999999;w=5');
    expect(headers.RateLimit).toBe('"1ms";r=999999999999999;t=1');
    expect(() => parseList(headers['RateLimit-Policy'] as string)).not.toThrow();
    expect(readRateLimitFields(new Headers(headers), 0).quotas).toEqual([
      {
        source: 'ietf',
        remaining: 999_999_999_999_999,
        limit: 999_999_999_999_999,
        windowMs: 5000,
        resetMs: 1000,
        policy: '1ms',
      },
    ]);
  });

  it('states a Retry-After of 10^9 s or more as 999 999 999 s, which a client reads as a delay, not a Unix time', async () => {
    // 20 000 tokens refilling 1 a day: refused a second batch of 20 000, it admits again in 20 000 days.
    const lifetime = perDay(1, { burst: 20_000 });
    const limiter = createLimiter({ store: memoryStore({ now: () => 0 }) });
    const request = { organization: 'o', endpoint: 'GET /x', limits: lifetime, cost: 20_000 };
    await limiter.consume(request);
    const denied = await limiter.consume(request);
    expect(denied.retryAfter).toBe(1_728_000_000);
    const headers = rateLimitHeaders(denied, { ietf: true });
    expect(headers['Retry-After']).toBe('999999999');
    expect(headers.RateLimit).toBe('"1d";r=0;t=999999999');
    const fields = readRateLimitFields(new Headers(headers), 0);
    expect(fields.garbled).toBe(false);
    expect(fields.retryAfter).toEqual({ source: 'retry-after', waitMs: 999_999_999_000 });
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
