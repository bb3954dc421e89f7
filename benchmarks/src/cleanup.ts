import { progress } from './progress.js';

/** Things to undo however the run ends: redis-servers, child processes, client connections. */
const tasks: { name: string; run: () => Promise<void> | void }[] = [];
let cleaning: Promise<void> | undefined;

/** Registers an undo step; returns a function that runs it now (and only once). */
export function onCleanup(name: string, run: () => Promise<void> | void): () => Promise<void> {
  const task = { name, run };
  tasks.push(task);
  return async () => {
    const at = tasks.indexOf(task);
    if (at === -1) return;
    tasks.splice(at, 1);
    await run();
  };
}

/** Runs every pending undo step, newest first; each failure is reported and the rest still run. */
export function cleanupAll(): Promise<void> {
  cleaning ??= (async () => {
    while (tasks.length > 0) {
      const task = tasks.pop() as (typeof tasks)[number];
      try {
        await Promise.race([task.run(), new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
      } catch (error) {
        progress(`cleanup: ${task.name} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  })();
  return cleaning;
}

/** Ctrl-C, SIGTERM and crashes still stop what the run started. */
export function cleanupOnExit(): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      progress(`${signal}: stopping what the benchmark started`);
      cleanupAll().finally(() => process.exit(130));
    });
  }
  process.once('uncaughtException', (error) => {
    progress(`uncaught exception: ${error.stack ?? error.message}`);
    cleanupAll().finally(() => process.exit(1));
  });
  process.once('unhandledRejection', (reason) => {
    progress(`unhandled rejection: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}`);
    cleanupAll().finally(() => process.exit(1));
  });
}
