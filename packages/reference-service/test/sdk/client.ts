/**
 * A small client of the reference service written against the official SDK's own declarations: `sdk.test.ts` runs it
 * against a started service, and `tsconfig.json` beside it compiles it with `tsc --strict`. Each shape below is typed
 * from the SDK's interface, so it cannot leave out a field the SDK requires or give a field a kind the SDK does not
 * declare; `problemsOf` then holds every response to it at run time.
 */
import Kernel from '@onkernel/sdk';
import type {
  BrowserPool,
  BrowserPoolAcquireResponse,
  BrowserPoolCreateParams,
} from '@onkernel/sdk/resources/browser-pools';
import type { BrowserCreateParams, BrowserCreateResponse } from '@onkernel/sdk/resources/browsers';
import type { InvocationCreateResponse } from '@onkernel/sdk/resources/invocations';

type RequiredKeys<T> = { [K in keyof T]-?: Record<never, never> extends Pick<T, K> ? never : K }[keyof T];
type OptionalKeys<T> = Exclude<keyof T, RequiredKeys<T>>;
type Kind = 'string' | 'number' | 'boolean' | 'array' | 'object';
type KindOf<V> = V extends string
  ? 'string'
  : V extends number
    ? 'number'
    : V extends boolean
      ? 'boolean'
      : V extends readonly unknown[]
        ? 'array'
        : 'object';

/** What the SDK declares of a response: every required field, and the optional fields the service sends. */
export interface Shape<T> {
  required: { [K in RequiredKeys<T>]: KindOf<T[K]> };
  optional: { [K in OptionalKeys<T>]?: KindOf<NonNullable<T[K]>> };
}

export const SESSION: Shape<BrowserCreateResponse> = {
  required: {
    session_id: 'string',
    cdp_ws_url: 'string',
    webdriver_ws_url: 'string',
    created_at: 'string',
    headless: 'boolean',
    stealth: 'boolean',
    timeout_seconds: 'number',
  },
  optional: {
    chrome_policy: 'object',
    gpu: 'boolean',
    kiosk_mode: 'boolean',
    name: 'string',
    proxy_id: 'string',
    start_url: 'string',
    tags: 'object',
    telemetry: 'object',
    viewport: 'object',
  },
};

export const ACQUIRED: Shape<BrowserPoolAcquireResponse> = {
  required: SESSION.required,
  optional: { ...SESSION.optional, pool: 'object' },
};

export const POOL: Shape<BrowserPool> = {
  required: {
    id: 'string',
    acquired_count: 'number',
    available_count: 'number',
    browser_pool_config: 'object',
    created_at: 'string',
    extension_ids: 'array',
  },
  optional: { name: 'string', profile_id: 'string' },
};

export const POOL_CONFIG: Shape<BrowserPool.BrowserPoolConfig> = {
  required: { size: 'number' },
  optional: {
    chrome_policy: 'object',
    extensions: 'array',
    fill_rate_per_minute: 'number',
    headless: 'boolean',
    kiosk_mode: 'boolean',
    name: 'string',
    profile: 'object',
    proxy_id: 'string',
    refresh_on_profile_update: 'boolean',
    start_url: 'string',
    stealth: 'boolean',
    telemetry: 'object',
    timeout_seconds: 'number',
    viewport: 'object',
  },
};

export const INVOCATION: Shape<InvocationCreateResponse> = {
  required: { id: 'string', action_name: 'string', status: 'string' },
  optional: {},
};

function kindOf(value: unknown): Kind | 'other' {
  if (Array.isArray(value)) return 'array';
  const kind = typeof value;
  if (kind === 'object' && value !== null) return 'object';
  return kind === 'string' || kind === 'number' || kind === 'boolean' ? kind : 'other';
}

/** Where a response departs from what the SDK declares: an empty list when it does not. */
export function problemsOf<T>(value: unknown, shape: Shape<T>): string[] {
  if (kindOf(value) !== 'object') return [`not an object: ${JSON.stringify(value)}`];
  const record = value as Record<string, unknown>;
  const declared: Record<string, string | undefined> = { ...shape.optional, ...shape.required };
  const problems: string[] = [];
  for (const key of Object.keys(shape.required)) {
    if (!Object.hasOwn(record, key)) problems.push(`${key}: missing`);
  }
  for (const [key, item] of Object.entries(record)) {
    const kind = declared[key];
    if (kind === undefined) problems.push(`${key}: not declared by the SDK`);
    else if (kindOf(item) !== kind) problems.push(`${key}: a ${kindOf(item)}, declared ${kind}`);
  }
  return problems;
}

/** Every request the client sends, with the status it got, in order. */
export interface Traffic {
  calls: { method: string; url: string; status: number }[];
  /** Called as each call is recorded, before the SDK reads its response. */
  onCall?: () => void;
}

/** An SDK client of the service at `baseURL` that records its traffic. */
export function connect(baseURL: string, apiKey: string, traffic: Traffic, maxRetries = 2): Kernel {
  const recording = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await fetch(input, init);
    traffic.calls.push({ method: init?.method ?? 'GET', url: String(input), status: response.status });
    traffic.onCall?.();
    return response;
  };
  return new Kernel({ apiKey, baseURL, maxRetries, fetch: recording });
}

/** Every optional setting the SDK lets a pool create send. */
export const FULL_POOL: BrowserPoolCreateParams = {
  size: 2,
  name: 'full',
  chrome_policy: { HomepageLocation: 'https://example.com' },
  extensions: [{ id: 'ext_1' }, { name: 'ublock' }],
  fill_rate_per_minute: 25,
  headless: true,
  kiosk_mode: false,
  profile: { name: 'shopper' },
  proxy_id: 'proxy_1',
  refresh_on_profile_update: true,
  start_url: 'https://example.com/start',
  stealth: true,
  telemetry: { enabled: true },
  timeout_seconds: 600,
  viewport: { width: 1280, height: 800, refresh_rate: 60 },
};

/** Every optional setting the SDK lets a browser create send. */
export const FULL_BROWSER: BrowserCreateParams = {
  chrome_policy: { HomepageLocation: 'https://example.com' },
  extensions: [{ name: 'ublock' }],
  gpu: false,
  headless: false,
  invocation_id: 'inv_1',
  kiosk_mode: true,
  name: 'agent-1',
  profile: { name: 'shopper', save_changes: true },
  proxy_id: 'proxy_1',
  start_url: 'https://example.com',
  stealth: true,
  tags: { team: 'qa' },
  telemetry: { enabled: false },
  timeout_seconds: 300,
  viewport: { width: 1920, height: 1080 },
};

/** Every pool of the organization, through the SDK's auto-pagination, a page of `pageSize` at a time. */
export async function allPools(kernel: Kernel, pageSize: number): Promise<BrowserPool[]> {
  const pools: BrowserPool[] = [];
  for await (const pool of kernel.browserPools.list({ limit: pageSize })) pools.push(pool);
  return pools;
}
