import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

/** Per fixture, the file bundled from it in this process. */
const bundles = new Map<string, string>();
let bundleDir: string | undefined;

/**
 * test/fixtures/`name`.ts bundled into one file with what it imports (once per process, in a temporary directory
 * removed at exit). A child then loads one file instead of resolving and transpiling some thousand modules under tsx:
 * here 0.3 s to start instead of 1.2 s of CPU, which the fault tests paid four times per test on two cores.
 */
function bundled(name: string): string {
  let file = bundles.get(name);
  if (file === undefined) {
    if (bundleDir === undefined) {
      const dir = mkdtempSync(join(tmpdir(), 'ratecard-fixtures-'));
      process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
      bundleDir = dir;
    }
    file = join(bundleDir, `${name}.mjs`);
    buildSync({
      entryPoints: [fileURLToPath(new URL(`../fixtures/${name}.ts`, import.meta.url))],
      outfile: file,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      // The clients are CommonJS, whose require of Node's modules an ES module bundle must be given.
      banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
      logLevel: 'error',
    });
    bundles.set(name, file);
  }
  return file;
}

/** A fixture running in a process of its own (test/fixtures/NAME.ts, bundled), and the lines it prints. */
export interface FixtureProcess {
  readonly child: ChildProcess;
  /** The next line the fixture prints; rejects if it exits first. */
  nextLine(): Promise<string>;
}

/** Spawns test/fixtures/`name`.ts (bundled) with `args`: its stdin and stdout are pipes, its stderr this process's. */
export function spawnFixture(name: string, args: readonly string[]): ChildProcess {
  return spawn(process.execPath, [bundled(name), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
}

/** Starts test/fixtures/`name`.ts with `args`, its printed lines read one at a time. */
export function startFixture(name: string, args: readonly string[]): FixtureProcess {
  const child = spawnFixture(name, args);
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
  return {
    child,
    async nextLine() {
      const { value, done } = await lines.next();
      if (done) throw new Error(`${name} process ${child.pid} exited early (code ${child.exitCode})`);
      return value;
    },
  };
}

/** Starts a hammer (test/fixtures/hammer.ts) and resolves once it has connected, with the report it prints at its end. */
export async function startHammer<Report>(
  args: readonly string[],
): Promise<{ child: ChildProcess; report: Promise<Report> }> {
  const { child, nextLine } = startFixture('hammer', args);
  const line = await nextLine();
  if (line !== 'ready') throw new Error(`hammer process said ${JSON.stringify(line)}`);
  return { child, report: nextLine().then((json) => JSON.parse(json) as Report) };
}
