import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Limiter } from '@ratecard/core';
import type { Identity } from '@ratecard/http';
import { type RequestListener, withRateLimit } from '@ratecard/http/node';
import { type ApiKeys, KeyRing, type Principal } from './auth.js';
import { readJson } from './body.js';
import { HttpError, INTERNAL, sendError, sendJson, UNAUTHORIZED } from './errors.js';
import { Fields } from './fields.js';
import { MAX_POOL_SIZE, nameProblem, newId, PoolRegistry } from './pools.js';
import { type Resolution, resolveRoute } from './routes.js';

export { type ApiKey, type ApiKeys, KeysFileError, SCOPES, type Scope, validateKeys } from './auth.js';
export { MAX_BODY_BYTES } from './body.js';
export { PoolRegistry, type PoolView } from './pools.js';

export interface AppOptions {
  /** Decides every request on a rule; its rules choose which routes are enforced, shadowed or unlimited. */
  limiter: Limiter;
  /** token → key, as in the keys file; validated here, so a bad set throws `KeysFileError` at start. */
  keys: ApiKeys;
  /** Where pools live; default a new, empty registry. */
  pools?: PoolRegistry;
  /** Gets every error answered 500 (and limiter failures); default `console.error`. Never sent to the client. */
  onError?: (error: unknown, request: IncomingMessage) => void;
}

/** What the service knows of a request before handling it: who sent it and where it goes. */
interface Gate {
  readonly principal: Principal | undefined;
  readonly route: Resolution;
}

const MAX_BROWSER_ID_LENGTH = 64;

function logError(error: unknown, request: IncomingMessage): void {
  console.error(`reference-service: ${request.method} ${request.url} answered 500:`, error);
}

/**
 * The service as a node:http request listener: authentication, then the rate limit (through `@ratecard/http/node`),
 * then routing, validation and the in-memory pools. Every error is answered with the spec's Error body.
 */
export function createApp(options: AppOptions): RequestListener {
  const ring = new KeyRing(options.keys);
  const pools = options.pools ?? new PoolRegistry();
  const onError = options.onError ?? logError;
  const gates = new WeakMap<IncomingMessage, Gate>();

  // The middleware asks `identify` and the handler asks the gate again; the cache makes it one lookup per request.
  function gate(request: IncomingMessage): Gate {
    let known = gates.get(request);
    if (known === undefined) {
      known = { principal: ring.authenticate(request), route: resolveRoute(request.method ?? '', request.url ?? '') };
      gates.set(request, known);
    }
    return known;
  }

  /**
   * Only a request that will be served is counted: one that fails authentication, routing or the scope check gets
   * null, goes past the limiter untouched and is answered 401, 404, 405 or 403 by the handler.
   */
  function identify(request: IncomingMessage): Identity | null {
    const { principal, route } = gate(request);
    if (principal === undefined || route.kind !== 'route' || !principal.scopes.has(route.area)) return null;
    return {
      organization: principal.organization,
      plan: principal.plan,
      trial: principal.trial,
      override: principal.override,
    };
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const { principal, route } = gate(request);
    if (principal === undefined) throw UNAUTHORIZED;
    if (route.kind === 'not_found') throw new HttpError(404, 'not_found', 'No such route.');
    if (route.kind === 'method_not_allowed') {
      throw new HttpError(405, 'method_not_allowed', `Method ${request.method} is not allowed here.`, {
        headers: { allow: route.allow.join(', ') },
      });
    }
    if (!principal.scopes.has(route.area)) {
      throw new HttpError(403, 'forbidden', `This API key lacks the ${route.area} scope needed here.`);
    }
    const organization = principal.organization;
    const pool = route.pool ?? '';
    switch (route.operation) {
      case 'createBrowser': {
        new Fields(await readJson(request, response), 'any').check();
        sendJson(response, 201, { id: newId('br_') });
        return;
      }
      case 'createInvocation': {
        new Fields(await readJson(request, response), 'any').check();
        sendJson(response, 202, { id: newId('inv_') });
        return;
      }
      case 'createPool': {
        const fields = new Fields(await readJson(request, response), ['name', 'size']);
        const name = fields.string('name', nameProblem);
        const size = fields.integer('size', 0, MAX_POOL_SIZE);
        fields.check();
        sendJson(response, 201, pools.create(organization, name, size));
        return;
      }
      case 'getPool': {
        sendJson(response, 200, pools.get(organization, pool));
        return;
      }
      case 'updatePool': {
        const fields = new Fields(await readJson(request, response), ['size']);
        const size = fields.integer('size', 0, MAX_POOL_SIZE);
        fields.check();
        sendJson(response, 200, pools.resize(organization, pool, size));
        return;
      }
      case 'acquire': {
        new Fields(await readJson(request, response), []).check();
        sendJson(response, 200, { browser_id: pools.acquire(organization, pool) });
        return;
      }
      case 'release': {
        const fields = new Fields(await readJson(request, response), ['browser_id']);
        const browser = fields.string('browser_id', (value) =>
          value.length === 0 || value.length > MAX_BROWSER_ID_LENGTH
            ? `must be 1 to ${MAX_BROWSER_ID_LENGTH} characters`
            : undefined,
        );
        fields.check();
        pools.release(organization, pool, browser);
        response.writeHead(204).end();
        return;
      }
      case 'flush': {
        new Fields(await readJson(request, response), []).check();
        pools.flush(organization, pool);
        response.writeHead(204).end();
        return;
      }
    }
  }

  function handler(request: IncomingMessage, response: ServerResponse): void {
    handle(request, response).catch((error: unknown) => {
      if (response.headersSent) {
        onError(error, request);
        response.destroy();
        return;
      }
      if (error instanceof HttpError) {
        sendError(response, error);
        return;
      }
      onError(error, request);
      sendError(response, INTERNAL);
    });
  }

  return withRateLimit(handler, { limiter: options.limiter, identify, onError });
}

const NOT_HTTP: readonly [string, HttpError] = [
  'Bad Request',
  new HttpError(400, 'invalid_request', 'The request is not valid HTTP/1.1.'),
];
const CLIENT_ERRORS: Readonly<Record<string, readonly [string, HttpError]>> = {
  HPE_HEADER_OVERFLOW: [
    'Request Header Fields Too Large',
    new HttpError(431, 'headers_too_large', 'The request headers are larger than the server accepts.'),
  ],
  ERR_HTTP_REQUEST_TIMEOUT: [
    'Request Timeout',
    new HttpError(408, 'request_timeout', 'The request did not arrive in time.'),
  ],
};

/**
 * For a server's `clientError` event: node:http refuses requests it cannot parse (an unknown method, a malformed
 * header, headers over the size bound) before any listener runs, and by default answers them with no body. This
 * answers them with an Error body too.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [reason, failure] = CLIENT_ERRORS[error.code ?? ''] ?? NOT_HTTP;
  const body = JSON.stringify(failure.body());
  socket.end(
    `HTTP/1.1 ${failure.status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
