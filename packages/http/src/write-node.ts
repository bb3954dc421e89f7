import type { ServerResponse } from 'node:http';
import type { Verdict } from './evaluate.js';

/** Sets a verdict's headers on a node:http response (Express' response is one too). */
export function setHeaders(response: ServerResponse, headers: Readonly<Record<string, string>>): void {
  for (const name in headers) response.setHeader(name, headers[name] as string);
}

/** Answers a 'respond' verdict on a node:http response, body bytes exactly as given. */
export function writeVerdict(response: ServerResponse, verdict: Extract<Verdict, { action: 'respond' }>): void {
  if (response.headersSent) {
    response.end();
    return;
  }
  setHeaders(response, verdict.headers);
  response.statusCode = verdict.status;
  response.setHeader('content-length', Buffer.byteLength(verdict.body));
  response.end(verdict.body);
}

/**
 * Calls `end` once, when a node:http response is done: `end(true)` when it has been sent whole ('finish'), `end(false)`
 * when the connection closed first (the client went away), including before this was called. A keep-alive connection
 * finishes each response apart, so each request's lease ends with its own response.
 */
export function whenDone(response: ServerResponse, end: (finished: boolean) => void): void {
  let done = false;
  const once = (finished: boolean): void => {
    if (done) return;
    done = true;
    end(finished);
  };
  if (response.writableFinished || response.destroyed) {
    once(response.writableFinished);
    return;
  }
  response.once('finish', () => once(true));
  response.once('close', () => once(response.writableFinished));
}
