import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const WORKSPACE: string = fileURLToPath(new URL('../../../../', import.meta.url));

export interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  exports: Record<string, unknown>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

export interface PublicPackage {
  dir: string;
  manifest: Manifest;
}

/** Every package of the workspace that is not private, as pnpm lists them (so a new package is in without a word). */
export function publicPackages(): PublicPackage[] {
  const listed = JSON.parse(
    execFileSync('pnpm', ['ls', '--recursive', '--depth', '-1', '--json'], { cwd: WORKSPACE, encoding: 'utf8' }),
  ) as { path: string; private?: boolean }[];
  return listed
    .filter((entry) => entry.private !== true)
    .map((entry) => ({
      dir: entry.path,
      manifest: JSON.parse(readFileSync(join(entry.path, 'package.json'), 'utf8')) as Manifest,
    }));
}

/** Import specifiers of every JavaScript export path of a package (`.` and subpaths, not JSON or package.json). */
export function entryPoints(manifest: Manifest): string[] {
  return Object.keys(manifest.exports)
    .filter((path) => path !== './package.json' && !path.endsWith('.json'))
    .map((path) => (path === '.' ? manifest.name : `${manifest.name}/${path.slice(2)}`));
}
