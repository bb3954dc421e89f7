import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConcurrentHobbyist, checkDeveloperBurst, checkOwnLimits, checkUnlimited } from './support/http.js';
import { binary, FIXTURES, runs } from './support/runtimes.js';

const WORKERD = binary('workerd');

/**
 * One Worker on one loopback socket. No compatibility flags: without nodejs_compat, workerd has no `process`,
 * `Buffer`, `setImmediate` nor `node:` modules, as on Cloudflare by default.
 */
const CONFIG = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .worker)],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "worker.js")],
  compatibilityDate = "2025-09-01",
);
`;

describe.runIf(runs('workerd', WORKERD))('a Cloudflare Worker in workerd: Hono middleware on the memory store', () => {
  let dir: string;
  let workerd: ChildProcess | undefined;
  let url: string;
  let logs = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ratecard-worker-'));
    // As wrangler bundles a Worker: esbuild, ESM, the worker conditions, and no Node built-ins to fall back on, so a
    // `node:` import anywhere on the path fails the build here.
    await build({
      entryPoints: [`${FIXTURES}worker.mjs`],
      outfile: join(dir, 'worker.js'),
      bundle: true,
      format: 'esm',
      platform: 'browser',
      conditions: ['workerd', 'worker', 'browser'],
      logLevel: 'silent',
    });
    writeFileSync(join(dir, 'config.capnp'), CONFIG);
    const child = spawn(WORKERD, ['serve', join(dir, 'config.capnp'), '--control-fd=3'], {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    workerd = child;
    child.stdout?.on('data', (chunk: Buffer) => {
      logs += chunk;
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      logs += chunk;
    });
    // workerd reports each socket's port on the control descriptor once it listens.
    const port = await new Promise<number>((resolve, reject) => {
      let control = '';
      const timer = setTimeout(() => reject(new Error(`workerd did not listen within 30 s:\n${logs}`)), 30_000);
      (child.stdio[3] as NodeJS.ReadableStream).on('data', (chunk: Buffer) => {
        control += chunk;
        for (const line of control.split('\n')) {
          if (!line.includes('"listen"')) continue;
          const event = JSON.parse(line) as { event: string; socket: string; port: number };
          clearTimeout(timer);
          resolve(event.port);
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`workerd exited ${code}:\n${logs}`));
      });
    });
    url = `http://127.0.0.1:${port}`;
  }, 60_000);

  afterAll(async () => {
    if (workerd !== undefined && workerd.exitCode === null) {
      const exited = new Promise((resolve) => workerd?.once('exit', resolve));
      workerd.kill('SIGTERM');
      await exited;
    }
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('bundles with no Node built-in: neither `node:` imports nor Node-only globals in the Worker', () => {
    const bundle = readFileSync(join(dir, 'worker.js'), 'utf8');
    expect(bundle).not.toMatch(/from\s*["']node:|require\(["']node:/);
    // A global Workers lack is only ever called off globalThis with ?. (core's deadlines fall back to a timer).
    expect(bundle).not.toMatch(/(?<!globalThis\.)\bsetImmediate\b|\.unref\(/);
  });

  it("answers a Developer's 11th request with the spec's 429: exact headers and body", async () => {
    await checkDeveloperBurst(url);
  });

  it('admits exactly 25 of 40 concurrent Hobbyist requests (one isolate, one memory store)', async () => {
    await checkConcurrentHobbyist(url);
  });

  it('lets unidentified requests and unlimited endpoints through untouched', async () => {
    await checkUnlimited(url);
  });

  it('limits per IP by limits identify gives, on a path no rule matches: the 11th at once is a 429', async () => {
    await checkOwnLimits(url);
  });

  it('decides by the failure policy when the store never answers, once storeTimeoutMs (50 ms) runs out', async () => {
    const response = await fetch(`${url}/budget`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { allowed: boolean; source: string; waitedMs: number };
    expect(body).toMatchObject({ allowed: false, source: 'fail-closed' });
    // Never early; the upper bound only catches a deadline timer that never fires.
    expect(body.waitedMs).toBeGreaterThanOrEqual(49);
    expect(body.waitedMs).toBeLessThan(5_000);
  });

  it('logged no uncaught exception', () => {
    expect(logs).not.toMatch(/Uncaught|ReferenceError|TypeError/);
  });
});
