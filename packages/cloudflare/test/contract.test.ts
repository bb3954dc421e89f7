import { storeContractSuite } from '@ratecard/core/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { prepareHarness } from './support/harness.js';
import { startWorkerd, type Workerd, workerdRuns } from './support/workerd.js';

// ratecard's store contract (its test vectors and leases included), checks against the exact model and limiter.reserve,
// run inside workerd on durableObjectStore with the suite's clock passed as clock 'client': one request to the harness
// Worker per test.

const runs = workerdRuns();
const harness = runs ? await prepareHarness() : undefined;
const workerd: Workerd | undefined = harness === undefined ? undefined : await startWorkerd(harness.dir);
const names = workerd === undefined ? [] : ((await (await fetch(`${workerd.url}/tests`)).json()) as string[]);

/** The contract's test names, as the suite declares them here. */
function contractNames(): string[] {
  const found: string[] = [];
  const path: string[] = [];
  storeContractSuite(
    'durable objects',
    { create: () => Promise.reject(new Error('never made here')) },
    {
      describe(name, body) {
        path.push(name);
        body();
        path.pop();
      },
      it(name) {
        found.push([...path, name].join(' > '));
      },
    },
  );
  return found;
}

afterAll(async () => {
  await workerd?.stop();
  harness?.remove();
});

describe.runIf(runs)('durableObjectStore in workerd', () => {
  it('runs the whole contract suite and the model check', () => {
    expect(names.filter((name) => name.startsWith('store contract: '))).toEqual(contractNames());
    expect(names.filter((name) => name.startsWith('the exact model'))).toHaveLength(2);
  });

  for (const name of names) {
    it(name, async () => {
      const response = await fetch(`${(workerd as Workerd).url}/run?name=${encodeURIComponent(name)}`);
      const result = (await response.json()) as { ok: boolean; error?: string };
      if (!result.ok) throw new Error(result.error);
    });
  }

  it('logged no uncaught exception', () => {
    expect(workerd?.output()).not.toMatch(/Uncaught|ReferenceError|TypeError/);
  });
});
