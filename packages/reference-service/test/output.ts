import type { ChildProcess } from 'node:child_process';

/** Collects what a child process prints from now on; each getter returns all of it so far. */
export function captureOutput(child: ChildProcess): { stdout: () => string; stderr: () => string } {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  return { stdout: () => stdout, stderr: () => stderr };
}
