/** Child processes running worker.js: a fresh V8 for a memory or Redis round or a heap case, or the reference service. */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

type Target = { kind: 'redis' | 'cluster'; nodes: { host: string; port: number }[] };
const WORKER = fileURLToPath(new URL('./worker.js', import.meta.url));
const running = new Set<ChildProcess>();

export type Job =
  | { kind: 'memory'; names: string[]; organizations: number; rounds: number; calls: number; warmupCalls: number }
  | { kind: 'heap'; case: string; organizations: number }
  | { kind: 'redis'; on: Target; contender: number; shape: object; prefix: string }
  | { kind: 'lone'; on: Target; contender: number; prefix: string }
  | { kind: 'http'; variant: string; organizations: number };

export type Message = { type: 'result' | 'ready' | 'cpu' | 'error'; value?: unknown };

export function startWorker(job: Job): ChildProcess {
  const child = fork(WORKER, [JSON.stringify(job)], { execArgv: ['--expose-gc'], stdio: 'inherit' });
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

/** The child's next message's value; rejects when it reports an error or takes too long (a crash, say). */
export async function nextMessage(child: ChildProcess, timeoutMs: number): Promise<unknown> {
  const [message] = (await once(child, 'message', { signal: AbortSignal.timeout(timeoutMs) })) as [Message];
  if (message.type === 'error') throw new Error(`worker failed: ${String(message.value)}`);
  return message.value;
}

/** For an interrupted run: no child outlives the harness. */
export function killWorkers(): void {
  for (const child of running) child.kill('SIGKILL');
}
