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

// Issue 37: a stall of the app's event loop up to 1 s changes no decision and charges nothing twice. A Worker
// (fixtures/stall.mjs, no compatibility flag) makes 19 calls through a limiter whose wait on the object (4 budgets of
// 100 ms) the stall outlasts, and blocks its isolate for 1 s once the first decision is in.
//
// The calls go to the second Worker service, so the object runs in another isolate. workerd runs every isolate on one
// thread: an object in the stalled isolate would get the calls only after the stall, past their deadline, and refuse
// them (measured: calls 5 to 19 then went to the policy, charged nothing by the object). From another isolate the
// object has answered every call before the stall starts, and its answers wait unread through it.
//
// Measured: this passes with core's deadlines judged at once when their timer fires, too. workerd runs an isolate's
// pending I/O before a timer that came due while it was blocked, so the replies are read first either way; the look
// after the poll phase is checked where setImmediate is absent in core's test/deadlines.test.ts.

const STALL_MS = 1_000;
const CALLS = 19;

/** What fixtures/stall.mjs answers. */
interface Run {
  first: { allowed: boolean; source: string };
  decisions: { allowed: boolean; source: string }[];
  stalledMs: number;
  /** Decisions read before the stall: the first only. */
  readBeforeStall: number;
  /** The object's bucket, peeked for one token: negative when it holds less. */
  held: number;
  /** The fallback's bucket, peeked the same way. */
  untouched: number;
  unitsPerToken: number;
  lines: string[];
  setImmediate: string;
}

let organizations = 0;
const organization = (label: string) => `${label}-${process.pid}-${Date.now().toString(36)}-${organizations++}`;

describe.runIf(workerdRuns())('a stall of a Worker isolate once the object has answered its calls', () => {
  let dir: string;
  let workerd: Workerd;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ratecard-cloudflare-stall-'));
    const wrangler = JSON.parse(readFileSync(`${FIXTURES}wrangler.json`, 'utf8')) as WranglerConfig;
    await prepareWorker(`${FIXTURES}stall.mjs`, wrangler, dir, join(dir, 'storage'), 2);
    workerd = await startWorkerd(dir);
  });

  afterAll(async () => {
    await workerd?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  for (const policy of ['fallback', 'deny', 'allow'] as const) {
    it(`changes no decision and charges nothing twice, policy '${policy}'`, async () => {
      const started = performance.now();
      const response = await fetch(`${workerd.urls[1]}/?policy=${policy}&organization=${organization(policy)}`);
      const run = (await response.json()) as Run;
      expect(performance.now() - started).toBeGreaterThanOrEqual(STALL_MS);
      expect(run.stalledMs).toBeGreaterThanOrEqual(STALL_MS);
      // As a deployed Worker: the limiter's look after the poll phase is a zero-delay timer here.
      expect(run.setImmediate).toBe('undefined');
      expect(run.readBeforeStall).toBe(1);
      expect(run.first).toEqual({ allowed: true, source: 'store' });
      expect(run.decisions.map((decision) => decision.source)).toEqual(Array(CALLS).fill('store'));
      expect(run.decisions.filter((decision) => decision.allowed)).toHaveLength(9);
      // The object charged each admitted call once (its bucket of 10 holds no whole token), the fallback nothing.
      expect(run.held).toBeLessThan(0);
      expect(Math.floor((-1 - run.held) / run.unitsPerToken)).toBe(0);
      expect(run.untouched).toBe(9 * run.unitsPerToken);
      expect(run.lines).toEqual([]);
    });
  }

  it('logged no uncaught exception', () => {
    expect(workerd.output()).not.toMatch(/Uncaught|ReferenceError|TypeError|Error/);
  });
});
