import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Call, call, prepareHarness, ringAlarm, sweptState, type WireLimit } from './support/harness.js';
import { startWorkerd, type Workerd, workerdRuns } from './support/workerd.js';

// Leases in the object (docs/stores.md, "Leases"), through durableObjectStore in workerd, one organization per test,
// under clock 'client' so that every instant is the test's: a reserve sets its cost aside, a settle charges the actual
// cost (below empty down to minus the capacity), a cancel gives all back, an extend holds longer, an expired lease keeps
// its charge and frees its slots, in order of expiry; concurrency limits, per-limit costs, reset, deadlines; and the
// sweep, which expires leases and keeps the buckets they hold.

const T = 1_700_000_000_000;
const ENDPOINT = 'POST /chat';
const DEBT_OFFSET = 2 ** 52;

/** 6 000 units a token, 1 unit a millisecond: full (60 000 units) after a minute. */
const TEN_A_MINUTE: WireLimit = { capacity: 10, refill: 10, intervalMs: 60_000, name: '1m' };
/** 180 000 units a token, 1 unit a millisecond. */
const TWENTY_AN_HOUR: WireLimit = { capacity: 20, refill: 20, intervalMs: 3_600_000, name: '1h' };
const sessions = (n: number): WireLimit => ({
  kind: 'concurrency',
  capacity: n,
  refill: 0,
  intervalMs: 0,
  name: 'sessions',
});
/** 8 640 000 units a token, 1 unit a millisecond: drained, full again in a day. */
const DAILY: WireLimit = { capacity: 10, refill: 10, intervalMs: 86_400_000, name: 'day' };

describe.runIf(workerdRuns())('leases in the Durable Object', () => {
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

  /** An organization of its own, and its calls at the client clock `now` (default T). */
  function organization(binding = 'BUCKETS') {
    const org = `leases-${process.pid}-${Date.now()}-${organizations++}`;
    const ask = (body: Omit<Call, 'organization' | 'endpoint' | 'binding'>) =>
      call(workerd, { binding, organization: org, endpoint: ENDPOINT, now: T, ...body });
    return {
      name: org,
      reserve: (limits: WireLimit[], cost: number | number[], id: string, ms = 60_000, now = T) =>
        ask({ method: 'consume', limits, cost, lease: { id, ms }, now }),
      consume: (limits: WireLimit[], cost: number | number[], now = T) => ask({ method: 'consume', limits, cost, now }),
      peek: (limits: WireLimit[], cost: number | number[], now = T) => ask({ method: 'peek', limits, cost, now }),
      settle: (limits: WireLimit[], id: string, actual: number | number[], now = T) =>
        ask({ method: 'settle', limits, change: { id, actual }, now }),
      extend: (limits: WireLimit[], id: string, holdMs: number, now = T) =>
        ask({ method: 'settle', limits, change: { id, holdMs }, now }),
      reset: (limits: WireLimit[]) => ask({ method: 'reset', limits }),
      ask,
    };
  }

  it('sets a reserve cost aside: its outcomes are a consume’s, and later calls count it as taken', async () => {
    const org = organization();
    expect(await org.reserve([TEN_A_MINUTE], 4, 'a')).toEqual({ outcomes: [36_000] });
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [30_000] });
    expect(await org.consume([TEN_A_MINUTE], 7)).toEqual({ outcomes: [-1 - 36_000] });
    expect(await org.consume([TEN_A_MINUTE], 6)).toEqual({ outcomes: [0] });
  });

  it('charges the actual cost at a settle in place of the reserved one, once', async () => {
    const org = organization();
    await org.reserve([TEN_A_MINUTE], 4, 'a');
    expect(await org.settle([TEN_A_MINUTE], 'a', 1)).toEqual({ settled: true });
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [48_000] });
    // Settled already, and never taken: false, nothing changed.
    expect(await org.settle([TEN_A_MINUTE], 'a', 1)).toEqual({ settled: false });
    expect(await org.settle([TEN_A_MINUTE], 'b', 0)).toEqual({ settled: false });
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [48_000] });
  });

  it('gives back every token and slot at a cancel (actual 0)', async () => {
    const org = organization();
    expect(await org.reserve([TEN_A_MINUTE, sessions(1)], [4, 1], 'a')).toEqual({ outcomes: [36_000, 0] });
    expect(await org.settle([TEN_A_MINUTE, sessions(1)], 'a', 0)).toEqual({ settled: true });
    expect(await org.peek([TEN_A_MINUTE, sessions(1)], [10, 1])).toEqual({ outcomes: [0, 0] });
  });

  it('refills a bucket while a lease is held and never gives back more than the actual cost allows', async () => {
    const org = organization();
    // Drained to 4 tokens held, 4 reserved of them; a minute later the bucket is full, less what is set aside.
    await org.consume([TEN_A_MINUTE], 6);
    await org.reserve([TEN_A_MINUTE], 4, 'a', 120_000);
    expect(await org.peek([TEN_A_MINUTE], 1, T + 60_000)).toEqual({ outcomes: [30_000] });
    // A cancel then gives the 4 back to a bucket that is full: full, not above.
    expect(await org.settle([TEN_A_MINUTE], 'a', 0, T + 60_000)).toEqual({ settled: true });
    expect(await org.peek([TEN_A_MINUTE], 10, T + 60_000)).toEqual({ outcomes: [0] });
  });

  it('expires a lease keeping its charge, in order of expiry, and frees its slots', async () => {
    const org = organization();
    // b expires at T + 3 000, a at T + 1 000; reserved in the other order. At a's expiry the bucket is full (capped),
    // so a's charge leaves 30 000, refilled to 32 000 at b's, which leaves 2 000; 4 000 at T + 5 000. (Charged in
    // the order they were taken, it would hold 2 000.)
    await org.reserve([TEN_A_MINUTE], 5, 'b', 3_000);
    await org.reserve([TEN_A_MINUTE], 5, 'a', 1_000);
    expect(await org.peek([TEN_A_MINUTE], 1, T + 5_000)).toEqual({ outcomes: [-1 - 4_000] });
    expect(await org.consume([TEN_A_MINUTE], 1, T + 5_000)).toEqual({ outcomes: [-1 - 4_000] });
    expect(await org.settle([TEN_A_MINUTE], 'a', 0, T + 5_000)).toEqual({ settled: false });
    expect(await org.peek([TEN_A_MINUTE], 1, T + 8_000)).toEqual({ outcomes: [1_000] });

    expect(await org.reserve([sessions(1)], 1, 'c', 1_000)).toEqual({ outcomes: [0] });
    expect(await org.reserve([sessions(1)], 1, 'd', 1_000, T + 999)).toEqual({ outcomes: [-1] });
    expect(await org.reserve([sessions(1)], 1, 'd', 1_000, T + 1_000)).toEqual({ outcomes: [0] });
  });

  it('holds an extended lease until its new expiry, and answers false after it', async () => {
    const org = organization();
    await org.reserve([sessions(1)], 1, 'a', 1_000);
    expect(await org.extend([sessions(1)], 'a', 5_000, T + 500)).toEqual({ settled: true });
    expect(await org.reserve([sessions(1)], 1, 'b', 1_000, T + 5_499)).toEqual({ outcomes: [-1] });
    expect(await org.reserve([sessions(1)], 1, 'b', 1_000, T + 5_500)).toEqual({ outcomes: [0] });
    expect(await org.extend([sessions(1)], 'a', 5_000, T + 5_500)).toEqual({ settled: false });
  });

  it('charges a settle beyond the reserve below empty, down to minus the capacity, and refusals count the debt', async () => {
    const org = organization();
    await org.reserve([TEN_A_MINUTE], 1, 'a');
    expect(await org.settle([TEN_A_MINUTE], 'a', 25)).toEqual({ settled: true });
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [-60_000 - 1 - DEBT_OFFSET] });
    // Paid back by refill: 60 000 ms later it is empty, 66 000 ms later it holds one token.
    expect(await org.peek([TEN_A_MINUTE], 1, T + 59_999)).toEqual({ outcomes: [-1 - 1 - DEBT_OFFSET] });
    expect(await org.peek([TEN_A_MINUTE], 1, T + 65_999)).toEqual({ outcomes: [-1 - 5_999] });
    expect(await org.consume([TEN_A_MINUTE], 1, T + 66_000)).toEqual({ outcomes: [0] });
  });

  it('floors a debt with the other held leases’ tokens still set aside', async () => {
    const org = organization();
    await org.reserve([TEN_A_MINUTE], 3, 'a');
    await org.reserve([TEN_A_MINUTE], 1, 'b');
    // Q - P_rest >= -60 000 with 18 000 still set aside by a: Q = -42 000, and the bucket holds -60 000.
    expect(await org.settle([TEN_A_MINUTE], 'b', 100)).toEqual({ settled: true });
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [-60_000 - 1 - DEBT_OFFSET] });
    expect(await org.settle([TEN_A_MINUTE], 'a', 0)).toEqual({ settled: true });
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [-42_000 - 1 - DEBT_OFFSET] });
  });

  it('admits n leases of a concurrency limit at once, all or nothing with the buckets', async () => {
    const org = organization();
    const limits = [TEN_A_MINUTE, sessions(2)];
    expect(await org.reserve(limits, 1, 'a')).toEqual({ outcomes: [54_000, 1] });
    expect(await org.reserve(limits, 1, 'b')).toEqual({ outcomes: [48_000, 0] });
    expect(await org.reserve(limits, 1, 'c')).toEqual({ outcomes: [-1 - 48_000, -1] });
    // The refusal set nothing aside.
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [42_000] });
    expect(await org.settle(limits, 'a', [1, 0])).toEqual({ settled: true });
    expect(await org.reserve(limits, 1, 'c')).toEqual({ outcomes: [42_000, 0] });
  });

  it('takes the slots a cost per limit names', async () => {
    const org = organization();
    expect(await org.reserve([TEN_A_MINUTE, sessions(3)], [2, 1], 'a')).toEqual({ outcomes: [48_000, 2] });
    expect(await org.reserve([TEN_A_MINUTE, sessions(3)], [1, 3], 'b')).toEqual({ outcomes: [-1 - 48_000, -1 - 2] });
    expect(await org.reserve([TEN_A_MINUTE, sessions(3)], [1, 2], 'b')).toEqual({ outcomes: [42_000, 0] });
  });

  it('charges a plain consume one cost per limit', async () => {
    const org = organization();
    expect(await org.consume([TEN_A_MINUTE, TWENTY_AN_HOUR], [2, 5])).toEqual({ outcomes: [48_000, 15 * 180_000] });
    expect(await org.consume([TEN_A_MINUTE, TWENTY_AN_HOUR], [9, 1])).toEqual({
      outcomes: [-1 - 48_000, -1 - 15 * 180_000],
    });
  });

  it('charges a limit the settle does not name what the lease set aside there', async () => {
    const org = organization();
    await org.reserve([TEN_A_MINUTE, TWENTY_AN_HOUR], 2, 'a');
    expect(await org.settle([TEN_A_MINUTE], 'a', 1)).toEqual({ settled: true });
    expect(await org.peek([TEN_A_MINUTE, TWENTY_AN_HOUR], 1)).toEqual({ outcomes: [48_000, 17 * 180_000] });
  });

  it('forgets the holds on the limits a reset names; a lease left holding nothing is gone', async () => {
    const org = organization();
    await org.reserve([TEN_A_MINUTE, sessions(1)], [4, 1], 'a');
    await org.reserve([sessions(2)], 1, 'b');
    await org.reset([sessions(1)]);
    expect(await org.peek([sessions(1)], 1)).toEqual({ outcomes: [0] });
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [30_000] });
    expect(await org.settle([TEN_A_MINUTE], 'b', 0)).toEqual({ settled: false });
    expect(await org.settle([TEN_A_MINUTE, sessions(1)], 'a', 4)).toEqual({ settled: true });
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [30_000] });
  });

  it('refuses a lease id already held with invalid_argument, charging nothing', async () => {
    const org = organization();
    await org.reserve([TEN_A_MINUTE], 1, 'a');
    expect(await org.reserve([TEN_A_MINUTE], 1, 'a')).toEqual({ error: 'invalid_argument' });
    expect(await org.peek([TEN_A_MINUTE], 1)).toEqual({ outcomes: [48_000] });
  });

  it('refuses a reserve or a settle that arrives after its deadline, changing nothing (store_timeout)', async () => {
    const org = organization();
    const late = { budgetMs: 0 };
    expect(
      await org.ask({ method: 'consume', limits: [sessions(1)], cost: 1, lease: { id: 'a', ms: 60_000 }, ...late }),
    ).toEqual({ error: 'store_timeout' });
    expect(await org.peek([sessions(1)], 1)).toEqual({ outcomes: [0] });
    await org.reserve([sessions(1)], 1, 'a');
    expect(await org.ask({ method: 'settle', limits: [sessions(1)], change: { id: 'a', actual: 0 }, ...late })).toEqual(
      {
        error: 'store_timeout',
      },
    );
    expect(await org.peek([sessions(1)], 1)).toEqual({ outcomes: [-1] });
    expect(await org.settle([sessions(1)], 'a', 0)).toEqual({ settled: true });
  });

  describe('the sweep', () => {
    const state = (org: ReturnType<typeof organization>) => sweptState(workerd, org.name);
    const ring = (org: ReturnType<typeof organization>) => ringAlarm(workerd, org.name);

    it('keeps a full bucket while a lease holds it, and deletes it once the lease is settled and it is full', async () => {
      const org = organization('SWEPT');
      // 1 000 tokens refilling one a millisecond: full again a millisecond after a charge of one.
      const fast: WireLimit = { capacity: 1_000, refill: 1_000, intervalMs: 1_000, name: 'fast' };
      const full = async () => {
        for (;;) {
          const seen = await state(org);
          if (seen.now >= (seen.rows[0]?.full_at ?? 0)) return;
        }
      };
      await org.consume([fast], 1);
      await org.reserve([fast, sessions(1)], [1, 1], 'a');
      await full();
      const held = await ring(org);
      expect(held.rows.map((row) => row.name)).toEqual(['fast']);
      expect(held.leaseRows).toMatchObject([
        {
          id: 'a',
          tokens: '{"fast":{"tokens":1,"capacity":1000,"unitsPerToken":1,"unitsPerMs":1}}',
          slots: '{"sessions":1}',
        },
      ]);
      expect(held.leases).toEqual([`a ${ENDPOINT}`]);
      expect(await org.settle([fast, sessions(1)], 'a', 1)).toEqual({ settled: true });
      await full();
      expect(await ring(org)).toMatchObject({ rows: [], held: [], leaseRows: [], leases: [], alarm: null });
    });

    it('expires a lease whose time has come on the object’s clock, keeping its charge, and sets the alarm on', async () => {
      const org = organization('SWEPT');
      expect(await org.reserve([DAILY, sessions(1)], [10, 1], 'a', 1)).toEqual({ outcomes: [0, 0] });
      for (;;) {
        const seen = await state(org);
        if (seen.now >= (seen.leaseRows[0]?.drop_at ?? 0)) break;
      }
      const after = await ring(org);
      expect(after).toMatchObject({ leaseRows: [], leases: [], rows: [{ name: 'day', units: 0 }] });
      // Full a day after the lease expired (T + 1 on the client's clock), on the object's clock.
      expect(after.alarm).toBe(after.rows[0]?.full_at);
      expect(await org.peek([DAILY], 1, T + 1)).toEqual({ outcomes: [-1] });
      expect(await org.peek([sessions(1)], 1, T + 1)).toEqual({ outcomes: [0] });
    });
  });
});
