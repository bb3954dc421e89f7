import type { ServerResponse } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { type Clock, rateLimitedFetch, rateLimitReason, type WaitEvent } from '../src/client.js';
import {
  type Answer,
  type CountingServer,
  drive,
  expressRateLimited,
  fixedWindow,
  handMade,
} from './client-servers.js';

// Real servers on 127.0.0.1, real sockets, real time. The target is 15 calls against 10 per 60 s; here the
// window is 2 s, 1/30 of it, and the ratio that matters is kept: 15 calls over a quota of 10, so one reset has to be
// waited out. The 120 s window is tested for what the client reads from it, without waiting it out.

const servers: CountingServer[] = [];
afterAll(async () => {
  for (const server of servers.splice(0)) await server.close();
});

async function started(server: Promise<CountingServer>): Promise<CountingServer> {
  const ready = await server;
  servers.push(ready);
  return ready;
}

/** Asserts that no request reached the server within `ms` of a refusal: no retry storm. */
function expectQuietAfterRefusals(server: CountingServer, ms: number): void {
  for (let i = 0; i + 1 < server.log.length; i++) {
    const entry = server.log[i] as CountingServer['log'][number];
    const next = server.log[i + 1] as CountingServer['log'][number];
    if (entry.refused) expect(next.at - entry.at).toBeGreaterThanOrEqual(ms);
  }
}

const ALL_CREATED = (n: number): number[] => Array.from({ length: n }, () => 201);

/** The real clock, keeping every wait the client asks of it. */
function recordingClock(): { clock: Clock; sleeps: number[] } {
  const sleeps: number[] = [];
  const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      sleeps.push(ms);
      signal?.throwIfAborted();
      const timer = setTimeout(resolve, ms);
      signal?.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  return { clock: { now: () => performance.now(), sleep }, sleeps };
}

// The issue's own case: a server that refuses 3 requests of every 4 with Retry-After: 2, counting arrivals whoever
// sends them. One caller alone needs 3 refusals per call and gets every call through with the default 3 retries.
// Each refusal costs 2 s of real time, so the workloads are small: 2 calls alone, 5 callers with 1 call each (about
// 30 s, while the rest of this file runs beside it).

function threeInFour(): Answer {
  let arrivals = 0;
  return (_request, response) => {
    if (++arrivals % 4 !== 0) {
      response.writeHead(429, { 'retry-after': '2' });
      response.end();
      return true;
    }
    response.writeHead(201);
    response.end('{}');
    return false;
  };
}

/** A bare Retry-After: whole seconds until the window ends, rounded up, and nothing else. */
function bareRetryAfter(response: ServerResponse, now: number, windowEnd: number): void {
  response.setHeader('retry-after', String(Math.ceil((windowEnd - now) / 1000)));
}

/** Retry-After as an HTTP-date, which keeps whole seconds: the window's end rounded down. */
function dateRoundedDown(response: ServerResponse, _now: number, windowEnd: number): void {
  response.setHeader('retry-after', new Date(windowEnd).toUTCString());
}

const SKEW_MS = 20_000;

/** A server clock 20 s behind: Date and the Retry-After date (the window's end, rounded up) both on it. */
function skewedDate(response: ServerResponse, now: number, windowEnd: number): void {
  response.setHeader('date', new Date(now - SKEW_MS).toUTCString());
  response.setHeader('retry-after', new Date(Math.ceil((windowEnd - SKEW_MS) / 1000) * 1000).toUTCString());
}

describe.concurrent('the client against real servers on 127.0.0.1', () => {
  describe("the issue's server, refusing 3 of 4 requests with Retry-After: 2", () => {
    it('one caller alone: 2 calls, both through, 3 refusals each', async () => {
      const server = await started(handMade(threeInFour()));
      expect(await drive(rateLimitedFetch(), server.url, 1, 2)).toEqual([201, 201]);
      expect(server.refused()).toBe(6);
    }, 40_000);

    it('five callers sharing a client, 1 call each: all through, no more than 3 refusals per call, no storm', async () => {
      const server = await started(handMade(threeInFour()));
      expect(await drive(rateLimitedFetch(), server.url, 5, 1)).toEqual([201, 201, 201, 201, 201]);
      expect(server.served()).toBe(5);
      expect(server.refused()).toBe(15);
      expectQuietAfterRefusals(server, 1950);
    }, 40_000);
  });

  describe('against express-rate-limit 8', () => {
    for (const dialect of ['draft-8', 'draft-6', 'legacy'] as const) {
      it(`${dialect}: 15 sequential calls at 10 per 2 s all succeed, and the server refuses none`, async () => {
        const server = await started(expressRateLimited(dialect, 10, 2000));
        expect(await drive(rateLimitedFetch(), server.url, 1, 15)).toEqual(ALL_CREATED(15));
        expect(server.served()).toBe(15);
        expect(server.refused()).toBe(0);
      }, 15_000);

      it(`${dialect}: five callers sharing a client, 3 calls each, do as well: all succeed, none refused`, async () => {
        const server = await started(expressRateLimited(dialect, 10, 2000));
        expect(await drive(rateLimitedFetch(), server.url, 5, 3)).toEqual(ALL_CREATED(15));
        expect(server.served()).toBe(15);
        expect(server.refused()).toBe(0);
      }, 15_000);

      it(`${dialect}: a 120 s window is read as such: the 11th call is answered at once, unsent`, async () => {
        const server = await started(expressRateLimited(dialect, 10, 120_000));
        const events: WaitEvent[] = [];
        const { clock, sleeps } = recordingClock();
        const client = rateLimitedFetch({ clock, maxWait: 5000, onWait: (event) => events.push(event) });
        expect(await drive(client, server.url, 1, 10)).toEqual(ALL_CREATED(10));
        const waited = sleeps.length;
        const eleventh = await client(`${server.url}/browsers`, { method: 'POST' });
        // At once: without a wait (timing it on a busy machine measured the machine, not the client).
        expect(sleeps.slice(waited)).toEqual([]);
        expect(eleventh.status).toBe(429);
        const reason = rateLimitReason(eleventh);
        expect(reason?.sent).toBe(false);
        expect(reason?.source).toBe(dialect === 'legacy' ? 'x-ratelimit' : dialect === 'draft-6' ? 'draft-6' : 'ietf');
        // The reset the server stated, give or take the whole seconds it is rounded to (and Date's, for legacy).
        expect(reason?.waitMs).toBeGreaterThan(115_000);
        expect(reason?.waitMs).toBeLessThanOrEqual(122_000);
        expect(server.refused()).toBe(0);
        expect(events.filter((event) => event.outcome !== 'sent')).toEqual([]);
      });
    }
  });

  describe('against hand-made servers that state no quota', () => {
    it('bare Retry-After, 4 per 2 s: one caller, 10 calls, sees one refusal per spent window', async () => {
      const server = await started(handMade(fixedWindow(4, 2000, bareRetryAfter)));
      expect(await drive(rateLimitedFetch(), server.url, 1, 10)).toEqual(ALL_CREATED(10));
      expect(server.refused()).toBe(2);
      expectQuietAfterRefusals(server, 950);
    }, 15_000);

    it('bare Retry-After, 4 per 2 s: five callers, 2 calls each, see no more refusals than one caller', async () => {
      const server = await started(handMade(fixedWindow(4, 2000, bareRetryAfter)));
      expect(await drive(rateLimitedFetch(), server.url, 5, 2)).toEqual(ALL_CREATED(10));
      expect(server.refused()).toBeLessThanOrEqual(2);
      expectQuietAfterRefusals(server, 950);
    }, 15_000);

    // A date rounded down can point before the window's end, or at the very second of Date: the wait then works out
    // to zero or less. The client waits at least a second, so a spent window costs at most two refusals, never a storm.
    for (const [callers, calls] of [
      [1, 10],
      [5, 2],
    ] as const) {
      it(`an HTTP-date rounded down, 3 per 1.5 s: ${callers} caller(s) x ${calls} calls, at most 2 refusals per spent window`, async () => {
        const server = await started(handMade(fixedWindow(3, 1500, dateRoundedDown)));
        expect(await drive(rateLimitedFetch(), server.url, callers, calls)).toEqual(ALL_CREATED(10));
        // 10 calls at 3 per window spend three windows.
        expect(server.refused()).toBeLessThanOrEqual(6);
        expectQuietAfterRefusals(server, 950);
      }, 20_000);
    }

    for (const [callers, calls] of [
      [1, 10],
      [5, 2],
    ] as const) {
      it(`a server clock 20 s behind, 4 per 2 s: ${callers} caller(s) x ${calls} calls, one refusal per spent window`, async () => {
        const server = await started(handMade(fixedWindow(4, 2000, skewedDate)));
        expect(await drive(rateLimitedFetch(), server.url, callers, calls)).toEqual(ALL_CREATED(10));
        expect(server.refused()).toBe(2);
        expectQuietAfterRefusals(server, 950);
      }, 15_000);
    }
  });
});
