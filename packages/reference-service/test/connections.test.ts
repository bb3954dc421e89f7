import { connect, type Socket } from 'node:net';
import { memoryStore } from '@ratecard/memory';
import { afterEach, expect, it } from 'vitest';
import { SERVER_LIMITS, type ServerLimits } from '../src/app.js';
import { readConfig } from '../src/config.js';
import { type RunningService, sendRaw, startService, testKeys } from './helpers.js';

let service: RunningService | undefined;
const made = testKeys('connections');
const token = made.tokens.startup;

afterEach(async () => {
  if (service === undefined) return;
  expect(service.errors).toEqual([]);
  await service.close();
  service = undefined;
});

async function serve(limits: Partial<ServerLimits>): Promise<RunningService> {
  service = await startService(memoryStore(), made.keys, { limits: { ...SERVER_LIMITS, ...limits } });
  return service;
}

/** What a raw connection got until the server closed it, and how long after the first bytes were sent. */
interface Held {
  text: string;
  ms: number;
}

/**
 * Opens a connection, writes `head`, then one byte of `drip` every `everyMs` (a slow client), and resolves when the
 * server closes the connection.
 */
function hold(port: number, head: string, drip = '', everyMs = 100): Promise<Held> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let started = 0;
    let timer: NodeJS.Timeout | undefined;
    const socket = connect(port, '127.0.0.1', () => {
      started = performance.now();
      if (head !== '') socket.write(head);
      let sent = 0;
      timer = setInterval(() => {
        if (sent < drip.length && socket.writable) socket.write(drip[sent++] ?? '');
      }, everyMs);
    });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ text: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - started });
    });
  });
}

/** Waits until `done` holds, for at most 5 s (a busy machine), checking every 50 ms. */
async function until(done: () => boolean | Promise<boolean>): Promise<void> {
  for (let waited = 0; waited < 5_000 && !(await done()); waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const PARTIAL_HEAD = `POST /browsers HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\n`;

it('keeps answering real clients through a flood of connections that each sent half a head, within its connection bound', async () => {
  // Timeouts far off, so only the connection bound can keep room for real clients.
  const { port } = await serve({ headersTimeoutMs: 60_000, requestTimeoutMs: 60_000, maxConnections: 100 });
  const flood: Socket[] = [];
  let cut = 0;
  const open = (count: number): Promise<void[]> =>
    Promise.all(
      Array.from(
        { length: count },
        () =>
          new Promise<void>((resolve) => {
            const socket = connect(port, '127.0.0.1', () => {
              socket.write(PARTIAL_HEAD);
              resolve();
            });
            socket.on('error', () => {});
            socket.on('close', () => {
              cut++;
              resolve();
            });
            flood.push(socket);
          }),
      ),
    );
  try {
    await open(500);
    const statuses: number[] = [];
    for (let round = 0; round < 20; round++) {
      await open(25);
      // A new connection each time, made while the bound is full of half-sent heads.
      const answer = await sendRaw(port, 'POST', '/browsers', {
        authorization: `Bearer ${token}`,
        connection: 'close',
      });
      statuses.push(answer.status);
    }
    expect(statuses).toEqual(Array(20).fill(201));
    await until(() => flood.length - cut <= 100);
    // Of 1000 flood connections, the server keeps at most its bound; the others were closed to make room.
    expect(flood.length - cut).toBeLessThanOrEqual(100);
    expect(cut).toBeGreaterThanOrEqual(900);
  } finally {
    for (const socket of flood) socket.destroy();
  }
}, 15_000);

it('closes a connection that sends nothing, or half a head, with a 408 Error body at the head timeout', async () => {
  const running = await serve({ headersTimeoutMs: 300, requestTimeoutMs: 600 });
  const [silent, partial] = await Promise.all([hold(running.port, ''), hold(running.port, PARTIAL_HEAD)]);
  for (const held of [silent, partial]) {
    expect(held.text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(held.text).toContain('{"code":"request_timeout","message":"The request did not arrive in time."}');
    // The bound is 300 ms; node looks for expired connections every 75 ms. Far below the default 60 s.
    expect(held.ms).toBeLessThan(5_000);
  }
}, 15_000);

it('lets go of slow clients that never read their 408 nor close', async () => {
  const running = await serve({ headersTimeoutMs: 300, requestTimeoutMs: 600 });
  // Never read from: a client that neither takes the answer nor closes its side.
  const deaf: Socket[] = [];
  await Promise.all(
    Array.from(
      { length: 50 },
      () =>
        new Promise<void>((resolve) => {
          const socket = connect(running.port, '127.0.0.1', () => socket.write(PARTIAL_HEAD, () => resolve()));
          socket.on('error', () => {});
          deaf.push(socket);
        }),
    ),
  );
  try {
    await until(async () => (await running.connections()) === 0);
    expect(await running.connections()).toBe(0);
  } finally {
    for (const socket of deaf) socket.destroy();
  }
}, 15_000);

it('cuts a body sent one byte at a time at the request timeout, answering 408', async () => {
  const { port } = await serve({ headersTimeoutMs: 300, requestTimeoutMs: 600 });
  const body = JSON.stringify({ name: 'slow', tags: { pad: 'x'.repeat(20) } });
  // 1 byte every 100 ms would take 5 s to send the whole body.
  const held = await hold(
    port,
    `${PARTIAL_HEAD}content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
    body,
    100,
  );
  expect(held.text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  expect(held.ms).toBeLessThan(5_000);
}, 15_000);

it('lets an acquire wait past the request timeout: the bound is on the request arriving, not on its answer', async () => {
  const { url } = await serve({ headersTimeoutMs: 300, requestTimeoutMs: 300 });
  const pools = made.tokens.hobbyist;
  await fetch(`${url}/browser_pools`, {
    method: 'POST',
    headers: { authorization: `Bearer ${pools}`, 'content-type': 'application/json' },
    body: '{"name":"none","size":0}',
  });
  const waited = await fetch(`${url}/browser_pools/none/acquire`, {
    method: 'POST',
    headers: { authorization: `Bearer ${pools}`, 'content-type': 'application/json' },
    body: '{"acquire_timeout_seconds":1}',
  });
  expect(waited.status).toBe(204);
}, 15_000);

it("closes a kept-alive connection left idle past the keep-alive timeout (and node's second of grace)", async () => {
  const { port } = await serve({ keepAliveTimeoutMs: 200 });
  const held = await hold(
    port,
    `GET /browsers/br_none HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\n\r\n`,
  );
  expect(held.text).toMatch(/^HTTP\/1\.1 404 Not Found\r\n/);
  expect(held.ms).toBeLessThan(5_000);
}, 15_000);

it('reads the bounds from the environment, refusing values that are not positive whole numbers', () => {
  expect(readConfig({}).limits).toEqual(SERVER_LIMITS);
  expect(
    readConfig({
      HEADERS_TIMEOUT_MS: '5000',
      REQUEST_TIMEOUT_MS: '20000',
      KEEP_ALIVE_TIMEOUT_MS: '1000',
      MAX_CONNECTIONS: '50',
    }).limits,
  ).toEqual({ headersTimeoutMs: 5000, requestTimeoutMs: 20000, keepAliveTimeoutMs: 1000, maxConnections: 50 });
  expect(() => readConfig({ MAX_CONNECTIONS: '0' })).toThrow(
    'reference-service: MAX_CONNECTIONS must be a whole number from 1 to 2147483647, got "0"',
  );
  expect(() => readConfig({ REQUEST_TIMEOUT_MS: '30s' })).toThrow('REQUEST_TIMEOUT_MS must be a whole number');
  expect(() => readConfig({ HEADERS_TIMEOUT_MS: '40000' })).toThrow(
    'reference-service: HEADERS_TIMEOUT_MS (40000) must not exceed REQUEST_TIMEOUT_MS (30000)',
  );
});
