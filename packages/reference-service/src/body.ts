import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, shown } from './errors.js';

/** Largest request body read: 1 MiB. */
export const MAX_BODY_BYTES: number = 1024 * 1024;

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

function payloadTooLarge(): HttpError {
  return new HttpError(413, 'payload_too_large', `The request body is larger than ${MAX_BODY_BYTES} bytes (1 MiB).`, {
    // The rest of the body is not read, so the connection cannot carry another request.
    headers: { connection: 'close' },
  });
}

/**
 * The request body parsed as JSON: undefined when there is none; a 415 for a body declared as something other than
 * JSON; a 413 past 1 MiB, found from Content-Length before reading or by counting while reading, and reading stops
 * there; a 400 for bytes that are not JSON.
 */
export async function readJson(request: IncomingMessage, response: ServerResponse): Promise<unknown> {
  const declared = request.headers['content-length'];
  const chunked = request.headers['transfer-encoding'] !== undefined;
  if (!chunked && (declared === undefined || declared === '0')) return undefined;
  const type = request.headers['content-type'];
  if (type !== undefined && !JSON_TYPE.test(type)) {
    throw new HttpError(
      415,
      'unsupported_media_type',
      'Request bodies must be JSON: send Content-Type: application/json.',
      {
        innerError: { code: 'content_type', message: `got ${shown(type)}` },
      },
    );
  }
  if (declared !== undefined && Number(declared) > MAX_BODY_BYTES) throw payloadTooLarge();
  const text = await collect(request, response);
  if (text.trim().length === 0) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'invalid_request', 'The request body is not valid JSON.', {
      innerError: { code: 'malformed_json', message: 'the body could not be parsed as JSON' },
    });
  }
}

function collect(request: IncomingMessage, response: ServerResponse): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        stop();
        // Nothing more is read: the answer goes out now and the connection closes behind it.
        request.pause();
        reject(payloadTooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      stop();
      try {
        resolve(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks)));
      } catch {
        reject(
          new HttpError(400, 'invalid_request', 'The request body is not valid JSON.', {
            innerError: { code: 'malformed_json', message: 'the body is not valid UTF-8' },
          }),
        );
      }
    };
    // An aborted upload: the client is gone, so this answer is never read, but the handler still ends cleanly.
    const onError = (): void => {
      stop();
      reject(new HttpError(400, 'invalid_request', 'The request body could not be read.'));
    };
    const onClose = (): void => {
      if (request.complete) return;
      stop();
      // Nobody is left to answer; the handler's reply goes nowhere, which is right.
      reject(new HttpError(400, 'invalid_request', 'The request body ended before its declared length.'));
    };
    function stop(): void {
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onError);
      response.off('close', onClose);
    }
    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', onError);
    response.on('close', onClose);
  });
}
