import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createLimiter, type Limit, perDay, perMinute, perSecond, RateLimitError } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { afterEach, describe, expect, it } from 'vitest';
import { type Clock, rateLimitedFetch, rateLimitReason, type WaitEvent } from '../src/client.js';
import { withRateLimit } from '../src/node.js';
import { identityFrom, listen, nodeHeader, T0 } from './support.js';

/** Virtual time shared by the server's store and the client: waits move the clock instead of the test sleeping. */
/** A clock whose timers fire exactly when asked, or `lateMs` after, as a busy event loop's do. */
function virtualTime(lateMs = 0): { clock: Clock; elapsed: () => number; sleeps: number[]; storeNow: () => number } {
  let time = 0;
  const sleeps: number[] = [];
  return {
    clock: {
      now: () => time,
      sleep: async (ms, signal) => {
        signal?.throwIfAborted();
        sleeps.push(ms);
        time += ms + lateMs;
      },
    },
    elapsed: () => time,
    sleeps,
    storeNow: () => T0 + time,
  };
}

const closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/**
 * A ratecard server on node:http in front of a handler that answers 201; counts what the limiter decided. With
 * `limits`, every identified request carries them.
 */
async function ratecardServer(
  now?: () => number,
  ietf = false,
  limits?: Limit[],
): Promise<{ url: string; allowed: () => number; denied: () => number }> {
  let allowed = 0;
  let denied = 0;
  const limiter = createLimiter({
    store: memoryStore(now === undefined ? {} : { now }),
    onDecision: (decision) => {
      if (decision.allowed) allowed++;
      else denied++;
    },
  });
  const listener = withRateLimit(
    (_request, response) => {
      response.statusCode = 201;
      response.end('{}');
    },
    {
      limiter,
      ietf,
      identify: (request) => {
        const identity = identityFrom(nodeHeader(request.headers));
        return identity === null || limits === undefined ? identity : { organization: identity.organization, limits };
      },
    },
  );
  const server = await listen(createServer(listener));
  closers.push(server.close);
  return { url: server.url, allowed: () => allowed, denied: () => denied };
}

/** A plain server that answers every request with `answer`, recording what arrived. */
async function scriptedServer(
  answer: (request: IncomingMessage, response: ServerResponse, body: string) => void,
): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const server = await listen(
    createServer((request, response) => {
      let body = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => {
        body += chunk;
      });
      request.on('end', () => {
        bodies.push(body);
        answer(request, response, body);
      });
    }),
  );
  closers.push(server.close);
  return { url: server.url, bodies };
}

function tooMany(retryAfter: string): (request: IncomingMessage, response: ServerResponse) => void {
  return (_request, response) => {
    response.writeHead(429, { 'retry-after': retryAfter, 'content-type': 'application/json' });
    response.end('{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}');
  };
}

const DEVELOPER = { authorization: 'Bearer org-1', 'x-plan': 'developer' };

describe('rateLimitedFetch', () => {
  it('keeps a loop of 60 requests at a Developer limit to at most a couple of 429s (virtual clock)', async () => {
    const time = virtualTime();
    const server = await ratecardServer(time.storeNow);
    const paced = rateLimitedFetch({ clock: time.clock });
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) {
      const response = await paced(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER });
      statuses.push(response.status);
      await response.arrayBuffer();
    }
    expect(statuses.every((status) => status === 201)).toBe(true);
    expect(server.denied()).toBeLessThanOrEqual(2);
    expect(server.allowed()).toBe(60);
    // The limit allows 10 at once and then one every 6 s, so 60 requests need 300 s; pacing adds nothing to that.
    expect(time.elapsed()).toBe(300_000);
  });

  it('without pacing, the same loop bounces off 429s and relies on Retry-After (the comparison)', async () => {
    const time = virtualTime();
    const server = await ratecardServer(time.storeNow);
    const unpaced = rateLimitedFetch({ clock: time.clock, pace: false });
    for (let i = 0; i < 60; i++) {
      const response = await unpaced(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER });
      expect(response.status).toBe(201);
      await response.arrayBuffer();
    }
    expect(server.denied()).toBe(50);
  });

  it("makes 15 sequential calls at ratecard's 10 per 60 s with the IETF fields, and the server denies none (virtual clock)", async () => {
    const time = virtualTime();
    const server = await ratecardServer(time.storeNow, true);
    const client = rateLimitedFetch({ clock: time.clock });
    for (let i = 0; i < 15; i++) {
      const response = await client(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER });
      expect(response.status).toBe(201);
      await response.arrayBuffer();
    }
    expect(server.allowed()).toBe(15);
    expect(server.denied()).toBe(0);
    // t is the time until the bucket is full again: the client waits it out once and then finds all 10 back.
    expect(time.sleeps).toEqual([60_000]);
  });

  it("paces by every item of ratecard's IETF fields when a request carries two limits (virtual clock)", async () => {
    const time = virtualTime();
    const server = await ratecardServer(time.storeNow, true, [perSecond(2), perMinute(5)]);
    const waits: WaitEvent[] = [];
    const client = rateLimitedFetch({ clock: time.clock, onWait: (event) => waits.push(event) });
    for (let i = 0; i < 8; i++) {
      const response = await client(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER });
      expect(response.status).toBe(201);
      await response.arrayBuffer();
    }
    expect(server.allowed()).toBe(8);
    expect(server.denied()).toBe(0);
    // It waited for the second's bucket and, once five were spent, for the minute's.
    expect(new Set(waits.map((event) => event.reason?.policy))).toEqual(new Set(['1s', '1m']));
  });

  it('after a 429 from one of two limits, waits Retry-After and not for the limit that still had room', async () => {
    const time = virtualTime();
    const server = await ratecardServer(time.storeNow, true, [perSecond(10), perMinute(1000)]);
    // Another client of the same organization spends the second's bucket first.
    for (let i = 0; i < 10; i++) {
      await (await fetch(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER })).arrayBuffer();
    }
    const client = rateLimitedFetch({ clock: time.clock });
    for (let i = 0; i < 2; i++) {
      const response = await client(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER });
      expect(response.status).toBe(201);
      await response.arrayBuffer();
    }
    // The 429 said "1s";r=0;t=1, "1m";r=990;t=1: one wait of a second; the retry's answer, "1s";r=9;t=1, is a new
    // window of the second's quota, not a stale answer from the old one, so the next call went at once.
    expect(time.sleeps).toEqual([1000]);
    expect(server.denied()).toBe(1);
  });

  it('paces a steady loop under a real clock with no more than a couple of 429s (600/min override, 660 requests)', async () => {
    const server = await ratecardServer();
    const paced = rateLimitedFetch();
    const headers = { authorization: 'Bearer org-real', 'x-plan': 'enterprise', 'x-override': '600' };
    let failures = 0;
    for (let i = 0; i < 660; i++) {
      const response = await paced(`${server.url}/browsers`, { method: 'POST', headers });
      if (response.status !== 201) failures++;
      await response.arrayBuffer();
    }
    expect(failures).toBe(0);
    expect(server.denied()).toBeLessThanOrEqual(2);
  }, 20_000);

  it('waits Retry-After after a 429 and retries', async () => {
    const time = virtualTime();
    const server = await ratecardServer(time.storeNow);
    // Another client of the same organization spends the whole bucket first.
    for (let i = 0; i < 10; i++) {
      await (await fetch(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER })).arrayBuffer();
    }
    const client = rateLimitedFetch({ clock: time.clock });
    const response = await client(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER });
    expect(response.status).toBe(201);
    expect(time.sleeps).toEqual([6000]);
    expect(server.denied()).toBe(1);
  });

  it('gives up after maxRetries and returns the last 429', async () => {
    const time = virtualTime();
    const server = await scriptedServer(tooMany('1'));
    const client = rateLimitedFetch({ clock: time.clock, maxRetries: 2 });
    const response = await client(server.url);
    expect(response.status).toBe(429);
    expect(await response.json()).toEqual({
      code: 'rate_limit_exceeded',
      message: 'Rate limit exceeded. Please retry later.',
    });
    expect(server.bodies).toHaveLength(3);
    expect(time.sleeps).toEqual([1000, 1000]);
  });

  it('does not retry at all with maxRetries: 0', async () => {
    const time = virtualTime();
    const server = await scriptedServer(tooMany('1'));
    const response = await rateLimitedFetch({ clock: time.clock, maxRetries: 0 })(server.url);
    expect(response.status).toBe(429);
    expect(server.bodies).toHaveLength(1);
    expect(time.sleeps).toEqual([]);
  });

  it('returns a 429 at once when Retry-After asks for longer than maxWait', async () => {
    const time = virtualTime();
    const server = await scriptedServer(tooMany('6'));
    const response = await rateLimitedFetch({ clock: time.clock, maxWait: 5000 })(server.url);
    expect(response.status).toBe(429);
    expect(server.bodies).toHaveLength(1);
    expect(time.sleeps).toEqual([]);
  });

  it('returns a 429 asking for 25 hours at once, without retrying', async () => {
    const time = virtualTime();
    const server = await scriptedServer(tooMany('90000'));
    const response = await rateLimitedFetch({ clock: time.clock })(server.url);
    expect(response.status).toBe(429);
    expect(server.bodies).toHaveLength(1);
    expect(time.sleeps).toEqual([]);
  });

  it("reads ratecard's Retry-After for a bucket that refills in decades as a wait, and returns that 429 at once", async () => {
    const time = virtualTime();
    // 20 000 tokens refilling 1 a day, 20 000 a request: the second is refused for 20 000 days (1.7 × 10^9 s).
    const limiter = createLimiter({ store: memoryStore({ now: time.storeNow }) });
    const lifetime = perDay(1, { burst: 20_000 });
    const listener = withRateLimit(
      (_request, response) => {
        response.statusCode = 201;
        response.end('{}');
      },
      { limiter, identify: () => ({ organization: 'o', limits: lifetime, cost: 20_000 }) },
    );
    const server = await listen(createServer(listener));
    closers.push(server.close);
    const client = rateLimitedFetch({ clock: time.clock, pace: false });
    expect((await client(server.url)).status).toBe(201);
    const refused = await client(server.url);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('999999999');
    expect(rateLimitReason(refused)).toEqual({ source: 'retry-after', waitMs: 999_999_999_000, sent: true });
    expect(time.sleeps).toEqual([]);
  });

  it('sends a call whose wait fits maxWait when the wait ends, even when its timer fires late', async () => {
    const time = virtualTime(33);
    let calls = 0;
    const server = await scriptedServer((request, response) => {
      if (calls++ === 0) return tooMany('2')(request, response);
      response.writeHead(200);
      response.end('ok');
    });
    const response = await rateLimitedFetch({ clock: time.clock, maxWait: 2000 })(server.url);
    expect(response.status).toBe(200);
    expect(server.bodies).toHaveLength(2);
    expect(time.elapsed()).toBe(2033);
  });

  it('reads a Retry-After given as an HTTP date', async () => {
    const time = virtualTime();
    let calls = 0;
    const server = await scriptedServer((request, response) => {
      // Date from the same instant: node's own Date field is cached and renewed by a timer, which a busy event loop
      // runs late, so it could read a second behind Retry-After's and make the wait 4 s.
      const now = Date.now();
      response.setHeader('date', new Date(now).toUTCString());
      if (++calls === 1) tooMany(new Date(now + 3000).toUTCString())(request, response);
      else response.end('ok');
    });
    const response = await rateLimitedFetch({ clock: time.clock })(server.url);
    expect(response.status).toBe(200);
    // Both dates have whole seconds, cut the same way: 3 s apart.
    expect(time.sleeps).toEqual([3000]);
  });

  it('returns a 429 without Retry-After as is', async () => {
    const time = virtualTime();
    const server = await scriptedServer((_request, response) => {
      response.statusCode = 429;
      response.end();
    });
    const response = await rateLimitedFetch({ clock: time.clock })(server.url);
    expect(response.status).toBe(429);
    expect(server.bodies).toHaveLength(1);
  });

  it('replays a string body on the retry', async () => {
    const time = virtualTime();
    let calls = 0;
    const server = await scriptedServer((request, response) => {
      if (++calls === 1) tooMany('2')(request, response);
      else response.end('ok');
    });
    const response = await rateLimitedFetch({ clock: time.clock })(server.url, {
      method: 'POST',
      body: '{"name":"pool-a"}',
    });
    expect(response.status).toBe(200);
    expect(server.bodies).toEqual(['{"name":"pool-a"}', '{"name":"pool-a"}']);
  });

  it('does not retry a request whose body is a stream, since it cannot be sent twice', async () => {
    const time = virtualTime();
    const server = await scriptedServer(tooMany('1'));
    const body = new Blob(['streamed']).stream();
    const response = await rateLimitedFetch({ clock: time.clock })(server.url, {
      method: 'POST',
      body,
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(429);
    expect(server.bodies).toEqual(['streamed']);
  });

  it('retries a Request object without a body, but not one with a body', async () => {
    const time = virtualTime();
    const server = await scriptedServer(tooMany('1'));
    const client = rateLimitedFetch({ clock: time.clock, maxRetries: 1 });
    await (await client(new Request(server.url))).arrayBuffer();
    expect(server.bodies).toHaveLength(2);
    await (await client(new Request(server.url, { method: 'POST', body: 'x' }))).arrayBuffer();
    expect(server.bodies).toHaveLength(3);
  });

  it('rejects promptly with the abort reason when aborted during a Retry-After wait', async () => {
    const server = await scriptedServer(tooMany('30'));
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    const pending = rateLimitedFetch()(server.url, { signal: controller.signal });
    // Abort once the 429 is in and the client is waiting its 30 s.
    while (server.bodies.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(server.bodies).toHaveLength(1);
  });

  it('rejects promptly with the abort reason when aborted while pacing holds a request back', async () => {
    const server = await ratecardServer();
    const client = rateLimitedFetch();
    for (let i = 0; i < 10; i++) {
      await (await client(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER })).arrayBuffer();
    }
    const reason = new Error('shutting down');
    const controller = new AbortController();
    // The 11th would find the bucket empty, so pacing holds it for 6 s; it is aborted long before.
    const held = client(`${server.url}/browsers`, { method: 'POST', headers: DEVELOPER, signal: controller.signal });
    setTimeout(() => controller.abort(reason), 20);
    await expect(held).rejects.toBe(reason);
    expect(server.allowed() + server.denied()).toBe(10);
  });

  it('rejects bad options with invalid_option', () => {
    for (const options of [
      { maxRetries: -1 },
      { maxRetries: 1.5 },
      { maxWait: Number.NaN },
      { maxHold: -1 },
      { maxHold: Number.NaN },
      { maxHold: '300000' },
      { pace: 'yes' },
    ]) {
      expect(() => rateLimitedFetch(options as never)).toThrow(RateLimitError);
      try {
        rateLimitedFetch(options as never);
      } catch (error) {
        expect((error as RateLimitError).code).toBe('invalid_option');
      }
    }
  });
});

/** A clock only the test moves: a sleep ends when `advance` reaches its time, never by itself. */
function handClock(): { clock: Clock; advance: (ms: number) => void; pending: () => number } {
  let time = 0;
  const timers: { at: number; fire: () => void }[] = [];
  return {
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
          signal?.addEventListener(
            'abort',
            () => {
              timers.splice(timers.indexOf(timer), 1);
              reject(signal.reason);
            },
            { once: true },
          );
        }),
    },
    advance: (ms) => {
      time += ms;
      for (const timer of timers.filter((each) => each.at <= time)) {
        timers.splice(timers.indexOf(timer), 1);
        timer.fire();
      }
    },
    pending: () => timers.length,
  };
}

/** A server answering its n-th request (from 0) with `answers[n]`, or the last one. */
async function answering(...answers: { status: number; headers?: Record<string, string> }[]) {
  let n = 0;
  return scriptedServer((_request, response) => {
    const answer = answers[Math.min(n++, answers.length - 1)] as (typeof answers)[number];
    response.writeHead(answer.status, answer.headers);
    response.end(answer.status === 429 ? 'slow down' : '{}');
  });
}

const DAY_AND_AN_HOUR = { status: 429, headers: { 'retry-after': '90000' } };

describe('rateLimitedFetch: how long it holds the calls to one server', () => {
  it('after a 429 asking for 25 hours, answers the calls itself for 5 minutes, then asks the server again', async () => {
    const hand = handClock();
    const server = await answering(DAY_AND_AN_HOUR, { status: 201 });
    const client = rateLimitedFetch({ clock: hand.clock });
    const first = await client(server.url);
    expect(rateLimitReason(first)).toEqual({ source: 'retry-after', waitMs: 90_000_000, sent: true });
    const held = await client(server.url);
    expect(held.status).toBe(429);
    expect(held.headers.get('retry-after')).toBe('300');
    expect(rateLimitReason(held)).toEqual({ source: 'retry-after', waitMs: 300_000, sent: false });
    hand.advance(299_999 - 60_000);
    expect(rateLimitReason(await client(server.url))).toMatchObject({ waitMs: 60_001, sent: false });
    hand.advance(60_001);
    expect((await client(server.url)).status).toBe(201);
    expect(server.bodies).toHaveLength(2);
  });

  it('holds them as long as maxHold says, and honours the 25 hours whole with maxHold: Infinity', async () => {
    const hand = handClock();
    const first = await answering(DAY_AND_AN_HOUR, { status: 201 });
    const second = await answering(DAY_AND_AN_HOUR, { status: 201 });
    const hourly = rateLimitedFetch({ clock: hand.clock, maxHold: 3_600_000 });
    const patient = rateLimitedFetch({ clock: hand.clock, maxHold: Infinity });
    await (await hourly(first.url)).arrayBuffer();
    await (await patient(second.url)).arrayBuffer();
    hand.advance(300_000);
    expect(rateLimitReason(await hourly(first.url))).toMatchObject({ waitMs: 3_300_000, sent: false });
    hand.advance(3_300_000);
    expect((await hourly(first.url)).status).toBe(201);
    expect(rateLimitReason(await patient(second.url))).toMatchObject({ waitMs: 86_400_000, sent: false });
    expect([first.bodies.length, second.bodies.length]).toEqual([2, 1]);
  });

  it('holds them at most 5 minutes for a spent quota whose reset is 22 hours off, then sends one to ask', async () => {
    const hand = handClock();
    const spent = { 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '80000' };
    const server = await answering({ status: 200, headers: spent }, { status: 201 });
    const client = rateLimitedFetch({ clock: hand.clock });
    expect((await client(server.url)).status).toBe(200);
    expect(rateLimitReason(await client(server.url))).toEqual({ source: 'x-ratelimit', waitMs: 300_000, sent: false });
    hand.advance(300_000);
    expect((await client(server.url)).status).toBe(201);
    expect(server.bodies).toHaveLength(2);
  });

  it('forgets an origin on request: the next call is sent at once', async () => {
    const hand = handClock();
    const server = await answering(DAY_AND_AN_HOUR, { status: 201 });
    const client = rateLimitedFetch({ clock: hand.clock });
    await (await client(server.url)).arrayBuffer();
    expect(client.forget('http://elsewhere.example')).toBe(false);
    expect(client.forget(new URL(server.url).origin)).toBe(true);
    expect((await client(server.url)).status).toBe(201);
    expect(server.bodies).toHaveLength(2);
  });

  it('lets a call waiting out a 429 go at once when its origin is forgotten', async () => {
    const hand = handClock();
    const server = await answering({ status: 429, headers: { 'retry-after': '30' } }, { status: 201 });
    const client = rateLimitedFetch({ clock: hand.clock });
    const waiting = client(server.url);
    while (hand.pending() === 0) await new Promise((resolve) => setImmediate(resolve));
    expect(client.forget(new URL(server.url).origin)).toBe(true);
    expect((await waiting).status).toBe(201);
    expect(server.bodies).toHaveLength(2);
  });

  it('refuses a key that is not a string with invalid_argument', () => {
    const client = rateLimitedFetch();
    expect(() => client.forget(new URL('https://api.example.com') as never)).toThrowError(
      expect.objectContaining({ code: 'invalid_argument' }),
    );
  });
});
