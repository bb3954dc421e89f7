import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { HeapJob, HeapJobResult, MemoryJob, MemoryJobResult } from './worker.js';

const WORKER = fileURLToPath(new URL('./worker.js', import.meta.url));

/** Children still running, so an interrupted run can stop them. */
const running = new Set<ReturnType<typeof fork>>();

export function stopChildren(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

/** How long to wait before the one retry of a child that found a workspace package's dist missing. */
const REBUILD_WAIT_MS = 5000;

/**
 * Whether a child died because a module file was missing: a workspace package being rebuilt (its build empties
 * dist first) while the benchmark runs. Such a child is retried once, after a pause; any other failure is final.
 */
export function missingModule(error: unknown): boolean {
  return error instanceof Error && error.message.includes('ERR_MODULE_NOT_FOUND');
}

/** The line of a dead child's stderr that says what went wrong: `SomeError: …` or `Error [CODE]: …`. */
export function firstErrorLine(lines: readonly string[]): string {
  return lines.find((line) => /^\w*Error\b/.test(line)) ?? lines.find((line) => line.trim() !== '') ?? '';
}

export function runJob(job: MemoryJob, timeoutMs: number): Promise<MemoryJobResult>;
export function runJob(job: HeapJob, timeoutMs: number): Promise<HeapJobResult>;
/** Runs one job in a fresh Node process (with --expose-gc) and resolves with what it reports. */
export async function runJob(job: MemoryJob | HeapJob, timeoutMs: number): Promise<unknown> {
  try {
    return await runOnce(job, timeoutMs);
  } catch (error) {
    if (!missingModule(error)) throw error;
    process.stderr.write(`${job.kind} case ${job.name}: a module was missing (a build in progress?); retrying once\n`);
    await new Promise((resolve) => setTimeout(resolve, REBUILD_WAIT_MS));
    return runOnce(job, timeoutMs);
  }
}

function runOnce(job: MemoryJob | HeapJob, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = fork(WORKER, [JSON.stringify(job)], {
      execArgv: ['--expose-gc'],
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    running.add(child);
    // Passed through, and the end kept, so a child that dies before reporting says why in the results too.
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      stderr = (stderr + chunk.toString()).slice(-2000);
    });
    let answered = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish(new Error(`${job.kind} case ${job.name} took longer than ${timeoutMs} ms`));
    }, timeoutMs);
    function finish(error: Error | null, value?: unknown): void {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      running.delete(child);
      if (error === null) resolve(value);
      else reject(error);
    }
    child.on('message', (message: { ok: boolean; result?: unknown; error?: string }) => {
      if (message.ok) finish(null, message.result);
      else finish(new Error(`${job.kind} case ${job.name} failed in its child process: ${message.error}`));
    });
    child.on('error', (error) => finish(error));
    child.on('close', (code, signal) => {
      running.delete(child);
      // The first line that names an error, so ERR_MODULE_NOT_FOUND and the like reach the message.
      const lines = stderr.trim().split('\n');
      const why = firstErrorLine(lines);
      finish(
        new Error(
          `${job.kind} case ${job.name}: child exited (${code ?? signal}) before reporting${why === '' ? '' : `: ${why}`}`,
        ),
      );
    });
  });
}
