import { createLimiter, RateLimitError } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { type RateLimitedFetchOptions, rateLimitedFetch } from '../src/client.js';
import { type RateLimitOptions, resolveOptions } from '../src/evaluate.js';
import { rateLimit as express } from '../src/express.js';
import { rateLimit as fastify } from '../src/fastify.js';
import { rateLimit as hono } from '../src/hono.js';
import { withRateLimit } from '../src/node.js';

const TAKES = 'It takes limiter, identify, onError, ietf, policy, shadowHeaders, lease';

/** Every middleware option, each set: what the middleware must take. */
function everyOption(): Required<RateLimitOptions<unknown>> {
  return {
    limiter: createLimiter({ store: memoryStore() }),
    identify: () => null,
    onError: () => {},
    ietf: true,
    policy: 'api',
    shadowHeaders: true,
    lease: { ms: 1_000, settle: () => undefined },
  };
}

/** The options with `ietf` misspelt `ietF`, as a new user wrote it. */
function misspelt(value: boolean | undefined): RateLimitOptions<unknown> {
  const { ietf: _, ...rest } = everyOption();
  return { ...rest, ietF: value } as RateLimitOptions<unknown>;
}

/** The RateLimitError `build` throws, which must be invalid_option. */
function refusal(build: () => unknown): RateLimitError {
  let error: unknown;
  try {
    build();
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(RateLimitError);
  expect((error as RateLimitError).code).toBe('invalid_option');
  return error as RateLimitError;
}

const MIDDLEWARE = `ratecard: the rate-limit middleware got an unknown option "ietF"; did you mean "ietf"? ${TAKES}`;

describe.each([
  ['resolveOptions', (options: RateLimitOptions<unknown>) => resolveOptions(options)],
  ['Express rateLimit', (options: RateLimitOptions<unknown>) => express(options)],
  ['Hono rateLimit', (options: RateLimitOptions<unknown>) => hono(options)],
  ['withRateLimit (node:http)', (options: RateLimitOptions<unknown>) => withRateLimit(() => {}, options)],
])('%s', (_name, build) => {
  it('takes every option of RateLimitOptions', () => {
    expect(() => build(everyOption())).not.toThrow();
  });

  it('refuses an unknown option, even one set to undefined, naming the option it most likely meant', () => {
    for (const value of [true, undefined]) expect(refusal(() => build(misspelt(value))).message).toBe(MIDDLEWARE);
  });
});

describe('Fastify rateLimit', () => {
  it('takes every option of RateLimitOptions', async () => {
    const app = Fastify();
    await app.register(fastify, everyOption());
    await app.close();
  });

  it('refuses an unknown option when registered, naming the option it most likely meant', async () => {
    for (const value of [true, undefined]) {
      const app = Fastify();
      const error = await app.register(fastify, misspelt(value)).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(RateLimitError);
      expect((error as RateLimitError).message).toBe(MIDDLEWARE);
      await app.close();
    }
  });
});

describe('rateLimitedFetch', () => {
  it('takes every option of RateLimitedFetchOptions', () => {
    const every: Required<RateLimitedFetchOptions> = {
      fetch: () => Promise.resolve(new Response()),
      maxRetries: 1,
      maxWait: 1_000,
      maxHold: 60_000,
      pace: false,
      key: (_method, url) => url.host,
      onWait: () => {},
      clock: { now: () => 0, sleep: () => Promise.resolve() },
    };
    expect(rateLimitedFetch(every)).toBeTypeOf('function');
  });

  it('refuses an unknown option, even one set to undefined, naming the option it most likely meant', () => {
    for (const value of [1_000, undefined]) {
      const options = { maxRetries: 1, maxwait: value } as RateLimitedFetchOptions;
      expect(refusal(() => rateLimitedFetch(options)).message).toBe(
        'ratecard: rateLimitedFetch got an unknown option "maxwait"; did you mean "maxWait"? It takes fetch, maxRetries, maxWait, maxHold, pace, key, onWait, clock',
      );
    }
  });
});
