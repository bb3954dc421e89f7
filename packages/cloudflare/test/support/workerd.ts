import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export const FIXTURES: string = fileURLToPath(new URL('../fixtures/', import.meta.url));

/** The workerd executable of this package's devDependency (not the .bin shim, which would outlive a kill). */
export const WORKERD: string = (() => {
  try {
    return join(dirname(createRequire(import.meta.url).resolve('workerd/package.json')), 'bin/workerd');
  } catch {
    return '(workerd is not installed)';
  }
})();

/**
 * Whether workerd runs here. When it cannot: under CI=true this throws (the suite must not pass by skipping),
 * elsewhere it warns loudly and returns false so the suites skip.
 */
export function workerdRuns(): boolean {
  const result = existsSync(WORKERD) ? spawnSync(WORKERD, ['--version'], { encoding: 'utf8', timeout: 30_000 }) : null;
  if (result !== null && result.error === undefined && result.status === 0) return true;
  const problem = result === null ? `${WORKERD} is missing: run pnpm install` : String(result.error ?? result.stderr);
  const message = `@ratecard/cloudflare: workerd cannot run here (${problem.trim()}).`;
  if (process.env.CI === 'true') throw new Error(`CI=true and workerd is missing. ${message}`);
  console.warn(`\n${'!'.repeat(100)}\n!! SKIPPING ${message}\n${'!'.repeat(100)}\n`);
  return false;
}

/** The part of a wrangler configuration (wrangler.json) that workerd needs to run a Worker with Durable Objects. */
export interface WranglerConfig {
  compatibility_date: string;
  compatibility_flags?: string[];
  durable_objects: { bindings: { name: string; class_name: string }[] };
  migrations: { tag: string; new_sqlite_classes?: string[] }[];
}

/** The Worker services of a configuration with `isolates` isolates: "main" (which holds the objects), then "other"s. */
const serviceNames = (isolates: number): string[] =>
  Array.from({ length: isolates }, (_, i) => (i === 0 ? 'main' : i === 1 ? 'other' : `other${i}`));

/**
 * Bundles a Worker (a file, or its source) as wrangler does (esbuild, ES module, the workerd conditions, the runtime's `cloudflare:` modules
 * left to it) and writes a workerd configuration for it: the wrangler bindings and SQLite classes, object storage on
 * disk in `storage`, an HTTP socket on a free loopback port. With `isolates` above 1, more Worker services run the same
 * bundle, each in an isolate of its own, on a socket of its own, with its bindings on the first one's classes (as
 * wrangler's `script_name` binds another Worker's Durable Objects): that many isolates sending to the same objects.
 */
export async function prepareWorker(
  entry: string | { contents: string },
  wrangler: WranglerConfig,
  dir: string,
  storage: string,
  isolates = 1,
): Promise<void> {
  mkdirSync(storage, { recursive: true });
  await build({
    // A Worker's source given as text is resolved from this package, as if it were one of its files.
    ...(typeof entry === 'string'
      ? { entryPoints: [entry] }
      : { stdin: { contents: entry.contents, resolveDir: FIXTURES, loader: 'js' as const } }),
    outfile: join(dir, 'worker.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    conditions: ['workerd', 'worker', 'browser'],
    // With nodejs_compat the runtime has Node's modules too (core's test helpers import `assert`, which its build
    // writes without the `node:` prefix).
    external: [
      'cloudflare:*',
      ...(wrangler.compatibility_flags?.includes('nodejs_compat') ? ['node:*', 'assert'] : []),
    ],
    logLevel: 'silent',
  });
  const text = JSON.stringify;
  const sqlite = new Set(wrangler.migrations.flatMap((migration) => migration.new_sqlite_classes ?? []));
  const bindings = wrangler.durable_objects.bindings;
  const worker = (name: string, own: boolean) => `const ${name} :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "worker.js")],
  compatibilityDate = ${text(wrangler.compatibility_date)},
  compatibilityFlags = ${text(wrangler.compatibility_flags ?? [])},
  ${
    own
      ? `durableObjectNamespaces = [${bindings
          .map(
            (b) =>
              `(className = ${text(b.class_name)}, uniqueKey = ${text(`ratecard-${b.class_name}`)}, enableSql = ${sqlite.has(b.class_name)})`,
          )
          .join(', ')}],
  durableObjectStorage = (localDisk = "storage"),`
      : ''
  }
  bindings = [${bindings
    .map(
      (b) =>
        `(name = ${text(b.name)}, durableObjectNamespace = ${own ? text(b.class_name) : `(className = ${text(b.class_name)}, serviceName = "main")`})`,
    )
    .join(', ')}],
);
`;
  const names = serviceNames(isolates);
  const services = names.map((name) => `(name = "${name}", worker = .${name})`);
  const sockets = names.map((name) => `(name = "${name}", address = "127.0.0.1:0", http = (), service = "${name}")`);
  const config = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [${services.join(', ')}, (name = "storage", disk = (path = ${text(storage)}, writable = true))],
  sockets = [${sockets.join(', ')}],
);
${names.map((name, i) => worker(name, i === 0)).join('')}`;
  writeFileSync(join(dir, 'config.capnp'), config);
  writeFileSync(join(dir, 'sockets'), String(isolates));
}

export interface Workerd {
  /** The first Worker's address. */
  url: string;
  /** Each Worker's address, the first one's first. */
  urls: string[];
  /** Everything workerd printed so far. */
  output(): string;
  /** Stops workerd with `signal` (SIGKILL: as a crash would) and waits for it to exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Starts workerd on the configuration `prepareWorker` wrote in `dir`; resolves once it listens. */
export function startWorkerd(dir: string): Promise<Workerd> {
  const child = spawn(WORKERD, ['serve', join(dir, 'config.capnp'), '--control-fd=3'], {
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
  });
  live.add(child);
  let output = '';
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      live.delete(child);
      resolve();
    }),
  );
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk;
  });
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  // workerd reports each socket's port on the control descriptor once it listens.
  const sockets = Number(readFileSync(join(dir, 'sockets'), 'utf8'));
  return new Promise((resolve, reject) => {
    let control = '';
    const timer = setTimeout(() => {
      void stop('SIGKILL');
      reject(new Error(`workerd did not listen within 30 s:\n${output}`));
    }, 30_000);
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (chunk: Buffer) => {
      control += chunk;
      const ports = new Map<string, number>();
      for (const line of control.split('\n')) {
        if (!line.includes('"listen"')) continue;
        const event = JSON.parse(line) as { socket: string; port: number };
        ports.set(event.socket, event.port);
      }
      if (ports.size < sockets) return;
      clearTimeout(timer);
      const urls = serviceNames(sockets).map((socket) => `http://127.0.0.1:${ports.get(socket)}`);
      resolve({ url: urls[0] as string, urls, output: () => output, stop });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`workerd exited ${code}:\n${output}`));
    });
  });
}
