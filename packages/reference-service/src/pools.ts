import { randomBytes } from 'node:crypto';
import { HttpError, shown } from './errors.js';

/** A pool as the API shows it. */
export interface PoolView {
  id: string;
  name: string;
  /** Browsers the pool is sized for; `idle + leased` never exceeds it. */
  size: number;
  idle: number;
  leased: number;
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

export function newId(prefix: string): string {
  return `${prefix}${randomBytes(10).toString('hex')}`;
}

/** Why a name is refused, or undefined for a good one. */
export function nameProblem(name: string): string | undefined {
  if (!NAME.test(name)) {
    return `must be 1 to 64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, got ${shown(name)}`;
  }
  if (name.startsWith(ID_PREFIX)) return `must not start with "${ID_PREFIX}" (pool ids do), got ${shown(name)}`;
  return undefined;
}

class Pool {
  readonly id: string = newId(ID_PREFIX);
  readonly idle = new Set<string>();
  readonly leased = new Set<string>();

  constructor(
    readonly name: string,
    public size: number,
  ) {
    this.fill();
  }

  /** Starts idle browsers until the pool holds `size`. */
  fill(): void {
    while (this.idle.size + this.leased.size < this.size) this.idle.add(newId('br_'));
  }

  view(): PoolView {
    return { id: this.id, name: this.name, size: this.size, idle: this.idle.size, leased: this.leased.size };
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

  create(organization: string, name: string, size: number): PoolView {
    let pools = this.organizations.get(organization);
    if (pools === undefined) {
      pools = new OrganizationPools();
      this.organizations.set(organization, pools);
    }
    if (pools.byName.has(name)) {
      throw new HttpError(409, 'conflict', `A browser pool named ${shown(name)} already exists.`);
    }
    if (pools.byId.size >= MAX_POOLS_PER_ORGANIZATION) {
      throw new HttpError(409, 'conflict', `An organization can hold at most ${MAX_POOLS_PER_ORGANIZATION} pools.`);
    }
    const pool = new Pool(name, size);
    pools.byId.set(pool.id, pool);
    pools.byName.set(name, pool);
    return pool.view();
  }

  get(organization: string, idOrName: string): PoolView {
    return this.find(organization, idOrName).view();
  }

  /** Sets the size: idle browsers are started or destroyed so that `idle + leased = size`; never below `leased`. */
  resize(organization: string, idOrName: string, size: number): PoolView {
    const pool = this.find(organization, idOrName);
    if (size < pool.leased.size) {
      throw new HttpError(
        409,
        'conflict',
        `The pool has ${pool.leased.size} leased browsers, so its size cannot go below that (got ${size}); release some first.`,
      );
    }
    pool.size = size;
    for (const browser of pool.idle) {
      if (pool.idle.size + pool.leased.size <= size) break;
      pool.idle.delete(browser);
    }
    pool.fill();
    return pool.view();
  }

  /** Leases an idle browser. */
  acquire(organization: string, idOrName: string): string {
    const pool = this.find(organization, idOrName);
    const browser = pool.idle.values().next();
    if (browser.done === true) {
      throw new HttpError(409, 'conflict', 'The pool has no idle browser to acquire.');
    }
    pool.idle.delete(browser.value);
    pool.leased.add(browser.value);
    return browser.value;
  }

  /** Returns a leased browser to the idle set. */
  release(organization: string, idOrName: string, browser: string): void {
    const pool = this.find(organization, idOrName);
    if (pool.idle.has(browser)) throw new HttpError(409, 'conflict', `Browser ${shown(browser)} is not leased.`);
    if (!pool.leased.delete(browser)) {
      throw new HttpError(404, 'not_found', `No browser ${shown(browser)} in this pool.`);
    }
    pool.idle.add(browser);
  }

  /** Destroys every idle browser; leased browsers are not affected. Returns how many were destroyed. */
  flush(organization: string, idOrName: string): number {
    const pool = this.find(organization, idOrName);
    const destroyed = pool.idle.size;
    pool.idle.clear();
    return destroyed;
  }

  private find(organization: string, idOrName: string): Pool {
    const pools = this.organizations.get(organization);
    const pool = pools?.byId.get(idOrName) ?? pools?.byName.get(idOrName);
    if (pool === undefined) throw notFound(idOrName);
    return pool;
  }
}
