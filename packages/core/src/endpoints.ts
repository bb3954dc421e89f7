import { describeValue, RateLimitError } from './errors.js';
import { configuredLimits, isLimit, type Limit, type Limits } from './limits.js';

/** `'enforce'`: a limited request is refused (429); `'shadow'`: it is counted and reported, never refused. */
export type EndpointMode = 'enforce' | 'shadow';

/** The spec's rate-limit rules: only `POST /browsers` enforces; the others run in shadow mode (counted, never 429). */
export const DEFAULT_ENDPOINTS: Readonly<Record<string, EndpointMode>> = Object.freeze({
  'POST /browsers': 'enforce',
  'POST /browser-pools': 'shadow',
  'PUT /browser-pools/:id': 'shadow',
  'POST /invocations': 'shadow',
});

/** The key of the catch-all rule: a request carrying own limits where no rule matches is counted under it. */
const CATCH_ALL = 'ALL /*';

/** The rules of a limiter given own `plans` or `limits` and no `endpoints`: every request, one bucket per key. */
export const EVERY_ENDPOINT: Readonly<Record<string, EndpointMode>> = Object.freeze({ [CATCH_ALL]: 'enforce' });

/** A rule's own limits: the same for every plan, or per plan (a plan not named keeps its plan's limits). */
export type EndpointLimits = Limits | Readonly<Record<string, Limits>>;

/**
 * What a rule says: a mode (the plan's limits apply), limits of its own (enforced), or both. Keys are
 * `'<METHOD> <path>'`: `:name` matches one segment, a last segment `*` any number of them (none included), and the
 * method `ALL` any method.
 */
export type EndpointSpec =
  | EndpointMode
  | Limits
  | {
      /** Default `'enforce'`. */
      mode?: EndpointMode;
      /** The rule's own limits; without them the plan's limits apply. */
      limits?: EndpointLimits;
    };

/** An endpoint rule as the limiter holds it, parsed from its key and checked: what `limiter.rules` lists. */
export interface EndpointRule {
  /** The rule key as configured, e.g. `'PUT /browser-pools/:id'`; buckets are named by it. */
  readonly key: string;
  /** Whether a limited request is refused or only reported. */
  readonly mode: EndpointMode;
  /** An upper-case method, or 'ALL'. */
  readonly method: string;
  /** Path segments after normalisation; `null` stands for a `:name` parameter. */
  readonly segments: readonly (string | null)[];
  /** The path ended in `/*`: the segments are a prefix. */
  readonly wildcard: boolean;
  /** The rule's own limits for every plan, if it states them. */
  readonly limits: readonly Limit[] | undefined;
  /** The rule's own limits per plan, if it states them so. */
  readonly planLimits: ReadonlyMap<string, readonly Limit[]> | undefined;
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

function notARequestTarget(method: unknown, path: unknown): RateLimitError {
  return new RateLimitError(
    'invalid_argument',
    `ratecard: ruleFor takes a method and a path, two strings such as 'POST' and '/browsers', got ${describeValue(method)} and ${describeValue(path)}`,
  );
}

function notAnEndpoint(endpoint: string): RateLimitError {
  return new RateLimitError(
    'invalid_argument',
    `ratecard: endpoint must be a rule key or '<METHOD> <path>' such as 'POST /browsers', got ${describeValue(endpoint)}`,
  );
}

function badRule(message: string): RateLimitError {
  return new RateLimitError('invalid_option', `ratecard: ${message}`);
}

/** The mode and own limits a rule's value states. */
function readSpec(
  key: string,
  spec: unknown,
  plans: ReadonlySet<string>,
): Pick<EndpointRule, 'mode' | 'limits' | 'planLimits'> {
  if (spec === 'enforce' || spec === 'shadow') return { mode: spec, limits: undefined, planLimits: undefined };
  if (isLimit(spec) || Array.isArray(spec)) {
    return {
      mode: 'enforce',
      limits: configuredLimits(spec, `endpoint rule ${key}`),
      planLimits: undefined,
    };
  }
  if (typeof spec !== 'object' || spec === null || Object.keys(spec).some((k) => k !== 'mode' && k !== 'limits')) {
    throw badRule(
      `endpoint rule ${key} must be 'enforce', 'shadow', a limit, an array of limits or { mode?, limits? }, got ${describeValue(spec)}`,
    );
  }
  const { mode = 'enforce', limits } = spec as { mode?: unknown; limits?: unknown };
  if (mode !== 'enforce' && mode !== 'shadow') {
    throw badRule(`endpoint rule ${key}'s mode must be 'enforce' or 'shadow', got ${describeValue(mode)}`);
  }
  if (limits === undefined) return { mode, limits: undefined, planLimits: undefined };
  if (isLimit(limits) || Array.isArray(limits)) {
    return { mode, limits: configuredLimits(limits, `endpoint rule ${key}`), planLimits: undefined };
  }
  if (typeof limits !== 'object' || limits === null) {
    throw badRule(
      `endpoint rule ${key}'s limits must be a limit, an array of limits or limits per plan, got ${describeValue(limits)}`,
    );
  }
  const planLimits = new Map<string, readonly Limit[]>();
  for (const [plan, value] of Object.entries(limits)) {
    if (!plans.has(plan)) {
      throw new RateLimitError(
        'unknown_plan',
        `ratecard: endpoint rule ${key} names plan ${describeValue(plan)}; the plans are ${[...plans].join(', ')}`,
      );
    }
    planLimits.set(plan, configuredLimits(value, `endpoint rule ${key} for plan ${plan}`));
  }
  return { mode, limits: undefined, planLimits };
}

function compileRule(key: string, spec: unknown, plans: ReadonlySet<string>): EndpointRule {
  const match = RULE_KEY.exec(key);
  if (match === null || match[1] === undefined || match[2] === undefined) {
    throw badRule(
      `endpoint rule keys look like 'POST /browsers', 'PUT /browser-pools/:id', 'ALL /api/*', got ${describeValue(key)}`,
    );
  }
  const raw = pathSegments(match[2]);
  const wildcard = raw.at(-1) === '*';
  if (wildcard) raw.pop();
  if (raw.some((segment) => segment.includes('*'))) {
    throw badRule(`endpoint rule ${key}: '*' may only stand as the whole last segment, as in 'ALL /api/*'`);
  }
  const segments = raw.map((segment) =>
    segment.startsWith(':') && segment.length > 1 ? null : normalizeSegment(segment),
  );
  return { key, method: match[1], segments, wildcard, ...readSpec(key, spec, plans) };
}

/**
 * Rules without a wildcard, that name a method, with more segments, then with more literal segments (`/users/me`
 * before `/users/:id`) are tried first: the most specific wins, whatever the order given.
 */
function specificity(rule: EndpointRule): number {
  const literals = rule.segments.filter((segment) => segment !== null).length;
  return (
    (rule.wildcard ? 0 : 1_000_000_000) +
    (rule.method === 'ALL' ? 0 : 1_000_000) +
    rule.segments.length * 1_000 +
    literals
  );
}

/** What EndpointRules.matched keeps for an endpoint no rule matches. */
const NO_RULE = Symbol('no rule');
/** How many matched endpoints EndpointRules keeps. */
const MATCHED_BOUND = 4_096;
/**
 * The longest endpoint EndpointRules keeps, in UTF-16 units: any endpoint a request may name (256 characters, each one
 * or two units). A request target may run to kilobytes (a query string), and 4 096 of them would hold megabytes; one
 * this long is matched every time instead.
 */
const KEPT_LENGTH = 512;

/** The compiled rule set of a limiter: exact lookup by rule key first, then pattern matching. */
export class EndpointRules {
  private readonly byKey = new Map<string, EndpointRule>();
  private readonly all: EndpointRule[] = [];
  /** The rules in the order they are tried. */
  private readonly tried: EndpointRule[];
  /**
   * Concrete endpoints and requests' methods and paths matched before, as `'<METHOD> <path>'` (a rule, or NO_RULE):
   * a limiter given `'POST /browsers'` under `'ALL /*'`, or the http middleware's `ruleFor` of each request, asks for
   * the same few strings again and again, and matching one splits its path and compares it with each rule (in CPU
   * profiles: a seventh of a memory reserve and its settle; a quarter of ratecard's own code in the reference
   * service's `POST /browsers`). Emptied when it holds MATCHED_BOUND, so endpoints that carry ids stay bounded.
   */
  private readonly matched = new Map<string, EndpointRule | typeof NO_RULE>();

  /** `plans`: the plan names a rule's per-plan limits may name. */
  constructor(endpoints: Readonly<Record<string, EndpointSpec>>, plans: ReadonlySet<string>) {
    if (typeof endpoints !== 'object' || endpoints === null || Array.isArray(endpoints)) {
      throw badRule(`endpoints must be an object of rules, got ${describeValue(endpoints)}`);
    }
    for (const [key, spec] of Object.entries(endpoints)) {
      const rule = compileRule(key, spec, plans);
      const clash = this.all.find(
        (other) =>
          other.method === rule.method &&
          other.wildcard === rule.wildcard &&
          other.segments.length === rule.segments.length &&
          other.segments.every((segment, i) => segment === rule.segments[i]),
      );
      if (clash !== undefined) throw badRule(`endpoint rules ${clash.key} and ${key} match the same paths`);
      this.byKey.set(key, rule);
      this.all.push(rule);
    }
    this.tried = [...this.all].sort((a, b) => specificity(b) - specificity(a));
  }

  /** Every rule, in the order given. */
  get rules(): readonly EndpointRule[] {
    return this.all;
  }

  /**
   * The rule for an endpoint string: a rule key itself (the fast path), or a concrete `'<METHOD> <path>'` such as
   * `'PUT /browser_pools/abc?x=1'` matched against the patterns. Anything else (`'/browsers'`, a method alone) could
   * match no rule, and would leave the request unlimited without a word: it throws `invalid_argument`. `'ALL /*'`,
   * when no rule has that key, is no rule: it names the requests no rule matches (the http middleware passes it for
   * them, whatever their path), so a request carrying own limits is counted under the catch-all.
   */
  forEndpoint(endpoint: string): EndpointRule | undefined {
    return this.byKey.get(endpoint) ?? this.matchedRule(endpoint);
  }

  /** The rule for an endpoint string that is no rule's key: matched once, then kept (see matched). */
  private matchedRule(endpoint: string): EndpointRule | undefined {
    // Read as a concrete path, `/*` would match a rule such as `ALL /:tenant` that the request did not match.
    if (endpoint === CATCH_ALL) return undefined;
    // Checked before the look-up: forRequest keeps what it matched too, 'OPTIONS *' among them.
    const space = endpoint.indexOf(' ');
    if (space <= 0 || endpoint.charCodeAt(space + 1) !== 47 /* '/' */) throw notAnEndpoint(endpoint);
    return this.kept(endpoint, space);
  }

  /**
   * The rule for an HTTP method and request path (query string, trailing slash and spelling ignored). The http
   * middleware asks it of every request, so the answer is kept: at most 4 096 of them, of targets up to 512 characters.
   */
  forRequest(method: string, path: string): EndpointRule | undefined {
    // Anything but two strings would be matched as its text ('undefined'): no rule, a request left unlimited.
    if (typeof method !== 'string' || typeof path !== 'string') throw notARequestTarget(method, path);
    const upper = method.toUpperCase();
    return this.kept(`${upper} ${path}`, upper.length);
  }

  /** The rule for `endpoint`, its method before `space` and its path after: as kept in matched, else matched and kept. */
  private kept(endpoint: string, space: number): EndpointRule | undefined {
    const keep = endpoint.length <= KEPT_LENGTH;
    const known = keep ? this.matched.get(endpoint) : undefined;
    if (known !== undefined) return known === NO_RULE ? undefined : known;
    const rule = this.match(endpoint.slice(0, space).toUpperCase(), endpoint.slice(space + 1));
    if (!keep) return rule;
    if (this.matched.size >= MATCHED_BOUND) this.matched.clear();
    this.matched.set(endpoint, rule ?? NO_RULE);
    return rule;
  }

  /** The most specific rule for an upper-case method and a path, each rule tried in turn. */
  private match(method: string, path: string): EndpointRule | undefined {
    const segments = pathSegments(path);
    for (const rule of this.tried) {
      if (rule.method !== method && rule.method !== 'ALL') continue;
      const n = rule.segments.length;
      if (rule.wildcard ? segments.length < n : segments.length !== n) continue;
      let matches = true;
      for (let i = 0; i < n; i++) {
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
