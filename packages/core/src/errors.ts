/**
 * Every error ratecard raises. Branch on `code`, never on the message: codes are stable across versions and are
 * listed in docs/errors.md.
 */
export type RateLimitErrorCode =
  | 'invalid_argument'
  | 'invalid_option'
  | 'unknown_plan'
  | 'cost_exceeds_limit'
  | 'store_unavailable'
  | 'store_timeout'
  | 'store_closed';

/** The one error class ratecard throws; its `code` says which error it is. */
export class RateLimitError extends Error {
  /** Stable across versions: branch on it. */
  readonly code: RateLimitErrorCode;

  constructor(code: RateLimitErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RateLimitError';
    this.code = code;
  }
}

/** Renders a caller's value for an error message without dumping huge or hostile strings. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') {
    // Counted in code points, as the bounds on names are, so an emoji is one character and is never cut in half.
    let characters = 0;
    let shownEnd = 0;
    for (const character of value) if (++characters <= 40) shownEnd += character.length;
    const shown = characters > 40 ? `${value.slice(0, shownEnd)}…` : value;
    return `${JSON.stringify(shown)} (${characters} ${characters === 1 ? 'character' : 'characters'})`;
  }
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : String(value);
}
