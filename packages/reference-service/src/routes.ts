import { requestPath } from '@ratecard/http';
import type { Scope } from './auth.js';

export type Operation =
  | 'createBrowser'
  | 'createPool'
  | 'getPool'
  | 'updatePool'
  | 'acquire'
  | 'release'
  | 'flush'
  | 'createInvocation';

export type Resolution =
  | { readonly kind: 'route'; readonly area: Scope; readonly operation: Operation; readonly pool: string | undefined }
  | { readonly kind: 'method_not_allowed'; readonly area: Scope; readonly allow: readonly string[] }
  | { readonly kind: 'not_found' };

type Methods = Readonly<Record<string, Operation>>;

const NOT_FOUND: Resolution = Object.freeze({ kind: 'not_found' });
const POOLS = new Set(['browser-pools', 'browser_pools']);
const POOL_ACTIONS: Readonly<Record<string, Operation>> = { acquire: 'acquire', release: 'release', flush: 'flush' };

function match(method: string, area: Scope, methods: Methods, pool?: string): Resolution {
  const operation = Object.hasOwn(methods, method) ? methods[method] : undefined;
  if (operation === undefined) return { kind: 'method_not_allowed', area, allow: Object.keys(methods) };
  return { kind: 'route', area, operation, pool };
}

/**
 * The route of a request. The path is read exactly as `@ratecard/http` reads it for the rate-limit rules (same
 * decoding, query, empty segments and trailing slash dropped, no `..` resolution), and names are matched exactly where
 * the rules fold case and spelling, so every request routed to a limited operation is also counted by its rule: no
 * spelling reaches a handler around the limiter.
 */
export function resolveRoute(method: string, target: string): Resolution {
  const path = requestPath(target);
  if (!path.startsWith('/')) return NOT_FOUND;
  let end = path.length;
  for (const mark of ['?', '#']) {
    const at = path.indexOf(mark);
    if (at !== -1 && at < end) end = at;
  }
  const segments = path
    .slice(0, end)
    .split('/')
    .filter((segment) => segment.length > 0);
  const [first, pool, action] = segments;
  if (first === 'browsers' && segments.length === 1) return match(method, 'browsers', { POST: 'createBrowser' });
  if (first === 'invocations' && segments.length === 1) {
    return match(method, 'invocations', { POST: 'createInvocation' });
  }
  if (first === undefined || !POOLS.has(first)) return NOT_FOUND;
  if (pool === undefined) return match(method, 'browser_pools', { POST: 'createPool' });
  if (action === undefined) {
    return match(method, 'browser_pools', { GET: 'getPool', HEAD: 'getPool', PUT: 'updatePool' }, pool);
  }
  const operation = Object.hasOwn(POOL_ACTIONS, action) ? POOL_ACTIONS[action] : undefined;
  if (operation === undefined || segments.length !== 3) return NOT_FOUND;
  return match(method, 'browser_pools', { POST: operation }, pool);
}
