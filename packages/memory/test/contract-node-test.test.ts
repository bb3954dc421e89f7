import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import type * as nodeTest from 'node:test';
import { fileURLToPath } from 'node:url';
import type { TestApi } from '@ratecard/core/testing';
import { expect, it } from 'vitest';

// docs/stores.md hands the suite node:test's describe and it; this package's tsc, run before its tests, fails here if
// their types stop fitting TestApi.
type NodeTestFits = { describe: typeof nodeTest.describe; it: typeof nodeTest.it } extends TestApi ? true : false;
const nodeTestFits: NodeTestFits = true;

it('passes the store contract suite under node:test, given its describe and it', () => {
  expect(nodeTestFits).toBe(true);
  // Written inside this package so that its imports resolve through the workspace like a user's would.
  const program = fileURLToPath(new URL('../contract-node-test.tmp.mjs', import.meta.url));
  writeFileSync(
    program,
    [
      "import { describe, it } from 'node:test';",
      "import { storeContractSuite } from '@ratecard/core/testing';",
      "import { memoryStore } from '@ratecard/memory';",
      "storeContractSuite('memory', { create: (now) => memoryStore({ now }) }, { describe, it });",
    ].join('\n'),
  );
  try {
    // node --test exits non-zero, and execFileSync throws, when a test fails.
    const report = execFileSync(process.execPath, ['--test', '--test-reporter=tap', program], { encoding: 'utf8' });
    expect(report).toMatch(/^# fail 0$/m);
    expect(Number(/^# pass (\d+)$/m.exec(report)?.[1])).toBeGreaterThan(0);
  } finally {
    rmSync(program, { force: true });
  }
});
