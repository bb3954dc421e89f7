import { Agent, request } from 'node:http';

export interface HttpLoadShape {
  port: number;
  method: string;
  path: string;
  body: string;
  /** Each request carries the next of these bearer tokens, round-robin. */
  tokens: readonly string[];
  connections: number;
  durationMs: number;
  maxRequests: number;
}

export interface HttpLoadResult {
  requests: number;
  elapsedMs: number;
  statuses: Record<string, number>;
  errors: number;
  latencies: Float64Array;
}

/**
 * A small closed-loop HTTP/1.1 load generator: `connections` keep-alive sockets to 127.0.0.1, each sending its next
 * request when the last answer has been read. Bounded by time and by count; loopback only.
 */
export async function httpLoad(shape: HttpLoadShape): Promise<HttpLoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: shape.connections, maxFreeSockets: shape.connections });
  const latencies = new Float64Array(shape.maxRequests);
  const statuses: Record<string, number> = {};
  const body = Buffer.from(shape.body);
  let started = 0;
  let finished = 0;
  let errors = 0;
  let token = 0;
  const t0 = performance.now();
  const deadline = t0 + shape.durationMs;

  function once(authorization: string): Promise<void> {
    return new Promise((resolve) => {
      const t = performance.now();
      const outgoing = request(
        {
          host: '127.0.0.1',
          port: shape.port,
          method: shape.method,
          path: shape.path,
          agent,
          headers: {
            authorization,
            'content-type': 'application/json',
            'content-length': body.length,
          },
        },
        (response) => {
          const status = String(response.statusCode);
          statuses[status] = (statuses[status] ?? 0) + 1;
          response.resume();
          response.on('end', () => {
            latencies[finished++] = performance.now() - t;
            resolve();
          });
          response.on('error', () => {
            errors++;
            resolve();
          });
        },
      );
      outgoing.on('error', () => {
        errors++;
        resolve();
      });
      outgoing.end(body);
    });
  }

  const authorizations = shape.tokens.map((value) => `Bearer ${value}`);
  async function connection(): Promise<void> {
    while (started < shape.maxRequests && performance.now() < deadline) {
      started++;
      await once(authorizations[token++ % authorizations.length] as string);
    }
  }

  await Promise.all(Array.from({ length: shape.connections }, connection));
  const elapsedMs = performance.now() - t0;
  agent.destroy();
  return { requests: finished, elapsedMs, statuses, errors, latencies: latencies.subarray(0, finished) };
}
