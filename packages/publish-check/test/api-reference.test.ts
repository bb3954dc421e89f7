import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { entryPoints, publicPackages, WORKSPACE } from './support/workspace.js';

// The API reference (docs/api/, `pnpm docs:api`): TypeDoc with the workspace's typedoc.config.mjs, written to a
// scratch folder and compared with what is committed.

const out = join(inject('scratch'), 'api');

function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

describe('the API reference', () => {
  let typedoc: { status: number | null; output: string };

  beforeAll(() => {
    const bin = join(createRequire(join(WORKSPACE, 'package.json')).resolve('typedoc/package.json'), '../bin/typedoc');
    const run = spawnSync(process.execPath, [bin, '--out', out], { cwd: WORKSPACE, encoding: 'utf8' });
    typedoc = { status: run.status, output: `${run.stdout}${run.stderr}`.replace(/\x1b\[[0-9;]*m/g, '') };
  });

  it('documents every public export: TypeDoc reports no export without a doc comment, and no other warning', () => {
    const warnings = typedoc.output.split('\n').filter((line) => /\[(warning|error)\]/.test(line));
    expect(warnings).toEqual([]);
    expect(typedoc.status).toBe(0);
  });

  it('has one page per export path of every public package, named by its import specifier', () => {
    const specifiers = publicPackages()
      .flatMap(({ manifest }) => entryPoints(manifest))
      .sort();
    const pages = files(out)
      .filter((file) => file !== 'README.md')
      .map((file) => file.replace(/\.md$/, ''))
      .sort();
    expect(pages).toEqual(specifiers);
  });

  it('is committed as pnpm docs:api writes it (run it after changing a public export or its comment)', () => {
    const committed = join(WORKSPACE, 'docs/api');
    expect(files(committed)).toEqual(files(out));
    for (const file of files(out)) {
      expect(readFileSync(join(committed, file), 'utf8'), file).toBe(readFileSync(join(out, file), 'utf8'));
    }
  });
});
