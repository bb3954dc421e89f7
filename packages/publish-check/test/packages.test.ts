import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { publint } from 'publint';
import ts from 'typescript';
import { describe, expect, inject, it } from 'vitest';
import { esmOnly, publicPackages, WORKSPACE, workspacePackages } from './support/workspace.js';

const tarballs = inject('tarballs');
const scratch = inject('scratch');
const BUILTINS = new Set(builtinModules);

/**
 * The modules `source` imports, requires or imports dynamically by the bare name of a Node built-in (`assert`,
 * `fs/promises`): Node alone reads those as its own; Deno, Bun and Workers' nodejs_compat want `node:`.
 */
function bareBuiltins(source: string): string[] {
  const { importedFiles } = ts.preProcessFile(source, true, true);
  return importedFiles.map(({ fileName }) => fileName).filter((specifier) => BUILTINS.has(specifier));
}

/** Every JavaScript file of a tarball, by its path in the package, with its text. */
function packedScripts(tarball: string): { path: string; source: string }[] {
  const into = join(scratch, `files-${basename(tarball, '.tgz')}`);
  mkdirSync(into);
  execFileSync('tar', ['-xzf', tarball, '-C', into]);
  const root = join(into, 'package');
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((path) => /\.[cm]?js$/.test(path))
    .map((path) => ({ path, source: readFileSync(join(root, path), 'utf8') }));
}

describe.each(publicPackages().map(({ dir, manifest }) => [manifest.name, dir, esmOnly(manifest)] as const))(
  '%s',
  (name, dir, esm) => {
    it('passes publint with no errors or warnings', async () => {
      const { messages } = await publint({ pkgDir: dir, pack: 'pnpm', level: 'warning' });
      expect(messages.map((m) => `${m.type}: ${m.code} ${JSON.stringify(m.args)}`)).toEqual([]);
    });

    it(`passes are-the-types-wrong for ${esm ? 'ESM' : 'ESM and CJS'} consumers`, () => {
      const attwPackage = createRequire(import.meta.url).resolve('@arethetypeswrong/cli/package.json');
      const attw = join(dirname(attwPackage), 'dist/index.js');
      const profile = esm ? 'esm-only' : 'node16';
      const output = execFileSync(
        process.execPath,
        [attw, tarballs[name] as string, '--profile', profile, '--format', 'json'],
        { encoding: 'utf8' },
      );
      const report = JSON.parse(output) as { analysis: { problems: { resolutionKind?: string }[] } };
      // The JSON lists every resolution mode; like --profile node16 we leave out node10, which ignores `exports`
      // (every Node release ratecard supports, and every bundler, reads `exports`), and for an ESM-only package, as
      // --profile esm-only does, a require from CommonJS.
      const ignored = esm ? ['node10', 'node16-cjs'] : ['node10'];
      const problems = report.analysis.problems.filter((problem) => !ignored.includes(problem.resolutionKind ?? ''));
      expect(problems).toEqual([]);
    });

    it('imports Node built-ins by their node: names only', () => {
      const bare = packedScripts(tarballs[name] as string).flatMap(({ path, source }) =>
        bareBuiltins(source).map((specifier) => `${path}: ${specifier}`),
      );
      expect(bare).toEqual([]);
    });
  },
);

it('finds a Node built-in imported, required or imported dynamically by its bare name', () => {
  const sample = [
    "import { strict } from 'assert';",
    "import { readFile } from 'fs/promises';",
    "const crypto = require('crypto');",
    "const net = await import('net');",
    "import { join } from 'node:path';",
    "import { Redis } from 'ioredis';",
  ].join('\n');
  expect(bareBuiltins(sample)).toEqual(['assert', 'fs/promises', 'crypto', 'net']);
});

describe('the release plan (.changeset/config.json)', () => {
  const config = JSON.parse(readFileSync(join(WORKSPACE, '.changeset/config.json'), 'utf8')) as {
    fixed: string[][];
    privatePackages: { version: boolean; tag: boolean };
  };

  it('versions every public package together, and never a private one', () => {
    expect(config.fixed).toEqual([['@ratecard/*']]);
    expect(config.privatePackages).toEqual({ version: false, tag: false });
    for (const { manifest } of publicPackages()) expect(manifest.name).toMatch(/^@ratecard\//);
  });

  it('has one version for all public packages, and every private @ratecard package at 0.0.0', () => {
    expect(new Set(publicPackages().map(({ manifest }) => manifest.version)).size).toBe(1);
    // A fixed group takes its highest member's version, private members included: a private package at 0.1.0
    // would turn the first release's minor bump into 0.2.0.
    const versioned = workspacePackages()
      .map(({ manifest }) => manifest)
      .filter(
        ({ name, version, private: hidden }) => hidden === true && name.startsWith('@ratecard/') && version !== '0.0.0',
      );
    expect(versioned.map(({ name, version }) => `${name}@${version}`)).toEqual([]);
  });
});
