import type { LuaScript } from './scripts/lua-script.js';

/**
 * The few things the store asks of a Redis client. ioredis' `Redis` (standalone or Sentinel-managed) and `Cluster`
 * fit it as they are; the store registers nothing on the client and sends only EVALSHA and EVAL.
 */
export interface RedisClient {
  /** 'ready' when a command goes straight to Redis. In any other state the store answers at once that Redis is unavailable, rather than let calls wait in the client's offline queue. */
  readonly status: string;
  /** True for a Redis Cluster client: a batch is then split by hash slot. */
  readonly isCluster?: boolean;
  /**
   * Sends one command (here EVALSHA or EVAL) with the arguments as they are, Buffers as bytes, and answers with the
   * reply, bulk strings as Buffers: the consume script speaks packed bytes, which UTF-8 decoding would garble.
   */
  callBuffer(command: string, args: (string | number | Buffer)[]): Promise<unknown>;
  /** Starts connecting a client made with `lazyConnect` (status 'wait'); the store calls it once. */
  connect?(): Promise<unknown>;
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * EVALSHA, and EVAL only when the node that got the call does not hold the script (after a restart, a failover or
 * SCRIPT FLUSH). In a cluster the EVAL goes where the EVALSHA went, so each node loads the script on first need.
 * NOSCRIPT means the script did not run, so sending it again charges nothing twice.
 */
export function runScript(
  client: RedisClient,
  script: LuaScript,
  numKeys: number,
  keysAndArgs: (string | number | Buffer)[],
  onReload: () => void,
): Promise<unknown> {
  return client.callBuffer('evalsha', [script.sha, numKeys, ...keysAndArgs]).then(undefined, (error: unknown) => {
    if (!isNoScript(error)) throw error;
    onReload();
    return client.callBuffer('eval', [script.text, numKeys, ...keysAndArgs]);
  });
}
