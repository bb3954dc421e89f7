import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Limiter, Plan } from '@ratecard/core';
import type { Identity } from '@ratecard/http';
import { type RequestListener, withRateLimit } from '@ratecard/http/node';
import { type ApiKeys, KeyRing, type Principal, type Scope } from './auth.js';
import { readJson } from './body.js';
import { BrowserRegistry } from './browsers.js';
import { HttpError, INTERNAL, sendError, sendJson, UNAUTHORIZED } from './errors.js';
import { Fields } from './fields.js';
import { BROWSER_SETTINGS, LEASE_SETTINGS, POOL_SETTINGS, readSettings } from './options.js';
import { MAX_POOL_SIZE, nameProblem, newId, PoolRegistry } from './pools.js';
import { type Resolution, resolveRoute } from './routes.js';

export { type ApiKey, type ApiKeys, KeysFileError, SCOPES, type Scope, validateKeys } from './auth.js';
export { MAX_BODY_BYTES } from './body.js';
export { BrowserRegistry, type Session } from './browsers.js';
export { type PoolPage, PoolRegistry, type PoolView } from './pools.js';

export interface AppOptions {
  /**
   * Decides every request on a rule; its rules choose which routes are enforced, shadowed or unlimited. `null` serves
   * every request with no rate-limit middleware at all: the baseline `pnpm bench` measures the limiter's cost against.
   */
  limiter: Limiter | null;
  /** token → key, as in the keys file; validated here, so a bad set throws `KeysFileError` at start. */
  keys: ApiKeys;
  /** Where pools live; default a new, empty registry. */
  pools?: PoolRegistry;
  /** Where standalone browsers live; default a new, empty registry. */
  browsers?: BrowserRegistry;
  /** Gets every error answered 500 (and limiter failures); default `console.error`. Never sent to the client. */
  onError?: (error: unknown, request: IncomingMessage) => void;
}

/** What the service knows of a request before handling it: who sent it and where it goes. */
interface Gate {
  readonly principal: Principal | undefined;
  readonly route: Resolution;
}

/** Route areas a plan does not include: browser pools are not part of the free Developer plan. */
export const PLAN_EXCLUDES: Readonly<Partial<Record<Plan, readonly Scope[]>>> = { developer: ['browser_pools'] };

const MAX_SESSION_ID_LENGTH = 64;
/** How long an acquire waits for an idle browser when it does not say. */
const DEFAULT_ACQUIRE_TIMEOUT_SECONDS = 10;
const DEFAULT_PAGE_SIZE = 20;
const MAX_PAGE_SIZE = 100;

function logError(error: unknown, request: IncomingMessage): void {
  console.error(`reference-service: ${request.method} ${request.url} answered 500:`, error);
}

/** The 403 a known key gets on a route it may not use (its scopes, its plan), or undefined. */
function refusal(principal: Principal, area: Scope): HttpError | undefined {
  if (!principal.scopes.has(area)) {
    return new HttpError(403, 'forbidden', `This API key lacks the ${area} scope needed here.`, {
      innerError: { code: 'missing_scope', message: `the key's scopes do not include ${area}` },
    });
  }
  if (PLAN_EXCLUDES[principal.plan]?.includes(area) === true) {
    return new HttpError(403, 'forbidden', `The ${principal.plan} plan does not include ${area}.`, {
      innerError: { code: 'insufficient_plan', message: `upgrade to a plan that includes ${area}` },
    });
  }
  return undefined;
}

function whole(value: string, field: string, min: number, max: number, problems: HttpError[]): number {
  const number = /^\d{1,10}$/.test(value) ? Number(value) : Number.NaN;
  if (Number.isInteger(number) && number >= min && number <= max) return number;
  problems.push(
    new HttpError(400, 'invalid_request', `${field}: must be a whole number from ${min} to ${max}, got ${value}`),
  );
  return min;
}

/** The query of `GET /browser_pools`: `offset`, `limit`, `name`, `query`; anything else is a 400. */
function readListQuery(query: string): { offset: number; limit: number; name?: string; query?: string } {
  const params = new URLSearchParams(query);
  const problems: HttpError[] = [];
  const filter: { offset: number; limit: number; name?: string; query?: string } = {
    offset: 0,
    limit: DEFAULT_PAGE_SIZE,
  };
  for (const [key, value] of params) {
    if (key === 'offset') filter.offset = whole(value, key, 0, 1_000_000, problems);
    else if (key === 'limit') filter.limit = whole(value, key, 1, MAX_PAGE_SIZE, problems);
    else if (key === 'name' || key === 'query') filter[key] = value;
    else problems.push(new HttpError(400, 'invalid_request', `${key}: is not a query parameter of this operation`));
  }
  if (problems.length > 0) {
    throw new HttpError(400, 'invalid_request', 'The query is invalid.', {
      details: problems.map((problem) => ({ code: 'invalid_value', message: problem.message })),
    });
  }
  return filter;
}

/**
 * The service as a node:http request listener: authentication, then the rate limit (through `@ratecard/http/node`),
 * then routing, validation, the in-memory browsers and pools. Every error is answered with the spec's Error body.
 */
export function createApp(options: AppOptions): RequestListener {
  const ring = new KeyRing(options.keys);
  const pools = options.pools ?? new PoolRegistry();
  const browsers = options.browsers ?? new BrowserRegistry();
  const onError = options.onError ?? logError;
  const gates = new WeakMap<IncomingMessage, Gate>();
  /** Requests whose method the limiter is shown as another: the method they arrived with. */
  const shownAs = new WeakMap<IncomingMessage, string>();

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
   * Only a request that will be served is counted: one that fails authentication, routing, the scope or the plan
   * check gets null, goes past the limiter untouched and is answered 401, 404, 405 or 403 by the handler.
   */
  function identify(request: IncomingMessage): Identity | null {
    const { principal, route } = gate(request);
    if (principal === undefined || route.kind !== 'route' || refusal(principal, route.area) !== undefined) return null;
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
    const refused = refusal(principal, route.area);
    if (refused !== undefined) throw refused;
    const organization = principal.organization;
    const id = route.id ?? '';
    switch (route.operation) {
      case 'createBrowser': {
        const fields = new Fields(await readJson(request, response), BROWSER_SETTINGS);
        const settings = readSettings(fields, BROWSER_SETTINGS);
        fields.check();
        sendJson(response, 201, browsers.create(organization, settings));
        return;
      }
      case 'getBrowser': {
        // `include_deleted` is taken and changes nothing: a deleted local browser is gone.
        sendJson(response, 200, browsers.get(organization, id));
        return;
      }
      case 'deleteBrowser': {
        browsers.delete(organization, id);
        response.writeHead(204).end();
        return;
      }
      case 'createInvocation': {
        const body = await readJson(request, response);
        new Fields(body, 'any').check();
        const action = (body as { action_name?: unknown } | undefined)?.action_name;
        sendJson(response, 202, {
          id: newId('inv_'),
          action_name: typeof action === 'string' ? action : '',
          status: 'queued',
        });
        return;
      }
      case 'listPools': {
        const page = pools.list(organization, readListQuery(route.query));
        sendJson(response, 200, page.items, {
          'x-has-more': String(page.hasMore),
          'x-next-offset': String(page.nextOffset),
        });
        return;
      }
      case 'createPool': {
        const fields = new Fields(await readJson(request, response), ['name', 'size', ...POOL_SETTINGS]);
        const name = fields.has('name') ? fields.string('name', nameProblem) : undefined;
        const size = fields.integer('size', 0, MAX_POOL_SIZE);
        const settings = readSettings(fields, POOL_SETTINGS);
        fields.check();
        const config = name === undefined ? { size, ...settings } : { size, name, ...settings };
        sendJson(response, 201, pools.create(organization, name, config));
        return;
      }
      case 'getPool': {
        sendJson(response, 200, pools.get(organization, id));
        return;
      }
      case 'updatePool': {
        const fields = new Fields(await readJson(request, response), [
          'name',
          'size',
          'discard_all_idle',
          ...POOL_SETTINGS,
        ]);
        const name = fields.has('name')
          ? fields.string('name', (value) => (value === '' ? undefined : nameProblem(value)))
          : undefined;
        const size = fields.has('size') ? fields.integer('size', 0, MAX_POOL_SIZE) : undefined;
        const discardAllIdle = fields.has('discard_all_idle') ? fields.boolean('discard_all_idle') : undefined;
        const settings = readSettings(fields, POOL_SETTINGS);
        fields.check();
        sendJson(response, 200, pools.update(organization, id, { name, size, discardAllIdle, settings }));
        return;
      }
      case 'deletePool': {
        const fields = new Fields(await readJson(request, response), ['force']);
        const force = fields.has('force') ? fields.boolean('force') : false;
        fields.check();
        pools.delete(organization, id, force);
        response.writeHead(204).end();
        return;
      }
      case 'acquire': {
        const fields = new Fields(await readJson(request, response), ['acquire_timeout_seconds', ...LEASE_SETTINGS]);
        const timeout = fields.has('acquire_timeout_seconds')
          ? fields.integer('acquire_timeout_seconds', 0, 300)
          : DEFAULT_ACQUIRE_TIMEOUT_SECONDS;
        const lease = readSettings(fields, LEASE_SETTINGS);
        fields.check();
        const gone = new AbortController();
        const onClose = (): void => gone.abort();
        response.on('close', onClose);
        const session = await pools.acquire(organization, id, lease, timeout * 1000, gone.signal);
        response.off('close', onClose);
        if (session === undefined) response.writeHead(204).end();
        else sendJson(response, 200, session);
        return;
      }
      case 'release': {
        const fields = new Fields(await readJson(request, response), ['session_id', 'reuse']);
        const session = fields.string('session_id', (value) =>
          value.length === 0 || value.length > MAX_SESSION_ID_LENGTH
            ? `must be 1 to ${MAX_SESSION_ID_LENGTH} characters`
            : undefined,
        );
        const reuse = fields.has('reuse') ? fields.boolean('reuse') : true;
        fields.check();
        pools.release(organization, id, session, reuse);
        response.writeHead(204).end();
        return;
      }
      case 'flush': {
        new Fields(await readJson(request, response), []).check();
        pools.flush(organization, id);
        response.writeHead(204).end();
        return;
      }
    }
  }

  function handler(request: IncomingMessage, response: ServerResponse): void {
    const arrived = shownAs.get(request);
    if (arrived !== undefined) request.method = arrived;
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

  const limiter = options.limiter;
  const limited =
    limiter === null
      ? handler
      : withRateLimit(handler, {
          limiter,
          identify,
          onError: (error, request) => {
            const arrived = shownAs.get(request);
            if (arrived !== undefined) request.method = arrived;
            onError(error, request);
          },
        });

  return (request, response) => {
    // node:http would answer this itself with an empty 400; the server is made with requireHostHeader: false so the
    // answer can carry the Error body.
    if (request.httpVersion === '1.1' && request.headers.host === undefined) {
      sendError(response, MISSING_HOST);
      return;
    }
    // The SDK updates a pool with PATCH, the spec's rule for pool updates is `PUT /browser-pools/:id`, and the
    // middleware matches rules by `request.method`: the limiter is shown PUT, and the handler gets PATCH back.
    if (request.method === 'PATCH') {
      const { route } = gate(request);
      if (route.kind === 'route' && route.operation === 'updatePool') {
        shownAs.set(request, 'PATCH');
        request.method = 'PUT';
      }
    }
    limited(request, response);
  };
}

const MISSING_HOST = new HttpError(400, 'invalid_request', 'An HTTP/1.1 request must carry a Host header.', {
  headers: { connection: 'close' },
});
const EXPECTATION_FAILED = new HttpError(
  417,
  'expectation_failed',
  'The only expectation this server meets is Expect: 100-continue.',
  { headers: { connection: 'close' } },
);
const CONNECT_REFUSED = new HttpError(405, 'method_not_allowed', 'Method CONNECT is not allowed: this is not a proxy.');

/** How long a client may take and how many connections it may hold: the server's bounds. */
export interface ServerLimits {
  /** Longest a request's head may take to arrive, from the connection on (or its first byte, after another request). */
  headersTimeoutMs: number;
  /** Longest a whole request, head and body, may take to arrive; a body dribbled in is cut here. */
  requestTimeoutMs: number;
  /** How long a kept-alive connection may stay idle between requests. */
  keepAliveTimeoutMs: number;
  /**
   * Most connections open at once. A connection past it closes the one that has waited longest without a request in
   * progress (idle, or still sending its head), or is itself closed when every connection is being served.
   */
  maxConnections: number;
}

/**
 * Node's own defaults let a request take 300 s and connections grow until the process has no file descriptor left;
 * these keep a slow or silent client from holding a connection for long, and the connections within what a default
 * open-file limit (`ulimit -n`, often 1024) allows beside the Redis connections and the metrics server.
 */
export const SERVER_LIMITS: Readonly<ServerLimits> = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 900,
};

/**
 * Holds the server to `max` connections. A flood of clients that connect and send nothing, or half a head, cannot
 * lock out real ones: each new connection past the bound displaces the one waiting longest for its request.
 */
function capConnections(server: Server, max: number): void {
  /** Connections with no request in progress, the longest waiting first. */
  const waiting = new Set<Socket>();
  let open = 0;
  server.on('connection', (socket: Socket) => {
    open++;
    socket.once('close', () => {
      open--;
      waiting.delete(socket);
    });
    if (open > max) {
      const longest = waiting.values().next().value;
      if (longest === undefined) {
        socket.destroy();
        return;
      }
      waiting.delete(longest);
      longest.destroy();
    }
    waiting.add(socket);
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    waiting.delete(socket);
    response.once('close', () => {
      if (!socket.destroyed) waiting.add(socket);
    });
  });
}

/**
 * The service's node:http server, held to `limits`, with the answers node:http would otherwise write itself, with no
 * body or none at all, given the Error body: a request without Host (400), an `Expect` other than `100-continue`
 * (417), `CONNECT` (405), and requests it cannot parse or that do not arrive in time (see `answerClientError`).
 */
export function createServiceServer(listener: RequestListener, limits: ServerLimits = SERVER_LIMITS): Server {
  const server = createServer(
    {
      requireHostHeader: false,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // How often node looks for connections past their timeouts (30 s by default, which a 10 s bound would triple).
      connectionsCheckingInterval: Math.ceil(Math.min(1_000, limits.headersTimeoutMs / 4)),
    },
    listener,
  );
  capConnections(server, limits.maxConnections);
  server.on('clientError', answerClientError);
  server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => {
    sendError(response, EXPECTATION_FAILED);
  });
  server.on('connect', (_request: IncomingMessage, socket: Duplex) => {
    writeRaw(socket, CONNECT_REFUSED, 'Method Not Allowed', 'allow: GET, HEAD, POST, PUT, PATCH, DELETE\r\n');
  });
  return server;
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
  writeRaw(socket, failure, reason);
}

/** An Error answer written straight to a socket that node:http has handed over, and the connection closed. */
function writeRaw(socket: Duplex, failure: HttpError, reason: string, headers = ''): void {
  const body = JSON.stringify(failure.body());
  socket.end(
    `HTTP/1.1 ${failure.status} ${reason}\r\n${headers}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    // Closed once the answer is written, as node closes after its own answers: ending only this side would leave the
    // connection open for as long as the client neither reads nor closes, which a flood of slow clients never does.
    () => socket.destroy(),
  );
}
