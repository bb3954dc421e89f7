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

export interface WorkspacePackage {
  dir: string;
  manifest: Manifest;
}

/** Every package of the workspace, as pnpm lists them (so a new package is in without a word), the root left out. */
export function workspacePackages(): WorkspacePackage[] {
  const listed = JSON.parse(
    execFileSync('pnpm', ['ls', '--recursive', '--depth', '-1', '--json'], { cwd: WORKSPACE, encoding: 'utf8' }),
  ) as { path: string }[];
  return listed
    .map((entry) => ({
      dir: entry.path,
      manifest: JSON.parse(readFileSync(join(entry.path, 'package.json'), 'utf8')) as Manifest,
    }))
    .filter(({ dir }) => join(dir, '/') !== WORKSPACE);
}

/** Every package of the workspace that is not private. */
export function publicPackages(): WorkspacePackage[] {
  return workspacePackages().filter(({ manifest }) => manifest.private !== true);
}

/** Import specifiers of every JavaScript export path of a package (`.` and subpaths, not JSON or package.json). */
export function entryPoints(manifest: Manifest): string[] {
  return Object.keys(manifest.exports)
    .filter((path) => path !== './package.json' && !path.endsWith('.json'))
    .map((path) => (path === '.' ? manifest.name : `${manifest.name}/${path.slice(2)}`));
}

/** Whether a package ships ES modules only (no `require` condition): @ratecard/cloudflare, for Workers. */
export function esmOnly(manifest: Manifest): boolean {
  return !JSON.stringify(manifest.exports).includes('"require"');
}
