import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type CalendarPeriodOptions,
  CurrentPeriod,
  calendarPeriod,
  type PeriodBounds,
  periodAt,
  RateLimitError,
} from '../src/index.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The period `options` gives the instant `at`, as the instants `start` and `end` (ISO strings with offsets). */
function expectPeriod(options: CalendarPeriodOptions, at: string, start: string, end: string): PeriodBounds {
  const bounds = periodAt(Date.parse(at), calendarPeriod(options));
  expect({ start: new Date(bounds.start).toISOString(), end: new Date(bounds.end).toISOString() }).toEqual({
    start: new Date(start).toISOString(),
    end: new Date(end).toISOString(),
  });
  return bounds;
}

/** The error `make` throws, which must be a RateLimitError of `code`. */
function errorOf(make: () => unknown, code: 'invalid_option' | 'invalid_argument' = 'invalid_option'): string {
  let error: unknown;
  try {
    make();
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(RateLimitError);
  expect((error as RateLimitError).code).toBe(code);
  return (error as RateLimitError).message;
}

describe('calendarPeriod', () => {
  it('defaults the time zone to UTC and a month to anchor day 1, and is frozen', () => {
    const day = calendarPeriod({ per: 'day' });
    expect(day).toEqual({ per: 'day', timeZone: 'UTC' });
    expect(Object.isFrozen(day)).toBe(true);
    expect(calendarPeriod({ per: 'month' })).toEqual({ per: 'month', timeZone: 'UTC', anchorDay: 1 });
    expect(calendarPeriod({ per: 'month', timeZone: 'Asia/Kathmandu', anchorDay: 31 })).toEqual({
      per: 'month',
      timeZone: 'Asia/Kathmandu',
      anchorDay: 31,
    });
  });

  it('keeps the time zone as the caller named it, in any case Intl takes', () => {
    const paris = calendarPeriod({ per: 'day', timeZone: 'europe/paris' });
    expect(paris.timeZone).toBe('europe/paris');
    expect(periodAt(Date.parse('2026-05-20T12:00:00Z'), paris)).toEqual({
      start: Date.parse('2026-05-20T00:00:00+02:00'),
      end: Date.parse('2026-05-21T00:00:00+02:00'),
    });
  });

  it.each(['Mars/Olympus', 'Europe/Pariss', 'UTC+1'])(
    'refuses the time zone %j, which Intl does not know',
    (timeZone) => {
      expect(errorOf(() => calendarPeriod({ per: 'day', timeZone }))).toBe(
        `ratecard: timeZone must be an IANA time zone name such as 'Europe/Paris', got ${JSON.stringify(timeZone)} (${timeZone.length} characters), which this runtime's Intl does not know`,
      );
    },
  );

  it.each(['+05:30', '-03:00'])('refuses the offset %j, which newer runtimes take and Node 20 does not', (timeZone) => {
    expect(errorOf(() => calendarPeriod({ per: 'day', timeZone }))).toBe(
      `ratecard: timeZone must be an IANA time zone name such as 'Europe/Paris', got "${timeZone}" (6 characters)`,
    );
  });

  it('refuses an empty time zone', () => {
    expect(errorOf(() => calendarPeriod({ per: 'day', timeZone: '' }))).toBe(
      `ratecard: timeZone must be an IANA time zone name such as 'Europe/Paris', got "" (0 characters)`,
    );
  });

  it('refuses a time zone that is not a string', () => {
    expect(errorOf(() => calendarPeriod({ per: 'day', timeZone: 42 as unknown as string }))).toBe(
      "ratecard: timeZone must be an IANA time zone name such as 'Europe/Paris', got 42",
    );
  });

  it.each([0, 32, -1, 1.5, Number.NaN, '15'])('refuses the anchor day %j', (anchorDay) => {
    expect(errorOf(() => calendarPeriod({ per: 'month', anchorDay: anchorDay as number }))).toMatch(
      /^ratecard: anchorDay must be a whole number from 1 to 31, got /,
    );
  });

  it('refuses an anchor day for a day or a week', () => {
    expect(errorOf(() => calendarPeriod({ per: 'day', anchorDay: 1 }))).toBe(
      "ratecard: anchorDay is for months only: a day starts at midnight; got anchorDay 1 with per 'day'",
    );
    expect(errorOf(() => calendarPeriod({ per: 'week', anchorDay: 15 }))).toBe(
      "ratecard: anchorDay is for months only: a week starts at midnight on Monday; got anchorDay 15 with per 'week'",
    );
  });

  it.each(['year', 'Day', undefined, 7])('refuses the period %j', (per) => {
    expect(errorOf(() => calendarPeriod({ per: per as 'day' }))).toMatch(
      /^ratecard: per must be 'day', 'week' or 'month', got /,
    );
  });

  it('refuses an unknown option, naming the one it most likely meant', () => {
    expect(errorOf(() => calendarPeriod({ per: 'day', timezone: 'UTC' } as CalendarPeriodOptions))).toBe(
      'ratecard: calendarPeriod got an unknown option "timezone"; did you mean "timeZone"? It takes per, timeZone, anchorDay',
    );
  });

  it('refuses options that are not an object', () => {
    expect(errorOf(() => calendarPeriod('day' as unknown as CalendarPeriodOptions))).toBe(
      'ratecard: calendarPeriod needs { per, timeZone?, anchorDay? }, got "day" (3 characters)',
    );
  });
});

describe('periodAt: days', () => {
  it('starts a day at local midnight and ends it at the next', () => {
    expectPeriod({ per: 'day' }, '2026-05-20T13:14:15.167Z', '2026-05-20T00:00:00Z', '2026-05-21T00:00:00Z');
    expectPeriod(
      { per: 'day', timeZone: 'America/New_York' },
      '2026-05-20T23:59:59.999-04:00',
      '2026-05-20T00:00:00-04:00',
      '2026-05-21T00:00:00-04:00',
    );
  });

  it('puts midnight itself in the day it starts, and the millisecond before in the day before', () => {
    const options = { per: 'day', timeZone: 'Europe/Paris' } as const;
    expectPeriod(options, '2026-05-20T00:00:00+02:00', '2026-05-20T00:00:00+02:00', '2026-05-21T00:00:00+02:00');
    expectPeriod(options, '2026-05-19T23:59:59.999+02:00', '2026-05-19T00:00:00+02:00', '2026-05-20T00:00:00+02:00');
  });

  it.each([
    // [zone, an instant of the day, its start, its end, its length]
    ['America/New_York', '2026-03-08T12:00:00-04:00', '2026-03-08T00:00:00-05:00', '2026-03-09T00:00:00-04:00', 23],
    ['America/New_York', '2026-11-01T01:30:00-05:00', '2026-11-01T00:00:00-04:00', '2026-11-02T00:00:00-05:00', 25],
    ['Europe/London', '2026-03-29T12:00:00+01:00', '2026-03-29T00:00:00+00:00', '2026-03-30T00:00:00+01:00', 23],
    ['Europe/London', '2026-10-25T01:30:00+00:00', '2026-10-25T00:00:00+01:00', '2026-10-26T00:00:00+00:00', 25],
    // The southern hemisphere: summer time ends in April and starts in October.
    ['Australia/Sydney', '2026-04-05T12:00:00+10:00', '2026-04-05T00:00:00+11:00', '2026-04-06T00:00:00+10:00', 25],
    ['Australia/Sydney', '2026-10-04T12:00:00+11:00', '2026-10-04T00:00:00+10:00', '2026-10-05T00:00:00+11:00', 23],
    // Lord Howe moves its clocks by half an hour.
    [
      'Australia/Lord_Howe',
      '2026-04-05T12:00:00+10:30',
      '2026-04-05T00:00:00+11:00',
      '2026-04-06T00:00:00+10:30',
      24.5,
    ],
    [
      'Australia/Lord_Howe',
      '2026-10-04T12:00:00+11:00',
      '2026-10-04T00:00:00+10:30',
      '2026-10-05T00:00:00+11:00',
      23.5,
    ],
    ['Pacific/Chatham', '2026-04-05T12:00:00+12:45', '2026-04-05T00:00:00+13:45', '2026-04-06T00:00:00+12:45', 25],
    ['Pacific/Chatham', '2026-09-27T12:00:00+13:45', '2026-09-27T00:00:00+12:45', '2026-09-28T00:00:00+13:45', 23],
  ])('gives %s on a day its clocks change (%s) its true length', (timeZone, at, start, end, hours) => {
    const bounds = expectPeriod({ per: 'day', timeZone }, at, start, end);
    expect(bounds.end - bounds.start).toBe(hours * HOUR);
  });

  it('measures a 23-hour day as 82 800 000 ms and a 25-hour day as 90 000 000 ms', () => {
    const period = calendarPeriod({ per: 'day', timeZone: 'America/New_York' });
    const spring = periodAt(Date.parse('2026-03-08T12:00:00-04:00'), period);
    const autumn = periodAt(Date.parse('2026-11-01T12:00:00-05:00'), period);
    expect(spring.end - spring.start).toBe(82_800_000);
    expect(autumn.end - autumn.start).toBe(90_000_000);
  });

  it.each([
    // [zone, an instant of the day, its first instant (the jump over midnight), its end]
    ['America/Santiago', '2022-09-11T12:00:00-03:00', '2022-09-11T01:00:00-03:00', '2022-09-12T00:00:00-03:00'],
    ['America/Havana', '2023-03-12T12:00:00-04:00', '2023-03-12T01:00:00-04:00', '2023-03-13T00:00:00-04:00'],
    ['Asia/Beirut', '2023-03-26T12:00:00+03:00', '2023-03-26T01:00:00+03:00', '2023-03-27T00:00:00+03:00'],
    // Nepal went from +05:30 to +05:45 at midnight: a day of 23 h 45 min that starts at 00:15.
    ['Asia/Kathmandu', '1986-01-01T12:00:00+05:45', '1986-01-01T00:15:00+05:45', '1986-01-02T00:00:00+05:45'],
  ])('starts the day %s skips midnight on (%s) at the jump, its first instant', (timeZone, at, start, end) => {
    const bounds = expectPeriod({ per: 'day', timeZone }, at, start, end);
    // The jump is itself midnight of the old offset, so the day before ends there, a whole day long.
    const before = periodAt(bounds.start - 1, calendarPeriod({ per: 'day', timeZone }));
    expect(before.end).toBe(bounds.start);
  });

  it('gives the days whose clocks go back at midnight 25 hours (Beirut, Santiago)', () => {
    const beirut = expectPeriod(
      { per: 'day', timeZone: 'Asia/Beirut' },
      '2023-10-28T23:30:00+02:00',
      '2023-10-28T00:00:00+03:00',
      '2023-10-29T00:00:00+02:00',
    );
    expect(beirut.end - beirut.start).toBe(25 * HOUR);
    const santiago = expectPeriod(
      { per: 'day', timeZone: 'America/Santiago' },
      '2023-04-01T23:30:00-04:00',
      '2023-04-01T00:00:00-03:00',
      '2023-04-02T00:00:00-04:00',
    );
    expect(santiago.end - santiago.start).toBe(25 * HOUR);
  });

  it.each([
    ['Asia/Kathmandu', '2026-06-15T00:10:00+05:45', '2026-06-15T00:00:00+05:45', '2026-06-16T00:00:00+05:45'],
    ['Asia/Kolkata', '2026-06-15T23:50:00+05:30', '2026-06-15T00:00:00+05:30', '2026-06-16T00:00:00+05:30'],
    ['Pacific/Chatham', '2026-06-15T00:10:00+12:45', '2026-06-15T00:00:00+12:45', '2026-06-16T00:00:00+12:45'],
    ['America/St_Johns', '2026-06-15T00:10:00-02:30', '2026-06-15T00:00:00-02:30', '2026-06-16T00:00:00-02:30'],
  ])('starts days at midnight in %s, whose offset is not whole hours', (timeZone, at, start, end) => {
    expectPeriod({ per: 'day', timeZone }, at, start, end);
  });

  it('ends the day before a skipped day where the day after it starts (Samoa skipped 2011-12-30)', () => {
    expectPeriod(
      { per: 'day', timeZone: 'Pacific/Apia' },
      '2011-12-29T23:59:59.999-10:00',
      '2011-12-29T00:00:00-10:00',
      '2011-12-31T00:00:00+14:00',
    );
    expectPeriod(
      { per: 'day', timeZone: 'Pacific/Apia' },
      '2011-12-31T00:00:00+14:00',
      '2011-12-31T00:00:00+14:00',
      '2012-01-01T00:00:00+14:00',
    );
  });

  it('handles the first instants of 1970 and dates up to the year 99,999', () => {
    expectPeriod(
      { per: 'day', timeZone: 'America/New_York' },
      '1970-01-01T00:00:00Z',
      '1969-12-31T00:00:00-05:00',
      '1970-01-01T00:00:00-05:00',
    );
    expectPeriod(
      { per: 'day', timeZone: 'Asia/Kathmandu' },
      '+010889-08-02T12:00:00Z',
      '+010889-08-02T00:00:00+05:45',
      '+010889-08-03T00:00:00+05:45',
    );
    expectPeriod({ per: 'day' }, '+099999-12-31T23:59:59.999Z', '+099999-12-31T00:00:00Z', '+100000-01-01T00:00:00Z');
  });

  it.each([-1, Date.UTC(100_000, 0, 1), Number.NaN, Number.POSITIVE_INFINITY])(
    'refuses the instant %s, outside 1970 to the year 99,999',
    (instant) => {
      expect(errorOf(() => periodAt(instant, calendarPeriod({ per: 'day' })), 'invalid_argument')).toMatch(
        /^ratecard: a calendar period's instant must be epoch milliseconds from 0 to 3093527980799999 \(the end of year 99,999\), got /,
      );
    },
  );

  it('refuses a period calendarPeriod did not make', () => {
    expect(errorOf(() => periodAt(0, { per: 'year' as 'day', timeZone: 'UTC' }), 'invalid_argument')).toBe(
      'ratecard: periodAt needs a period made by calendarPeriod, got per "year" (4 characters)',
    );
    expect(errorOf(() => periodAt(0, { per: 'day', timeZone: 'Mars/Olympus' }))).toMatch(/Mars\/Olympus/);
  });
});

describe('periodAt: weeks', () => {
  it('starts a week on Monday at midnight, across a year end', () => {
    expectPeriod({ per: 'week' }, '2026-01-01T12:00:00Z', '2025-12-29T00:00:00Z', '2026-01-05T00:00:00Z');
    expectPeriod({ per: 'week' }, '2025-12-29T00:00:00Z', '2025-12-29T00:00:00Z', '2026-01-05T00:00:00Z');
    expectPeriod({ per: 'week' }, '2026-01-04T23:59:59.999Z', '2025-12-29T00:00:00Z', '2026-01-05T00:00:00Z');
  });

  it('puts Sunday late at night in the week of the Monday before, in its own time zone', () => {
    expectPeriod(
      { per: 'week', timeZone: 'Asia/Kolkata' },
      '2026-05-24T23:30:00+05:30',
      '2026-05-18T00:00:00+05:30',
      '2026-05-25T00:00:00+05:30',
    );
  });

  it('gives a week with a daylight-saving change its true length', () => {
    const spring = expectPeriod(
      { per: 'week', timeZone: 'America/New_York' },
      '2026-03-08T23:59:59.999-04:00',
      '2026-03-02T00:00:00-05:00',
      '2026-03-09T00:00:00-04:00',
    );
    expect(spring.end - spring.start).toBe(7 * DAY - HOUR);
    const autumn = expectPeriod(
      { per: 'week', timeZone: 'Europe/London' },
      '2026-10-21T12:00:00+01:00',
      '2026-10-19T00:00:00+01:00',
      '2026-10-26T00:00:00+00:00',
    );
    expect(autumn.end - autumn.start).toBe(7 * DAY + HOUR);
  });

  it('ends the week at the next Monday, across the year 9999', () => {
    expectPeriod(
      { per: 'week', timeZone: 'Pacific/Chatham' },
      '9999-12-31T12:00:00Z',
      '9999-12-27T00:00:00+13:45',
      '+010000-01-03T00:00:00+13:45',
    );
  });
});

describe('periodAt: months', () => {
  it.each([
    // [anchor day, an instant, the period's start, its end], all in UTC
    [1, '2024-02-15T00:00:00Z', '2024-02-01T00:00:00Z', '2024-03-01T00:00:00Z'],
    [1, '2025-12-31T23:59:59.999Z', '2025-12-01T00:00:00Z', '2026-01-01T00:00:00Z'],
    [15, '2024-02-10T00:00:00Z', '2024-01-15T00:00:00Z', '2024-02-15T00:00:00Z'],
    [15, '2024-02-15T00:00:00Z', '2024-02-15T00:00:00Z', '2024-03-15T00:00:00Z'],
    [15, '2026-01-10T00:00:00Z', '2025-12-15T00:00:00Z', '2026-01-15T00:00:00Z'],
    // 2024 is a leap year: February has a 29th, and no 30th or 31st.
    [29, '2024-03-01T00:00:00Z', '2024-02-29T00:00:00Z', '2024-03-29T00:00:00Z'],
    [29, '2024-02-28T23:59:59.999Z', '2024-01-29T00:00:00Z', '2024-02-29T00:00:00Z'],
    [30, '2024-03-01T00:00:00Z', '2024-02-29T00:00:00Z', '2024-03-30T00:00:00Z'],
    [31, '2024-03-05T00:00:00Z', '2024-02-29T00:00:00Z', '2024-03-31T00:00:00Z'],
    [31, '2024-02-01T00:00:00Z', '2024-01-31T00:00:00Z', '2024-02-29T00:00:00Z'],
    // 2025 is not: the 28th stands for the 29th, 30th and 31st, and March starts on the anchor again.
    [29, '2025-02-28T12:00:00Z', '2025-02-28T00:00:00Z', '2025-03-29T00:00:00Z'],
    [29, '2025-02-27T23:59:59.999Z', '2025-01-29T00:00:00Z', '2025-02-28T00:00:00Z'],
    [30, '2025-02-15T00:00:00Z', '2025-01-30T00:00:00Z', '2025-02-28T00:00:00Z'],
    [30, '2025-03-29T00:00:00Z', '2025-02-28T00:00:00Z', '2025-03-30T00:00:00Z'],
    [31, '2025-03-05T00:00:00Z', '2025-02-28T00:00:00Z', '2025-03-31T00:00:00Z'],
    [31, '2025-02-01T00:00:00Z', '2025-01-31T00:00:00Z', '2025-02-28T00:00:00Z'],
    [31, '2025-05-01T00:00:00Z', '2025-04-30T00:00:00Z', '2025-05-31T00:00:00Z'],
    // 2100 is not a leap year (divisible by 100); 2000 was (divisible by 400).
    [29, '2100-03-01T00:00:00Z', '2100-02-28T00:00:00Z', '2100-03-29T00:00:00Z'],
    [29, '2000-03-01T00:00:00Z', '2000-02-29T00:00:00Z', '2000-03-29T00:00:00Z'],
    [1, '9999-12-31T23:59:59.999Z', '9999-12-01T00:00:00Z', '+010000-01-01T00:00:00Z'],
  ])('starts a month of anchor day %i at %s on %s', (anchorDay, at, start, end) => {
    expectPeriod({ per: 'month', anchorDay }, at, start, end);
  });

  it('gives a month with a daylight-saving change its true length', () => {
    const march = expectPeriod(
      { per: 'month', timeZone: 'America/New_York' },
      '2026-03-08T12:00:00-04:00',
      '2026-03-01T00:00:00-05:00',
      '2026-04-01T00:00:00-04:00',
    );
    expect(march.end - march.start).toBe(31 * DAY - HOUR);
    const autumn = expectPeriod(
      { per: 'month', timeZone: 'America/New_York', anchorDay: 15 },
      '2026-11-01T12:00:00-05:00',
      '2026-10-15T00:00:00-04:00',
      '2026-11-15T00:00:00-05:00',
    );
    expect(autumn.end - autumn.start).toBe(31 * DAY + HOUR);
    expectPeriod(
      { per: 'month', timeZone: 'Australia/Sydney', anchorDay: 31 },
      '2026-04-15T12:00:00+10:00',
      '2026-03-31T00:00:00+11:00',
      '2026-04-30T00:00:00+10:00',
    );
  });

  it('starts a month on an anchor day whose midnight is skipped at the jump', () => {
    expectPeriod(
      { per: 'month', timeZone: 'America/Santiago', anchorDay: 11 },
      '2022-09-20T12:00:00-03:00',
      '2022-09-11T01:00:00-03:00',
      '2022-10-11T00:00:00-03:00',
    );
  });
});

describe('CurrentPeriod', () => {
  it('keeps the period until an instant falls outside it, then computes the one it falls in', () => {
    const current = new CurrentPeriod(calendarPeriod({ per: 'day', timeZone: 'America/New_York' }));
    const first = current.at(Date.parse('2026-03-08T12:00:00-04:00'));
    expect(current.at(Date.parse('2026-03-08T23:59:59.999-04:00'))).toBe(first);
    expect(current.at(first.start)).toBe(first);
    const next = current.at(first.end);
    expect(next).toEqual(periodAt(first.end, current.period));
    expect(next.start).toBe(first.end);
    // A clock stepped back: the day before is computed again.
    expect(current.at(first.end - 1)).toEqual(first);
  });

  it('refuses an instant periodAt refuses', () => {
    const current = new CurrentPeriod(calendarPeriod({ per: 'day' }));
    expect(errorOf(() => current.at(Number.NaN), 'invalid_argument')).toMatch(/got NaN$/);
  });
});

/**
 * Zones for the properties of lengths: daylight-saving in both hemispheres, offsets of half and quarter hours, clocks
 * that jump over midnight, and Lord Howe's half-hour change. Not Samoa or Kiribati, whose skipped days make a week of 6.
 */
const ZONES = [
  'UTC',
  'America/New_York',
  'America/St_Johns',
  'America/Santiago',
  'America/Havana',
  'America/Sao_Paulo',
  'Europe/London',
  'Europe/Moscow',
  'Africa/Casablanca',
  'Asia/Beirut',
  'Asia/Tehran',
  'Asia/Kolkata',
  'Asia/Kathmandu',
  'Australia/Sydney',
  'Australia/Lord_Howe',
  'Pacific/Chatham',
] as const;

/** Instants from March 1970 (so a period's start, and the millisecond before it, are never before 1970) to 9999. */
const instant = fc.oneof(
  fc.integer({ min: Date.UTC(1970, 2, 1), max: Date.UTC(2040, 0, 1) }),
  fc.integer({ min: Date.UTC(1970, 2, 1), max: Date.UTC(10_000, 0, 1) - 1 }),
);
const options = fc.oneof(
  fc.record({ per: fc.constantFrom('day' as const, 'week' as const) }),
  fc.record({ per: fc.constant('month' as const), anchorDay: fc.integer({ min: 1, max: 31 }) }),
);

describe('periodAt: properties', () => {
  it('holds the instant, is the same from its start, and meets the periods before and after it, in every zone', () => {
    fc.assert(
      fc.property(instant, fc.constantFrom(...Intl.supportedValuesOf('timeZone')), options, (at, timeZone, shape) => {
        const period = calendarPeriod({ ...shape, timeZone });
        const bounds = periodAt(at, period);
        expect(bounds.start).toBeLessThanOrEqual(at);
        expect(bounds.end).toBeGreaterThan(at);
        expect(periodAt(bounds.start, period)).toEqual(bounds);
        expect(periodAt(bounds.end, period).start).toBe(bounds.end);
        expect(periodAt(bounds.start - 1, period).end).toBe(bounds.start);
      }),
      { numRuns: 500 },
    );
  });

  // Give or take two hours, not one: Newfoundland's double summer time of 1988 (UTC-1:30) began and ended with a step
  // of two hours, so America/St_Johns has a week from 1988-03-28 and a month from 1988-10-01 two hours off. Walking
  // every week and month of these zones from 1970 to 2045 finds no larger step.
  it('lasts a day of 22 to 26 hours, a week of 7 days and a month of 28 to 31 days, give or take two hours', () => {
    fc.assert(
      fc.property(instant, fc.constantFrom(...ZONES), options, (at, timeZone, shape) => {
        const bounds = periodAt(at, calendarPeriod({ ...shape, timeZone }));
        const length = bounds.end - bounds.start;
        if (shape.per === 'day') {
          expect(length).toBeGreaterThanOrEqual(22 * HOUR);
          expect(length).toBeLessThanOrEqual(26 * HOUR);
        } else if (shape.per === 'week') {
          expect(Math.abs(length - 7 * DAY)).toBeLessThanOrEqual(2 * HOUR);
        } else {
          expect(length).toBeGreaterThanOrEqual(28 * DAY - 2 * HOUR);
          expect(length).toBeLessThanOrEqual(31 * DAY + 2 * HOUR);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("gives Newfoundland's double summer time of 1988 a week and a month two hours off", () => {
    const week = periodAt(Date.UTC(1988, 3, 1), calendarPeriod({ per: 'week', timeZone: 'America/St_Johns' }));
    expect(week.end - week.start).toBe(7 * DAY - 2 * HOUR);
    const month = periodAt(Date.UTC(1988, 9, 15), calendarPeriod({ per: 'month', timeZone: 'America/St_Johns' }));
    expect([new Date(month.start).toISOString(), month.end - month.start]).toEqual([
      '1988-10-01T01:30:00.000Z',
      31 * DAY + 2 * HOUR,
    ]);
  });

  it('gives a year on Lord Howe Island (whose summer time is half an hour since 1986) a day of 23.5 hours and one of 24.5', () => {
    const period = calendarPeriod({ per: 'day', timeZone: 'Australia/Lord_Howe' });
    fc.assert(
      fc.property(fc.integer({ min: 1986, max: 9998 }), (year) => {
        const lengths = new Map<number, number>();
        const end = Date.UTC(year + 1, 0, 1);
        for (let at = Date.UTC(year, 0, 1); at < end; at = periodAt(at, period).end) {
          const bounds = periodAt(at, period);
          lengths.set(bounds.end - bounds.start, (lengths.get(bounds.end - bounds.start) ?? 0) + 1);
        }
        expect(lengths.get(23.5 * HOUR)).toBe(1);
        expect(lengths.get(24.5 * HOUR)).toBe(1);
        expect(lengths.size).toBe(3);
      }),
      { numRuns: 20 },
    );
  });
});
