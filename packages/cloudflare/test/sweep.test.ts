import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Call,
  call,
  prepareHarness,
  ringAlarm,
  type SweptState,
  sweptState,
  type WireLimit,
} from './support/harness.js';
import { startWorkerd, type Workerd, workerdRuns } from './support/workerd.js';

// The object deletes full buckets (a full bucket is the same as a missing one): when its alarm rings and when it
// starts. SweptBuckets (fixtures/harness.mjs) shows its table, Map and alarm, and rings the alarm now instead of an
// hour from now. Calls carry a client clock stuck at T: a bucket is full once the object's own clock has moved on by
// its time to refill, however far T is from it (as a Redis key under clock 'client' expires after a real PX).
// Time passing is the object's clock moving: 2 000 buckets that refill in 1 ms, beside buckets that take a day.

const T = 1_700_000_000_000;
const ENDPOINT = 'POST /browsers';

/** Refills a token a millisecond: a bucket charged one token is full again 1 ms later. */
const fast = (name: string): WireLimit => ({ capacity: 1_000, refill: 1_000, intervalMs: 1_000, name });
/** 10 a day: drained, full again in a day. */
const DAILY: WireLimit = { capacity: 10, refill: 10, intervalMs: 86_400_000, name: 'day' };
/** 1 000 a day: one token short of full after one charge, full again in 86.4 s. */
const ALMOST: WireLimit = { capacity: 1_000, refill: 1_000, intervalMs: 86_400_000, name: 'almost' };

describe.runIf(workerdRuns())('full buckets are deleted', () => {
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

  const ask = async (organization: string, body: Omit<Call, 'organization' | 'endpoint' | 'binding'>) =>
    call(workerd, { binding: 'SWEPT', organization, endpoint: ENDPOINT, now: T, cost: 1, ...body });
  const state = (organization: string) => sweptState(workerd, organization);
  const ring = (organization: string) => ringAlarm(workerd, organization);

  /** An organization whose object holds 2 000 fast buckets charged once, and `slow` charged as `DAILY` and `ALMOST`. */
  async function charged(slow: boolean): Promise<string> {
    const organization = `sweep-${process.pid}-${Date.now()}-${organizations++}`;
    for (let first = 0; first < 2_000; first += 16) {
      const limits = Array.from({ length: 16 }, (_, i) => fast(`fast-${first + i}`));
      expect(await ask(organization, { method: 'consume', limits })).toEqual({ outcomes: Array(16).fill(999) });
    }
    if (slow) {
      expect(await ask(organization, { method: 'consume', limits: [DAILY], cost: 10 })).toEqual({ outcomes: [0] });
      expect(await ask(organization, { method: 'consume', limits: [ALMOST] })).toEqual({ outcomes: [999 * 86_400] });
    }
    return organization;
  }

  /** Waits until the object's clock has passed the instant every fast bucket is full. */
  async function fastBucketsFull(organization: string): Promise<SweptState> {
    for (;;) {
      const seen = await state(organization);
      const fastFullAt = seen.rows.filter((row) => row.name.startsWith('fast-')).map((row) => row.full_at);
      if (seen.now >= Math.max(...fastFullAt)) return seen;
    }
  }

  it('sets the alarm an hour ahead with the first bucket, and keeps the buckets until it rings', async () => {
    const organization = await charged(true);
    const seen = await fastBucketsFull(organization);
    expect(seen.rows).toHaveLength(2_002);
    expect(seen.held).toHaveLength(2_002);
    expect(seen.alarm).toBeGreaterThan(seen.now);
    expect(seen.alarm).toBeLessThanOrEqual(seen.now + 3_600_000);
  });

  it('deletes the full buckets from the table and the Map when the alarm rings, and keeps every other one', async () => {
    const organization = await charged(true);
    const before = await fastBucketsFull(organization);
    const after = await ring(organization);
    const slow = before.rows.filter((row) => !row.name.startsWith('fast-'));
    expect(slow.map((row) => row.name).sort()).toEqual(['almost', 'day']);
    // Each slow bucket is full only later than the sweep, and only those are left: rows, Map and figures untouched.
    for (const row of slow) expect(row.full_at).toBeGreaterThan(after.now);
    expect(after.rows).toEqual(slow);
    expect(after.held.sort()).toEqual([`almost ${ENDPOINT}`, `day ${ENDPOINT}`]);
    expect(await ask(organization, { method: 'peek', limits: [DAILY] })).toEqual({ outcomes: [-1] });
    expect(await ask(organization, { method: 'peek', limits: [ALMOST] })).toEqual({ outcomes: [998 * 86_400] });
    // The next alarm: when the last bucket left is full, the drained daily one (later than an hour from now).
    expect(after.alarm).toBe(Math.max(...slow.map((row) => row.full_at)));
  });

  it('clears the alarm once no bucket is left, and sets it again with the next bucket written', async () => {
    const organization = await charged(false);
    await fastBucketsFull(organization);
    const after = await ring(organization);
    expect(after).toMatchObject({ rows: [], held: [], alarm: null });
    await ask(organization, { method: 'consume', limits: [DAILY] });
    const again = await state(organization);
    expect(again.rows).toHaveLength(1);
    expect(again.alarm).toBeGreaterThan(again.now);
  });

  it('sets the alarm a year ahead for a bucket that takes longer to fill (workerd refuses alarms after 2189)', async () => {
    const organization = `sweep-${process.pid}-${Date.now()}-${organizations++}`;
    // 52 million tokens, one a day: drained, full again in 142 000 years.
    const slowest: WireLimit = { capacity: 52_000_000, refill: 1, intervalMs: 86_400_000, name: 'slowest' };
    expect(await ask(organization, { method: 'consume', limits: [slowest], cost: 52_000_000 })).toEqual({
      outcomes: [0],
    });
    const seen = await state(organization);
    expect(seen.alarm).toBeGreaterThan(seen.now + 364 * 86_400_000);
    expect(seen.alarm).toBeLessThanOrEqual(seen.now + 365 * 86_400_000);
  });

  it('deletes the full buckets when the object starts again, after the runtime is killed', async () => {
    const organization = await charged(true);
    await fastBucketsFull(organization);
    await workerd.stop('SIGKILL');
    workerd = await startWorkerd(harness.dir);
    const seen = await state(organization);
    expect(seen.rows.map((row) => row.name).sort()).toEqual(['almost', 'day']);
    expect(seen.held).toHaveLength(2);
    expect(seen.alarm).toBeGreaterThan(seen.now);
  });
});
