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
