import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'tsup';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { captureOutput } from './output.js';

/**
 * The service as `pnpm start` runs it, in a heap of 192 MiB, replaying the attack that took it down: 1 MiB bodies of
 * `{}` items (some 20 MiB of heap each once parsed) in browsers and pools, from two organizations, and then every
 * organization filling what it may keep to the bound with the costliest shape that fits. Without the bounds the
 * process runs out of heap within the first ten requests.
 */
const HEAP_MIB = 192;
/** Two organizations at every bound: 4 MiB of settings twice each, 100 pools of 1000 browsers (about 18 MiB). */
const GROWTH_BOUND = 64 * 2 ** 20;

const packageDir = fileURLToPath(new URL('..', import.meta.url));
let scratch: string;
let child: ChildProcess;
let url: string;
let printed: ReturnType<typeof captureOutput>;
const tokens = ['tok_heap_a', 'tok_heap_b'];

beforeAll(async () => {
  await build({ config: join(packageDir, 'tsup.config.ts'), silent: true });
  scratch = mkdtempSync(join(tmpdir(), 'ratecard-heap-'));
  const keys = Object.fromEntries(
    tokens.map((token) => [
      token,
      { organization: `org_${token}`, plan: 'startup', scopes: ['browsers', 'browser_pools', 'invocations'] },
    ]),
  );
  writeFileSync(join(scratch, 'keys.json'), JSON.stringify(keys));
  const probe = fileURLToPath(new URL('./load/heap-probe.mjs', import.meta.url));
  child = spawn(
    process.execPath,
    [`--max-old-space-size=${HEAP_MIB}`, '--expose-gc', '--import', probe, join(packageDir, 'dist', 'main.js')],
    {
      env: { PATH: process.env.PATH ?? '', PORT: '0', API_KEYS_FILE: join(scratch, 'keys.json') },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    },
  );
  printed = captureOutput(child);
  for (let waited = 0; waited < 10_000 && url === undefined; waited += 20) {
    const port = /listening on http:\/\/[^:]+:(\d+)/.exec(printed.stdout())?.[1];
    if (port !== undefined) url = `http://127.0.0.1:${port}`;
    else await new Promise((resolve) => setTimeout(resolve, 20));
  }
  if (url === undefined) throw new Error(`the service did not start: ${printed.stderr()}`);
}, 30_000);

afterAll(() => {
  child?.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

function heapUsed(): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (message) => resolve((message as { heapUsed: number }).heapUsed));
    child.send('heap');
  });
}

async function post(token: string, path: string, body: string): Promise<number> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
  });
  await response.arrayBuffer();
  return response.status;
}

/** `{"<field>":{"list":[{},{},…]}}` of about `bytes` bytes, plus `extra` fields. */
function emptyObjects(field: string, bytes: number, extra = ''): string {
  return `{${extra}"${field}":{"list":[${'{},'.repeat(Math.floor(bytes / 3) - 10)}{}]}}`;
}

it(`keeps the heap bounded under 1 MiB settings bodies from two organizations, in a ${HEAP_MIB} MiB heap`, async () => {
  const before = await heapUsed();
  const statuses: Record<string, number> = {};
  const count = (status: number): void => {
    statuses[status] = (statuses[status] ?? 0) + 1;
  };
  const mib = emptyObjects('chrome_policy', 1000 * 1024);
  const mibPool = emptyObjects('chrome_policy', 1000 * 1024, '"size":1000,');
  for (const token of tokens) {
    for (let i = 0; i < 5; i++) count(await post(token, '/browsers', mib));
    for (let i = 0; i < 5; i++) count(await post(token, '/browser_pools', mibPool));
  }
  // Kept, these 20 would need some 400 MiB.
  expect(statuses).toEqual({ 409: 20 });
  // Every organization fills each bound with the shape that costs the most memory per byte.
  const fitting = emptyObjects('telemetry', 40 * 1024);
  const fittingPool = emptyObjects('telemetry', 40 * 1024, '"size":1000,');
  for (const token of tokens) {
    for (let i = 0; i < 8; i++) count(await post(token, '/browsers', fitting));
    for (let i = 0; i < 8; i++) count(await post(token, '/browser_pools', fittingPool));
    for (let i = 0; i < 100; i++) count(await post(token, '/browser_pools', '{"size":1000}'));
  }
  expect(statuses[201]).toBeGreaterThan(200);
  const growth = (await heapUsed()) - before;
  console.log(
    `heap growth ${(growth / 2 ** 20).toFixed(1)} MiB after ${JSON.stringify(statuses)} (two organizations at every bound)`,
  );
  expect(growth).toBeLessThan(GROWTH_BOUND);
  expect(child.exitCode).toBeNull();
  expect(printed.stderr()).toBe('');
}, 60_000);
