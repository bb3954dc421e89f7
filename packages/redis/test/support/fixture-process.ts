import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** A fixture running in a process of its own (test/fixtures/NAME.ts, under tsx), and the lines it prints. */
export interface FixtureProcess {
  readonly child: ChildProcess;
  /** The next line the fixture prints; rejects if it exits first. */
  nextLine(): Promise<string>;
}

/** Starts test/fixtures/`name`.ts with `args`; its stdin is a pipe, its stderr this process's. */
export function startFixture(name: string, args: readonly string[]): FixtureProcess {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL(`../fixtures/${name}.ts`, import.meta.url)), ...args],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
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
