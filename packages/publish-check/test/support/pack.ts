import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { publicPackages } from './workspace.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A folder outside the workspace, removed after the run. */
    scratch: string;
    /** Each public package's tarball, as `pnpm pack` writes it (`workspace:` ranges made real), by package name. */
    tarballs: Record<string, string>;
  }
}

/** Packs every public package once for all the test files. */
export default function setup(project: TestProject): () => void {
  const scratch = mkdtempSync(join(tmpdir(), 'ratecard-publish-'));
  const tarballs: Record<string, string> = {};
  for (const { dir, manifest } of publicPackages()) {
    const out = execFileSync('pnpm', ['pack', '--pack-destination', scratch], { cwd: dir, encoding: 'utf8' });
    tarballs[manifest.name] = out.trim().split('\n').at(-1) as string;
  }
  project.provide('scratch', scratch);
  project.provide('tarballs', tarballs);
  return () => rmSync(scratch, { recursive: true, force: true });
}
