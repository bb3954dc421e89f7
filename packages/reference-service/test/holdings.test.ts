import { ConflictError } from '@onkernel/sdk';
import { memoryStore } from '@ratecard/memory';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { ApiKey } from '../src/auth.js';
import { MAX_SETTINGS_BYTES } from '../src/browsers.js';
import { ALL_SCOPES, type Answer, type RunningService, send, startService, testKeys } from './helpers.js';
import { connect, type Traffic } from './sdk/client.js';

let service: RunningService;
let tokens: ReturnType<typeof testKeys>['tokens'];
/** An organization with a limit high enough to make 101 browsers in a burst. */
const ROOMY = `tok_roomy_${Date.now()}`;

beforeEach(async () => {
  const made = testKeys('holdings');
  tokens = made.tokens;
  const roomy: ApiKey = {
    organization: `org_roomy_${Date.now()}`,
    plan: 'enterprise',
    override: 1000,
    scopes: ALL_SCOPES,
  };
  service = await startService(memoryStore(), { ...made.keys, [ROOMY]: roomy });
});

afterEach(async () => {
  expect(service.errors).toEqual([]);
  await service.close();
});

/** About 1 MiB of `{}` items, the body that took the heap out: it parses into some 20 MiB. */
function emptyObjects(bytes: number): Record<string, unknown> {
  return { list: Array.from({ length: Math.floor(bytes / 3) }, () => ({})) };
}

/** A JSON object of `bytes` bytes whose memory is its text: one long string. */
function text(bytes: number): Record<string, unknown> {
  return { note: 'x'.repeat(bytes - '{"note":""}'.length) };
}

/** A quarter of what an organization may keep, less room for the rest of a body: four fit, a fifth does not. */
const QUARTER = MAX_SETTINGS_BYTES / 4 - 1000;

function expectQuota(answer: Answer, what: string): void {
  expect(answer.status).toBe(409);
  expect(answer.headers.get('content-type')).toBe('application/json');
  expect(answer.headers.get('x-should-retry')).toBe('false');
  expect(answer.json).toEqual({
    code: 'quota_exceeded',
    message: expect.stringMatching(
      new RegExp(`^An organization keeps at most ${MAX_SETTINGS_BYTES} bytes of ${what}: `),
    ),
  });
}

it('refuses a browser whose settings would take the heap out with 409 quota_exceeded, keeping nothing', async () => {
  const answer = await send(service.url, 'POST', '/browsers', {
    token: tokens.startup,
    body: { chrome_policy: emptyObjects(1000 * 1024) },
  });
  expectQuota(answer, 'browser settings');
  // What the organization may keep is all still free: a browser as large as fits is made.
  const fits = await send(service.url, 'POST', '/browsers', {
    token: tokens.startup,
    body: { chrome_policy: text(QUARTER) },
  });
  expect(fits.status).toBe(201);
}, 15_000);

it("keeps browsers' settings up to the bound per organization, and a deleted browser gives its bytes back", async () => {
  const big = { telemetry: text(QUARTER) };
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) {
    const created = await send(service.url, 'POST', '/browsers', { token: tokens.startup, body: big });
    expect(created.status).toBe(201);
    ids.push((created.json as { session_id: string }).session_id);
  }
  expectQuota(await send(service.url, 'POST', '/browsers', { token: tokens.startup, body: big }), 'browser settings');
  // Another organization keeps its own.
  expect((await send(service.url, 'POST', '/browsers', { token: tokens.trial, body: big })).status).toBe(201);
  // The refusal ended no browser, and its settings are echoed whole.
  for (const id of ids) {
    const found = await send(service.url, 'GET', `/browsers/${id}`, { token: tokens.startup });
    expect(found.json).toMatchObject(big);
  }
  expect((await send(service.url, 'DELETE', `/browsers/${ids[0]}`, { token: tokens.startup })).status).toBe(204);
  expect((await send(service.url, 'POST', '/browsers', { token: tokens.startup, body: big })).status).toBe(201);
}, 15_000);

it('ends the oldest of 100 browsers to make the 101st, bytes and all', async () => {
  const big = { telemetry: text(QUARTER) };
  const ids: string[] = [];
  for (let i = 0; i < 100; i++) {
    const created = await send(service.url, 'POST', '/browsers', { token: ROOMY, body: i < 3 ? big : {} });
    expect(created.status).toBe(201);
    ids.push((created.json as { session_id: string }).session_id);
  }
  // Three quarters and 97 small ones are kept: a fourth quarter fits only because the oldest browser ends.
  expect((await send(service.url, 'POST', '/browsers', { token: ROOMY, body: big })).status).toBe(201);
  expect((await send(service.url, 'GET', `/browsers/${ids[0]}`, { token: ROOMY })).status).toBe(404);
  expect((await send(service.url, 'GET', `/browsers/${ids[1]}`, { token: ROOMY })).status).toBe(200);
  // Past the bytes the oldest frees, the create is refused and the oldest is kept.
  const huge = { telemetry: emptyObjects(300 * 1024) };
  expectQuota(await send(service.url, 'POST', '/browsers', { token: ROOMY, body: huge }), 'browser settings');
  expect((await send(service.url, 'GET', `/browsers/${ids[1]}`, { token: ROOMY })).status).toBe(200);
}, 15_000);

it('bounds the bytes of pool settings across creates and updates, and frees them with the pool', async () => {
  const token = tokens.hobbyist;
  const big = text(QUARTER);
  for (let i = 0; i < 4; i++) {
    const created = await send(service.url, 'POST', '/browser-pools', {
      token,
      body: { name: `p${i}`, size: 1, chrome_policy: big },
    });
    expect(created.status).toBe(201);
  }
  expectQuota(
    await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'p4', size: 1, telemetry: big } }),
    'pool settings',
  );
  expect((await send(service.url, 'GET', '/browser-pools/p4', { token })).status).toBe(404);
  // An update that would grow a pool past the bound changes nothing, not even its size or name.
  const before = (await send(service.url, 'GET', '/browser-pools/p0', { token })).json;
  expectQuota(
    await send(service.url, 'PATCH', '/browser-pools/p0', {
      token,
      body: { size: 3, name: 'renamed', telemetry: big },
    }),
    'pool settings',
  );
  expect((await send(service.url, 'GET', '/browser-pools/p0', { token })).json).toEqual(before);
  // An update that replaces a setting with a smaller one gives the difference back.
  const smaller = await send(service.url, 'PATCH', '/browser-pools/p0', { token, body: { chrome_policy: {} } });
  expect(smaller.status).toBe(200);
  expect((await send(service.url, 'POST', '/browser-pools', { token, body: { size: 0, telemetry: big } })).status).toBe(
    201,
  );
  expect((await send(service.url, 'DELETE', '/browser-pools/p1', { token })).status).toBe(204);
  expect((await send(service.url, 'POST', '/browser-pools', { token, body: { size: 0, telemetry: big } })).status).toBe(
    201,
  );
}, 15_000);

it('counts the lease of an acquire while it waits, and gives it back when the wait ends', async () => {
  const token = tokens.hobbyist;
  await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'empty', size: 0 } });
  const lease = { acquire_timeout_seconds: 10, telemetry: text(QUARTER) };
  const five = [1, 2, 3, 4, 5].map(() =>
    send(service.url, 'POST', '/browser-pools/empty/acquire', { token, body: lease }),
  );
  // Whichever arrives fifth finds four leases kept and is refused at once; the other four wait.
  const refused = await Promise.race(five);
  expectQuota(refused, 'pool settings');
  // Browsers come: the four waiting are served, and their leases no longer count.
  expect((await send(service.url, 'PATCH', '/browser-pools/empty', { token, body: { size: 4 } })).status).toBe(200);
  expect((await Promise.all(five)).map((answer) => answer.status).sort()).toEqual([200, 200, 200, 200, 409]);
  for (let i = 0; i < 4; i++) {
    const created = await send(service.url, 'POST', '/browser-pools', {
      token,
      body: { size: 0, telemetry: text(QUARTER) },
    });
    expect(created.status).toBe(201);
  }
}, 15_000);

it('answers 409 quota_exceeded past 100 pools, once to the SDK, which raises ConflictError', async () => {
  const token = tokens.hobbyist;
  for (let i = 0; i < 100; i++) {
    expect((await send(service.url, 'POST', '/browser-pools', { token, body: { size: 0 } })).status).toBe(201);
  }
  const traffic: Traffic = { calls: [] };
  const refused = await connect(service.url, token, traffic)
    .browserPools.create({ size: 0 })
    .catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(ConflictError);
  expect((refused as ConflictError).error).toEqual({
    code: 'quota_exceeded',
    message: 'An organization holds at most 100 pools; delete one first.',
  });
  expect(traffic.calls.map((call) => call.status)).toEqual([409]);
}, 15_000);

it('answers 400 to a chrome_policy or telemetry nested deeper than 32 levels, never a 500', async () => {
  // Written out by hand: JSON.stringify itself cannot go 100,000 levels deep.
  const deep = `${'{"a":'.repeat(100_000)}{}${'}'.repeat(100_000)}`;
  for (const field of ['chrome_policy', 'telemetry']) {
    const answer = await send(service.url, 'POST', '/browsers', {
      token: tokens.startup,
      raw: `{"${field}":${deep}}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({
      code: 'invalid_request',
      details: [{ code: 'invalid_value', message: expect.stringMatching(/: must nest at most 32 levels/) }],
    });
  }
  let fine: Record<string, unknown> = {};
  for (let i = 0; i < 31; i++) fine = { a: fine };
  const kept = await send(service.url, 'POST', '/browsers', { token: tokens.startup, body: { chrome_policy: fine } });
  expect(kept.status).toBe(201);
  expect(kept.json).toMatchObject({ chrome_policy: fine });
}, 15_000);

it("shows an acquired browser with the pool's settings as they are when it is acquired", async () => {
  const token = tokens.hobbyist;
  await send(service.url, 'POST', '/browser-pools', { token, body: { name: 'now', size: 1, start_url: 'https://a' } });
  await send(service.url, 'PATCH', '/browser-pools/now', { token, body: { start_url: 'https://b', stealth: true } });
  const acquired = await send(service.url, 'POST', '/browser-pools/now/acquire', { token, body: { tags: { t: '1' } } });
  expect(acquired.json).toMatchObject({ start_url: 'https://b', stealth: true, tags: { t: '1' } });
}, 15_000);
