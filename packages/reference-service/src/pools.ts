import { type Browser, MAX_SETTINGS_BYTES, newBrowser, newId, type Session, sessionOf } from './browsers.js';
import { Budget, keptBytes } from './budget.js';
import { conflict, HttpError, quotaExceeded, shown } from './errors.js';
import type { Settings } from './options.js';

/** A pool as the SDK declares it (`BrowserPool`). */
export interface PoolView {
  id: string;
  name?: string;
  available_count: number;
  acquired_count: number;
  browser_pool_config: Settings & { size: number };
  created_at: string;
  extension_ids: string[];
  profile_id?: string;
}

/** One page of `GET /browser_pools`: the SDK's offset pagination reads `X-Has-More` and `X-Next-Offset`. */
export interface PoolPage {
  items: PoolView[];
  hasMore: boolean;
  /** Where the next page starts; 0 on the last page, the API's stop sentinel. */
  nextOffset: number;
}

/** Largest pool, so one request cannot make the process hold an unbounded number of browsers. */
export const MAX_POOL_SIZE = 1000;
/** Most pools per organization, for the same reason: creation is only shadow-limited. */
export const MAX_POOLS_PER_ORGANIZATION = 100;

/**
 * Pool names share the path position of ids, so they are restricted to characters that need no encoding, must start
 * with a letter or digit (so `.` and `..` are never names), and cannot take the `bp_` prefix of ids.
 */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ID_PREFIX = 'bp_';

export { newId };

/** Why a name is refused, or undefined for a good one. */
export function nameProblem(name: string): string | undefined {
  if (!NAME.test(name)) {
    return `must be 1 to 64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, got ${shown(name)}`;
  }
  if (name.startsWith(ID_PREFIX)) return `must not start with "${ID_PREFIX}" (pool ids do), got ${shown(name)}`;
  return undefined;
}

interface Waiter {
  lease: Settings;
  give(session: Session | undefined): void;
}

/**
 * A pool's browsers keep no settings of their own: an acquired one is shown with the pool's settings and the lease's
 * at that moment, and the lease's are gone with the answer. So an organization's settings are its pools' configs (and
 * the leases of acquires still waiting), counted once, however many browsers the pools hold.
 */
class Pool {
  readonly id: string = newId(ID_PREFIX);
  readonly created_at: string = new Date().toISOString();
  readonly idle = new Map<string, Browser>();
  readonly leased = new Map<string, Browser>();
  /** Acquires waiting for an idle browser, first come first served. */
  readonly waiters = new Set<Waiter>();

  constructor(
    public name: string | undefined,
    public config: Settings & { size: number },
    /** What `config` costs to keep (`keptBytes`), charged to the organization's budget. */
    public bytes: number,
  ) {
    this.fill();
  }

  /** Starts idle browsers until the pool holds `size`. */
  fill(): void {
    while (this.idle.size + this.leased.size < this.config.size) {
      const browser = newBrowser();
      this.idle.set(browser.session_id, browser);
    }
    this.serve();
  }

  /** Hands available browsers to waiting acquires. */
  serve(): void {
    for (const waiter of this.waiters) {
      const browser = this.lease(waiter.lease);
      if (browser === undefined) break;
      this.waiters.delete(waiter);
      waiter.give(browser);
    }
  }

  lease(settings: Settings): Session | undefined {
    const next = this.idle.values().next();
    if (next.done === true) return undefined;
    const browser = next.value;
    this.idle.delete(browser.session_id);
    this.leased.set(browser.session_id, browser);
    // The config's name is the pool's; a pooled browser has a name only when its lease gives it one.
    const { name: _, ...own } = this.config;
    const pool = this.name === undefined ? { id: this.id } : { id: this.id, name: this.name };
    return Object.assign(sessionOf(browser, own, { pool }), settings);
  }

  view(): PoolView {
    const view: PoolView = {
      id: this.id,
      ...(this.name === undefined ? {} : { name: this.name }),
      available_count: this.idle.size,
      acquired_count: this.leased.size,
      browser_pool_config: { ...this.config },
      created_at: this.created_at,
      // Nothing resolves selectors locally: each extension is known by the id or name it was given.
      extension_ids: ((this.config.extensions as { id?: string; name?: string }[] | undefined) ?? []).map(
        (extension) => extension.id ?? extension.name ?? '',
      ),
    };
    const profile = this.config.profile as { id?: string; name?: string } | undefined;
    const profileId = profile?.id ?? profile?.name;
    if (profileId !== undefined && profileId !== '') view.profile_id = profileId;
    return view;
  }
}

class OrganizationPools {
  readonly byId = new Map<string, Pool>();
  readonly byName = new Map<string, Pool>();
}

function notFound(idOrName: string): HttpError {
  return new HttpError(404, 'not_found', `No browser pool with id or name ${shown(idOrName)} in this organization.`);
}

/**
 * Browser pools, kept in memory and scoped to an organization: a pool of another organization is not found, exactly
 * like a pool that does not exist, so ids leak nothing across organizations.
 */
export class PoolRegistry {
  private readonly organizations = new Map<string, OrganizationPools>();
  /** Pools' configs and waiting acquires' leases, per organization. */
  private readonly budget = new Budget('pool settings', MAX_SETTINGS_BYTES);
  private closed = false;

  create(organization: string, name: string | undefined, config: Settings & { size: number }): PoolView {
    let pools = this.organizations.get(organization);
    if (pools === undefined) {
      pools = new OrganizationPools();
      this.organizations.set(organization, pools);
    }
    if (name !== undefined && pools.byName.has(name)) {
      throw conflict(`A browser pool named ${shown(name)} already exists.`);
    }
    if (pools.byId.size >= MAX_POOLS_PER_ORGANIZATION) {
      throw quotaExceeded(`An organization holds at most ${MAX_POOLS_PER_ORGANIZATION} pools; delete one first.`);
    }
    const bytes = keptBytes(config);
    this.budget.charge(organization, bytes);
    const pool = new Pool(name, config, bytes);
    pools.byId.set(pool.id, pool);
    if (name !== undefined) pools.byName.set(name, pool);
    return pool.view();
  }

  get(organization: string, idOrName: string): PoolView {
    return this.find(organization, idOrName).view();
  }

  /**
   * Pools in creation order. `name` matches a whole name and `query` a part of one, both ignoring case (as the API's
   * collation does); `query` also matches an id exactly.
   */
  list(organization: string, filter: { offset: number; limit: number; name?: string; query?: string }): PoolPage {
    const name = filter.name?.toLowerCase();
    const query = filter.query?.toLowerCase();
    const matching = [...(this.organizations.get(organization)?.byId.values() ?? [])].filter((pool) => {
      const own = pool.name?.toLowerCase();
      if (name !== undefined && own !== name) return false;
      if (query !== undefined && pool.id !== filter.query && !(own ?? '').includes(query)) return false;
      return true;
    });
    const end = filter.offset + filter.limit;
    const hasMore = end < matching.length;
    return {
      items: matching.slice(filter.offset, end).map((pool) => pool.view()),
      hasMore,
      nextOffset: hasMore ? end : 0,
    };
  }

  /**
   * Changes what the update names. A new `size` starts or destroys idle browsers so that `available + acquired = size`
   * (never below the acquired count); `discard_all_idle` replaces every idle browser; other settings apply to
   * browsers started from now on. A name already used is a 409; an empty name changes nothing.
   */
  update(
    organization: string,
    idOrName: string,
    change: { name?: string; size?: number; discardAllIdle?: boolean; settings: Settings },
  ): PoolView {
    const pools = this.organizations.get(organization);
    const pool = this.find(organization, idOrName);
    const name = change.name === '' ? undefined : change.name;
    if (name !== undefined && name !== pool.name && pools?.byName.has(name)) {
      throw conflict(`A browser pool named ${shown(name)} already exists.`);
    }
    if (change.size !== undefined && change.size < pool.leased.size) {
      throw conflict(
        `The pool has ${pool.leased.size} acquired browsers, so its size cannot go below that (got ${change.size}); release some first.`,
      );
    }
    const config = { ...pool.config, ...change.settings };
    if (name !== undefined) config.name = name;
    if (change.size !== undefined) config.size = change.size;
    const bytes = keptBytes(config);
    this.budget.charge(organization, bytes, pool.bytes);
    pool.config = config;
    pool.bytes = bytes;
    if (name !== undefined && name !== pool.name) {
      if (pool.name !== undefined) pools?.byName.delete(pool.name);
      pools?.byName.set(name, pool);
      pool.name = name;
    }
    if (change.discardAllIdle === true) pool.idle.clear();
    for (const id of pool.idle.keys()) {
      if (pool.idle.size + pool.leased.size <= pool.config.size) break;
      pool.idle.delete(id);
    }
    pool.fill();
    return pool.view();
  }

  /** Deletes a pool and its browsers; with acquired browsers only when `force` is set (they are ended too). */
  delete(organization: string, idOrName: string, force: boolean): void {
    const pool = this.find(organization, idOrName);
    if (pool.leased.size > 0 && !force) {
      throw conflict(
        `The pool has ${pool.leased.size} acquired browsers; release them first, or delete with force: true to end them.`,
      );
    }
    const pools = this.organizations.get(organization);
    pools?.byId.delete(pool.id);
    if (pool.name !== undefined) pools?.byName.delete(pool.name);
    this.budget.refund(organization, pool.bytes);
    for (const waiter of pool.waiters) waiter.give(undefined);
    pool.waiters.clear();
  }

  /**
   * Leases an idle browser. With none idle it waits up to `timeoutMs` for one (a release, a larger size) and gives
   * undefined when none came; `abandoned` ends the wait early, for a client that went away.
   */
  acquire(
    organization: string,
    idOrName: string,
    lease: Settings,
    timeoutMs: number,
    abandoned: AbortSignal,
  ): Promise<Session | undefined> {
    const pool = this.find(organization, idOrName);
    const now = pool.lease(lease);
    if (now !== undefined || timeoutMs === 0 || this.closed || abandoned.aborted) return Promise.resolve(now);
    // A waiting acquire keeps its lease until a browser comes, so the lease counts against the budget meanwhile.
    const bytes = keptBytes(lease);
    this.budget.charge(organization, bytes);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        lease,
        give: (session) => {
          clearTimeout(timer);
          abandoned.removeEventListener('abort', stop);
          this.budget.refund(organization, bytes);
          resolve(session);
        },
      };
      const stop = (): void => {
        pool.waiters.delete(waiter);
        waiter.give(undefined);
      };
      const timer = setTimeout(stop, timeoutMs);
      abandoned.addEventListener('abort', stop, { once: true });
      pool.waiters.add(waiter);
    });
  }

  /**
   * Returns an acquired browser to the pool: as it is with `reuse`, else replaced by a new browser. A browser already available is a 409, one the pool does not hold a 404. A flushed pool is not refilled
   * here: only an update (a `size`, even the same one) starts browsers.
   */
  release(organization: string, idOrName: string, sessionId: string, reuse: boolean): void {
    const pool = this.find(organization, idOrName);
    if (pool.idle.has(sessionId)) throw conflict(`Browser ${shown(sessionId)} is not acquired.`);
    const browser = pool.leased.get(sessionId);
    if (browser === undefined) throw new HttpError(404, 'not_found', `No browser ${shown(sessionId)} in this pool.`);
    pool.leased.delete(sessionId);
    const returned = reuse ? browser : newBrowser();
    pool.idle.set(returned.session_id, returned);
    pool.serve();
  }

  /** Destroys every idle browser; acquired browsers are not affected. Returns how many were destroyed. */
  flush(organization: string, idOrName: string): number {
    const pool = this.find(organization, idOrName);
    const destroyed = pool.idle.size;
    pool.idle.clear();
    return destroyed;
  }

  /** Ends every waiting acquire (they are answered 204) and every later one at once: the server is shutting down. */
  close(): void {
    this.closed = true;
    for (const pools of this.organizations.values()) {
      for (const pool of pools.byId.values()) {
        for (const waiter of pool.waiters) waiter.give(undefined);
        pool.waiters.clear();
      }
    }
  }

  private find(organization: string, idOrName: string): Pool {
    const pools = this.organizations.get(organization);
    const pool = pools?.byId.get(idOrName) ?? pools?.byName.get(idOrName);
    if (pool === undefined) throw notFound(idOrName);
    return pool;
  }
}
