import { describe, expect, it } from 'vitest';
import { type Clock, rateLimitedFetch, rateLimitReason, type WaitEvent } from '../src/client.js';

// No socket here: the "server" is a function answering fetch, and time is a manual clock, so waits of seconds cost
// nothing. The tests against real servers on loopback are in client-peers.test.ts.

/** A clock whose sleeps fire only when the test advances it, in order; every promise settles between two firings. */
function manualClock(): { clock: Clock; advance: (ms: number) => Promise<void>; now: () => number } {
  let time = 0;
  const timers: { at: number; fire: () => void }[] = [];
  const settle = async (): Promise<void> => {
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  };
  return {
    now: () => time,
    clock: {
      now: () => time,
      sleep: (ms, signal) =>
        new Promise<void>((resolve, reject) => {
          if (signal?.aborted) {
            reject(signal.reason);
            return;
          }
          const timer = { at: time + ms, fire: resolve };
          timers.push(timer);
          signal?.addEventListener('abort', () => {
            timers.splice(timers.indexOf(timer), 1);
            reject(signal.reason);
          });
        }),
    },
    advance: async (ms) => {
      const end = time + ms;
      await settle();
      for (;;) {
        timers.sort((a, b) => a.at - b.at);
        const next = timers[0];
        if (next === undefined || next.at > end) break;
        timers.shift();
        time = Math.max(time, next.at);
        next.fire();
        await settle();
      }
      time = end;
      await settle();
    },
  };
}

/** A fake server: `answer(n)` gives the headers and status of the n-th request (from 0); records when each came. */
type FakeAnswer = { status: number; headers?: Record<string, string> };

function fakeServer(answer: (n: number) => FakeAnswer, now: () => number) {
  const arrivals: number[] = [];
  const fetch = async (): Promise<Response> => {
    const { status, headers } = answer(arrivals.length);
    arrivals.push(now());
    return new Response(status === 429 ? 'slow down' : 'ok', { status, headers });
  };
  return { fetch, arrivals };
}

const URL_A = 'https://api.example.com/browsers';

describe('one budget shared by the callers of a client', () => {
  it('holds every caller through a 429 and then lets them go one at a time, spaced by a random gap', async () => {
    const time = manualClock();
    const server = fakeServer(
      (n): FakeAnswer =>
        n === 0
          ? { status: 429, headers: { 'retry-after': '2' } }
          : { status: 200, headers: { 'ratelimit-policy': '"p";q=100;w=60', ratelimit: `"p";r=${99 - n};t=60` } },
      time.now,
    );
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock });
    const calls = Array.from({ length: 5 }, () => client(URL_A));
    await time.advance(1999);
    // The first request went alone (nothing was known of the server), was refused, and nobody went since.
    expect(server.arrivals).toEqual([0]);
    await time.advance(1000);
    const statuses = (await Promise.all(calls)).map((response) => response.status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    const after = server.arrivals.slice(1);
    expect(after).toHaveLength(5);
    expect(after[0]).toBe(2000);
    for (let i = 1; i < after.length; i++) {
      const spacing = (after[i] as number) - (after[i - 1] as number);
      expect(spacing).toBeGreaterThanOrEqual(5);
      expect(spacing).toBeLessThanOrEqual(50);
    }
  });

  it('makes every caller wait for a quota at 0 until the reset the server stated', async () => {
    const time = manualClock();
    const server = fakeServer(
      (n) => ({
        status: 200,
        headers: { 'ratelimit-limit': '3', 'ratelimit-remaining': String(2 - (n % 3)), 'ratelimit-reset': '10' },
      }),
      time.now,
    );
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock });
    const calls = Array.from({ length: 6 }, () => client(URL_A));
    await time.advance(9000);
    expect(server.arrivals).toHaveLength(3);
    await time.advance(2000);
    await Promise.all(calls);
    expect(server.arrivals).toHaveLength(6);
    // Quota 3 per 10 s: the second three went after the reset the server stated.
    expect(server.arrivals[3]).toBeGreaterThanOrEqual(10_000);
  });

  it('keeps separate budgets for separate origins', async () => {
    const time = manualClock();
    const server = fakeServer((n) => ({ status: n === 0 ? 429 : 200, headers: { 'retry-after': '30' } }), time.now);
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock });
    const refused = client('https://a.example.com/x');
    await time.advance(10);
    const other = await client('https://b.example.com/x');
    expect(other.status).toBe(200);
    expect(server.arrivals).toEqual([0, 10]);
    await time.advance(30_000);
    expect((await refused).status).toBe(200);
  });

  it('shares one budget across origins when the key says so', async () => {
    const time = manualClock();
    const server = fakeServer((n) => ({ status: n === 0 ? 429 : 200, headers: { 'retry-after': '30' } }), time.now);
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock, key: () => 'one account' });
    const refused = client('https://a.example.com/x');
    await time.advance(10);
    const other = client('https://b.example.com/x');
    // 30 s, and the gap of up to 50 ms between two waiters let go in a row.
    await time.advance(30_100);
    expect((await refused).status).toBe(200);
    expect((await other).status).toBe(200);
    expect(server.arrivals[2]).toBeGreaterThanOrEqual(30_000);
  });
});

describe('bounded, cancellable, observable waits', () => {
  it('returns a 429 asking for more than maxWait at once, with the reason attached', async () => {
    const time = manualClock();
    const server = fakeServer(() => ({ status: 429, headers: { 'retry-after': '3600' } }), time.now);
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock, maxWait: 5000 });
    const response = await client(URL_A);
    expect(response.status).toBe(429);
    expect(await response.text()).toBe('slow down');
    expect(rateLimitReason(response)).toEqual({ source: 'retry-after', waitMs: 3_600_000, sent: true });
  });

  it('answers a call made during such a wait itself, without sending it, so the server is not asked again', async () => {
    const time = manualClock();
    const server = fakeServer(() => ({ status: 429, headers: { 'retry-after': '3600' } }), time.now);
    // maxHold: Infinity honours the hour whole (the default holds calls 5 minutes; client.test.ts has that).
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock, maxWait: 5000, maxHold: Infinity });
    await client(URL_A);
    await time.advance(600_000);
    const second = await client(URL_A);
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('3000');
    expect(rateLimitReason(second)).toEqual({ source: 'retry-after', waitMs: 3_000_000, sent: false });
    expect(server.arrivals).toHaveLength(1);
  });

  it('gives a waiting caller its 429 as soon as a new refusal puts the end of its wait past maxWait', async () => {
    const time = manualClock();
    const server = fakeServer((n) => ({ status: 429, headers: { 'retry-after': n === 0 ? '2' : '120' } }), time.now);
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock, maxWait: 10_000 });
    const first = client(URL_A);
    const second = client(URL_A);
    await time.advance(2000);
    // The first caller's retry was told 120 s: both get their 429 now, not after 10 s of silence.
    const [a, b] = await Promise.all([first, second]);
    expect([a.status, b.status]).toEqual([429, 429]);
    expect(rateLimitReason(a)).toMatchObject({ waitMs: 120_000, sent: true });
    expect(rateLimitReason(b)).toMatchObject({ source: 'retry-after', sent: false });
    expect(server.arrivals).toEqual([0, 2000]);
  });

  it('rejects a waiting caller at once when its signal aborts, and leaves the others waiting', async () => {
    const time = manualClock();
    const server = fakeServer((n) => ({ status: n === 0 ? 429 : 200, headers: { 'retry-after': '5' } }), time.now);
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock });
    const first = client(URL_A);
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    const aborted = client(URL_A, { signal: controller.signal });
    const patient = client(URL_A);
    await time.advance(1000);
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    await time.advance(5000);
    expect((await first).status).toBe(200);
    expect((await patient).status).toBe(200);
    expect(server.arrivals).toHaveLength(3);
  });

  it('reports each wait through onWait', async () => {
    const time = manualClock();
    const events: WaitEvent[] = [];
    const server = fakeServer((n) => ({ status: n === 0 ? 429 : 200, headers: { 'retry-after': '2' } }), time.now);
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock, onWait: (event) => events.push(event) });
    const call = client(URL_A);
    await time.advance(2000);
    await call;
    expect(events).toEqual([
      { key: 'https://api.example.com', ms: 2000, reason: { source: 'retry-after', waitMs: 2000 }, outcome: 'sent' },
    ]);
  });

  it('waits a garbled Retry-After out for a default second, doubling on each retry', async () => {
    const time = manualClock();
    const server = fakeServer((n) => ({ status: n < 3 ? 429 : 200, headers: { 'retry-after': '-5' } }), time.now);
    const client = rateLimitedFetch({ fetch: server.fetch, clock: time.clock });
    const call = client(URL_A);
    await time.advance(10_000);
    expect((await call).status).toBe(200);
    expect(server.arrivals).toEqual([0, 1000, 3000, 7000]);
  });

  it('waits at least a second when Retry-After says "0", and 1.5 s when it says "1.5"', async () => {
    for (const [value, wait] of [
      ['0', 1000],
      ['1.5', 1500],
    ] as const) {
      const time = manualClock();
      const server = fakeServer((n) => ({ status: n === 0 ? 429 : 200, headers: { 'retry-after': value } }), time.now);
      const call = rateLimitedFetch({ fetch: server.fetch, clock: time.clock })(URL_A);
      await time.advance(5000);
      expect((await call).status).toBe(200);
      expect(server.arrivals).toEqual([0, wait]);
    }
  });
});
