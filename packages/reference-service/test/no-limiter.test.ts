import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../src/app.js';
import { send, testKeys } from './helpers.js';

describe('the reference service with limiter: null', () => {
  const { keys, tokens } = testKeys('no_limiter');
  const server = createServer(createApp({ limiter: null, keys }));
  let url = '';
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('serves POST /browsers past the plan limit with no rate-limit headers', async () => {
    for (let i = 0; i < 12; i++) {
      const answer = await send(url, 'POST', '/browsers', { token: tokens.developer, body: {} });
      expect(answer.status).toBe(201);
      expect(answer.headers.get('x-ratelimit-limit')).toBeNull();
    }
  });

  it('still answers 401 without a token', async () => {
    expect((await send(url, 'POST', '/browsers', { body: {} })).status).toBe(401);
  });
});
