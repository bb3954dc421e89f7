import { PLANS } from '../src/plans.js';
import {
  expectedSteps,
  type VectorCase,
  type VectorFile,
  type VectorLimit,
  type VectorStep,
} from '../src/testing/vectors.js';

type Step = Pick<VectorStep, 'at' | 'op' | 'limit' | 'cost'>;

const T0 = 1_700_000_000_000;
const SECOND = 1_000;
const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const TEN_YEARS = 3_650 * DAY;

const shape = (capacity: number, refill: number, intervalMs: number): VectorLimit => ({ capacity, refill, intervalMs });
const perMinute = (rpm: number) => shape(rpm, rpm, MINUTE);

/** A small deterministic PRNG (mulberry32) so the committed file regenerates byte for byte. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Steps on one limit: `[offset ms from T0, op, cost]`. */
function on(limit: VectorLimit, steps: readonly (readonly [number, Step['op'], number])[]): Step[] {
  return steps.map(([offset, op, cost]) => ({ at: T0 + offset, op, limit, cost }));
}

function burstThenOne(limit: VectorLimit): Step[] {
  return on(limit, [...Array.from({ length: limit.capacity }, () => [0, 'consume', 1] as const), [0, 'consume', 1]]);
}

/** The spec's per-minute plans, unchanged in behaviour. */
function specCases(): { name: string; steps: Step[] }[] {
  const cases: { name: string; steps: Step[] }[] = [];
  for (const [plan, rpm] of Object.entries(PLANS)) {
    cases.push({ name: `${plan}: a full burst at one instant, then one more`, steps: burstThenOne(perMinute(rpm)) });
  }
  const developer = perMinute(10);
  cases.push({
    name: 'developer: the refill boundary, one millisecond either side',
    steps: on(developer, [
      [0, 'consume', 10],
      [5_999, 'peek', 1],
      [5_999, 'consume', 1],
      [6_000, 'consume', 1],
      [6_000, 'consume', 1],
      [11_999, 'consume', 1],
    ]),
  });
  cases.push({
    name: 'hobbyist: costs above one, a limited request charges nothing',
    steps: on(perMinute(25), [
      [0, 'consume', 20],
      [1, 'consume', 6],
      [1, 'consume', 5],
      [2_400, 'consume', 1],
      [60_000, 'peek', 25],
      [62_400, 'consume', 25],
    ]),
  });
  cases.push({
    name: 'plan change: upgrade refills at the old rate until the change, downgrade caps',
    steps: [
      ...on(developer, [[0, 'consume', 10]]),
      ...on(perMinute(250), [
        [6_000, 'consume', 1],
        [6_240, 'consume', 2],
        [60_000, 'consume', 100],
      ]),
      ...on(developer, [
        [60_000, 'consume', 10],
        [60_000, 'consume', 1],
      ]),
    ],
  });
  cases.push({
    name: 'clock going backwards refills nothing, and never twice',
    steps: on(perMinute(100), [
      [10_000, 'consume', 100],
      [5_000, 'consume', 1],
      [10_599, 'consume', 1],
      [10_600, 'consume', 1],
    ]),
  });
  cases.push({
    name: 'reset in the middle of a drained bucket',
    steps: on(perMinute(25), [
      [0, 'consume', 25],
      [1, 'consume', 1],
      [2, 'reset', 1],
      [2, 'consume', 25],
    ]),
  });
  cases.push({
    name: 'odd override: 7 per minute, a token is 60 000 units',
    steps: on(perMinute(7), [
      [0, 'consume', 7],
      [8_571, 'consume', 1],
      [8_572, 'consume', 1],
      [8_572, 'peek', 1],
    ]),
  });
  return cases;
}

/** Limits other than per minute: seconds to days, bursts above and below the rate, odd intervals, costs. */
function shapeCases(): { name: string; steps: Step[] }[] {
  return [
    {
      name: '5 per second, burst 10: the burst, then one token every 200 ms',
      steps: on(shape(10, 5, SECOND), [
        [0, 'consume', 10],
        [199, 'consume', 1],
        [200, 'consume', 1],
        [200, 'peek', 1],
        [1_000, 'consume', 4],
        [1_000, 'consume', 1],
        [3_000, 'consume', 10],
        [3_000, 'reset', 1],
        [3_000, 'consume', 10],
      ]),
    },
    {
      name: '5 per second, burst 2: never more than 2 at once, however long idle',
      steps: on(shape(2, 5, SECOND), [
        [0, 'consume', 2],
        [0, 'consume', 1],
        [200, 'consume', 1],
        [399, 'consume', 1],
        [400, 'consume', 1],
        [60_000, 'consume', 2],
        [60_000, 'consume', 1],
        [60_100, 'peek', 2],
      ]),
    },
    {
      name: '1 000 per hour, burst 50, costs above one: 3.6 s a token',
      steps: on(shape(50, 1_000, HOUR), [
        [0, 'consume', 30],
        [0, 'consume', 21],
        [0, 'consume', 20],
        [3_599, 'consume', 1],
        [3_600, 'consume', 1],
        [36_000, 'consume', 10],
        [HOUR, 'peek', 50],
        [HOUR, 'consume', 50],
      ]),
    },
    {
      name: '10 000 per day, burst 100: 8.64 s a token, a day to refill from empty',
      steps: on(shape(100, 10_000, DAY), [
        [0, 'consume', 100],
        [8_639, 'consume', 1],
        [8_640, 'consume', 1],
        [8_640 + 86_400, 'consume', 10],
        [DAY, 'consume', 100],
        [DAY, 'consume', 1],
      ]),
    },
    {
      name: '1 per day, burst 3: the longest interval',
      steps: on(shape(3, 1, DAY), [
        [0, 'consume', 3],
        [DAY - 1, 'consume', 1],
        [DAY, 'consume', 1],
        [DAY, 'consume', 1],
        [3 * DAY + 5, 'peek', 3],
        [4 * DAY, 'consume', 3],
      ]),
    },
    {
      name: 'odd interval: 7 every 1 000 ms, capacity 7, a token in 142.857… ms',
      steps: on(shape(7, 7, 1_000), [
        [0, 'consume', 7],
        [142, 'consume', 1],
        [143, 'consume', 1],
        [285, 'consume', 1],
        [286, 'consume', 1],
        [1_286, 'consume', 7],
        [1_287, 'peek', 1],
      ]),
    },
    {
      name: 'odd interval: 3 every 7 ms, capacity 50, costs above one',
      steps: on(shape(50, 3, 7), [
        [0, 'consume', 49],
        [2, 'consume', 2],
        [3, 'consume', 2],
        [100, 'consume', 40],
        [200, 'consume', 50],
      ]),
    },
    {
      name: '1 every 250 ms, capacity 1: no burst at all',
      steps: on(shape(1, 1, 250), [
        [0, 'consume', 1],
        [0, 'consume', 1],
        [249, 'consume', 1],
        [250, 'consume', 1],
        [10_000, 'consume', 1],
        [10_000, 'consume', 1],
      ]),
    },
  ];
}

/** A limit changed under one name: refill at the old rate to the old capacity, then convert (rounding down), cap. */
function changeCases(): { name: string; steps: Step[] }[] {
  return [
    {
      name: 'change 7/s to 5/s: a token goes from 1 000 units to 200, the part token rounds down',
      steps: [
        ...on(shape(10, 7, SECOND), [
          [0, 'consume', 10],
          [1, 'peek', 1],
        ]),
        ...on(shape(10, 5, SECOND), [
          [1, 'peek', 1],
          [143, 'peek', 1],
          [143, 'consume', 1],
        ]),
      ],
    },
    {
      name: 'change 10/s to 3/s: a token goes from 100 units to 1 000, converted exactly',
      steps: [
        ...on(shape(10, 10, SECOND), [
          [0, 'consume', 10],
          [150, 'peek', 2],
        ]),
        ...on(shape(10, 3, SECOND), [
          [150, 'peek', 1],
          [150, 'consume', 1],
          [300, 'consume', 1],
        ]),
      ],
    },
    {
      name: 'change 7/min to 10/min: 60 000 units a token to 6 000, rounding down',
      steps: [
        ...on(perMinute(7), [
          [0, 'consume', 7],
          [1_001, 'consume', 1],
        ]),
        ...on(perMinute(10), [
          [1_001, 'peek', 1],
          [5_000, 'consume', 1],
          [5_001, 'peek', 1],
        ]),
      ],
    },
    {
      name: 'change 3/s to 1 000/h: part tokens convert from 1 000 units to 3 600, down',
      steps: [
        ...on(shape(3, 3, SECOND), [
          [0, 'consume', 3],
          [500, 'peek', 1],
        ]),
        ...on(shape(1_000, 1_000, HOUR), [
          [500, 'peek', 1],
          [500, 'consume', 1],
          [4_100, 'consume', 1],
        ]),
      ],
    },
    {
      name: 'change 1/day to 1/s: a token goes from 86 400 000 units to 1 000, the part token rounds down',
      steps: [
        ...on(shape(2, 1, DAY), [
          [0, 'consume', 1],
          [HOUR, 'peek', 1],
        ]),
        ...on(shape(2, 1, SECOND), [
          [HOUR, 'consume', 1],
          [HOUR + 958, 'consume', 1],
          [HOUR + 959, 'consume', 1],
        ]),
      ],
    },
    {
      name: 'change 100/min to 5/s burst 5: a full bucket is capped at the new capacity',
      steps: [
        ...on(perMinute(100), [[0, 'consume', 3]]),
        ...on(shape(5, 5, SECOND), [
          [0, 'peek', 5],
          [0, 'consume', 5],
          [0, 'consume', 1],
        ]),
        ...on(perMinute(100), [
          [200, 'consume', 1],
          [800, 'consume', 1],
        ]),
      ],
    },
    {
      name: 'change 5/s burst 2 to 5/s burst 10: same unit, the tokens are kept, the room grows',
      steps: [
        ...on(shape(2, 5, SECOND), [[0, 'consume', 1]]),
        ...on(shape(10, 5, SECOND), [
          [100, 'peek', 2],
          [1_000, 'consume', 7],
          [1_000, 'consume', 1],
        ]),
      ],
    },
  ];
}

/** The largest buckets (capacity × units per token near 2^52) and the fastest refill, after years of idle time. */
function boundCases(): { name: string; steps: Step[] }[] {
  const daily = shape(52_124_995, 1, DAY); // 52 124 995 × 86 400 000 units, just under 2^52
  const oddDaily = shape(52_124_996, 7, DAY - 1); // a token is 86 399 999 units
  const fastest = shape(2 ** 52, 1_000_000_000_000, 1); // a token is one unit, a trillion a millisecond
  const trillionDaily = shape(Math.floor(2 ** 52 / 27), 1_000_000_000_000, DAY); // a token is 27 units
  return [
    {
      name: 'largest bucket of a trillion a day: 166 799 986 198 907 tokens of 27 units, full after ten years idle',
      steps: on(trillionDaily, [
        [0, 'consume', 166_799_986_198_907],
        [1, 'consume', 11_575],
        [1, 'consume', 11_574],
        [DAY, 'peek', 1_000_000_000_000],
        [TEN_YEARS, 'consume', 166_799_986_198_907],
        [TEN_YEARS, 'consume', 1],
      ]),
    },
    {
      name: 'largest daily bucket: 52 124 995 tokens refilling 1 a day, ten years idle refill 3 650',
      steps: on(daily, [
        [0, 'consume', 52_124_995],
        [1, 'consume', 1],
        [DAY, 'consume', 1],
        [TEN_YEARS, 'peek', 52_124_995],
        [TEN_YEARS, 'consume', 52_124_994],
        [TEN_YEARS, 'consume', 2],
      ]),
    },
    {
      name: 'largest odd bucket: 7 every 86 399 999 ms, ten years idle',
      steps: on(oddDaily, [
        [0, 'consume', 52_124_996],
        [12_342_857, 'consume', 1],
        [12_342_858, 'consume', 1],
        [TEN_YEARS, 'consume', 52_124_996],
        [TEN_YEARS, 'consume', 1],
      ]),
    },
    {
      name: 'fastest refill: 2^52 tokens, a trillion a millisecond, ten years idle',
      steps: on(fastest, [
        [0, 'consume', 2 ** 52],
        [0, 'consume', 1],
        [1, 'consume', 1_000_000_000_001],
        [1, 'consume', 1_000_000_000_000],
        [TEN_YEARS, 'consume', 2 ** 52],
        [TEN_YEARS, 'consume', 1],
      ]),
    },
    {
      name: 'change from the largest daily bucket to 10 per second, and back, after a year',
      steps: [
        ...on(daily, [[0, 'consume', 52_124_990]]),
        ...on(shape(10, 10, SECOND), [
          [365 * DAY, 'consume', 10],
          [365 * DAY + 50, 'consume', 1],
        ]),
        ...on(daily, [
          [365 * DAY + 50, 'consume', 1],
          [365 * DAY + 51, 'consume', 1],
        ]),
      ],
    },
  ];
}

/** Limits random schedules choose from, with the gaps that suit each. */
const RANDOM_LIMITS: VectorLimit[] = [
  ...Object.values(PLANS).map(perMinute),
  perMinute(1),
  perMinute(59_999),
  shape(10, 5, SECOND),
  shape(2, 5, SECOND),
  shape(7, 7, 1_000),
  shape(50, 3, 7),
  shape(1, 1, 250),
  shape(50, 1_000, HOUR),
  shape(1_000, 1_000, HOUR),
  shape(100, 10_000, DAY),
  shape(3, 1, DAY),
];

function randomCase(seed: number): { name: string; steps: Step[] } {
  const next = random(seed);
  const pick = () => RANDOM_LIMITS[Math.floor(next() * RANDOM_LIMITS.length)] as VectorLimit;
  let limit = pick();
  let at = T0;
  const steps: Step[] = [];
  for (let i = 0; i < 36; i++) {
    const roll = next();
    if (roll < 0.06) limit = pick();
    // Gaps in proportion to the time a token takes, so that every limit sees both empty and refilled buckets.
    const tokenMs = limit.intervalMs / limit.refill;
    at += roll < 0.5 ? 0 : Math.floor(next() * tokenMs * (roll < 0.9 ? 3 : limit.capacity * 1.5));
    const op = roll < 0.03 ? 'reset' : roll < 0.15 ? 'peek' : 'consume';
    const cost = 1 + Math.floor(next() ** 3 * limit.capacity);
    steps.push({ at, op, limit, cost });
  }
  return { name: `random schedule, seed ${seed}`, steps };
}

/** A day quota of `capacity` for a step at `at` (offset from T0): its period ends at the next day boundary in UTC. */
const dayQuota = (capacity: number, at: number): VectorLimit => ({
  capacity,
  refill: 0,
  intervalMs: 0,
  periodEnd: (Math.floor((T0 + at) / DAY) + 1) * DAY,
});

/** Quotas: a period's count, the next period full, a caller a period behind, a capacity change within a period. */
function quotaCases(): { name: string; steps: Step[] }[] {
  const end = (Math.floor(T0 / DAY) + 1) * DAY - T0;
  const steps = (list: readonly (readonly [number, Step['op'], number, number])[]): Step[] =>
    list.map(([at, op, cost, capacity]) => ({ at: T0 + at, op, limit: dayQuota(capacity, at), cost }));
  return [
    {
      name: 'quota: 3 a day, nothing refills within it, full again when the next day starts',
      steps: steps([
        [0, 'consume', 1, 3],
        [0, 'consume', 2, 3],
        [0, 'consume', 1, 3],
        [HOUR, 'peek', 1, 3],
        [end - 1, 'consume', 1, 3],
        [end, 'peek', 3, 3],
        [end, 'consume', 2, 3],
        [end + 3 * DAY, 'consume', 3, 3],
      ]),
    },
    {
      name: 'quota: a call stating the earlier period counts in the stored later one',
      steps: [
        { at: T0 + end, op: 'consume', limit: dayQuota(5, end), cost: 4 },
        { at: T0 + end, op: 'consume', limit: dayQuota(5, end - 1), cost: 1 },
        { at: T0 + end, op: 'consume', limit: dayQuota(5, end), cost: 1 },
      ],
    },
    {
      name: 'quota: a capacity lowered within a period caps what is left, raised it adds nothing back',
      steps: steps([
        [0, 'consume', 2, 10],
        [MINUTE, 'consume', 1, 5],
        [MINUTE, 'consume', 5, 5],
        [2 * MINUTE, 'peek', 5, 20],
        [2 * MINUTE, 'consume', 5, 20],
        [end, 'consume', 20, 20],
        [end, 'reset', 1, 20],
        [end, 'consume', 20, 20],
      ]),
    },
  ];
}

export function generateVectors(): VectorFile {
  const cases: VectorCase[] = [
    ...specCases(),
    ...shapeCases(),
    ...changeCases(),
    ...boundCases(),
    ...quotaCases(),
    ...Array.from({ length: 30 }, (_, i) => randomCase(i + 1)),
  ].map(({ name, steps }) => ({ name, steps: expectedSteps(steps) }));
  return {
    description:
      'ratecard token-bucket test vectors. Each case is one bucket, starting missing (full); every step names the ' +
      'limit in force, { capacity, refill, intervalMs } (tokenBucket: at most capacity tokens, refill tokens every ' +
      'intervalMs, added continuously), all under one limit name, so a change of shape within a case is a limit ' +
      'changed under its name: the bucket refills at the old limit until the step, then converts to the new unit ' +
      '(rounding down) and is capped at the new capacity. at is epoch ms, cost the tokens asked; outcome is the ' +
      'store Outcome (>= 0: admitted, units left; < 0: limited, -1 - units held); remaining, retryAfter and ' +
      'resetAfter are the seconds and whole tokens of bucket.ts. A quota step states periodEnd, the end of the ' +
      'period it falls in (refill and intervalMs 0): the bucket counts capacity per period, a later period starts ' +
      'full, and its waits count to periodEnd. Generated by ' +
      'UPDATE_VECTORS=1 pnpm --filter @ratecard/core exec vitest run test/vectors.test.ts',
    unit:
      "units of the step's own limit: with g = gcd(refill, intervalMs), a token is intervalMs / g units and the " +
      'bucket gains refill / g units per millisecond; a full bucket holds capacity × intervalMs / g units',
    cases,
  };
}
