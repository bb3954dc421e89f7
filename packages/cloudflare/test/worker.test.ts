import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FIXTURES,
  prepareWorker,
  startWorkerd,
  type Workerd,
  type WranglerConfig,
  workerdRuns,
} from './support/workerd.js';

// The Worker a user writes (fixtures/worker.mjs, wrangler.json beside it): Hono's middleware over durableObjectStore,
// no compatibility flag, two Worker services (two isolates) sending to the same objects.

const DENIAL = '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}';

let organizations = 0;
/** An organization no other check (nor an earlier run: storage is fresh, but say so anyway) has used. */
const organization = (label: string) => `${label}-${process.pid}-${Date.now().toString(36)}-${organizations++}`;

interface Answer {
  status: number;
  body: string;
  remaining: string | null;
}

async function post(url: string, org: string): Promise<Answer> {
  const response = await fetch(`${url}/browsers`, { method: 'POST', headers: { 'x-api-key': org } });
  return {
    status: response.status,
    body: await response.text(),
    remaining: response.headers.get('x-ratelimit-remaining'),
  };
}

/** What a burst of answers admitted: every admitted one with its own remaining count, every other one the 429. */
function admitted(answers: Answer[]): number {
  const ok = answers.filter((answer) => answer.status === 200);
  for (const answer of answers) if (answer.status !== 200) expect(answer).toMatchObject({ status: 429, body: DENIAL });
  // Each admitted request saw a different count left: no two took the same token.
  expect(new Set(ok.map((answer) => answer.remaining)).size).toBe(ok.length);
  return ok.length;
}

describe.runIf(workerdRuns())(
  'a Worker with Hono and durableObjectStore, in workerd without compatibility flags',
  () => {
    let dir: string;
    let workerd: Workerd;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'ratecard-cloudflare-worker-'));
      const wrangler = JSON.parse(readFileSync(`${FIXTURES}wrangler.json`, 'utf8')) as WranglerConfig;
      await prepareWorker(`${FIXTURES}worker.mjs`, wrangler, dir, join(dir, 'storage'), 2);
      workerd = await startWorkerd(dir);
    });

    afterAll(async () => {
      await workerd?.stop();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    it('bundles with no Node built-in: neither `node:` imports nor Node-only globals', () => {
      const bundle = readFileSync(join(dir, 'worker.js'), 'utf8');
      expect(bundle).not.toMatch(/from\s*["']node:|require\(["']node:/);
      // A global Workers lack is only ever read off globalThis after a check (core's deadlines fall back to a timer).
      expect(bundle).not.toMatch(/(?<!globalThis\.)\bsetImmediate\b|\.unref\(/);
    });

    it('admits exactly 100 of 300 concurrent requests of a free organization (100 an hour)', async () => {
      const org = organization('burst');
      const answers = await Promise.all(Array.from({ length: 300 }, () => post(workerd.url, org)));
      expect(admitted(answers)).toBe(100);
      expect((await post(workerd.url, org)).status).toBe(429);
    });

    it('admits exactly 100 of 300 concurrent requests sent through two isolates to one object', async () => {
      const org = organization('two-isolates');
      const answers = await Promise.all(
        Array.from({ length: 300 }, (_, i) => post(workerd.urls[i % 2] as string, org)),
      );
      expect(admitted(answers)).toBe(100);
      for (const url of workerd.urls) expect((await post(url, org)).status).toBe(429);
    });

    it('keeps organizations apart: another one still has its 100', async () => {
      const answers = await Promise.all(Array.from({ length: 100 }, () => post(workerd.url, organization('apart'))));
      expect(answers.every((answer) => answer.status === 200 && answer.remaining === '99')).toBe(true);
    });

    it('logged no uncaught exception', () => {
      expect(workerd.output()).not.toMatch(/Uncaught|ReferenceError|TypeError|Error/);
    });
  },
);
