import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURES, prepareWorker, startWorkerd, type Workerd, type WranglerConfig } from './workerd.js';

/**
 * The harness Worker's configuration: the store's class, three faulty ones for the failure policy, and one that shows
 * its state for the sweep's tests.
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
    ],
  },
  migrations: [
    {
      tag: 'v1',
      new_sqlite_classes: ['RatecardBuckets', 'ThrowingBuckets', 'SlowBuckets', 'RefusingBuckets', 'SweptBuckets'],
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

/** A limit as the harness's `/call` takes it. */
export interface WireLimit {
  capacity: number;
  refill: number;
  intervalMs: number;
  name: string;
}

export interface Call {
  /** A store call; 'rows': RefusingBuckets' table; 'state', 'ring': SweptBuckets' (fixtures/harness.mjs). */
  method: 'consume' | 'peek' | 'reset' | 'rows' | 'state' | 'ring';
  /** The namespace binding; default BUCKETS. */
  binding?: string;
  organization: string;
  endpoint: string;
  limits: WireLimit[];
  cost?: number;
  /** The client clock's reading; omitted: the object's clock. */
  now?: number;
  budgetMs?: number;
}

/** One store call through a running harness: the outcomes, or the error code the store threw. */
export async function call(workerd: Workerd, body: Call): Promise<Answer> {
  const response = await fetch(`${workerd.url}/call`, { method: 'POST', body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`harness answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as Answer;
}

/** What SweptBuckets' `state()` shows. */
export interface SweptState {
  /** The object's clock. */
  now: number;
  rows: { endpoint: string; name: string; units: number; full_at: number }[];
  /** The keys of the object's Map: `name endpoint`. */
  held: string[];
  /** The alarm set, or null. */
  alarm: number | null;
}

/** What the harness's `/call` answers: the key named by the method. */
export interface Answer {
  outcomes?: number[] | null;
  error?: string;
  rows?: unknown[];
  state?: SweptState;
  ring?: number;
}
