import { describeValue, RateLimitError } from './errors.js';

export type EndpointMode = 'enforce' | 'shadow';

/** The spec's rate-limit rules: only `POST /browsers` enforces; the others run in shadow mode (counted, never 429). */
export const DEFAULT_ENDPOINTS: Readonly<Record<string, EndpointMode>> = Object.freeze({
  'POST /browsers': 'enforce',
  'POST /browser-pools': 'shadow',
  'PUT /browser-pools/:id': 'shadow',
  'POST /invocations': 'shadow',
});

export interface EndpointRule {
  /** The rule key as configured, e.g. `'PUT /browser-pools/:id'`; buckets are named by it. */
  readonly key: string;
  readonly mode: EndpointMode;
  readonly method: string;
  /** Path segments after normalisation; `null` stands for a `:name` parameter. */
  readonly segments: readonly (string | null)[];
}

const RULE_KEY = /^([A-Z]+) (\/\S*)$/;

/**
 * Literal path segments compare case-insensitively and with `_` and `-` as one character, so a client cannot dodge
 * `POST /browser-pools` by writing `/browser_pools` or `/Browser-Pools` on servers that route those to the same place.
 */
function normalizeSegment(segment: string): string {
  return segment.toLowerCase().replaceAll('_', '-');
}

/** The non-empty segments of a path, without query string, fragment or trailing slash. */
function pathSegments(path: string): string[] {
  let end = path.length;
  const query = path.indexOf('?');
  if (query !== -1) end = query;
  const fragment = path.indexOf('#');
  if (fragment !== -1 && fragment < end) end = fragment;
  return path
    .slice(0, end)
    .split('/')
    .filter((segment) => segment.length > 0);
}

function compileRule(key: string, mode: unknown): EndpointRule {
  const match = RULE_KEY.exec(key);
  if (match === null || match[1] === undefined || match[2] === undefined) {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: endpoint rule keys look like 'POST /browsers' or 'PUT /browser-pools/:id', got ${describeValue(key)}`,
    );
  }
  if (mode !== 'enforce' && mode !== 'shadow') {
    throw new RateLimitError(
      'invalid_option',
      `ratecard: endpoint rule ${key} must be 'enforce' or 'shadow', got ${describeValue(mode)}`,
    );
  }
  const segments = pathSegments(match[2]).map((segment) =>
    segment.startsWith(':') && segment.length > 1 ? null : normalizeSegment(segment),
  );
  return { key, mode, method: match[1], segments };
}

/** The compiled rule set of a limiter: exact lookup by rule key first, then pattern matching. */
export class EndpointRules {
  private readonly byKey = new Map<string, EndpointRule>();
  private readonly all: EndpointRule[] = [];

  constructor(endpoints: Readonly<Record<string, EndpointMode>>) {
    if (typeof endpoints !== 'object' || endpoints === null || Array.isArray(endpoints)) {
      throw new RateLimitError(
        'invalid_option',
        `ratecard: endpoints must be an object of rules, got ${describeValue(endpoints)}`,
      );
    }
    for (const [key, mode] of Object.entries(endpoints)) {
      const rule = compileRule(key, mode);
      const clash = this.all.find(
        (other) =>
          other.method === rule.method &&
          other.segments.length === rule.segments.length &&
          other.segments.every((segment, i) => segment === rule.segments[i]),
      );
      if (clash !== undefined) {
        throw new RateLimitError(
          'invalid_option',
          `ratecard: endpoint rules ${clash.key} and ${key} match the same paths`,
        );
      }
      this.byKey.set(key, rule);
      this.all.push(rule);
    }
  }

  /** Every rule, in the order given. */
  get rules(): readonly EndpointRule[] {
    return this.all;
  }

  /**
   * The rule for an endpoint string: a rule key itself (the fast path), or a concrete `'<METHOD> <path>'` such as
   * `'PUT /browser_pools/abc?x=1'` matched against the patterns.
   */
  forEndpoint(endpoint: string): EndpointRule | undefined {
    const exact = this.byKey.get(endpoint);
    if (exact !== undefined) return exact;
    const space = endpoint.indexOf(' ');
    if (space <= 0) return undefined;
    return this.forRequest(endpoint.slice(0, space), endpoint.slice(space + 1));
  }

  /** The rule for an HTTP method and request path (query string, trailing slash and spelling ignored). */
  forRequest(method: string, path: string): EndpointRule | undefined {
    const upper = method.toUpperCase();
    const segments = pathSegments(path);
    for (const rule of this.all) {
      if (rule.method !== upper || rule.segments.length !== segments.length) continue;
      let matches = true;
      for (let i = 0; i < segments.length; i++) {
        const expected = rule.segments[i];
        if (expected !== null && expected !== normalizeSegment(segments[i] as string)) {
          matches = false;
          break;
        }
      }
      if (matches) return rule;
    }
    return undefined;
  }
}
