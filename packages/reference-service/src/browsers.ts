import { randomBytes } from 'node:crypto';
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

/** Settings a session echoes back, as they were sent. */
const ECHOED = ['chrome_policy', 'gpu', 'kiosk_mode', 'name', 'proxy_id', 'start_url', 'tags', 'telemetry', 'viewport'];

export function newId(prefix: string): string {
  return `${prefix}${randomBytes(10).toString('hex')}`;
}

/** A new session with the settings given (a pool's, or a create request's). */
export function newSession(settings: Settings, extra: Settings = {}): Session {
  const id = newId('br_');
  const session: Session = {
    session_id: id,
    cdp_ws_url: `ws://127.0.0.1:9222/devtools/browser/${id}`,
    webdriver_ws_url: `ws://127.0.0.1:9222/session/${id}`,
    created_at: new Date().toISOString(),
    headless: settings.headless === true,
    stealth: settings.stealth === true,
    timeout_seconds: (settings.timeout_seconds as number | undefined) ?? DEFAULT_TIMEOUT_SECONDS,
  };
  for (const field of ECHOED) if (settings[field] !== undefined) session[field] = settings[field];
  return Object.assign(session, extra);
}

interface Held {
  session: Session;
  /** Date.now() after which the browser has timed out: nothing ever uses a local browser, so it ends then. */
  ends: number;
}

function notFound(id: string): HttpError {
  return new HttpError(404, 'not_found', `No browser ${shown(id)} in this organization.`);
}

/** Standalone browsers (`POST /browsers`), per organization, each gone after its `timeout_seconds`. */
export class BrowserRegistry {
  private readonly organizations = new Map<string, Map<string, Held>>();

  create(organization: string, settings: Settings): Session {
    let held = this.organizations.get(organization);
    if (held === undefined) {
      held = new Map();
      this.organizations.set(organization, held);
    }
    const now = Date.now();
    // Insertion order is creation order: the oldest come first, so the ended and the evicted are found there.
    for (const [id, entry] of held) {
      if (entry.ends > now && held.size < MAX_BROWSERS_PER_ORGANIZATION) break;
      held.delete(id);
    }
    const session = newSession(settings);
    held.set(session.session_id, { session, ends: now + session.timeout_seconds * 1000 });
    return session;
  }

  get(organization: string, id: string): Session {
    return this.find(organization, id).session;
  }

  delete(organization: string, id: string): void {
    this.find(organization, id);
    this.organizations.get(organization)?.delete(id);
  }

  private find(organization: string, id: string): Held {
    const held = this.organizations.get(organization);
    const entry = held?.get(id);
    if (entry === undefined) throw notFound(id);
    if (entry.ends <= Date.now()) {
      held?.delete(id);
      throw notFound(id);
    }
    return entry;
  }
}
