import type { ServerResponse } from 'node:http';
import type { ErrorBody, ErrorDetail } from '@ratecard/http';

/** Every code this service answers with; docs/reference-service.md lists them with their statuses. */
export type ServiceErrorCode =
  | 'invalid_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'quota_exceeded'
  | 'expectation_failed'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'headers_too_large'
  | 'request_timeout'
  | 'internal_error';

/** An error answered as it is: its status, the spec's Error body, and any extra headers. */
export class HttpError extends Error {
  readonly status: number;
  readonly code: ServiceErrorCode;
  readonly details: ErrorDetail[] | undefined;
  readonly innerError: ErrorDetail | undefined;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    status: number,
    code: ServiceErrorCode,
    message: string,
    extra: { details?: ErrorDetail[]; innerError?: ErrorDetail; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.code = code;
    this.details = extra.details;
    this.innerError = extra.innerError;
    this.headers = extra.headers ?? {};
  }

  body(): ErrorBody {
    const body: ErrorBody = { code: this.code, message: this.message };
    if (this.details !== undefined) body.details = this.details;
    if (this.innerError !== undefined) body.inner_error = this.innerError;
    return body;
  }
}

export const UNAUTHORIZED: HttpError = new HttpError(
  401,
  'unauthorized',
  'Missing or invalid authorization token. Send exactly one header: Authorization: Bearer <token>.',
  { headers: { 'www-authenticate': 'Bearer' } },
);

/**
 * A 409. The SDK retries a 409 by default (elsewhere it can be a lock timeout); none of this service's conflicts
 * goes away by retrying, so the answer says so and one call costs one request.
 */
export function conflict(message: string): HttpError {
  return new HttpError(409, 'conflict', message, { headers: { 'x-should-retry': 'false' } });
}

/**
 * A 409 for an organization that holds as much as it may keep (pools, bytes of settings): nothing changes until it lets
 * something go, so a retry would only be refused again.
 */
export function quotaExceeded(message: string): HttpError {
  return new HttpError(409, 'quota_exceeded', message, { headers: { 'x-should-retry': 'false' } });
}

export const INTERNAL: HttpError = new HttpError(500, 'internal_error', 'Internal server error.');

/** Writes a JSON body with an exact content-type and length. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('content-type', 'application/json');
  res.setHeader('content-length', Buffer.byteLength(text));
  res.end(text);
}

export function sendError(res: ServerResponse, error: HttpError): void {
  sendJson(res, error.status, error.body(), error.headers);
}

/** Renders a client's value for an error detail without echoing huge strings back. */
export function shown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return String(value);
}
