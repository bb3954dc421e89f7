import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BLOCKS_OBJECT } from '../src/store.js';
import { type Call, call, prepareHarness, type WireLimit } from './support/harness.js';
import { startWorkerd, type Workerd, workerdRuns } from './support/workerd.js';

// What a call costs in SQLite rows, read and written, as workerd counts them for each statement (cursor.rowsRead and
// rowsWritten, the figures Cloudflare bills): MeteredBuckets (fixtures/harness.mjs) sums them per call. The object
// reads its rows once when it starts; a call reads only what SQLite reads to replace or delete a row. A bucket's row
// counts twice when written (the row and its primary key's index); a lease's row, in a WITHOUT ROWID table, once.
// docs/runtimes.md quotes these figures.

const T = 1_700_000_000_000;
const REQUESTS: WireLimit = { capacity: 60, refill: 60, intervalMs: 60_000, name: 'requests' };
/** 3 units a token. */
const TOKENS: WireLimit = { capacity: 100_000, refill: 100_000, intervalMs: 60_000, name: 'tokens' };
const SESSIONS: WireLimit = { kind: 'concurrency', capacity: 2, refill: 0, intervalMs: 0, name: 'sessions' };
const LIMITS = [REQUESTS, TOKENS, SESSIONS];

describe.runIf(workerdRuns())('rows read and written per call', () => {
  let harness: Awaited<ReturnType<typeof prepareHarness>>;
  let workerd: Workerd;
  let organizations = 0;

  beforeAll(async () => {
    harness = await prepareHarness();
    workerd = await startWorkerd(harness.dir);
  });

  afterAll(async () => {
    await workerd?.stop();
    harness?.remove();
  });

  /**
   * An organization of its own; `rows(body)` makes the call and answers it with the rows it read and wrote in the
   * object named `metered` (the organization's by default).
   */
  function organization() {
    const org = `rows-${process.pid}-${Date.now()}-${organizations++}`;
    const ask = (body: Omit<Call, 'organization' | 'endpoint' | 'binding'>, named = org) =>
      call(workerd, { binding: 'METERED', organization: named, endpoint: 'POST /chat', now: T, ...body });
    return async (body: Omit<Call, 'organization' | 'endpoint' | 'binding'>, metered = org) => {
      await ask({ method: 'metered', limits: [] }, metered);
      const answer = await ask(body);
      return { answer, rows: (await ask({ method: 'metered', limits: [] }, metered)).metered };
    };
  }

  const reserve = (id: string, cost = [1, 4_000, 1], ms = 60_000, now = T) =>
    ({ method: 'consume', limits: LIMITS, cost, lease: { id, ms }, now }) as const;
  const settle = (id: string, actual: number[] | number) =>
    ({ method: 'settle', limits: LIMITS, change: { id, actual } }) as const;

  it('a consume: two rows written per bucket, one read where the row was there', async () => {
    const rows = organization();
    const first = await rows({ method: 'consume', limits: [REQUESTS, TOKENS], cost: [1, 4_000] });
    expect(first.rows).toEqual({ read: 0, written: 4 });
    const again = await rows({ method: 'consume', limits: [REQUESTS, TOKENS], cost: [1, 4_000] });
    expect(again.rows).toEqual({ read: 2, written: 4 });
    expect((await rows({ method: 'peek', limits: [REQUESTS, TOKENS], cost: 1 })).rows).toEqual({ read: 0, written: 0 });
  });

  it('a reserve: its lease, one row written, and its buckets only where they have rows', async () => {
    const rows = organization();
    expect(await rows(reserve('a'))).toEqual({
      answer: { outcomes: [59_000, 96_000 * 3, 1] },
      rows: { read: 0, written: 1 },
    });
    await rows({ method: 'consume', limits: [REQUESTS, TOKENS], cost: 1 });
    expect((await rows(reserve('b'))).rows).toEqual({ read: 2, written: 5 });
    // Refused by the concurrency limit: nothing written.
    expect((await rows(reserve('c'))).rows).toEqual({ read: 0, written: 0 });
  });

  it('a settle or cancel: its lease deleted, and each bucket it holds written; an extend, one row', async () => {
    const rows = organization();
    await rows(reserve('a'));
    await rows(reserve('b'));
    expect((await rows({ method: 'settle', limits: LIMITS, change: { id: 'b', holdMs: 120_000 } })).rows).toEqual({
      read: 0,
      written: 1,
    });
    // The buckets had no rows (a reserve leaves a full bucket unwritten): the settle writes them.
    expect(await rows(settle('a', [1, 2_500, 1]))).toEqual({
      answer: { settled: true },
      rows: { read: 1, written: 5 },
    });
    expect(await rows(settle('b', 0))).toEqual({ answer: { settled: true }, rows: { read: 3, written: 5 } });
    expect(await rows(settle('b', 0))).toEqual({ answer: { settled: false }, rows: { read: 0, written: 0 } });
  });

  it('a lease expired by a call costs that call its settle’s rows', async () => {
    const rows = organization();
    await rows({ method: 'consume', limits: [REQUESTS, TOKENS], cost: 1 });
    await rows(reserve('a', [1, 4_000, 1], 1_000));
    const later = await rows({ method: 'peek', limits: [REQUESTS, TOKENS], cost: 1, now: T + 1_000 });
    expect(later.rows).toEqual({ read: 0, written: 0 });
    const charged = await rows({ method: 'consume', limits: [REQUESTS], cost: 1, now: T + 1_000 });
    // The lease's row deleted (1 read, 1 written) and both its buckets written (1 read, 2 written each), the request
    // bucket once for the expiry and the consume together.
    expect(charged.rows).toEqual({ read: 3, written: 5 });
  });

  it('a quota: the rows of a token bucket', async () => {
    const rows = organization();
    const daily: WireLimit = { kind: 'quota', capacity: 1_000, per: 'day', name: 'daily' };
    expect(await rows({ method: 'consume', limits: [daily], cost: 1 })).toEqual({
      answer: { outcomes: [999] },
      rows: { read: 0, written: 2 },
    });
    expect((await rows({ method: 'consume', limits: [daily], cost: 1 })).rows).toEqual({ read: 1, written: 2 });
  });

  it('an inspect reads and writes no row', async () => {
    const rows = organization();
    await rows(reserve('a'));
    await rows({ method: 'consume', limits: [REQUESTS, TOKENS], cost: 1 });
    const inspected = await rows({ method: 'inspect', limits: [] });
    expect(inspected.answer.inspect?.buckets).toHaveLength(2);
    expect(inspected.answer.inspect?.leases).toHaveLength(1);
    expect(inspected.rows).toEqual({ read: 0, written: 0 });
  });

  it('blocks: a read reads and writes no row, a block or an unblock writes one', async () => {
    const rows = organization();
    const block = { organization: `rows-blocked-${process.pid}-${Date.now()}`, endpoint: '*', reason: 'r' };
    // The first call reads the table into the object's memory (a row per block kept); the later ones read none.
    await rows({ method: 'blocks', limits: [] }, BLOCKS_OBJECT);
    expect((await rows({ method: 'blocks', limits: [] }, BLOCKS_OBJECT)).rows).toEqual({ read: 0, written: 0 });
    const made = await rows({ method: 'blocks', limits: [], block: { ...block, ms: 60_000 } }, BLOCKS_OBJECT);
    expect(made.rows).toEqual({ read: 0, written: 1 });
    expect((await rows({ method: 'blocks', limits: [] }, BLOCKS_OBJECT)).rows).toEqual({ read: 0, written: 0 });
    const lifted = await rows({ method: 'blocks', limits: [], block: { ...block, ms: 0 } }, BLOCKS_OBJECT);
    expect(lifted.rows).toEqual({ read: 1, written: 1 });
  });
});
