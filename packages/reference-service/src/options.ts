import { MAX_DEPTH, tooDeep } from './budget.js';
import { shown } from './errors.js';
import type { Fields } from './fields.js';

/** The optional settings of a request as the SDK names them, only those present, as they were sent. */
export type Settings = Record<string, unknown>;

type Reader = (fields: Fields, field: string) => unknown;

const MAX_TEXT = 2048;
const MAX_TAGS = 50;
const MAX_EXTENSIONS = 20;

function text(max: number): Reader {
  return (fields, field) =>
    fields.string(field, (value) => (value.length > max ? `must be at most ${max} characters` : undefined));
}

const flag: Reader = (fields, field) => fields.boolean(field);

/** `{ id?, name? }` (extensions, profiles): strings, at least one of them. */
function selectorProblem(value: unknown, extra: readonly string[] = []): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return `must be an object { id?, name? }, got ${shown(value)}`;
  }
  const record = value as Record<string, unknown>;
  for (const [key, item] of Object.entries(record)) {
    if (extra.includes(key)) {
      if (typeof item !== 'boolean') return `${key} must be true or false, got ${shown(item)}`;
    } else if (key !== 'id' && key !== 'name') {
      return `has an unknown field ${shown(key)}`;
    } else if (typeof item !== 'string' || item.length > 255) {
      return `${key} must be a string of at most 255 characters, got ${shown(item)}`;
    }
  }
  if (record.id === undefined && record.name === undefined) return 'must give an id or a name';
  return undefined;
}

/** A free-form object is kept and echoed; past `MAX_DEPTH` levels it could not be measured or written back. */
function depthProblem(value: Record<string, unknown>): string | undefined {
  return tooDeep(value) ? `must nest at most ${MAX_DEPTH} levels of objects and arrays` : undefined;
}

function tagsProblem(value: Record<string, unknown>): string | undefined {
  const entries = Object.entries(value);
  if (entries.length > MAX_TAGS) return `must hold at most ${MAX_TAGS} pairs, got ${entries.length}`;
  for (const [key, item] of entries) {
    if (typeof item !== 'string') return `${shown(key)} must be a string, got ${shown(item)}`;
  }
  return undefined;
}

function viewportProblem(value: Record<string, unknown>): string | undefined {
  for (const key of Object.keys(value)) {
    if (key !== 'width' && key !== 'height' && key !== 'refresh_rate') return `has an unknown field ${shown(key)}`;
  }
  for (const key of ['width', 'height', 'refresh_rate']) {
    const item = value[key];
    if (item === undefined && key === 'refresh_rate') continue;
    if (!Number.isInteger(item) || (item as number) < 1 || (item as number) > 10_000) {
      return `${key} must be a whole number from 1 to 10000, got ${shown(item)}`;
    }
  }
  return undefined;
}

const READERS: Readonly<Record<string, Reader>> = {
  acquire_timeout_seconds: (fields, field) => fields.integer(field, 0, 300),
  chrome_policy: (fields, field) => fields.object(field, depthProblem),
  discard_all_idle: flag,
  extensions: (fields, field) => fields.array(field, MAX_EXTENSIONS, (item) => selectorProblem(item)),
  fill_rate_per_minute: (fields, field) => fields.integer(field, 1, 100),
  force: flag,
  gpu: flag,
  headless: flag,
  invocation_id: text(255),
  kiosk_mode: flag,
  name: text(255),
  profile: (fields, field) => fields.object(field, (value) => selectorProblem(value, ['save_changes'])),
  proxy_id: text(255),
  refresh_on_profile_update: flag,
  reuse: flag,
  start_url: text(MAX_TEXT),
  stealth: flag,
  tags: (fields, field) => fields.object(field, tagsProblem),
  telemetry: (fields, field) => (fields.isNull(field) ? null : fields.object(field, depthProblem)),
  timeout_seconds: (fields, field) => fields.integer(field, 10, 259_200),
  viewport: (fields, field) => fields.object(field, viewportProblem),
};

/** Browser settings the SDK can send when creating a browser (`BrowserCreateParams`). */
export const BROWSER_SETTINGS: readonly string[] = [
  'chrome_policy',
  'extensions',
  'gpu',
  'headless',
  'invocation_id',
  'kiosk_mode',
  'name',
  'profile',
  'proxy_id',
  'start_url',
  'stealth',
  'tags',
  'telemetry',
  'timeout_seconds',
  'viewport',
];

/** Pool settings of `BrowserPoolCreateParams` besides `name` and `size`; an update takes them too. */
export const POOL_SETTINGS: readonly string[] = [
  'chrome_policy',
  'extensions',
  'fill_rate_per_minute',
  'headless',
  'kiosk_mode',
  'profile',
  'proxy_id',
  'refresh_on_profile_update',
  'start_url',
  'stealth',
  'telemetry',
  'timeout_seconds',
  'viewport',
];

/** Lease settings of `BrowserPoolAcquireParams` besides `acquire_timeout_seconds`. */
export const LEASE_SETTINGS: readonly string[] = ['name', 'start_url', 'tags', 'telemetry'];

/** Reads each of `names` the body holds, checked by its kind; absent ones stay absent. */
export function readSettings(fields: Fields, names: readonly string[]): Settings {
  const settings: Settings = {};
  for (const name of names) {
    const read = READERS[name];
    if (read !== undefined && fields.has(name)) settings[name] = read(fields, name);
  }
  return settings;
}
