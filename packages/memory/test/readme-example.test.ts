import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/**
 * Runs the program with Date.now, the clock the memory store reads, standing still at the instant it starts: its
 * buckets see no time pass, so the Retry-After it prints is the README's on a machine of any speed (on the real
 * clock, a second spent between the first and the eleventh call would make it 5 s).
 */
const STILL_CLOCK = `--import=data:text/javascript,${encodeURIComponent('const at = Date.now(); Date.now = () => at;')}`;

it('runs the README usage example as written and prints what the README says', () => {
  const example = /<!-- readme-example[^>]*-->\n```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  const printed = /It prints:\n\n```text\n([\s\S]*?)```/.exec(readme)?.[1];
  expect(example).toBeDefined();
  expect(printed).toBeDefined();
  // Written inside this package so that its imports resolve through the workspace like a user's would.
  const program = fileURLToPath(new URL('../readme-example.tmp.mjs', import.meta.url));
  writeFileSync(program, example as string);
  try {
    expect(execFileSync(process.execPath, [STILL_CLOCK, program], { encoding: 'utf8' })).toBe(printed);
  } finally {
    rmSync(program, { force: true });
  }
});
