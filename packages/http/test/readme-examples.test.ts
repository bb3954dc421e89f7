import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { expect, it } from 'vitest';
import { STILL_CLOCK } from './support.js';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/** The README's named examples: `<!-- readme-example: name -->`, a ts block, then "It prints:" and a text block. */
const EXAMPLE = /<!-- readme-example: ([a-z-]+) -->\n```ts\n([\s\S]*?)```\n\nIt prints:\n\n```text\n([\s\S]*?)```/g;
const examples = [...readme.matchAll(EXAMPLE)].map(([, name, code, printed]) => ({ name, code, printed }));

it('finds the README examples of own limits', () => {
  expect(examples.map((example) => example.name)).toEqual([
    'per-ip',
    'own-plans',
    'two-limits',
    'sessions',
    'daily-quota',
    'billing-month',
  ]);
});

it.each(examples)(
  'runs the README example $name as written and prints what the README says, on a clock that stands still',
  ({ name, code, printed }) => {
    // TypeScript as a user writes it, compiled by the TypeScript compiler, not edited.
    const { outputText } = ts.transpileModule(code as string, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    // Written inside this package so that its imports resolve through the workspace like a user's would. On the real
    // clock a busy machine took over 100 ms for per-ip's 12 requests, a token refilled, and it printed 'admitted 11'.
    const program = fileURLToPath(new URL(`../readme-${name}.tmp.mjs`, import.meta.url));
    writeFileSync(program, outputText);
    try {
      expect(execFileSync(process.execPath, [STILL_CLOCK, program], { encoding: 'utf8' })).toBe(printed);
    } finally {
      rmSync(program, { force: true });
    }
  },
);
