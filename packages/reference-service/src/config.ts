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

/** The service's settings from environment variables; a bad value throws `ConfigError` naming it. */
export function readConfig(env: NodeJS.ProcessEnv): Config {
  const keysFile =
    env.API_KEYS_FILE === undefined || env.API_KEYS_FILE === '' ? DEMO_KEYS_FILE : resolve(env.API_KEYS_FILE);
  const redisUrl = env.REDIS_URL === '' ? undefined : env.REDIS_URL;
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('reference-service: REDIS_URL must start with redis:// or rediss://');
  }
  if (redisUrl !== undefined && !URL.canParse(redisUrl)) {
    throw new ConfigError(
      `reference-service: REDIS_URL is not a valid URL (a port from 0 to 65535, no spaces), got ${redactUrl(redisUrl)}`,
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
 * A Redis URL fit for a log line: every form of credential a client accepts is masked (the user and password of the
 * userinfo, and query parameters such as `password` and `username`). A URL that does not parse is masked by its
 * text, so even a malformed value never prints a secret.
 */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url
      .replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1***@')
      .replace(/([?&][^=&#]*=)[^&#]*/g, (pair, name: string) => (SECRET_PARAMETER.test(name) ? `${name}***` : pair));
  }
  if (parsed.username !== '') parsed.username = '***';
  if (parsed.password !== '') parsed.password = '***';
  for (const name of [...parsed.searchParams.keys()]) {
    if (SECRET_PARAMETER.test(name)) parsed.searchParams.set(name, '***');
  }
  return parsed.toString();
}
