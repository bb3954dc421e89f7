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

// Quotas in the object (docs/stores.md, "Quotas"): calls carry a client clock the test sets, and the harness gives the
// store each quota as the limit of the period that clock falls in (`inPeriod`, as the limiter does), so a period ends
// when the test says so. The row of a quota is written at its period's end and deleted by the sweep from then.

/** 2023-11-14 22:13:20 UTC: its day ends at END, its month at MONTH_END. */
const T = 1_700_000_000_000;
const END = Date.UTC(2023, 10, 15);
const MONTH_END = Date.UTC(2023, 11, 1);
const DAILY: WireLimit = { kind: 'quota', capacity: 3, per: 'day', name: 'day' };
const MONTHLY: WireLimit = { kind: 'quota', capacity: 1_000, per: 'month', name: 'month' };
const ENDPOINT = 'POST /reports';

describe.runIf(workerdRuns())('quotas in the object', () => {
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

  /** An organization of its own; `ask(body)` makes a call for it at the body's `now`. */
  function organization(binding?: string) {
    const org = `quotas-${process.pid}-${Date.now()}-${organizations++}`;
    const ask = (body: Omit<Call, 'organization' | 'endpoint' | 'binding'>) =>
      call(workerd, { organization: org, endpoint: ENDPOINT, ...(binding === undefined ? {} : { binding }), ...body });
    return { org, ask };
  }

  it('admits a quota up to its period end, refills nothing before it, and starts full in the next period', async () => {
    const { ask } = organization();
    expect(await ask({ method: 'consume', limits: [DAILY], cost: 3, now: T })).toEqual({ outcomes: [0] });
    expect(await ask({ method: 'consume', limits: [DAILY], cost: 1, now: END - 1 })).toEqual({ outcomes: [-1] });
    expect((await ask({ method: 'inspect', limits: [], now: END - 1 })).inspect).toEqual({
      now: END - 1,
      buckets: [{ name: 'day', units: 0, updatedAt: END, capacity: 3, unitsPerToken: 1, unitsPerMs: 0 }],
      leases: [],
    });
    expect(await ask({ method: 'consume', limits: [DAILY], cost: 1, now: END })).toEqual({ outcomes: [2] });
    // A caller whose clock is a millisecond behind asks for the day that ended: it is charged in the stored new one.
    expect(await ask({ method: 'consume', limits: [DAILY], cost: 1, now: END - 1 })).toEqual({ outcomes: [1] });
    const next = (await ask({ method: 'inspect', limits: [], now: END })).inspect;
    expect(next?.buckets).toEqual([
      { name: 'day', units: 1, updatedAt: END + 86_400_000, capacity: 3, unitsPerToken: 1, unitsPerMs: 0 },
    ]);
  });

  it('charges a lease on a quota in the period it was reserved in, when it expires after that period ends', async () => {
    const { ask } = organization();
    const lease = { id: 'a', ms: 60_000 };
    expect(await ask({ method: 'consume', limits: [DAILY], cost: 2, now: END - 1_000, lease })).toEqual({
      outcomes: [1],
    });
    // Expired at END + 59 000, keeping its charge in the day it was reserved in, which has ended by then.
    expect(await ask({ method: 'peek', limits: [DAILY], cost: 3, now: END + 60_000 })).toEqual({ outcomes: [0] });
    expect(await ask({ method: 'peek', limits: [DAILY], cost: 2, now: END - 1 })).toEqual({ outcomes: [-1 - 1] });
  });

  it("deletes a quota's row at its period's end, and keeps one whose period has not ended", async () => {
    const { org, ask } = organization('SWEPT');
    // A millisecond before the day ends on the caller's clock: the day's row is full a millisecond later on the
    // object's. The month's is full when the month ends, 16 days later.
    expect(await ask({ method: 'consume', limits: [DAILY, MONTHLY], cost: 1, now: END - 1 })).toEqual({
      outcomes: [2, 999],
    });
    let seen: SweptState;
    do seen = await sweptState(workerd, org);
    while (seen.now < Math.min(...seen.rows.map((row) => row.full_at)));
    const after = await ringAlarm(workerd, org);
    expect(after.rows.map((row) => row.name)).toEqual(['month']);
    const month = after.rows[0] as SweptState['rows'][number];
    expect(month.full_at - after.now).toBeGreaterThan(MONTH_END - END - 60_000);
    expect(after.alarm).toBe(month.full_at);
    expect(await ask({ method: 'peek', limits: [MONTHLY], cost: 1, now: END })).toEqual({ outcomes: [998] });
  });
});
