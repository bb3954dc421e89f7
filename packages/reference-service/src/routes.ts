import { requestPath } from '@ratecard/http';
import type { Scope } from './auth.js';

export type Operation =
  | 'createBrowser'
  | 'getBrowser'
  | 'deleteBrowser'
  | 'listPools'
  | 'createPool'
  | 'getPool'
  | 'updatePool'
  | 'deletePool'
  | 'acquire'
  | 'release'
  | 'flush'
  | 'createInvocation';

export type Resolution =
  | {
      readonly kind: 'route';
      readonly area: Scope;
      readonly operation: Operation;
      /** The `{id}` or `{id_or_name}` path segment, when the route has one. */
      readonly id: string | undefined;
      /** The query string, without its `?`. */
      readonly query: string;
    }
  | { readonly kind: 'method_not_allowed'; readonly area: Scope; readonly allow: readonly string[] }
  | { readonly kind: 'not_found' };

type Methods = Readonly<Record<string, Operation>>;

const NOT_FOUND: Resolution = Object.freeze({ kind: 'not_found' });
const POOLS = new Set(['browser-pools', 'browser_pools']);
const POOL_ACTIONS: Readonly<Record<string, Operation>> = { acquire: 'acquire', release: 'release', flush: 'flush' };

/** Pool updates: the SDK sends PATCH; PUT is the method of the spec's rate-limit rule and stays accepted. */
const POOL_RECORD: Methods = {
  GET: 'getPool',
  HEAD: 'getPool',
  PATCH: 'updatePool',
  PUT: 'updatePool',
  DELETE: 'deletePool',
};

function match(method: string, area: Scope, methods: Methods, id: string | undefined, query: string): Resolution {
  const operation = Object.hasOwn(methods, method) ? methods[method] : undefined;
  if (operation === undefined) return { kind: 'method_not_allowed', area, allow: Object.keys(methods) };
  return { kind: 'route', area, operation, id, query };
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
  const fragment = path.indexOf('#');
  const withoutFragment = fragment === -1 ? path : path.slice(0, fragment);
  const mark = withoutFragment.indexOf('?');
  const query = mark === -1 ? '' : withoutFragment.slice(mark + 1);
  const segments = (mark === -1 ? withoutFragment : withoutFragment.slice(0, mark))
    .split('/')
    .filter((segment) => segment.length > 0);
  const [first, id, action] = segments;
  if (first === 'browsers') {
    if (id === undefined) return match(method, 'browsers', { POST: 'createBrowser' }, undefined, query);
    if (segments.length !== 2) return NOT_FOUND;
    return match(method, 'browsers', { GET: 'getBrowser', HEAD: 'getBrowser', DELETE: 'deleteBrowser' }, id, query);
  }
  if (first === 'invocations' && segments.length === 1) {
    return match(method, 'invocations', { POST: 'createInvocation' }, undefined, query);
  }
  if (first === undefined || !POOLS.has(first)) return NOT_FOUND;
  if (id === undefined)
    return match(
      method,
      'browser_pools',
      { GET: 'listPools', HEAD: 'listPools', POST: 'createPool' },
      undefined,
      query,
    );
  if (action === undefined) return match(method, 'browser_pools', POOL_RECORD, id, query);
  const operation = Object.hasOwn(POOL_ACTIONS, action) ? POOL_ACTIONS[action] : undefined;
  if (operation === undefined || segments.length !== 3) return NOT_FOUND;
  return match(method, 'browser_pools', { POST: operation }, id, query);
}
