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
// no compatibility flag, three Worker services (three isolates) sending to the same objects.

const DENIAL = '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}';

let organizations = 0;
/** An organization no other check (nor an earlier run: storage is fresh, but say so anyway) has used. */
const organization = (label: string) => `${label}-${process.pid}-${Date.now().toString(36)}-${organizations++}`;

interface Answer {
  status: number;
  body: string;
  remaining: string | null;
  retryAfter: string | null;
}

async function post(url: string, org: string, plan = 'free'): Promise<Answer> {
  const response = await fetch(`${url}/browsers`, { method: 'POST', headers: { 'x-api-key': org, 'x-plan': plan } });
  return {
    status: response.status,
    body: await response.text(),
    remaining: response.headers.get('x-ratelimit-remaining'),
    retryAfter: response.headers.get('retry-after'),
  };
}

/** An operator's call through the Worker's routes (fixtures/worker.mjs): block or unblock. */
async function ops(url: string, action: 'block' | 'unblock', body: object): Promise<void> {
  const response = await fetch(`${url}/ops/${action}`, { method: 'POST', body: JSON.stringify(body) });
  expect(response.status).toBe(204);
}

/**
 * Sends the organization's requests to one isolate, 50 ms apart, until one is answered `status`, and answers it. A
 * block or unblock made at `changedAt` (this clock, which workerd shares) must be seen by every isolate within a second:
 * a request sent later than that and answered otherwise fails the test, which needs no fixed wait.
 */
async function untilStatus(url: string, org: string, status: number, changedAt: number): Promise<Answer> {
  for (;;) {
    const sentAt = Date.now();
    const answer = await post(url, org, 'pro');
    if (answer.status === status) return answer;
    if (sentAt >= changedAt + 1_000) {
      throw new Error(`a request sent ${sentAt - changedAt} ms after the change was answered ${answer.status}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
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
      await prepareWorker(`${FIXTURES}worker.mjs`, wrangler, dir, join(dir, 'storage'), 3);
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

    it('refuses an organization blocked through one isolate in every other within a second, and admits it once unblocked', async () => {
      const org = organization('blocked');
      const [first, ...others] = workerd.urls as [string, ...string[]];
      // Every isolate has read the blocks (none for this organization) before the block is made.
      for (const url of workerd.urls) expect((await post(url, org, 'pro')).status).toBe(200);
      await ops(first, 'block', { organization: org, forMs: 60_000, reason: 'abuse report 17' });
      const blockedAt = Date.now();
      expect((await post(first, org, 'pro')).status).toBe(429);
      for (const url of others) {
        const refused = await untilStatus(url, org, 429, blockedAt);
        // The block's Retry-After (its end, a minute away), not the pro plan's (a token each 0.36 s).
        expect(Number(refused.retryAfter)).toBeGreaterThan(55);
        expect(Number(refused.retryAfter)).toBeLessThanOrEqual(60);
      }
      await ops(others[0] as string, 'unblock', { organization: org });
      const unblockedAt = Date.now();
      for (const url of [first, ...others.slice(1)]) await untilStatus(url, org, 200, unblockedAt);
    });

    it('inspects an organization through the Worker: its bucket in tokens, by the store clock', async () => {
      const org = organization('inspect');
      for (let i = 0; i < 3; i++) expect((await post(workerd.url, org)).status).toBe(200);
      const response = await fetch(`${workerd.urls[1]}/ops/inspect?organization=${encodeURIComponent(org)}`);
      const inspection = (await response.json()) as { at: number; limits: { fullAt: number }[] };
      expect(inspection).toMatchObject({
        organization: org,
        leases: [],
        limits: [{ name: '1h', kind: 'bucket', capacity: 100, tokens: 97, reserved: 0 }],
      });
      // Three tokens short of full, a token each 36 s: full within 108 s of the object's now.
      const fullIn = (inspection.limits[0]?.fullAt as number) - inspection.at;
      expect(fullIn).toBeGreaterThan(72_000);
      expect(fullIn).toBeLessThanOrEqual(108_000);
    });

    it('logged no uncaught exception', () => {
      expect(workerd.output()).not.toMatch(/Uncaught|ReferenceError|TypeError|Error/);
    });
  },
);
