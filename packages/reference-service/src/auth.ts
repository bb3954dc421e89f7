import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { MAX_LIMIT, PLANS, type Plan } from '@ratecard/core';
import { shown } from './errors.js';

/** The route areas a key can be granted. */
export const SCOPES: readonly Scope[] = ['browsers', 'browser_pools', 'invocations'];
export type Scope = 'browsers' | 'browser_pools' | 'invocations';

/** One entry of the keys file, keyed there by its token. */
export interface ApiKey {
  organization: string;
  plan: Plan;
  /** A trial organization gets the Start-Up limit whatever its plan. */
  trial?: boolean;
  /** A custom limit in requests per minute. */
  override?: number;
  scopes: Scope[];
}

/** The keys file: token → key. */
export type ApiKeys = Readonly<Record<string, ApiKey>>;

/** An API key after a successful lookup (the token itself is not kept). */
export interface Principal {
  readonly organization: string;
  readonly plan: Plan;
  readonly trial: boolean;
  readonly override: number | undefined;
  readonly scopes: ReadonlySet<Scope>;
}

/** RFC 6750's b64token, bounded: anything else cannot be a token, so it is refused before any lookup. */
const TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const MAX_TOKEN_LENGTH = 512;
const MAX_ORGANIZATION_LENGTH = 256;
const KEY_FIELDS = new Set(['organization', 'plan', 'trial', 'override', 'scopes']);

export class KeysFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeysFileError';
  }
}

function fail(where: string, message: string): never {
  throw new KeysFileError(`reference-service: ${where}: ${message}`);
}

/** Keys are named by position in error messages: a token is a secret and never goes to a log. */
function keyLabel(index: number): string {
  return `key #${index + 1}`;
}

/**
 * Checks a parsed keys file and returns it typed. Every problem names the key and the field, so a broken file fails
 * at start with a message that says what to fix. Keys of one organization must agree on plan, trial and override:
 * the organization has one bucket per endpoint, so its limit cannot depend on which key a request carries.
 */
export function validateKeys(value: unknown, source = 'keys'): ApiKeys {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(source, `must be a JSON object of "<token>": { organization, plan, scopes }, got ${shown(value)}`);
  }
  const keys: Record<string, ApiKey> = {};
  const limits = new Map<string, { plan: Plan; trial: boolean; override: number | undefined; index: number }>();
  for (const [index, [token, entry]] of Object.entries(value).entries()) {
    const where = `${source}: ${keyLabel(index)}`;
    if (token.length > MAX_TOKEN_LENGTH || !TOKEN.test(token)) {
      fail(
        where,
        `a token must be 1 to ${MAX_TOKEN_LENGTH} characters of A-Z a-z 0-9 - . _ ~ + / (then optional =), got ${token.length} characters`,
      );
    }
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      fail(where, `must be an object { organization, plan, scopes }, got ${shown(entry)}`);
    }
    const record = entry as Record<string, unknown>;
    for (const field of Object.keys(record)) {
      if (!KEY_FIELDS.has(field))
        fail(where, `unknown field ${JSON.stringify(field)} (allowed: ${[...KEY_FIELDS].join(', ')})`);
    }
    const { organization, plan, trial, override, scopes } = record;
    if (
      typeof organization !== 'string' ||
      organization.length === 0 ||
      organization.length > MAX_ORGANIZATION_LENGTH
    ) {
      fail(
        where,
        `organization must be a non-empty string of at most ${MAX_ORGANIZATION_LENGTH} characters, got ${shown(organization)}`,
      );
    }
    if (typeof plan !== 'string' || !Object.hasOwn(PLANS, plan)) {
      fail(where, `plan must be one of ${Object.keys(PLANS).join(', ')}, got ${shown(plan)}`);
    }
    if (trial !== undefined && typeof trial !== 'boolean') {
      fail(where, `trial must be true or false, got ${shown(trial)}`);
    }
    if (
      override !== undefined &&
      (!Number.isSafeInteger(override) || (override as number) < 1 || (override as number) > MAX_LIMIT)
    ) {
      fail(
        where,
        `override must be a whole number of requests per minute from 1 to ${MAX_LIMIT}, got ${shown(override)}`,
      );
    }
    if (!Array.isArray(scopes)) fail(where, `scopes must be an array of ${SCOPES.join(', ')}, got ${shown(scopes)}`);
    for (const scope of scopes) {
      if (!SCOPES.includes(scope)) fail(where, `unknown scope ${shown(scope)} (known: ${SCOPES.join(', ')})`);
    }
    const key: ApiKey = { organization, plan: plan as Plan, scopes: [...new Set(scopes as Scope[])] };
    if (trial !== undefined) key.trial = trial;
    if (override !== undefined) key.override = override as number;
    const limit = { plan: key.plan, trial: key.trial === true, override: key.override, index };
    const seen = limits.get(organization);
    if (seen === undefined) {
      limits.set(organization, limit);
    } else if (seen.plan !== limit.plan || seen.trial !== limit.trial || seen.override !== limit.override) {
      fail(
        where,
        `organization ${JSON.stringify(organization)} has another key (${keyLabel(seen.index)}) with a different plan, trial or override; keys of one organization must agree on them`,
      );
    }
    keys[token] = key;
  }
  return keys;
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Looks tokens up without a timing leak, and reads the Authorization header strictly. */
export class KeyRing {
  private readonly entries: { digest: Buffer; principal: Principal }[] = [];

  constructor(keys: ApiKeys) {
    for (const [token, key] of Object.entries(validateKeys(keys))) {
      this.entries.push({
        digest: digest(token),
        principal: Object.freeze({
          organization: key.organization,
          plan: key.plan,
          trial: key.trial === true,
          override: key.override,
          scopes: new Set(key.scopes),
        }),
      });
    }
  }

  /**
   * The key a token belongs to, or undefined. Tokens are compared as SHA-256 digests with `timingSafeEqual`, and every
   * key is compared whatever matched, so the time taken says nothing about how close a guess came to a real token.
   */
  lookup(token: string): Principal | undefined {
    const presented = digest(token);
    let found: Principal | undefined;
    for (const entry of this.entries) {
      if (timingSafeEqual(presented, entry.digest)) found = entry.principal;
    }
    return found;
  }

  /**
   * The principal of a request, or undefined for a missing, repeated or malformed Authorization header, another
   * scheme, or an unknown token (all of them 401).
   */
  authenticate(request: IncomingMessage): Principal | undefined {
    // node:http keeps only the first Authorization header in `headers`; a second one must not be silently ignored.
    const values = request.headersDistinct.authorization;
    if (values === undefined || values.length !== 1) return undefined;
    const header = values[0] as string;
    const space = header.indexOf(' ');
    if (space === -1 || header.slice(0, space).toLowerCase() !== 'bearer') return undefined;
    const token = header.slice(space + 1).trim();
    if (token.length === 0 || token.length > MAX_TOKEN_LENGTH || !TOKEN.test(token)) return undefined;
    return this.lookup(token);
  }
}
