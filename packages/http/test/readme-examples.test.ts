import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { expect, it } from 'vitest';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/** The README's named examples: `<!-- readme-example: name -->`, a ts block, then "It prints:" and a text block. */
const EXAMPLE = /<!-- readme-example: ([a-z-]+) -->\n```ts\n([\s\S]*?)```\n\nIt prints:\n\n```text\n([\s\S]*?)```/g;
const examples = [...readme.matchAll(EXAMPLE)].map(([, name, code, printed]) => ({ name, code, printed }));

/**
 * Runs a program with Date.now standing still at the instant it starts, the clock the memory store reads: its buckets
 * see no time pass, as if the machine ran the program in no time. What the README says it prints (12 requests at once
 * against 10 a second, 11 calls against 10 a second) is then what it prints at any speed; on the real clock a busy
 * machine took over 100 ms for the 12 requests, a token refilled, and 'per-ip' printed `admitted 11, refused 1`.
 */
const STILL_CLOCK = `--import=data:text/javascript,${encodeURIComponent('const at = Date.now(); Date.now = () => at;')}`;

it('finds the README examples of own limits', () => {
  expect(examples.map((example) => example.name)).toEqual(['per-ip', 'own-plans', 'two-limits']);
});

it.each(examples)(
  'runs the README example $name as written and prints what the README says, on a clock that stands still',
  ({ name, code, printed }) => {
    // TypeScript as a user writes it, compiled by the TypeScript compiler, not edited.
    const { outputText } = ts.transpileModule(code as string, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    // Written inside this package so that its imports resolve through the workspace like a user's would.
    const program = fileURLToPath(new URL(`../readme-${name}.tmp.mjs`, import.meta.url));
    writeFileSync(program, outputText);
    try {
      expect(execFileSync(process.execPath, [STILL_CLOCK, program], { encoding: 'utf8' })).toBe(printed);
    } finally {
      rmSync(program, { force: true });
    }
  },
);
