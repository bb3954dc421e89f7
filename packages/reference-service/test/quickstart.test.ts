import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS_FILE, loadKeysFile } from '../src/config.js';
import { type RunningService, startService, stillMemoryStore } from './helpers.js';

const doc = readFileSync(new URL('../../../docs/reference-service.md', import.meta.url), 'utf8');
const section = /<!-- quickstart:[^>]*-->\n```sh\n([\s\S]*?)```\n\nIt prints[^\n]*\n\n```text\n([\s\S]*?)```/.exec(doc);

/** The commands this test replays. Change them together with the block in docs/reference-service.md. */
const SESSION = `POOLS=rc_demo_hobbyist
curl -s -w '\\n' -X POST localhost:3000/browser_pools -H "Authorization: Bearer $POOLS" \\
  -H 'Content-Type: application/json' -d '{"name": "demo", "size": 3}'
curl -s -o /dev/null -w '%{http_code}\\n' -X POST localhost:3000/browser_pools/demo/acquire -H "Authorization: Bearer $POOLS"
curl -s -w '%{http_code}\\n' -X POST localhost:3000/browser_pools/demo/flush -H "Authorization: Bearer $POOLS"
curl -s -w '\\n' localhost:3000/browser_pools/demo -H "Authorization: Bearer $POOLS"
TOKEN=rc_demo_developer
for i in $(seq 10); do
  curl -s -o /dev/null -w '%{http_code} ' -X POST localhost:3000/browsers -H "Authorization: Bearer $TOKEN"
done; echo
curl -si -X POST localhost:3000/browsers -H "Authorization: Bearer $TOKEN"
`;

let service: RunningService;
beforeAll(async () => {
  // On a clock that stands still: the transcript's Retry-After: 6 holds however long the eleven requests take.
  service = await startService(stillMemoryStore(), loadKeysFile(DEMO_KEYS_FILE));
});
afterAll(async () => {
  await service.close();
});

it('documents the session this test replays', () => {
  expect(section?.[1]).toBe(SESSION);
});

it('shows the same session and transcript in the README quickstart', () => {
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  const quickstart =
    /## Quickstart\n[\s\S]*?```sh\npnpm install && pnpm start\n```[\s\S]*?```sh\n([\s\S]*?)```\n\nIt prints[^\n]*\n\n```text\n([\s\S]*?)```/.exec(
      readme,
    );
  expect(quickstart?.[1]).toBe(SESSION);
  expect(quickstart?.[2]).toBe(section?.[2]);
});

it('prints what the docs say: a pool flushed to its acquired browser, ten 201s, then a 429 with Retry-After: 6', async () => {
  const call = (token: string, method: string, path: string, body?: string): Promise<Response> => {
    const authorization = `Bearer ${token}`;
    return fetch(`${service.url}${path}`, {
      method,
      headers: body === undefined ? { authorization } : { authorization, 'content-type': 'application/json' },
      body,
    });
  };
  const pools = 'rc_demo_hobbyist';
  const token = 'rc_demo_developer';
  const varying = (text: string): string =>
    text.replace(/\b(bp|br)_[0-9a-f]{20}\b/g, '$1_…').replace(/"\d{4}-\d\d-\d\dT[\d:.]+Z"/g, '"…"');

  const printed: string[] = [];
  printed.push(varying(await (await call(pools, 'POST', '/browser_pools', '{"name": "demo", "size": 3}')).text()));
  printed.push(String((await call(pools, 'POST', '/browser_pools/demo/acquire')).status));
  printed.push(String((await call(pools, 'POST', '/browser_pools/demo/flush')).status));
  printed.push(varying(await (await call(pools, 'GET', '/browser_pools/demo')).text()));
  const burst: number[] = [];
  for (let i = 0; i < 10; i++) burst.push((await call(token, 'POST', '/browsers')).status);
  printed.push(burst.join(' '));
  const last = await call(token, 'POST', '/browsers');
  printed.push(`HTTP/1.1 ${last.status} ${last.statusText}`);

  const expected = (section?.[2] ?? '').trimEnd().split('\n');
  const blank = expected.indexOf('');
  // Up to the status line of the 429, the transcript is exactly what the docs show.
  expect(printed).toEqual(expected.slice(0, printed.length));
  // Then every header the docs show has that value, and the body is the same bytes.
  for (const line of expected.slice(printed.length, blank)) {
    const colon = line.indexOf(': ');
    expect(last.headers.get(line.slice(0, colon)), line).toBe(line.slice(colon + 2));
  }
  expect(expected.slice(blank + 1)).toEqual([await last.text()]);
});
