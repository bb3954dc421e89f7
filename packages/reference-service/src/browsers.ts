import { randomBytes } from 'node:crypto';
import { Budget, keptBytes } from './budget.js';
import { HttpError, shown } from './errors.js';
import type { Settings } from './options.js';

/**
 * A browser session as the SDK declares it (`BrowserCreateResponse`, `BrowserPoolAcquireResponse`). No browser runs:
 * the WebSocket URLs point at loopback, where nothing listens.
 */
export interface Session {
  session_id: string;
  cdp_ws_url: string;
  webdriver_ws_url: string;
  created_at: string;
  headless: boolean;
  stealth: boolean;
  timeout_seconds: number;
  [field: string]: unknown;
}

/** Idle timeout of a browser that does not set `timeout_seconds`, as the API defaults it. */
export const DEFAULT_TIMEOUT_SECONDS = 60;
/** Most standalone browsers an organization holds at once; creating one more ends the oldest. */
export const MAX_BROWSERS_PER_ORGANIZATION = 100;
/**
 * Most bytes of settings (`keptBytes`) an organization keeps in its standalone browsers, and again in its pools: 4 MiB
 * each, far above what a browser's settings need, and low enough that no one organization runs the heap out.
 */
export const MAX_SETTINGS_BYTES: number = 4 * 1024 * 1024;

/** Settings a session echoes back, as they were sent. */
const ECHOED = ['chrome_policy', 'gpu', 'kiosk_mode', 'name', 'proxy_id', 'start_url', 'tags', 'telemetry', 'viewport'];

export function newId(prefix: string): string {
  return `${prefix}${randomBytes(10).toString('hex')}`;
}

/** What a browser is whatever settings it is shown with: a pooled browser keeps only this. */
export interface Browser {
  session_id: string;
  created_at: string;
}

export function newBrowser(): Browser {
  return { session_id: newId('br_'), created_at: new Date().toISOString() };
}

/** The session a browser is shown as, with the settings given (a pool's, or a create request's). */
export function sessionOf(browser: Browser, settings: Settings, extra: Settings = {}): Session {
  const id = browser.session_id;
  const session: Session = {
    session_id: id,
    cdp_ws_url: `ws://127.0.0.1:9222/devtools/browser/${id}`,
    webdriver_ws_url: `ws://127.0.0.1:9222/session/${id}`,
    created_at: browser.created_at,
    headless: settings.headless === true,
    stealth: settings.stealth === true,
    timeout_seconds: (settings.timeout_seconds as number | undefined) ?? DEFAULT_TIMEOUT_SECONDS,
  };
  for (const field of ECHOED) if (settings[field] !== undefined) session[field] = settings[field];
  return Object.assign(session, extra);
}

interface Held {
  session: Session;
  /** What its settings cost to keep (`keptBytes`), charged to the organization's budget. */
  bytes: number;
  /** Date.now() after which the browser has timed out: nothing ever uses a local browser, so it ends then. */
  ends: number;
}

function notFound(id: string): HttpError {
  return new HttpError(404, 'not_found', `No browser ${shown(id)} in this organization.`);
}

/**
 * Standalone browsers (`POST /browsers`), per organization, each gone after its `timeout_seconds`: at most
 * `MAX_BROWSERS_PER_ORGANIZATION` of them, holding at most `MAX_SETTINGS_BYTES` of settings.
 */
export class BrowserRegistry {
  private readonly organizations = new Map<string, Map<string, Held>>();
  private readonly budget = new Budget('browser settings', MAX_SETTINGS_BYTES);

  create(organization: string, settings: Settings): Session {
    let held = this.organizations.get(organization);
    if (held === undefined) {
      held = new Map();
      this.organizations.set(organization, held);
    }
    const now = Date.now();
    // Insertion order is creation order: the oldest come first, so the ended and the evicted are found there.
    for (const [id, entry] of held) {
      if (entry.ends > now) break;
      this.drop(organization, held, id, entry);
    }
    const bytes = keptBytes(settings);
    const oldest = held.size < MAX_BROWSERS_PER_ORGANIZATION ? undefined : held.entries().next().value;
    // The oldest gives its place (and its bytes) only to a browser that is kept: a refused create ends nothing.
    this.budget.charge(organization, bytes, oldest?.[1].bytes);
    if (oldest !== undefined) held.delete(oldest[0]);
    const session = sessionOf(newBrowser(), settings);
    held.set(session.session_id, { session, bytes, ends: now + session.timeout_seconds * 1000 });
    return session;
  }

  get(organization: string, id: string): Session {
    return this.find(organization, id).session;
  }

  delete(organization: string, id: string): void {
    const entry = this.find(organization, id);
    const held = this.organizations.get(organization);
    if (held !== undefined) this.drop(organization, held, id, entry);
  }

  private find(organization: string, id: string): Held {
    const held = this.organizations.get(organization);
    const entry = held?.get(id);
    if (held === undefined || entry === undefined) throw notFound(id);
    if (entry.ends <= Date.now()) {
      this.drop(organization, held, id, entry);
      throw notFound(id);
    }
    return entry;
  }

  private drop(organization: string, held: Map<string, Held>, id: string, entry: Held): void {
    held.delete(id);
    this.budget.refund(organization, entry.bytes);
  }
}
