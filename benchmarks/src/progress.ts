/** Progress lines on stderr, so stdout stays free for a caller that pipes it. */
const started = performance.now();

export function progress(message: string): void {
  const seconds = ((performance.now() - started) / 1000).toFixed(0).padStart(3);
  process.stderr.write(`[${seconds}s] ${message}\n`);
}

export function elapsedSeconds(): number {
  return (performance.now() - started) / 1000;
}
