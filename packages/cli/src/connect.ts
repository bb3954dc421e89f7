import { Cluster, Redis, type RedisOptions } from 'ioredis';

/** Where the command line finds Redis: the URLs given, and whether they are a cluster's seed nodes. */
export interface Target {
  readonly urls: readonly string[];
  readonly cluster: boolean;
  /** How long connecting may take, in ms. */
  readonly timeoutMs: number;
}

/** A mistake in what was typed (exit 1). */
export class UsageError extends Error {}

/** Redis could not be reached, or refused the credentials (exit 3). */
export class UnreachableError extends Error {}

/**
 * Every password the command line was given (in its arguments and REDIS_URL), as typed and decoded, so that no output
 * shows one: each is replaced by `***` in every line written, errors included.
 */
export function secretsIn(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): string[] {
  const secrets = new Set<string>();
  for (const text of [...argv, env.REDIS_URL ?? '']) {
    // A URL anywhere in an argument: `--redis=redis://…` as well as the value after `--redis`.
    for (const match of text.matchAll(/[a-z][a-z0-9+.-]*:\/\/\S+/gi)) {
      const candidate = match[0];
      if (!URL.canParse(candidate)) continue;
      const url = new URL(candidate);
      for (const secret of [url.password, safeDecode(url.password)]) if (secret !== '') secrets.add(secret);
    }
  }
  // Longest first, so that a password holding another is masked whole.
  return [...secrets].sort((a, b) => b.length - a.length);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Replaces every secret in `text` with `***`. */
export function masked(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) out = out.split(secret).join('***');
  return out;
}

/** A Redis URL checked for what the command line reads of it: redis:// or rediss://, a host. */
function parsed(given: string): URL {
  // Not `new URL(given)` bare: its error carries the whole URL, password included, as `input`.
  if (!URL.canParse(given)) {
    throw new UsageError(
      `ratecard: not a Redis URL (redis://[user:password@]host:port; write / ? # @ in a password as %2F %3F %23 %40)`,
    );
  }
  const url = new URL(given);
  if ((url.protocol !== 'redis:' && url.protocol !== 'rediss:') || url.hostname === '') {
    throw new UsageError(`ratecard: a Redis URL starts redis:// or rediss:// and names a host, got ${url.protocol}//…`);
  }
  return url;
}

/** The address and credentials of a URL as ioredis takes them. */
function optionsOf(url: URL, timeoutMs: number): RedisOptions & { host: string; port: number } {
  return {
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port || 6379),
    ...(url.username !== '' && { username: safeDecode(url.username) }),
    ...(url.password !== '' && { password: safeDecode(url.password) }),
    ...(url.pathname.length > 1 && { db: Number(url.pathname.slice(1)) }),
    ...(url.protocol === 'rediss:' && { tls: {} }),
    connectTimeout: timeoutMs,
    // One attempt: an operator wants an answer, not a client waiting for a server that is not there.
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    lazyConnect: true,
  };
}

/** A ready ioredis client for the target; throws UsageError or UnreachableError. */
export async function connect(target: Target): Promise<Redis | Cluster> {
  if (target.urls.length === 0) {
    throw new UsageError('ratecard: no Redis given: set REDIS_URL or pass --redis <url>');
  }
  const urls = target.urls.map(parsed);
  const client =
    target.cluster || urls.length > 1
      ? clusterOf(urls, target.timeoutMs)
      : new Redis(optionsOf(urls[0] as URL, target.timeoutMs));
  let lastError: unknown;
  client.on('error', (error: unknown) => {
    lastError = error;
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      client.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${target.timeoutMs} ms`)),
          // A cluster connects to its seed, then to every master: give it the timeout for each step.
          target.timeoutMs * (target.cluster ? 2 : 1),
        );
      }),
    ]);
    await client.ping();
  } catch (error) {
    // A client that ended already would wait two seconds for a socket it no longer has.
    if (client.status !== 'end') client.disconnect();
    const cause = lastError ?? error;
    const detail = cause instanceof Error ? cause.message : String(cause);
    throw new UnreachableError(`ratecard: could not use Redis at ${described(urls, target)}: ${detail}`);
  } finally {
    clearTimeout(timer);
  }
  return client;
}

function clusterOf(urls: readonly URL[], timeoutMs: number): Cluster {
  const nodes = urls.map((url) => optionsOf(url, timeoutMs));
  // The credentials and timeouts of the first URL serve every node, as one cluster has one password.
  const { host: _host, port: _port, db: _db, lazyConnect: _lazy, ...redisOptions } = nodes[0] as (typeof nodes)[0];
  return new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    { redisOptions, lazyConnect: true, clusterRetryStrategy: () => null, slotsRefreshTimeout: timeoutMs },
  );
}

/** The target as it may be shown: hosts and ports, the password never. */
export function described(urls: readonly URL[], target: Target): string {
  const hosts = urls.map((url) => `${url.protocol}//${url.username === '' ? '' : `${url.username}@`}${url.host}`);
  return `${hosts.join(', ')}${target.cluster || urls.length > 1 ? ' (cluster)' : ''}`;
}
