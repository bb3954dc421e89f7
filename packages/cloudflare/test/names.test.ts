import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, prepareHarness, type WireLimit } from './support/harness.js';
import { startWorkerd, type Workerd, workerdRuns } from './support/workerd.js';

// Organizations name objects and endpoints are SQLite text, and the store passes both as they are: workerd keeps
// names apart that differ only in a lone UTF-16 surrogate (which UTF-8 cannot carry) or in NUL, so no escaping is
// needed, and this test would show the day it is.

const ONE: WireLimit = { capacity: 1, refill: 1, intervalMs: 86_400_000, name: '1d' };
const T = 1_700_000_000_000;

describe.runIf(workerdRuns())('names through the object', () => {
  let harness: Awaited<ReturnType<typeof prepareHarness>>;
  let workerd: Workerd;

  beforeAll(async () => {
    harness = await prepareHarness();
    workerd = await startWorkerd(harness.dir);
  });

  afterAll(async () => {
    await workerd?.stop();
    harness?.remove();
  });

  it('gives every organization and endpoint its own bucket, lone surrogates and NUL included', async () => {
    const prefix = `names-${process.pid}-${Date.now()}-`;
    const names = ['x\uD800', 'x\uD801', 'x\uFFFD', 'x%uD800', 'x\u0000', 'x\u0000y', 'x'];
    for (const organization of names) {
      for (const endpoint of names) {
        const body = { organization: prefix + organization, endpoint, limits: [ONE], cost: 1, now: T };
        expect(await call(workerd, { method: 'consume', ...body })).toEqual({ outcomes: [0] });
      }
    }
  });
});
