import { readFileSync } from 'node:fs';
import { memoryStore } from '@ratecard/memory';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS_FILE, loadKeysFile } from '../src/config.js';
import { type RunningService, startService } from './helpers.js';

const doc = readFileSync(new URL('../../../docs/reference-service.md', import.meta.url), 'utf8');
const section = /<!-- quickstart:[^>]*-->\n```sh\n([\s\S]*?)```\n\nIt prints[^\n]*\n\n```text\n([\s\S]*?)```/.exec(doc);

/** The commands this test replays. Change them together with the block in docs/reference-service.md. */
const SESSION = `TOKEN=rc_demo_developer
curl -s -w '\\n' -X POST localhost:3000/browser-pools -H "Authorization: Bearer $TOKEN" \\
  -H 'Content-Type: application/json' -d '{"name": "demo", "size": 3}'
curl -s -w '\\n' -X POST localhost:3000/browser-pools/demo/acquire -H "Authorization: Bearer $TOKEN"
curl -s -w '%{http_code}\\n' -X POST localhost:3000/browser_pools/demo/flush -H "Authorization: Bearer $TOKEN"
curl -s -w '\\n' localhost:3000/browser-pools/demo -H "Authorization: Bearer $TOKEN"
for i in $(seq 10); do
  curl -s -o /dev/null -w '%{http_code} ' -X POST localhost:3000/browsers -H "Authorization: Bearer $TOKEN"
done; echo
curl -si -X POST localhost:3000/browsers -H "Authorization: Bearer $TOKEN"
`;

let service: RunningService;
beforeAll(async () => {
  service = await startService(memoryStore(), loadKeysFile(DEMO_KEYS_FILE));
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

it('prints what the docs say: a pool flushed to its leased browser, ten 201s, then a 429 with Retry-After: 6', async () => {
  const authorization = 'Bearer rc_demo_developer';
  const call = (method: string, path: string, body?: string): Promise<Response> =>
    fetch(`${service.url}${path}`, {
      method,
      headers: body === undefined ? { authorization } : { authorization, 'content-type': 'application/json' },
      body,
    });
  const ids = (text: string): string => text.replace(/\b(bp|br)_[0-9a-f]{20}\b/g, '$1_…');

  const printed: string[] = [];
  printed.push(ids(await (await call('POST', '/browser-pools', '{"name": "demo", "size": 3}')).text()));
  printed.push(ids(await (await call('POST', '/browser-pools/demo/acquire')).text()));
  printed.push(String((await call('POST', '/browser_pools/demo/flush')).status));
  printed.push(ids(await (await call('GET', '/browser-pools/demo')).text()));
  const burst: number[] = [];
  for (let i = 0; i < 10; i++) burst.push((await call('POST', '/browsers')).status);
  printed.push(burst.join(' '));
  const last = await call('POST', '/browsers');
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
