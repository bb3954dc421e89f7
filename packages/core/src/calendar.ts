/**
 * Calendar periods for quotas: for an instant, the day, week (from Monday) or month (from an anchor day) it falls in,
 * in a time zone, as the epoch milliseconds it starts at and the next one starts at. A period starts at local
 * midnight, or, where the clocks jump over midnight, at the jump: the first instant of that local day.
 *
 * Built on the platform's Intl.DateTimeFormat alone, which every runtime core runs on has with the IANA time zone
 * data (Node, Bun, Deno, browsers, workerd). Intl reads an instant's local date and time; it cannot answer "at which
 * instant is it midnight here", so startOfDay solves for that from the offsets on either side of midnight, as
 * Temporal's polyfill does, and finds the jump by halving where midnight is skipped. That is all the time zone
 * arithmetic here; the rest is dates, where Date.UTC is the calendar. No offsets or rules of our own.
 *
 * Considered and not taken, each measured on a module computing the same day, week and month periods (esbuild
 * --bundle --minify, then gzip -9; against core's index at 29.1 kB, 10.1 kB gzipped; Node 20, a shared 2-core machine):
 * - @js-temporal/polyfill 0.5.1: PlainDate#toZonedDateTime (the start of a day) and add({ months: 1 }) state the
 *   rules most plainly, but it adds 153 kB, 44 kB gzipped, four times core, and it also reads zones through Intl.
 *   An uncached call took 45 to 61 µs.
 * - @date-fns/tz 1.5.0 with date-fns 4.4.0: its TZDate starts days right where midnight is skipped, and would save
 *   wallClock and startOfDay below, some 30 lines; the anchor-day months take as many lines with it as here. It adds
 *   6.4 kB, 2.3 kB gzipped, and two dependencies, and an uncached call took 42 µs (a day) to 148 µs (a month).
 * This module adds 2.8 kB, 1.05 kB gzipped.
 *
 * Cost on Node 20, a shared 2-core machine, in UTC, America/New_York and Asia/Kathmandu, per day, week and month: a
 * scratch loop of 20,000 periodAt calls at instants 1,000,003 ms apart took 27 to 30 µs a call, seven formatToParts
 * reads of some 3.5 µs each and their arrays; one of 20 million CurrentPeriod#at calls 1 ms apart, which keeps the
 * period until an instant falls outside it, 2.3 to 4.3 ns. A limiter that keeps a CurrentPeriod per quota pays the
 * 30 µs once a period. (Intl's format() and a regular expression over its text would read three times as fast, but
 * that leans on the en-US pattern staying what it is; formatToParts names every field.)
 */
import { describeValue, RateLimitError } from './errors.js';
import { checkOptionKeys } from './options.js';

/** Options of `calendarPeriod`, as a quota takes them. */
export interface CalendarPeriodOptions {
  /** A day from midnight, a week from Monday's midnight, or a month from `anchorDay`'s midnight. */
  per: 'day' | 'week' | 'month';
  /** The IANA time zone whose midnights start the periods, as 'Europe/Paris'; default 'UTC'. */
  timeZone?: string;
  /** Months only: the day of the month each period starts on, 1 to 31, the last day of a shorter month; default 1. */
  anchorDay?: number;
}

/** Every key of CalendarPeriodOptions: calendarPeriod refuses any other. */
const CALENDAR_PERIOD_OPTIONS = { per: true, timeZone: true, anchorDay: true } satisfies Record<
  keyof CalendarPeriodOptions,
  true
>;

/** A calendar period made by `calendarPeriod`: checked and frozen. */
export interface CalendarPeriod {
  /** A day, a week from Monday, or a month from the anchor day. */
  readonly per: 'day' | 'week' | 'month';
  /**
   * The time zone as the options named it. Not as Intl resolves it: that name differs between runtimes (Node 20 turns
   * 'Asia/Kathmandu' into 'Asia/Katmandu', newer ones keep it), and the caller's is the one they read back.
   */
  readonly timeZone: string;
  /** Set for months only (default 1). */
  readonly anchorDay?: number;
}

/** One period of a calendar, in epoch milliseconds: `start` is in it, `end` is the next period's start. */
export interface PeriodBounds {
  /** The first instant of the period, epoch ms. */
  readonly start: number;
  /** The first instant of the next period, epoch ms. */
  readonly end: number;
}

const DAY_MS = 86_400_000;
/**
 * The last instant periodAt takes: the end of year 99,999. Past the year 10,889 a store keeps instants to, and far
 * short of the year 275,760 where Date stops. The first is 0, in 1970: a limiter's clock is never earlier, and before
 * 1583 Intl's Gregorian calendar turns Julian.
 */
const MAX_INSTANT_MS = Date.UTC(100_000, 0, 1) - 1;

function badOption(message: string): RateLimitError {
  return new RateLimitError('invalid_option', `ratecard: ${message}`);
}

/**
 * A calendar period, checked once where it is made: `per` is 'day', 'week' or 'month'; `timeZone` a time zone this
 * runtime's Intl knows by its IANA name; `anchorDay` a whole number from 1 to 31, for months only.
 */
export function calendarPeriod(options: CalendarPeriodOptions): CalendarPeriod {
  if (typeof options !== 'object' || options === null) {
    throw badOption(`calendarPeriod needs { per, timeZone?, anchorDay? }, got ${describeValue(options)}`);
  }
  checkOptionKeys(options, CALENDAR_PERIOD_OPTIONS, 'calendarPeriod');
  const { per, anchorDay } = options;
  if (per !== 'day' && per !== 'week' && per !== 'month') {
    throw badOption(`per must be 'day', 'week' or 'month', got ${describeValue(per)}`);
  }
  const timeZone = options.timeZone ?? 'UTC';
  const format = zoneFormat(timeZone);
  let period: CalendarPeriod;
  if (per !== 'month') {
    if (anchorDay !== undefined) {
      throw badOption(
        `anchorDay is for months only: a ${per} starts at midnight${per === 'week' ? ' on Monday' : ''}; got anchorDay ${describeValue(anchorDay)} with per '${per}'`,
      );
    }
    period = Object.freeze({ per, timeZone });
  } else {
    if (anchorDay !== undefined && (!Number.isInteger(anchorDay) || anchorDay < 1 || anchorDay > 31)) {
      throw badOption(`anchorDay must be a whole number from 1 to 31, got ${describeValue(anchorDay)}`);
    }
    period = Object.freeze({ per, timeZone, anchorDay: anchorDay ?? 1 });
  }
  formats.set(period, format);
  return period;
}

/**
 * The formatter of each period calendarPeriod made, for periodAt: making one takes some 70 µs, more than two periodAt
 * calls, so it is made once, with the period, and goes when the period does. A period made elsewhere (by hand, or by
 * another copy of this module) gets a new one each call.
 */
const formats = new WeakMap<CalendarPeriod, Intl.DateTimeFormat>();

/** The formatter that reads local dates and times in `timeZone`; throws invalid_option for a zone Intl does not know. */
function zoneFormat(timeZone: unknown): Intl.DateTimeFormat {
  // Newer runtimes also take offsets ('+05:30') where Node 20 refuses them: refused everywhere, a configuration that
  // works on one runtime works on all.
  if (typeof timeZone !== 'string' || !/^[A-Za-z]/.test(timeZone)) {
    throw badOption(`timeZone must be an IANA time zone name such as 'Europe/Paris', got ${describeValue(timeZone)}`);
  }
  let format: Intl.DateTimeFormat;
  try {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      calendar: 'gregory',
      numberingSystem: 'latn',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      hourCycle: 'h23',
    });
  } catch (error) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: timeZone must be an IANA time zone name such as 'Europe/Paris', got ${describeValue(timeZone)}, which this runtime's Intl does not know`,
      { cause: error },
    );
  }
  return format;
}

/**
 * The local date and time at `instantMs` as the epoch milliseconds a UTC clock reads when it shows the same: the
 * instant plus the zone's offset then. Intl shows whole seconds, so it reads the instant's second and adds the
 * milliseconds back; offsets change on whole seconds only.
 */
function wallClock(format: Intl.DateTimeFormat, instantMs: number): number {
  const second = Math.floor(instantMs / 1000) * 1000;
  const fields = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of format.formatToParts(second)) {
    if (Object.hasOwn(fields, part.type)) fields[part.type as keyof typeof fields] = Number(part.value);
  }
  const shown = Date.UTC(fields.year, fields.month - 1, fields.day, fields.hour, fields.minute, fields.second);
  return shown + (instantMs - second);
}

/**
 * The first instant of a local day, given as days since 1970-01-01: the instant local midnight is at, or, where the
 * clocks jump over midnight, the jump. The offsets a day before and a day after local midnight are the offsets in
 * force on either side of any change near it (as Temporal's polyfill finds them); midnight minus each is a candidate,
 * and the earlier one that shows midnight is it (the earlier, should the clocks show midnight twice).
 */
function startOfDay(format: Intl.DateTimeFormat, day: number): number {
  const midnight = day * DAY_MS;
  const early = midnight - (wallClock(format, midnight - DAY_MS) - (midnight - DAY_MS));
  const late = midnight - (wallClock(format, midnight + DAY_MS) - (midnight + DAY_MS));
  let before = Math.min(early, late);
  let after = Math.max(early, late);
  if (wallClock(format, before) === midnight) return before;
  if (wallClock(format, after) === midnight) return after;
  // Neither shows midnight: the clocks jumped over it, from before midnight at `before` to after it at `after`. The
  // day starts at the jump, the first instant showing a time past midnight, found by halving (some 22 reads, on a day
  // that comes at most twice a year in the few zones that move their clocks at midnight).
  while (after - before > 1) {
    const middle = Math.floor((before + after) / 2);
    if (wallClock(format, middle) < midnight) before = middle;
    else after = middle;
  }
  return after;
}

/**
 * The day, as days since 1970-01-01, a month's period starts on: its `anchorDay`th, or its last day if it has fewer.
 * `month` counts from 0 and may be -1 or 12: Date.UTC carries it into the year before or after.
 */
function anchorIn(year: number, month: number, anchorDay: number): number {
  return Math.min(Date.UTC(year, month, anchorDay), Date.UTC(year, month + 1, 0)) / DAY_MS;
}

/**
 * The period of `period` that `instantMs` falls in: the instant it starts at and the next one starts at. `period` is
 * one `calendarPeriod` made. Throws invalid_argument for an instant outside 0 to the end of year 99,999.
 */
export function periodAt(instantMs: number, period: CalendarPeriod): PeriodBounds {
  if (!(instantMs >= 0 && instantMs <= MAX_INSTANT_MS)) {
    throw new RateLimitError(
      'invalid_argument',
      `ratecard: a calendar period's instant must be epoch milliseconds from 0 to ${MAX_INSTANT_MS} (the end of year 99,999), got ${describeValue(instantMs)}`,
    );
  }
  const format = formats.get(period) ?? zoneFormat(period.timeZone);
  // Local dates from here on, as days since 1970-01-01.
  const today = Math.floor(wallClock(format, instantMs) / DAY_MS);
  let first: number;
  let next: number;
  if (period.per === 'day') {
    first = today;
    next = today + 1;
  } else if (period.per === 'week') {
    // 1970-01-01 was a Thursday, 3 days after a Monday.
    first = today - ((((today + 3) % 7) + 7) % 7);
    next = first + 7;
  } else if (period.per === 'month') {
    // Each month's start is found from the anchor, never from the previous start: anchor 31 starts on February 28
    // and again on March 31.
    const date = new Date(today * DAY_MS);
    const [year, month, anchorDay] = [date.getUTCFullYear(), date.getUTCMonth(), period.anchorDay ?? 1];
    const thisMonth = anchorIn(year, month, anchorDay);
    if (today >= thisMonth) {
      first = thisMonth;
      next = anchorIn(year, month + 1, anchorDay);
    } else {
      first = anchorIn(year, month - 1, anchorDay);
      next = thisMonth;
    }
  } else {
    throw new RateLimitError(
      'invalid_argument',
      `ratecard: periodAt needs a period made by calendarPeriod, got per ${describeValue(period.per)}`,
    );
  }
  return Object.freeze({ start: startOfDay(format, first), end: startOfDay(format, next) });
}

/** No instant is in it: the first call of a CurrentPeriod computes. */
const NO_PERIOD: PeriodBounds = Object.freeze({ start: 0, end: 0 });

/**
 * The period of one calendar that is in force, kept until an instant falls outside it: a quota's decisions ask it
 * with the time of each, and all but the first of a period cost two comparisons instead of periodAt's Intl reads.
 * An instant before the kept period (a clock stepped back) is computed again, as is one past its end.
 */
export class CurrentPeriod {
  private bounds: PeriodBounds = NO_PERIOD;

  /** @param period The calendar whose period in force this keeps. */
  constructor(readonly period: CalendarPeriod) {}

  /** The period `instantMs` falls in: periodAt(instantMs, period), from the kept one where it falls in that. */
  at(instantMs: number): PeriodBounds {
    const bounds = this.bounds;
    if (instantMs >= bounds.start && instantMs < bounds.end) return bounds;
    this.bounds = periodAt(instantMs, this.period);
    return this.bounds;
  }
}
