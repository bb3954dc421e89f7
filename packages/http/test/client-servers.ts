import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import express from 'express';
import { rateLimit } from 'express-rate-limit';
import type { FetchFunction } from '../src/client.js';
import { listen } from './support.js';

/** A server on 127.0.0.1 with what it answered: requests served, requests refused with 429, and when each came. */
export interface CountingServer {
  url: string;
  served: () => number;
  refused: () => number;
  /** performance.now() of each request, with whether it was refused. */
  log: { at: number; refused: boolean }[];
  close: () => Promise<void>;
}

/**
 * express-rate-limit 8 in front of `POST /browsers`, with the headers of one dialect: `draft-8` (the IETF RateLimit
 * and RateLimit-Policy fields), `draft-6` (RateLimit-Limit/Remaining/Reset) or `legacy` (X-RateLimit-* with an epoch
 * reset). Its memory store counts fixed windows, each starting with a client's first request.
 */
export async function expressRateLimited(
  dialect: 'draft-8' | 'draft-6' | 'legacy',
  limit: number,
  windowMs: number,
): Promise<CountingServer> {
  let served = 0;
  let refused = 0;
  const log: CountingServer['log'] = [];
  const app = express();
  app.use((_request, response, next) => {
    const entry = { at: performance.now(), refused: false };
    log.push(entry);
    response.locals.entry = entry;
    next();
  });
  app.use(
    rateLimit({
      windowMs,
      limit,
      standardHeaders: dialect === 'legacy' ? false : dialect,
      legacyHeaders: dialect === 'legacy',
      handler: (_request, response) => {
        refused++;
        (response.locals.entry as { refused: boolean }).refused = true;
        response.status(429).json({ code: 'rate_limit_exceeded', message: 'Rate limit exceeded. Please retry later.' });
      },
    }),
  );
  app.post('/browsers', (_request, response) => {
    served++;
    response.status(201).json({ id: String(served) });
  });
  const server = await listen(createServer(app));
  return { url: server.url, served: () => served, refused: () => refused, log, close: server.close };
}

/** What a hand-made server does with one request: answer it (true: it was refused). */
export type Answer = (request: IncomingMessage, response: ServerResponse) => boolean;

/** A node:http server answering every request with `answer`, counting what it refused. */
export async function handMade(answer: Answer): Promise<CountingServer> {
  let served = 0;
  let refused = 0;
  const log: CountingServer['log'] = [];
  const server = await listen(
    createServer((request, response) => {
      request.resume();
      const wasRefused = answer(request, response);
      log.push({ at: performance.now(), refused: wasRefused });
      if (wasRefused) refused++;
      else served++;
    }),
  );
  return { url: server.url, served: () => served, refused: () => refused, log, close: server.close };
}

/**
 * A fixed window of `limit` requests per `windowMs`, starting with the first request after the last window ended.
 * A refused request is answered 429 with whatever `refusal(now, windowEnd)` sets; served ones carry no rate-limit
 * field at all, so the client learns nothing until it is refused.
 */
export function fixedWindow(
  limit: number,
  windowMs: number,
  refusal: (response: ServerResponse, now: number, windowEnd: number) => void,
): Answer {
  let windowEnd = 0;
  let count = 0;
  return (_request, response) => {
    const now = Date.now();
    if (now >= windowEnd) {
      windowEnd = now + windowMs;
      count = 0;
    }
    if (++count > limit) {
      response.statusCode = 429;
      refusal(response, now, windowEnd);
      response.end('{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}');
      return true;
    }
    response.statusCode = 201;
    response.end('{}');
    return false;
  };
}

/**
 * `callers` callers sharing `client`, each making `calls` POSTs one after another; the statuses in order of the
 * callers' calls.
 */
export async function drive(client: FetchFunction, url: string, callers: number, calls: number): Promise<number[]> {
  const results = await Promise.all(
    Array.from({ length: callers }, async () => {
      const statuses: number[] = [];
      for (let i = 0; i < calls; i++) {
        const response = await client(`${url}/browsers`, { method: 'POST' });
        await response.arrayBuffer();
        statuses.push(response.status);
      }
      return statuses;
    }),
  );
  return results.flat();
}
