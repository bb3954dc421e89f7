// Progress on stderr (stdout stays free for a caller that pipes it): on a terminal a cli-progress bar over the run's
// steps with the figures logged above it; elsewhere (CI, a pipe) the same figures as plain lines.
import { MultiBar, Presets, type SingleBar } from 'cli-progress';

const started = performance.now();
const tty = process.stderr.isTTY === true;
const format = '{bar} {value}/{total} | {duration_formatted} | {step}';
const options = { stream: process.stderr, format, barsize: 16, hideCursor: true, clearOnComplete: true };
const bars = new MultiBar(options, Presets.shades_classic);
let bar: SingleBar | undefined;

export const elapsedSeconds = (): number => (performance.now() - started) / 1000;

/** One line, kept within 80 columns: `[ 12s] text`. */
export function say(text: string): void {
  const line = `[${elapsedSeconds().toFixed(0).padStart(3)}s] ${text}`.slice(0, 80);
  if (bar !== undefined) bars.log(`${line}\n`);
  else process.stderr.write(`${line}\n`);
}

export function startSteps(): void {
  if (tty) bar = bars.create(0, 0, { step: 'starting' });
}

/** Adds the steps a suite is about to take to the bar's total. */
export function plan(steps: number): void {
  bar?.setTotal(bar.getTotal() + steps);
}

/** Marks one step done; `next` names the step that starts now. */
export function step(next: string): void {
  bar?.increment({ step: next.slice(0, 40) });
}

export function stopSteps(): void {
  bars.stop();
  bar = undefined;
}
