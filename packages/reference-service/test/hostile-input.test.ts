import { connect } from 'node:net';
import { memoryStore } from '@ratecard/memory';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { MAX_BODY_BYTES } from '../src/body.js';
import { type RunningService, send, sendRaw, startService, testKeys } from './helpers.js';

let service: RunningService;
let token: string;
let before: unknown;

beforeEach(async () => {
  const made = testKeys('hostile');
  token = made.tokens.startup;
  service = await startService(memoryStore(), made.keys);
  await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'keep', size: 3 } });
  await send(service.url, 'POST', '/browser-pools/keep/acquire', { token });
  before = (await send(service.url, 'GET', '/browser-pools/keep', { token })).json;
});

afterEach(async () => {
  // Whatever was sent, the pool is exactly as it was.
  expect((await send(service.url, 'GET', '/browser-pools/keep', { token })).json).toEqual(before);
  expect(service.errors).toEqual([]);
  await service.close();
});

it('refuses pool names with path syntax, encodings, unicode or the id prefix with a 400 naming the field', async () => {
  const names = [
    '../x',
    '..',
    '.',
    'a/b',
    '%2F',
    'a%2Fb',
    'pööl',
    'ｋｅｅｐ',
    'a\u0000b',
    '',
    ' keep',
    'x'.repeat(65),
    'bp_fake',
    '<b>',
    '__proto__',
  ];
  for (const name of names) {
    const answer = await send(service.url, 'POST', '/browser-pools', { token, body: { name, size: 1 } });
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toBe('application/json');
    expect(answer.json).toMatchObject({
      code: 'invalid_request',
      message: 'The request body is invalid: name.',
      details: [{ code: 'invalid_value', message: expect.stringMatching(/^name: must /) }],
    });
  }
});

it('answers 404 to pool paths that traverse, encode a slash or hold malformed escapes, and never reaches another route', async () => {
  const paths = [
    ['GET', '/browser-pools/..%2Fkeep'],
    ['GET', '/browser-pools/%2E%2E'],
    ['GET', '/browser-pools/keep%2F..%2Fkeep'],
    ['GET', '/browser-pools/%ZZ'],
    ['GET', '/browser-pools/%C3'],
    ['GET', '/browser-pools/%E2%80%AEkeep'],
    ['GET', '/browser-pools/constructor'],
    ['GET', '/browser-pools/__proto__'],
    ['POST', '/browser-pools/keep/flush/..'],
    ['POST', '/browser-pools/keep/..%2Fflush'],
    ['POST', '/browser-pools/keep/constructor'],
    ['POST', '/browser-pools/keep/../../browsers'],
  ] as const;
  const counted = service.decisions.length;
  for (const [method, path] of paths) {
    // node:http's client sends the target byte for byte; fetch would resolve the dot segments first.
    const answer = await sendRaw(service.port, method, path, { authorization: `Bearer ${token}` });
    expect(answer.status, `${method} ${path}`).toBe(404);
    expect(answer.headers['content-type']).toBe('application/json');
    expect(JSON.parse(answer.text)).toMatchObject({ code: 'not_found' });
  }
  // None of them reached a route, so none charged a bucket.
  expect(service.decisions.length).toBe(counted);
});

it('answers methods node:http cannot parse with 400 and methods it can but no route takes with 405, both with Error bodies', async () => {
  const unknown = await send(service.url, 'FOO', '/browser-pools/keep/flush', { token });
  expect(unknown.status).toBe(400);
  expect(unknown.headers.get('content-type')).toBe('application/json');
  expect(unknown.json).toEqual({ code: 'invalid_request', message: 'The request is not valid HTTP/1.1.' });
  for (const method of ['PROPFIND', 'PURGE', 'POST', 'OPTIONS']) {
    const answer = await send(service.url, method, '/browser-pools/keep', { token });
    expect(answer.status).toBe(405);
    expect(answer.headers.get('allow')).toBe('GET, HEAD, PATCH, PUT, DELETE');
    expect(answer.json).toEqual({ code: 'method_not_allowed', message: `Method ${method} is not allowed here.` });
  }
});

it('answers 401 to tokens that cannot be tokens: 8 KiB, non-ASCII, with spaces or commas', async () => {
  for (const header of [
    `Bearer ${'k'.repeat(8 * 1024)}`,
    'Bearer k\u00e9y',
    `Bearer ${token} extra`,
    `Bearer ${token},x`,
  ]) {
    const answer = await sendRaw(service.port, 'POST', '/browser-pools/keep/flush', { authorization: header });
    expect(answer.status).toBe(401);
    expect(answer.headers['content-type']).toBe('application/json');
    expect(JSON.parse(answer.text)).toMatchObject({ code: 'unauthorized' });
  }
});

/** Sends raw bytes over a loopback socket and reads the whole answer until the server closes the connection. */
function exchange(
  port: number,
  bytes: string,
): Promise<{ status: number; headers: Map<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
      const headers = new Map<string, string>();
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: text.slice(split + 4) });
    });
  });
}

it('answers what node:http would answer by itself with an Error body: no Host, Expect: foo, CONNECT', async () => {
  const counted = service.decisions.length;
  const noHost = await exchange(
    service.port,
    `POST /browsers HTTP/1.1\r\nauthorization: Bearer ${token}\r\ncontent-length: 0\r\n\r\n`,
  );
  expect(noHost.status).toBe(400);
  expect(noHost.headers.get('content-type')).toBe('application/json');
  expect(noHost.headers.get('connection')).toBe('close');
  expect(JSON.parse(noHost.body)).toEqual({
    code: 'invalid_request',
    message: 'An HTTP/1.1 request must carry a Host header.',
  });

  const expectation = await exchange(
    service.port,
    `POST /browsers HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\nexpect: foo\r\ncontent-length: 2\r\n\r\n{}`,
  );
  expect(expectation.status).toBe(417);
  expect(expectation.headers.get('content-type')).toBe('application/json');
  expect(JSON.parse(expectation.body)).toEqual({
    code: 'expectation_failed',
    message: 'The only expectation this server meets is Expect: 100-continue.',
  });

  const tunnel = await exchange(service.port, 'CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n');
  expect(tunnel.status).toBe(405);
  expect(tunnel.headers.get('content-type')).toBe('application/json');
  expect(tunnel.headers.get('allow')).toBe('GET, HEAD, POST, PUT, PATCH, DELETE');
  expect(JSON.parse(tunnel.body)).toEqual({
    code: 'method_not_allowed',
    message: 'Method CONNECT is not allowed: this is not a proxy.',
  });
  // None of them reached the limiter.
  expect(service.decisions.length).toBe(counted);

  // HTTP/1.0 has no Host requirement, and Expect: 100-continue is still met.
  const old = await exchange(
    service.port,
    `POST /browsers HTTP/1.0\r\nauthorization: Bearer ${token}\r\ncontent-length: 0\r\n\r\n`,
  );
  expect(old.status).toBe(201);
  const proceed = await sendRaw(
    service.port,
    'POST',
    '/browsers',
    { authorization: `Bearer ${token}`, expect: '100-continue', 'content-type': 'application/json' },
    '{}',
  );
  expect(proceed.status).toBe(201);
});

/** Every route that changes state, with a body each would accept from a valid key. */
const MUTATIONS = [
  ['POST', '/browsers', {}],
  ['POST', '/invocations', {}],
  ['POST', '/browser-pools', { name: 'fresh', size: 2 }],
  ['PUT', '/browser-pools/keep', { size: 9 }],
  ['PATCH', '/browser-pools/keep', { size: 9 }],
  ['DELETE', '/browser-pools/keep', { force: true }],
  ['POST', '/browser_pools/keep/acquire', {}],
  ['POST', '/browser-pools/keep/release', { session_id: 'br_x' }],
  ['POST', '/browser-pools/keep/flush', {}],
] as const;

it('answers 401 with an Error body to every malformed Authorization on every mutating route, charging nothing', async () => {
  const headers: Record<string, string | string[]>[] = [
    {},
    { authorization: token },
    { authorization: `Basic ${Buffer.from(`${token}:`).toString('base64')}` },
    { authorization: 'Bearer ' },
    { authorization: `Bearer ${'k'.repeat(8 * 1024)}` },
    { authorization: [`Bearer ${token}`, `Bearer ${token}`] },
    { authorization: [`Bearer ${token}`, 'Basic eDp5'] },
  ];
  const counted = service.decisions.length;
  for (const [method, path, body] of MUTATIONS) {
    for (const header of headers) {
      const answer = await sendRaw(
        service.port,
        method,
        path,
        {
          ...header,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(JSON.stringify(body))),
        },
        JSON.stringify(body),
      );
      const label = `${method} ${path} ${JSON.stringify(header).slice(0, 80)}`;
      expect(answer.status, label).toBe(401);
      expect(answer.headers['content-type'], label).toBe('application/json');
      expect(JSON.parse(answer.text), label).toMatchObject({ code: 'unauthorized' });
    }
  }
  // Refused before the limiter: no bucket was asked, let alone charged.
  expect(service.decisions.length).toBe(counted);
  expect((await send(service.url, 'GET', '/browser-pools/fresh', { token })).status).toBe(404);
});

it('answers 400 to malformed JSON and 413 to a body over 1 MiB on every mutating route, changing nothing', async () => {
  const bodies = [
    ['{"name": "fresh", ', 400, 'invalid_request'],
    ['{"size": 9}}', 400, 'invalid_request'],
    ['\u0000', 400, 'invalid_request'],
    [' '.repeat(MAX_BODY_BYTES + 1), 413, 'payload_too_large'],
  ] as const;
  for (const [method, path] of MUTATIONS) {
    for (const [raw, status, code] of bodies) {
      const answer = await send(service.url, method, path, {
        token,
        raw,
        headers: { 'content-type': 'application/json' },
      });
      expect(answer.status, `${method} ${path} ${raw.slice(0, 20)}`).toBe(status);
      expect(answer.headers.get('content-type')).toBe('application/json');
      expect(answer.json).toMatchObject({ code });
    }
  }
  // The pool (checked after each test) kept its size and its leased browser, and no pool was created.
  expect((await send(service.url, 'GET', '/browser-pools/fresh', { token })).status).toBe(404);
});

it('answers 400 to hostile JSON bodies: prototype keys, huge numbers, deep nesting', async () => {
  const bodies = [
    '{"__proto__": {"size": 1}, "name": "p", "size": 1}',
    '{"name": "p", "size": 1e309}',
    '{"name": "p", "size": -0.5}',
    `${'['.repeat(400_000)}${']'.repeat(400_000)}`,
  ];
  for (const raw of bodies) {
    const answer = await send(service.url, 'POST', '/browser-pools', {
      token,
      raw,
      headers: { 'content-type': 'application/json' },
    });
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({ code: 'invalid_request' });
  }
  expect((await send(service.url, 'GET', '/browser-pools/p', { token })).status).toBe(404);
  expect(({} as Record<string, unknown>).size).toBeUndefined();
});

it('answers 400 to a PUT that would resize past the bound and keeps the pool as it was', async () => {
  const answer = await send(service.url, 'PUT', '/browser-pools/keep', { token, body: { size: 1_000_000 } });
  expect(answer.json).toEqual({
    code: 'invalid_request',
    message: 'The request body is invalid: size.',
    details: [{ code: 'invalid_value', message: 'size: must be a whole number from 0 to 1000, got 1000000' }],
  });
});

it('answers 500 with no internal detail when a handler fails, and reports the error instead', async () => {
  // A real PoolRegistry whose flush breaks, to see what a bug in a handler looks like from outside.
  const { PoolRegistry } = await import('../src/pools.js');
  class BrokenPools extends PoolRegistry {
    override flush(): number {
      throw new Error('secret internal detail at /srv/app/pools.ts:42');
    }
  }
  const made = testKeys('broken');
  const broken = await startService(memoryStore(), made.keys, { pools: new BrokenPools() });
  try {
    await send(broken.url, 'POST', '/browser-pools', { token: made.tokens.hobbyist, body: { name: 'b', size: 1 } });
    const answer = await send(broken.url, 'POST', '/browser-pools/b/flush', { token: made.tokens.hobbyist });
    expect(answer.status).toBe(500);
    expect(answer.headers.get('content-type')).toBe('application/json');
    expect(answer.text).toBe('{"code":"internal_error","message":"Internal server error."}');
    expect(broken.errors).toEqual([new Error('secret internal detail at /srv/app/pools.ts:42')]);
  } finally {
    await broken.close();
  }
});
