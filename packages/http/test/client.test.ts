import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createLimiter, type Limit, perMinute, perSecond, RateLimitError } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { afterEach, describe, expect, it } from 'vitest';
import { type Clock, rateLimitedFetch, type WaitEvent } from '../src/client.js';
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
    for (const options of [{ maxRetries: -1 }, { maxRetries: 1.5 }, { maxWait: Number.NaN }, { pace: 'yes' }]) {
      expect(() => rateLimitedFetch(options as never)).toThrow(RateLimitError);
      try {
        rateLimitedFetch(options as never);
      } catch (error) {
        expect((error as RateLimitError).code).toBe('invalid_option');
      }
    }
  });
});
