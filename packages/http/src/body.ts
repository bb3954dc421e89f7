/** A lower-level detail inside an Error body (the spec's ErrorDetail). */
export interface ErrorDetail {
  /** A machine-readable code. */
  code?: string;
  /** A human-readable message. */
  message?: string;
}

/** The body of every error response (the spec's Error). */
export interface ErrorBody {
  /** A machine-readable code: `rate_limit_exceeded` on a 429, `internal_error` on a 500. */
  code: string;
  /** A human-readable message. */
  message: string;
  /** Lower-level details, if any. */
  details?: ErrorDetail[];
  /** The underlying error, if any. */
  inner_error?: ErrorDetail;
}

/** The body of a 429: the spec fixes the code and the message, and allows nothing else in it. */
export const RATE_LIMIT_EXCEEDED: Readonly<ErrorBody> = Object.freeze({
  code: 'rate_limit_exceeded',
  message: 'Rate limit exceeded. Please retry later.',
});

/**
 * The body of the 500 a middleware answers when the limiter fails (for example a store outage under
 * `onStoreError: 'throw'`). It says nothing about the cause: that goes to `onError`, never to the client.
 */
export const INTERNAL_ERROR: Readonly<ErrorBody> = Object.freeze({
  code: 'internal_error',
  message: 'Internal server error.',
});
