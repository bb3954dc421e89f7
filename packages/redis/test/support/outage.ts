import { createLimiter, type Decision, type Limiter, type LimitRequest, RateLimitError } from '@ratecard/core';
import { expect } from 'vitest';
import { type RedisStore, redisStore } from '../../src/index.js';

/** Helpers for tests that take Redis away under a limiter and look at how each call was answered. */

export async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The error a call rejects with, or undefined when it was answered. */
export async function refusal(call: Promise<Decision>): Promise<RateLimitError | undefined> {
  return call.then(
    () => undefined,
    (error: unknown) => {
      if (!(error instanceof RateLimitError)) throw error;
      return error;
    },
  );
}

export interface Watched {
  store: RedisStore;
  limiter: Limiter;
  lines: string[];
}

export function watched(client: Parameters<typeof redisStore>[0]['client']): Watched {
  const lines: string[] = [];
  const store = redisStore({ client });
  // A budget that a machine busy with other work does not run over by itself: these tests look at who answers.
  const limiter = createLimiter({ store, onStoreError: 'throw', storeTimeoutMs: 500, log: (line) => lines.push(line) });
  return { store, limiter, lines };
}

/** A request of an organization on a plan no test here exhausts: every decision is a call to Redis. */
export function request(organization: string): LimitRequest {
  return { organization, endpoint: 'POST /browsers', plan: 'enterprise' };
}

/**
 * Calls until the store refuses one with `code` and `cause` in its own error, then `count` more: each must be refused
 * the same way by the store itself, nothing sent, and the limiter's error must show this call in its stack.
 */
export async function refusedAtOnce(
  { store, limiter }: Watched,
  organization: string,
  code: RateLimitError['code'],
  cause: string,
  count = 20,
): Promise<void> {
  await until(`a ${code} refusal`, async () => {
    const error = await refusal(limiter.consume(request(organization)));
    return error?.code === code && (error.cause as Error | undefined)?.message.includes(cause) === true;
  });
  const before = store.stats();
  const errors = [];
  for (let i = 0; i < count; i++) errors.push(await refusal(limiter.consume(request(organization))));
  expect(errors.map((error) => [error?.code, (error?.cause as Error | undefined)?.message.includes(cause)])).toEqual(
    errors.map(() => [code, true]),
  );
  // Made for this call: its stack shows the caller, not the store's shared error or the limiter's timer.
  expect(errors[0]?.stack).toMatch(/\.test\.ts/);
  const after = store.stats();
  expect(after.unavailable - before.unavailable).toBe(count);
  expect(after.expired).toBe(before.expired);
}
