import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, prepareHarness, type WireLimit } from './support/harness.js';
import { startWorkerd, type Workerd, workerdRuns } from './support/workerd.js';

// The limiter's failure policy over durableObjectStore, in workerd: an object whose consume throws, one whose
// consume and reset reach it 300 ms late, and one whose storage refuses a write (fixtures/harness.mjs: ThrowingBuckets,
// SlowBuckets, RefusingBuckets). The harness peeks the
// organization's bucket afterwards (peek works on both), so a charge that should not have happened would show.

interface PolicyRun {
  decision: { allowed?: boolean; source?: string; error?: string };
  waitedMs: number;
  /** What the late object answered once it ran: null for a call it refused. */
  answered: (number[] | null)[] | null;
  /** A token peeked of the bucket afterwards (6 000 units a token). */
  peeked: number[];
}

/** A token asked of a full bucket of 10 leaves 9: 54 000 units. */
const FULL = [54_000];

/** Whole tokens a peek leaves: 8 after a charge (the bucket refills a token in 6 s, longer than a test). */
const tokens = (outcomes: number[]) => outcomes.map((outcome) => Math.floor(outcome / 6_000));

describe.runIf(workerdRuns())('the failure policy when the object throws or is late', () => {
  let harness: Awaited<ReturnType<typeof prepareHarness>>;
  let workerd: Workerd;

  beforeAll(async () => {
    harness = await prepareHarness();
    workerd = await startWorkerd(harness.dir);
  });

  afterAll(async () => {
    await workerd?.stop();
    harness?.remove();
  });

  const run = async (kind: 'throw' | 'slow', policy: string, timeoutMs: number): Promise<PolicyRun> => {
    const response = await fetch(`${workerd.url}/policy?kind=${kind}&policy=${policy}&timeoutMs=${timeoutMs}`);
    return (await response.json()) as PolicyRun;
  };

  it("answers by 'deny' at once when the object throws, and charges nothing", async () => {
    const result = await run('throw', 'deny', 1_000);
    expect(result.decision).toEqual({ allowed: false, source: 'fail-closed' });
    expect(result.waitedMs).toBeLessThan(1_000);
    expect(result.peeked).toEqual(FULL);
  });

  it("rejects with store_unavailable under 'throw' when the object throws", async () => {
    const result = await run('throw', 'throw', 1_000);
    expect(result.decision).toEqual({ error: 'store_unavailable' });
    expect(result.peeked).toEqual(FULL);
  });

  it("answers by 'allow' within storeTimeoutMs when the object is late, and the late call charges nothing", async () => {
    const result = await run('slow', 'allow', 50);
    expect(result.decision).toEqual({ allowed: true, source: 'fail-open' });
    // Never early; well before the object got the call (300 ms).
    expect(result.waitedMs).toBeGreaterThanOrEqual(49);
    expect(result.waitedMs).toBeLessThan(300);
    // The object did get the call, after its deadline: it refused it and left the bucket full.
    expect(result.answered).toEqual([null]);
    expect(result.peeked).toEqual(FULL);
  });

  it('charges a late call that still reaches the object within the budget, and answers from the store', async () => {
    const result = await run('slow', 'deny', 2_000);
    expect(result.decision).toEqual({ allowed: true, source: 'store' });
    expect(result.answered).toEqual([FULL]);
    expect(tokens(result.peeked)).toEqual([8]);
  });

  it('forgets nothing for a reset that reaches the object after its budget, and rejects with store_timeout', async () => {
    const limits: WireLimit[] = [{ capacity: 10, refill: 10, intervalMs: 60_000, name: '1m' }];
    const base = { binding: 'SLOW', organization: `late-reset-${Date.now()}`, endpoint: 'e', limits };
    expect(await call(workerd, { ...base, method: 'consume', cost: 10 })).toEqual({ outcomes: [0] });
    expect(await call(workerd, { ...base, method: 'reset', budgetMs: 50 })).toEqual({ error: 'store_timeout' });
    // Refused: the bucket holds what refilled since the drain, less than a token (one refills in 6 s).
    const drained = await call(workerd, { ...base, method: 'peek', cost: 1 });
    expect(drained.outcomes?.[0]).toBeLessThan(0);
    // A reset that reaches the object within its budget (the object is 300 ms late) forgets the bucket.
    expect(await call(workerd, { ...base, method: 'reset', budgetMs: 2_000 })).toEqual({ outcomes: null });
    expect(await call(workerd, { ...base, method: 'peek', cost: 1 })).toEqual({ outcomes: FULL });
  });

  it('charges nothing, in memory or in the table, for a call whose write the storage refuses', async () => {
    const limit = (name: string): WireLimit => ({ capacity: 10, refill: 10, intervalMs: 60_000, name });
    const base = { binding: 'REFUSING', organization: `refused-${Date.now()}`, endpoint: 'e', cost: 1 } as const;
    const both = [limit('kept'), limit('refused')];
    expect(await call(workerd, { ...base, method: 'consume', limits: both })).toEqual({ error: 'store_unavailable' });
    expect(await call(workerd, { ...base, method: 'rows', limits: [] })).toEqual({ rows: [] });
    expect(await call(workerd, { ...base, method: 'peek', limits: both })).toEqual({ outcomes: [54_000, 54_000] });
    expect(await call(workerd, { ...base, method: 'consume', limits: [limit('kept')] })).toEqual({
      outcomes: [54_000],
    });
    expect(await call(workerd, { ...base, method: 'rows', limits: [] })).toEqual({
      rows: [{ name: 'kept', units: 54_000 }],
    });
  });

  it('logged no uncaught exception', () => {
    expect(workerd.output()).not.toMatch(/Uncaught|ReferenceError|TypeError/);
  });
});
