import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { listeningUrl, STILL_CLOCK } from './support.js';

const guide = readFileSync(new URL('../../../docs/http.md', import.meta.url), 'utf8');
const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The first js block under a `## heading` of docs/http.md, as written. */
function example(heading: string): string {
  const section = guide.split(/^## /m).find((part) => part.startsWith(`${heading}\n`));
  const code = section === undefined ? undefined : /```js\n([\s\S]*?)```/.exec(section)?.[1];
  if (code === undefined) throw new Error(`docs/http.md has no js example under "## ${heading}"`);
  return code;
}

// Written inside this package so that imports resolve through the workspace, the package's own name included.
const files: string[] = [];
function writeExample(name: string, code: string): string {
  const file = fileURLToPath(new URL(`../docs-${name}.tmp.mjs`, import.meta.url));
  writeFileSync(file, code);
  files.push(file);
  return file;
}

const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.kill();
  for (const file of files.splice(0)) rmSync(file, { force: true });
});

/**
 * Runs a server example on port 0, on a clock that stands still (support.ts), and resolves with the URL it prints: on
 * the real clock, a second spent between the first and the eleventh request would make Retry-After 5.
 */
function startExample(name: string, code: string): Promise<string> {
  const child = spawn(process.execPath, [STILL_CLOCK, writeExample(name, code)], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return listeningUrl(child, name);
}

const built = existsSync(new URL('../dist/node.js', import.meta.url));

describe('the examples in docs/http.md, run as written', () => {
  beforeAll(() => {
    // The examples import the package by name, which resolves to dist/.
    if (!built) throw new Error('the examples need the package built first: pnpm --filter @ratecard/http build');
  });

  it.each([
    ['node:http', 'node'],
    ['Express', 'express'],
    ['Fastify', 'fastify'],
    ['Hono', 'hono'],
  ])('the %s example answers the 11th POST /browsers of a Developer key with 429', async (heading, name) => {
    const url = await startExample(name, example(heading));
    const post = (): Promise<Response> =>
      fetch(`${url}/browsers`, { method: 'POST', headers: { authorization: 'Bearer key-dev' } });
    for (let i = 9; i >= 0; i--) {
      const response = await post();
      expect(response.status).toBe(201);
      expect(response.headers.get('x-ratelimit-remaining')).toBe(String(i));
      await response.arrayBuffer();
    }
    const denied = await post();
    expect(denied.status).toBe(429);
    expect(denied.headers.get('retry-after')).toBe('6');
    expect(await denied.text()).toBe(
      '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}',
    );
    const anonymous = await fetch(`${url}/browsers`, { method: 'POST' });
    expect(anonymous.headers.get('x-ratelimit-limit')).toBeNull();
  });

  it('the session example holds 2 sessions at once and 10 starts a minute, and a heartbeat extends a lease', async () => {
    const url = await startExample('sessions', example('A session that outlives its request'));
    const headers = { authorization: 'Bearer key-dev' };
    const start = (): Promise<Response> => fetch(`${url}/sessions`, { method: 'POST', headers });
    const started = async (remaining: string): Promise<string> => {
      const response = await start();
      expect(response.status).toBe(201);
      expect(response.headers.get('x-ratelimit-limit')).toBe('10');
      expect(response.headers.get('x-ratelimit-remaining')).toBe(remaining);
      return ((await response.json()) as { id: string }).id;
    };
    const end = async (id: string): Promise<void> => {
      const response = await fetch(`${url}/sessions/${id}`, { method: 'DELETE', headers });
      expect(response.status).toBe(204);
    };
    const first = await started('9');
    const second = await started('8');
    // Two sessions run: a third is refused by the concurrency limit, and that refusal charged no start.
    const third = await start();
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('1');
    expect(third.headers.get('x-ratelimit-limit')).toBe('10');
    expect(third.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(await third.text()).toBe(
      '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}',
    );
    const heartbeat = await fetch(`${url}/sessions/${first}/heartbeat`, { method: 'POST', headers });
    expect(heartbeat.status).toBe(204);
    const stranger = await fetch(`${url}/sessions/${first}/heartbeat`, { method: 'POST' });
    expect(stranger.status).toBe(401);
    const unknown = await fetch(`${url}/sessions/nope/heartbeat`, { method: 'POST', headers });
    expect(unknown.status).toBe(404);
    await end(first);
    // The slot is free again; eight more starts use up the minute's ten, one session ended before each next.
    let running = second;
    for (let remaining = 7; remaining >= 0; remaining--) {
      const next = await started(String(remaining));
      await end(running);
      running = next;
    }
    const eleventh = await start();
    expect(eleventh.status).toBe(429);
    expect(eleventh.headers.get('retry-after')).toBe('6');
    await eleventh.arrayBuffer();
    await end(running);
    const ended = await fetch(`${url}/sessions/${running}`, { method: 'DELETE', headers });
    expect(ended.status).toBe(404);
  });

  it("the README's example answers the 11th POST /browsers with 429", async () => {
    const code = /```js\n([\s\S]*?)```/.exec(readme)?.[1] as string;
    const url = await startExample('readme', code);
    for (let i = 0; i < 10; i++) {
      await (await fetch(`${url}/browsers`, { method: 'POST', headers: { authorization: 'Bearer key-dev' } })).text();
    }
    const denied = await fetch(`${url}/browsers`, { method: 'POST', headers: { authorization: 'Bearer key-dev' } });
    expect(denied.status).toBe(429);
    expect(denied.headers.get('retry-after')).toBe('6');
    expect(await denied.text()).toBe(
      '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}',
    );
  });

  it('the client example runs against the node:http example', async () => {
    const url = await startExample('node', example('node:http'));
    const client = writeExample('client', example('The client'));
    const output = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, [client], { env: { ...process.env, API_URL: url } }, (error, stdout) =>
        error === null ? resolve(stdout) : reject(error),
      );
    });
    expect(output).toBe('201 9\n201 8\n201 7\n');
  });

  it('the fetch-handler example for other frameworks rate-limits web-standard requests', async () => {
    // In this process: Date.now stands still instead, as it does for the examples run as servers.
    vi.useFakeTimers({ toFake: ['Date'] });
    onTestFinished(() => {
      vi.useRealTimers();
    });
    const module = (await import(writeExample('handler', example('Other frameworks')))) as {
      handle: (request: Request) => Promise<Response>;
    };
    const post = (): Promise<Response> =>
      module.handle(
        new Request('http://api.test/browsers', { method: 'POST', headers: { authorization: 'Bearer key-dev' } }),
      );
    for (let i = 0; i < 10; i++) expect((await post()).status).toBe(201);
    const denied = await post();
    expect(denied.status).toBe(429);
    expect(denied.headers.get('retry-after')).toBe('6');
  });
});
