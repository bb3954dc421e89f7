import { RateLimitError } from '@ratecard/core';
import { expect } from 'vitest';

/** The RateLimitError a promise rejects with; fails the test when it resolves or rejects with anything else. */
export async function rejection(promise: Promise<unknown>): Promise<RateLimitError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitError);
    return error as RateLimitError;
  }
  throw new Error('expected a rejection');
}
