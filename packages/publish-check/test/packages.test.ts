import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { publint } from 'publint';
import { describe, expect, inject, it } from 'vitest';
import { publicPackages } from './support/workspace.js';

const tarballs = inject('tarballs');

describe.each(publicPackages().map(({ dir, manifest }) => [manifest.name, dir] as const))('%s', (name, dir) => {
  it('passes publint with no errors or warnings', async () => {
    const { messages } = await publint({ pkgDir: dir, pack: 'pnpm', level: 'warning' });
    expect(messages.map((m) => `${m.type}: ${m.code} ${JSON.stringify(m.args)}`)).toEqual([]);
  });

  it('passes are-the-types-wrong for ESM and CJS consumers', () => {
    const attwPackage = createRequire(import.meta.url).resolve('@arethetypeswrong/cli/package.json');
    const attw = join(dirname(attwPackage), 'dist/index.js');
    const output = execFileSync(
      process.execPath,
      [attw, tarballs[name] as string, '--profile', 'node16', '--format', 'json'],
      { encoding: 'utf8' },
    );
    const report = JSON.parse(output) as { analysis: { problems: { resolutionKind?: string }[] } };
    // The JSON lists every resolution mode; like --profile node16 we leave out node10, which ignores `exports`
    // (every Node release ratecard supports, and every bundler, reads `exports`).
    expect(report.analysis.problems.filter((problem) => problem.resolutionKind !== 'node10')).toEqual([]);
  });
});
