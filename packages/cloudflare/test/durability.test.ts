import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Call, call, prepareHarness, type WireLimit } from './support/harness.js';
import { startWorkerd, type Workerd, workerdRuns } from './support/workerd.js';

// Durability: an organization's object charged in one workerd, which is then killed as a crash would (SIGKILL); a new
// workerd on the same object storage finds the bucket exactly as it was charged, to the unit, the leases held, and the
// blocks the blocks object keeps. The client clock ('client', `now` sent with each call) keeps the units independent
// of how long the restart takes.

/** A token every 6 s: 6 000 units a token, 1 unit a millisecond. */
const TEN_A_MINUTE: WireLimit = { capacity: 10, refill: 10, intervalMs: 60_000, name: '1m' };
/** A token every 3 minutes, kept in the same object beside the first. */
const TWENTY_AN_HOUR: WireLimit = { capacity: 20, refill: 20, intervalMs: 3_600_000, name: '1h' };
/** At most two held at once. */
const SESSIONS: WireLimit = { kind: 'concurrency', capacity: 2, refill: 0, intervalMs: 0, name: 'sessions' };
const T = 1_700_000_000_000;
const ORG = `durable-${process.pid}-${Date.now()}`;

describe.runIf(workerdRuns())('durability across a restart of the runtime', () => {
  let harness: Awaited<ReturnType<typeof prepareHarness>>;
  let workerd: Workerd | undefined;

  const ask = (body: Omit<Call, 'organization' | 'endpoint'>) =>
    call(workerd as Workerd, { organization: ORG, endpoint: 'POST /browsers', ...body });

  beforeAll(async () => {
    harness = await prepareHarness();
  });

  afterAll(async () => {
    await workerd?.stop('SIGKILL');
    harness?.remove();
  });

  it('keeps a drained bucket drained, with the exact units, after the runtime is killed and started again', async () => {
    workerd = await startWorkerd(harness.dir);
    const both = [TEN_A_MINUTE, TWENTY_AN_HOUR];
    expect(await ask({ method: 'consume', limits: both, cost: 7, now: T })).toEqual({
      outcomes: [18_000, 13 * 180_000],
    });
    // 1 234 ms later the minute bucket holds 18 000 + 1 234 units: 3 tokens more leave 1 234.
    expect(await ask({ method: 'consume', limits: [TEN_A_MINUTE], cost: 3, now: T + 1_234 })).toEqual({
      outcomes: [1_234],
    });
    expect(await ask({ method: 'consume', limits: [TEN_A_MINUTE], cost: 1, now: T + 1_234 })).toEqual({
      outcomes: [-1 - 1_234],
    });
    await workerd.stop('SIGKILL');

    workerd = await startWorkerd(harness.dir);
    expect(await ask({ method: 'peek', limits: both, cost: 1, now: T + 1_234 })).toEqual({
      outcomes: [-1 - 1_234, -1 - (13 * 180_000 + 1_234)],
    });
    expect(await ask({ method: 'consume', limits: [TEN_A_MINUTE], cost: 1, now: T + 5_999 })).toEqual({
      outcomes: [-1 - 5_999],
    });
    expect(await ask({ method: 'consume', limits: [TEN_A_MINUTE], cost: 1, now: T + 6_000 })).toEqual({
      outcomes: [0],
    });
  });

  it('keeps a reset too: a bucket reset before the restart is full after it', async () => {
    await ask({ method: 'reset', limits: [TWENTY_AN_HOUR] });
    await (workerd as Workerd).stop('SIGKILL');
    workerd = await startWorkerd(harness.dir);
    expect(await ask({ method: 'peek', limits: [TWENTY_AN_HOUR], cost: 20, now: T + 6_000 })).toEqual({
      outcomes: [0],
    });
    expect(await ask({ method: 'peek', limits: [TEN_A_MINUTE], cost: 1, now: T + 6_000 })).toEqual({ outcomes: [-1] });
  });

  it('keeps held leases, what they set aside and the slots they take, after the runtime is killed', async () => {
    const limits = [TEN_A_MINUTE, SESSIONS];
    const leases = (body: Omit<Call, 'organization' | 'endpoint'>) =>
      call(workerd as Workerd, { organization: ORG, endpoint: 'POST /sessions', ...body });
    const restart = async () => {
      await (workerd as Workerd).stop('SIGKILL');
      workerd = await startWorkerd(harness.dir);
    };
    // The tokens of the minute bucket, and one slot.
    const reserve = (id: string, tokens: number, ms: number) =>
      leases({ method: 'consume', limits, cost: [tokens, 1], lease: { id, ms }, now: T });
    expect(await reserve('a', 4, 60_000)).toEqual({ outcomes: [36_000, 1] });
    expect(await reserve('b', 1, 10_000)).toEqual({ outcomes: [30_000, 0] });
    await restart();
    expect(await reserve('c', 1, 10_000)).toEqual({ outcomes: [-1 - 30_000, -1] });
    expect(await leases({ method: 'settle', limits, change: { id: 'a', actual: [2, 1] }, now: T })).toEqual({
      settled: true,
    });
    expect(await leases({ method: 'peek', limits, cost: 1, now: T })).toEqual({ outcomes: [36_000, 0] });
    await restart();
    expect(await leases({ method: 'settle', limits, change: { id: 'a', actual: [2, 1] }, now: T })).toEqual({
      settled: false,
    });
    // b expires at T + 10 000 keeping its token: 48 000 units refilled by 10 000, less 6 000; both slots free.
    expect(await leases({ method: 'peek', limits, cost: 1, now: T + 10_000 })).toEqual({ outcomes: [46_000, 1] });
  });

  it('keeps blocks, and a quota of the period, after the runtime is killed', async () => {
    const block = { organization: ORG, endpoint: '*', ms: 60_000, reason: 'abuse report 17' };
    const ours = (answer: { blocks?: { blocks: readonly { organization: string }[] } }) =>
      answer.blocks?.blocks.filter((kept) => kept.organization === ORG);
    const kept = { organization: ORG, endpoint: '*', until: T + 60_000, reason: 'abuse report 17' };
    expect(ours(await ask({ method: 'blocks', limits: [], block, now: T }))).toEqual([kept]);
    const daily: WireLimit = { kind: 'quota', capacity: 5, per: 'day', name: 'day' };
    expect(await ask({ method: 'consume', limits: [daily], cost: 5, now: T })).toEqual({ outcomes: [0] });
    await (workerd as Workerd).stop('SIGKILL');
    workerd = await startWorkerd(harness.dir);
    expect(ours(await ask({ method: 'blocks', limits: [], now: T + 59_999 }))).toEqual([kept]);
    expect(ours(await ask({ method: 'blocks', limits: [], now: T + 60_000 }))).toEqual([]);
    expect(await ask({ method: 'peek', limits: [daily], cost: 1, now: T + 1_000 })).toEqual({ outcomes: [-1] });
  });
});
