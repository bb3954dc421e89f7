import { perMinute, RateLimitError } from '@ratecard/core';
import { describe, expect, it } from 'vitest';
import { type BucketsNamespace, type DurableObjectStoreOptions, durableObjectStore } from '../src/store.js';

// Options are checked where the store is made, and a closed store sends nothing. Neither needs the runtime: the
// namespace here only records that it was never used.

const untouched = (): BucketsNamespace & { used: number } => {
  const namespace = {
    used: 0,
    idFromName: () => {
      namespace.used++;
      return 'id';
    },
    get: () => {
      namespace.used++;
      throw new Error('no objects here');
    },
  };
  return namespace;
};

function codeOf(make: () => unknown): string | undefined {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitError);
    return (error as RateLimitError).code;
  }
  return undefined;
}

describe('durableObjectStore options', () => {
  it('refuses a missing or wrong namespace, naming it', () => {
    expect(codeOf(() => durableObjectStore(undefined as never))).toBe('invalid_option');
    expect(codeOf(() => durableObjectStore({} as never))).toBe('invalid_option');
    expect(() => durableObjectStore({ namespace: { idFromName: 1 } as never })).toThrow(/namespace must be a Durable/);
  });

  it("refuses an unknown clock, a now that is not a function, and a now with the object's clock", () => {
    const namespace = untouched();
    expect(codeOf(() => durableObjectStore({ namespace, clock: 'redis' as never }))).toBe('invalid_option');
    expect(codeOf(() => durableObjectStore({ namespace, clock: 'client', now: 5 as never }))).toBe('invalid_option');
    expect(() => durableObjectStore({ namespace, now: () => 1 })).toThrow(/now is read only with clock 'client'/);
    expect(codeOf(() => durableObjectStore({ namespace, clock: 'client', now: () => 1 }))).toBeUndefined();
  });

  it('takes every option of DurableObjectStoreOptions', () => {
    const namespace = untouched();
    const every: Required<DurableObjectStoreOptions> = { namespace, clock: 'client', now: () => 1 };
    expect(durableObjectStore(every).shared).toBe(true);
    expect(namespace.used).toBe(0);
  });

  it('refuses an unknown option, even one set to undefined, naming the option it most likely meant', () => {
    for (const value of [untouched(), undefined]) {
      let error: unknown;
      try {
        durableObjectStore({ namespace: untouched(), namepsace: value } as DurableObjectStoreOptions);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(RateLimitError);
      expect((error as RateLimitError).code).toBe('invalid_option');
      expect((error as RateLimitError).message).toBe(
        'ratecard: durableObjectStore got an unknown option "namepsace"; did you mean "namespace"? It takes namespace, clock, now',
      );
    }
  });

  it('declares itself shared, and once closed rejects every call with store_closed, sending nothing', async () => {
    const namespace = untouched();
    const store = durableObjectStore({ namespace });
    expect(store.shared).toBe(true);
    await store.close();
    const limits = [perMinute(10)];
    for (const call of [
      () => store.consume('org', 'e', limits, 1, 100),
      () => store.peek('org', 'e', limits, 1),
      () => store.reset('org', 'e', limits),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: 'store_closed' });
    }
    expect(namespace.used).toBe(0);
  });
});
