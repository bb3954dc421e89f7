import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVER_LIMITS, type ServerLimits } from './app.js';
import { type ApiKeys, KeysFileError, validateKeys } from './auth.js';

/** The shipped keys file, beside `src/` and `dist/` alike. */
export const DEMO_KEYS_FILE: string = fileURLToPath(new URL('../demo-keys.json', import.meta.url));

export interface ClusterNode {
  host: string;
  port: number;
}

export interface Config {
  port: number;
  host: string;
  keysFile: string;
  /** True when the keys file is the shipped demo file, whose tokens are public and may be printed. */
  demoKeys: boolean;
  redisUrl: string | undefined;
  clusterNodes: ClusterNode[] | undefined;
  /** Where Prometheus scrapes the limiter's metrics; undefined: no metrics. */
  metricsPort: number | undefined;
  limits: ServerLimits;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

function parsePort(value: string, name: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535) {
    throw new ConfigError(
      `reference-service: ${name} must be a port number from 0 to 65535, got ${JSON.stringify(value)}`,
    );
  }
  return port;
}

/** The variable's value as a whole number from 1 to `max`, or `fallback` when it is unset or empty. */
function positive(env: NodeJS.ProcessEnv, name: string, fallback: number, max = 2_147_483_647): number {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  const number = Number(value);
  if (!/^\d+$/.test(value) || number < 1 || number > max) {
    throw new ConfigError(
      `reference-service: ${name} must be a whole number from 1 to ${max}, got ${JSON.stringify(value)}`,
    );
  }
  return number;
}

function readLimits(env: NodeJS.ProcessEnv): ServerLimits {
  const limits = {
    headersTimeoutMs: positive(env, 'HEADERS_TIMEOUT_MS', SERVER_LIMITS.headersTimeoutMs),
    requestTimeoutMs: positive(env, 'REQUEST_TIMEOUT_MS', SERVER_LIMITS.requestTimeoutMs),
    keepAliveTimeoutMs: positive(env, 'KEEP_ALIVE_TIMEOUT_MS', SERVER_LIMITS.keepAliveTimeoutMs),
    maxConnections: positive(env, 'MAX_CONNECTIONS', SERVER_LIMITS.maxConnections),
  };
  // A request's head is part of the request: node refuses a head timeout longer than the whole request's.
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new ConfigError(
      `reference-service: HEADERS_TIMEOUT_MS (${limits.headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${limits.requestTimeoutMs})`,
    );
  }
  return limits;
}

function parseNodes(value: string): ClusterNode[] {
  const nodes = value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0)
    .map((entry) => {
      const colon = entry.lastIndexOf(':');
      const host = colon > 0 ? entry.slice(0, colon).replace(/^\[(.*)\]$/, '$1') : '';
      if (host.length === 0) {
        throw new ConfigError(
          `reference-service: REDIS_CLUSTER_NODES must be comma-separated host:port pairs, got ${JSON.stringify(entry)}`,
        );
      }
      return { host, port: parsePort(entry.slice(colon + 1), 'each REDIS_CLUSTER_NODES port') };
    });
  if (nodes.length === 0) throw new ConfigError('reference-service: REDIS_CLUSTER_NODES is set but names no node');
  return nodes;
}

/**
 * Whether a client reads the URL as written. One that parses may still not: with a `/`, `?` or `#` unencoded in its
 * password, `redis://user:123/x@host` parses as host `user`, port 123 and a path holding the rest, and a client would
 * connect there and report errors naming that host. Such URLs show an `@` after the host (in the path or a query
 * name) or a fragment (no client reads one), so these are refused too.
 */
function isRedisUrl(url: string): boolean {
  if (!URL.canParse(url) || url.includes('#')) return false;
  const parsed = new URL(url);
  return !parsed.pathname.includes('@') && ![...parsed.searchParams.keys()].some((name) => name.includes('@'));
}

/** The service's settings from environment variables; a bad value throws `ConfigError` naming it. */
export function readConfig(env: NodeJS.ProcessEnv): Config {
  const keysFile =
    env.API_KEYS_FILE === undefined || env.API_KEYS_FILE === '' ? DEMO_KEYS_FILE : resolve(env.API_KEYS_FILE);
  const redisUrl = env.REDIS_URL === '' ? undefined : env.REDIS_URL;
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('reference-service: REDIS_URL must start with redis:// or rediss://');
  }
  if (redisUrl !== undefined && !isRedisUrl(redisUrl)) {
    throw new ConfigError(
      `reference-service: REDIS_URL is not a valid URL (a port from 0 to 65535, no spaces, and / ? # @ in a user or password written %2F %3F %23 %40), got ${redactUrl(redisUrl)}`,
    );
  }
  const nodes = env.REDIS_CLUSTER_NODES;
  return {
    port: env.PORT === undefined || env.PORT === '' ? 3000 : parsePort(env.PORT, 'PORT'),
    host: env.HOST === undefined || env.HOST === '' ? '127.0.0.1' : env.HOST,
    keysFile,
    demoKeys: keysFile === DEMO_KEYS_FILE,
    redisUrl,
    clusterNodes: nodes === undefined || nodes === '' ? undefined : parseNodes(nodes),
    metricsPort:
      env.METRICS_PORT === undefined || env.METRICS_PORT === ''
        ? undefined
        : parsePort(env.METRICS_PORT, 'METRICS_PORT'),
    limits: readLimits(env),
  };
}

/** Reads and validates the keys file; every failure says which file and what is wrong. */
export function loadKeysFile(path: string): ApiKeys {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = error instanceof Error && 'code' in error ? String(error.code) : 'unreadable';
    throw new KeysFileError(`reference-service: cannot read the keys file ${path} (${reason}); set API_KEYS_FILE`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    // Only the position: the parser's message quotes the text around it, and that text may be a token.
    const where =
      error instanceof Error ? /position \d+(?: \(line \d+ column \d+\))?/.exec(error.message)?.[0] : undefined;
    throw new KeysFileError(
      `reference-service: the keys file ${path} is not valid JSON${where === undefined ? '' : ` (at ${where})`}`,
    );
  }
  return validateKeys(parsed, path);
}

/** Query parameters a Redis client may read credentials from (ioredis takes any option from the query string). */
const SECRET_PARAMETER = /pass|user|secret|token|auth/i;

/**
 * A Redis URL fit for a log line, masked by its text alone, the same way whether it parses or not:
 * - everything between the scheme and the last `@` shows as `***`: a password may hold `/`, `?`, `#` or `@`
 *   unencoded, and then no parser can tell where it ends, but it ends before the host;
 * - the value of every query parameter whose name speaks of a credential (`password`, `username`,
 *   `sentinelPassword`, …), its name read as the client reads it (percent-decoded);
 * - the whole fragment, which no Redis client reads;
 * - everything after the scheme when a `?` or `#` and then a `=` come before that last `@`, since the `@` may then be
 *   inside a query value.
 */
export function redactUrl(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0] ?? '';
  let rest = url.slice(scheme.length);
  let userinfo = '';
  const at = rest.lastIndexOf('@');
  if (at !== -1) {
    if (/[?#].*=/.test(rest.slice(0, at))) return `${scheme}***`;
    userinfo = '***@';
    rest = rest.slice(at + 1);
  }
  const hash = rest.indexOf('#');
  const fragment = hash === -1 ? '' : '#***';
  if (hash !== -1) rest = rest.slice(0, hash);
  const question = rest.indexOf('?');
  if (question !== -1) {
    const pairs = rest.slice(question + 1).split('&');
    const masked = pairs.map((pair) => {
      const equals = pair.indexOf('=');
      const name = [...new URLSearchParams(pair).keys()][0] ?? '';
      return equals !== -1 && SECRET_PARAMETER.test(name) ? `${pair.slice(0, equals)}=***` : pair;
    });
    rest = `${rest.slice(0, question)}?${masked.join('&')}`;
  }
  return `${scheme}${userinfo}${rest}${fragment}`;
}
