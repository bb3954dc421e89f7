import type { ChildProcess } from 'node:child_process';
import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Plan, Store } from '@ratecard/core';
import type { Identity } from '../src/evaluate.js';

export const T0 = 1_700_000_000_000;

/**
 * A node flag that makes Date.now, the clock the memory store reads, stand still at the instant the process starts: a
 * program's buckets then see no time pass, as if the machine ran it in no time, so what it prints or answers (10 of
 * 12 requests at once against 10 a second, Retry-After: 6 for the 11th of 10 a minute) holds at any machine speed.
 */
export const STILL_CLOCK: string = `--import=data:text/javascript,${encodeURIComponent('const at = Date.now(); Date.now = () => at;')}`;

/** A clock the test moves by hand; the memory store reads it, so Retry-After and remaining are exact. */
export interface TestClock {
  now: () => number;
  advance: (ms: number) => void;
}

export function testClock(start: number = T0): TestClock {
  let time = start;
  return {
    now: () => time,
    advance: (ms) => {
      time += ms;
    },
  };
}

/**
 * The tests' stand-in for authentication: `authorization: Bearer <organization>`, the plan in `x-plan`, `x-trial: 1`
 * for a trial and `x-override` for a custom limit. No authorization header: not identified (null).
 */
export function identityFrom(header: (name: string) => string | undefined): Identity | null {
  const authorization = header('authorization');
  if (authorization === undefined || !authorization.startsWith('Bearer ')) return null;
  const override = header('x-override');
  return {
    organization: authorization.slice('Bearer '.length),
    plan: (header('x-plan') ?? 'developer') as Plan,
    trial: header('x-trial') === '1',
    override: override === undefined ? null : Number(override),
  };
}

/** A header reader over a node:http style header record. */
export function nodeHeader(
  headers: Record<string, string | string[] | undefined>,
): (name: string) => string | undefined {
  return (name) => {
    const value = headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
}

/** Listens on 127.0.0.1, port 0, and gives the base URL and a close that also drops keep-alive sockets. */
export async function listen(server: Server): Promise<{ url: string; close: () => Promise<void> }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The same store answering through promises, as a store across the network does. */
export function asynchronous(store: Store): Store {
  return {
    shared: false,
    consume: async (...args) => store.consume(...args),
    settle: async (...args) => store.settle(...args),
    peek: async (...args) => store.peek(...args),
    reset: async (...args) => store.reset(...args),
    inspect: async (...args) => store.inspect(...args),
    blocks: async (...args) => store.blocks(...args),
    close: () => store.close(),
  };
}

/** A store that is down: every call fails with a message that must never reach a client. */
export function brokenStore(): Store {
  const fail = (): never => {
    throw new Error('connect ECONNREFUSED 10.1.2.3:6379 (secret-host)');
  };
  return {
    shared: false,
    consume: fail,
    settle: fail,
    peek: fail,
    reset: fail,
    inspect: fail,
    blocks: fail,
    close: () => undefined,
  };
}

/** Sends a request with the request target exactly as given (fetch always sends origin-form). */
export function rawRequest(
  base: string,
  method: string,
  target: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ hostname, port, method, path: target, headers, agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers }));
    });
    request.on('error', reject);
    request.end();
  });
}

/** Resolves with the URL a server example prints (`listening on http://…`); rejects with its output if it exits first. */
export function listeningUrl(child: ChildProcess, name: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const url = /listening on (http:\/\/\S+)/.exec(output)?.[1];
      if (url !== undefined) resolve(url);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.on('exit', (code) => reject(new Error(`the ${name} example exited (${code}) before listening:\n${output}`)));
  });
}
