import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BlockChange, KeptBlocks, KeptState } from '@ratecard/core';
import { FIXTURES, prepareWorker, startWorkerd, type Workerd, type WranglerConfig } from './workerd.js';

/**
 * The harness Worker's configuration: the store's class, three faulty ones for the failure policy, one that shows its
 * state for the sweep's tests, and one that counts the rows its calls read and write.
 */
export const HARNESS: WranglerConfig = {
  compatibility_date: '2025-09-01',
  compatibility_flags: ['nodejs_compat'],
  durable_objects: {
    bindings: [
      { name: 'BUCKETS', class_name: 'RatecardBuckets' },
      { name: 'THROWING', class_name: 'ThrowingBuckets' },
      { name: 'SLOW', class_name: 'SlowBuckets' },
      { name: 'REFUSING', class_name: 'RefusingBuckets' },
      { name: 'SWEPT', class_name: 'SweptBuckets' },
      { name: 'METERED', class_name: 'MeteredBuckets' },
    ],
  },
  migrations: [
    {
      tag: 'v1',
      new_sqlite_classes: [
        'RatecardBuckets',
        'ThrowingBuckets',
        'SlowBuckets',
        'RefusingBuckets',
        'SweptBuckets',
        'MeteredBuckets',
      ],
    },
  ],
};

/** A scratch folder with the bundled harness and its configuration, and the object storage folder in it. */
export async function prepareHarness(): Promise<{ dir: string; storage: string; remove(): void }> {
  const dir = mkdtempSync(join(tmpdir(), 'ratecard-cloudflare-'));
  const storage = join(dir, 'storage');
  await prepareWorker(`${FIXTURES}harness.mjs`, HARNESS, dir, storage);
  return { dir, storage, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A limit as the harness's `/call` takes it: a token bucket, with kind 'concurrency' `concurrency(capacity)`, with kind
 * 'quota' `quota(capacity, { per })` (in UTC) as the limit of the period the call's clock falls in.
 */
export type WireLimit =
  | { kind?: 'concurrency'; capacity: number; refill: number; intervalMs: number; name: string }
  | { kind: 'quota'; capacity: number; per: 'day' | 'week' | 'month'; name: string };

export interface Call {
  /**
   * A store call; 'rows': RefusingBuckets' table; 'state', 'ring': SweptBuckets'; 'metered': MeteredBuckets'
   * (fixtures/harness.mjs).
   */
  method: 'consume' | 'peek' | 'reset' | 'settle' | 'inspect' | 'blocks' | 'rows' | 'state' | 'ring' | 'metered';
  /** The namespace binding; default BUCKETS. */
  binding?: string;
  organization: string;
  endpoint: string;
  limits: WireLimit[];
  cost?: number | number[];
  /** The client clock's reading; omitted: the object's clock. */
  now?: number;
  budgetMs?: number;
  /** consume's lease: the call reserves. */
  lease?: { id: string; ms: number };
  /** settle's change. */
  change?: { id: string; actual: number | number[] } | { id: string; holdMs: number };
  /** blocks' change. */
  block?: BlockChange;
}

/** One store call through a running harness: the outcomes, or the error code the store threw. */
export async function call(workerd: Workerd, body: Call): Promise<Answer> {
  const response = await fetch(`${workerd.url}/call`, { method: 'POST', body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`harness answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as Answer;
}

/** SweptBuckets' `state()` of an organization's object. */
export async function sweptState(workerd: Workerd, organization: string): Promise<SweptState> {
  return (await call(workerd, { method: 'state', binding: 'SWEPT', organization, endpoint: '', limits: [] }))
    .state as SweptState;
}

/**
 * Rings SweptBuckets' alarm of an organization's object and waits until it has run: then the alarm is set later than
 * the object's clock, or not at all.
 */
export async function ringAlarm(workerd: Workerd, organization: string): Promise<SweptState> {
  await call(workerd, { method: 'ring', binding: 'SWEPT', organization, endpoint: '', limits: [] });
  const waitUntil = Date.now() + 20_000;
  for (;;) {
    const seen = await sweptState(workerd, organization);
    if (seen.alarm === null || seen.alarm > seen.now) return seen;
    if (Date.now() > waitUntil) throw new Error(`the alarm did not run within 20 s: ${JSON.stringify(seen.alarm)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** What SweptBuckets' `state()` shows. */
export interface SweptState {
  /** The object's clock. */
  now: number;
  rows: { endpoint: string; name: string; units: number; full_at: number }[];
  /** The keys of the object's Map: `name endpoint`. */
  held: string[];
  leaseRows: { endpoint: string; id: string; expires_at: number; drop_at: number; tokens: string; slots: string }[];
  /** The leases in the object's Map: `id endpoint`. */
  leases: string[];
  /** The alarm set, or null. */
  alarm: number | null;
}

/** What the harness's `/call` answers: the key named by the method. */
export interface Answer {
  outcomes?: number[] | null;
  /** What settle answered: whether the lease was held. */
  settled?: boolean;
  error?: string;
  rows?: unknown[];
  state?: SweptState;
  ring?: number;
  /** MeteredBuckets' rows read and written since it was last asked. */
  metered?: { read: number; written: number };
  inspect?: KeptState;
  blocks?: KeptBlocks;
}
