import { describe, expect, it } from 'vitest';
import { MAX_QUOTAS, readRateLimitFields, refusalWait } from '../src/rate-limit-fields.js';

const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);

function read(fields: Record<string, string>, wallNow: number = NOW) {
  return readRateLimitFields(new Headers(fields), wallNow);
}

describe('Retry-After and retry-after-ms', () => {
  it('reads delay-seconds', () => {
    expect(read({ 'retry-after': '7' }).retryAfter).toEqual({ source: 'retry-after', waitMs: 7000 });
  });

  it('prefers retry-after-ms, which is more precise', () => {
    expect(read({ 'retry-after': '7', 'retry-after-ms': '250' }).retryAfter).toEqual({
      source: 'retry-after-ms',
      waitMs: 250,
    });
  });

  it('reads "1.5" as a second and a half, not as a date in 2001', () => {
    expect(read({ 'retry-after': '1.5' }).retryAfter?.waitMs).toBe(1500);
  });

  it('measures an HTTP-date against the Date field, so a server clock 20 s behind cancels out', () => {
    const server = NOW - 20_000;
    const fields = read({
      date: new Date(server).toUTCString(),
      'retry-after': new Date(server + 3000).toUTCString(),
    });
    expect(fields.retryAfter).toEqual({ source: 'retry-after', waitMs: 3000 });
  });

  it('measures an HTTP-date against the local clock when Date is missing', () => {
    expect(read({ 'retry-after': new Date(NOW + 4000).toUTCString() }).retryAfter?.waitMs).toBe(4000);
  });

  it('turns a wait of zero or less into the minimum, never into "again at once"', () => {
    const date = new Date(NOW).toUTCString();
    const cases: Record<string, string>[] = [
      { 'retry-after': '0' },
      { date, 'retry-after': date },
      { date, 'retry-after': new Date(NOW - 5000).toUTCString() },
    ];
    for (const fields of cases) {
      expect(refusalWait(read(fields), 1000)?.waitMs).toBe(1000);
    }
  });

  it('reads at most MAX_QUOTAS quotas of a RateLimit field, the first ones, however many items it has', () => {
    const items = Array.from({ length: 5_000 }, (_, i) => `"p${i}";r=${i};t=10`).join(', ');
    const { quotas } = read({ ratelimit: items });
    expect(quotas).toHaveLength(MAX_QUOTAS);
    expect(quotas.map((quota) => quota.policy)).toEqual(Array.from({ length: MAX_QUOTAS }, (_, i) => `p${i}`));
  });

  it('reads a wait longer than a day as the wait it says', () => {
    expect(read({ 'retry-after': '90000' }).retryAfter).toEqual({ source: 'retry-after', waitMs: 90_000_000 });
    expect(read({ 'retry-after-ms': '90000000' }).retryAfter).toEqual({ source: 'retry-after-ms', waitMs: 90_000_000 });
  });

  it('marks negative, unreadable and epoch-sized values as garbled and reads no wait from them', () => {
    for (const value of ['-5', 'soon', 'NaN', '1e3', '1700000000', 'Tue, 99 Foo 2026 25:61:61 GMT']) {
      const fields = read({ 'retry-after': value });
      expect(fields.retryAfter, value).toBeUndefined();
      expect(fields.garbled, value).toBe(true);
      expect(refusalWait(fields, 1000), value).toBeUndefined();
    }
  });
});

describe('the largest values a field can state', () => {
  it('reads a Retry-After of 999 999 999 s, the most ratecard sends, as a delay, and 10^9 s as garbled', () => {
    expect(read({ 'retry-after': '999999999' })).toMatchObject({
      retryAfter: { source: 'retry-after', waitMs: 999_999_999_000 },
      garbled: false,
    });
    expect(read({ 'retry-after': '1000000000' })).toMatchObject({ retryAfter: undefined, garbled: true });
  });

  it('reads q and r of 15 digits, and drops a RateLimit field with a 16-digit one as a whole (RFC 9651)', () => {
    const policy = '"1ms";q=999999999999999;w=5';
    expect(read({ 'ratelimit-policy': policy, ratelimit: '"1ms";r=999999999999999;t=1' }).quotas).toEqual([
      {
        source: 'ietf',
        remaining: 999_999_999_999_999,
        limit: 999_999_999_999_999,
        windowMs: 5000,
        resetMs: 1000,
        policy: '1ms',
      },
    ]);
    expect(read({ 'ratelimit-policy': policy, ratelimit: '"1ms";r=4503599627370495;t=1' }).quotas).toEqual([]);
  });
});

describe('the IETF RateLimit and RateLimit-Policy fields', () => {
  it('reads several policies (drafts 9 to 11: names as strings) and lets the most restrictive decide', () => {
    const fields = read({
      'ratelimit-policy': '"burst";q=10;w=60, "daily";q=1000;w=86400',
      ratelimit: '"burst";r=0;t=4, "daily";r=0;t=50000',
    });
    expect(fields.quotas).toEqual([
      { source: 'ietf', remaining: 0, limit: 10, windowMs: 60_000, resetMs: 4000, policy: 'burst' },
      { source: 'ietf', remaining: 0, limit: 1000, windowMs: 86_400_000, resetMs: 50_000_000, policy: 'daily' },
    ]);
    expect(refusalWait(fields, 1000)).toEqual({ source: 'ietf', waitMs: 50_000_000, policy: 'daily' });
  });

  it('reads draft 8, which wrote policy names as tokens', () => {
    const fields = read({ 'ratelimit-policy': 'burst;q=5;w=10', ratelimit: 'burst;r=3;t=10' });
    expect(fields.quotas).toEqual([
      { source: 'ietf', remaining: 3, limit: 5, windowMs: 10_000, resetMs: 10_000, policy: 'burst' },
    ]);
  });

  it("reads express-rate-limit's draft-8 output, partition key and all", () => {
    const fields = read({
      'ratelimit-policy': '"10-in-120sec"; q=10; w=120; pk=:ZmYzZTc2NDhlMzdj:',
      ratelimit: '"10-in-120sec"; r=0; t=117',
    });
    expect(fields.quotas).toEqual([
      { source: 'ietf', remaining: 0, limit: 10, windowMs: 120_000, resetMs: 117_000, policy: '10-in-120sec' },
    ]);
  });

  it("reads draft 7's dictionary", () => {
    const fields = read({ 'ratelimit-policy': '10;w=60', ratelimit: 'limit=10, remaining=0, reset=30' });
    expect(fields.quotas).toEqual([{ source: 'ietf', remaining: 0, limit: 10, windowMs: 60_000, resetMs: 30_000 }]);
  });

  it('lets a quota of another unit limit requests only once it is spent', () => {
    const policy = '"bytes";q=1000;qu="content-bytes";w=60';
    expect(read({ 'ratelimit-policy': policy, ratelimit: '"bytes";r=500;t=30' }).quotas).toEqual([]);
    expect(read({ 'ratelimit-policy': policy, ratelimit: '"bytes";r=0;t=30' }).quotas).toHaveLength(1);
  });

  it('ignores a field that does not parse and falls back to the next dialect', () => {
    const fields = read({ ratelimit: '"burst";r=', 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '4' });
    expect(fields.quotas).toEqual([{ source: 'x-ratelimit', remaining: 4, limit: 10, windowMs: undefined }]);
  });

  it('takes the IETF fields over draft-6 and X-RateLimit when a server sends several', () => {
    const fields = read({
      ratelimit: '"a";r=2;t=5',
      'ratelimit-remaining': '9',
      'x-ratelimit-remaining': '9',
    });
    expect(fields.quotas.map((quota) => quota.source)).toEqual(['ietf']);
  });
});

describe('draft-6 and X-RateLimit fields', () => {
  it('reads draft 6 with the window of its RateLimit-Policy', () => {
    const fields = read({
      'ratelimit-policy': '10;w=120',
      'ratelimit-limit': '10',
      'ratelimit-remaining': '0',
      'ratelimit-reset': '42',
    });
    expect(fields.quotas).toEqual([{ source: 'draft-6', remaining: 0, limit: 10, windowMs: 120_000, resetMs: 42_000 }]);
    expect(refusalWait(fields, 1000)).toEqual({ source: 'draft-6', waitMs: 42_000 });
  });

  it('tells an X-RateLimit-Reset in seconds from one in epoch seconds or milliseconds, against Date', () => {
    const date = new Date(NOW - 20_000).toUTCString(); // a server clock 20 s behind
    const base = { date, 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '0' };
    const serverSeconds = (NOW - 20_000) / 1000;
    for (const reset of ['30', String(serverSeconds + 30), String((serverSeconds + 30) * 1000)]) {
      expect(read({ ...base, 'x-ratelimit-reset': reset }).quotas[0]?.resetMs, reset).toBe(30_000);
    }
  });

  it('drops a reset that is absurd and keeps the rest of the quota', () => {
    const fields = read({ 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '99999999' });
    expect(fields.quotas).toEqual([{ source: 'x-ratelimit', remaining: 0, limit: 10, windowMs: undefined }]);
    // Without a reset the quota refills over the default minute: one request every 6 s.
    expect(refusalWait(fields, 1000)).toEqual({ source: 'x-ratelimit', waitMs: 6000 });
  });

  it('ignores a negative or fractional remaining count', () => {
    expect(read({ 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '-1' }).quotas).toEqual([]);
    expect(read({ 'ratelimit-limit': '10', 'ratelimit-remaining': '2.5' }).quotas).toEqual([]);
  });
});
