import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { publint } from 'publint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Manifest {
  name: string;
  private?: boolean;
  exports: Record<string, unknown>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

const packagesDir = fileURLToPath(new URL('../../', import.meta.url));
const publicPackages = readdirSync(packagesDir, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => join(packagesDir, entry.name))
  .flatMap((dir) => {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
      return manifest.private === true ? [] : [{ dir, manifest }];
    } catch {
      return [];
    }
  });

/** Whether a package ships ES modules only (no `require` condition): @ratecard/cloudflare, for Workers. */
function esmOnly(manifest: Manifest): boolean {
  return !JSON.stringify(manifest.exports).includes('"require"');
}

/**
 * Node has no `cloudflare:workers`, the Workers runtime's own module that @ratecard/cloudflare imports: this hook
 * stands in for it with an empty DurableObject class, so that Node loads the rest of the packed package's graph.
 * That package runs for real in workerd in its own tests.
 */
const WORKERS_MODULE_HOOK = `export async function resolve(specifier, context, next) {
  if (specifier !== 'cloudflare:workers') return next(specifier, context);
  return { url: 'data:text/javascript,export class DurableObject {}', shortCircuit: true };
}
`;

/** Import specifiers of every JavaScript export path of a package (`.` and subpaths, not JSON or package.json). */
function entryPoints(manifest: Manifest): string[] {
  return Object.keys(manifest.exports)
    .filter((path) => path !== './package.json' && !path.endsWith('.json'))
    .map((path) => (path === '.' ? manifest.name : `${manifest.name}/${path.slice(2)}`));
}

/**
 * Where a dependency is installed, as seen from a package: its package.json, or when its `exports` hide that (as
 * @opentelemetry/api's do), the nearest folder above its entry point whose package.json bears its name.
 */
function installedDir(resolveFrom: NodeJS.Require, name: string): string | undefined {
  try {
    return dirname(resolveFrom.resolve(`${name}/package.json`));
  } catch {
    // Hidden by `exports`, or not installed: look from the entry point.
  }
  let dir: string;
  try {
    dir = dirname(resolveFrom.resolve(name));
  } catch {
    return undefined;
  }
  for (; dir !== dirname(dir); dir = dirname(dir)) {
    try {
      if ((JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest).name === name) return dir;
    } catch {
      // No package.json here: go up.
    }
  }
  return undefined;
}

let scratch: string;
const tarballs = new Map<string, string>();

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'ratecard-publish-'));
  const modules = join(scratch, 'node_modules');
  mkdirSync(join(modules, '@ratecard'), { recursive: true });
  for (const { dir, manifest } of publicPackages) {
    const out = execFileSync('pnpm', ['pack', '--pack-destination', scratch], { cwd: dir, encoding: 'utf8' });
    const tarball = out.trim().split('\n').at(-1) as string;
    tarballs.set(manifest.name, tarball);
    const target = join(modules, manifest.name);
    mkdirSync(target, { recursive: true });
    execFileSync('tar', ['-xzf', tarball, '-C', target, '--strip-components=1']);
    // Third-party dependencies come from the workspace install, as a package manager would provide them.
    const resolveFrom = createRequire(join(dir, 'package.json'));
    for (const dependency of Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies })) {
      if (dependency.startsWith('@ratecard/')) continue;
      const link = join(modules, dependency);
      // An ESM-only package that also hides package.json (structured-headers) resolves for neither: take the
      // workspace's own link to it.
      const linked = join(dir, 'node_modules', dependency);
      const source = installedDir(resolveFrom, dependency) ?? (existsSync(linked) ? realpathSync(linked) : undefined);
      if (source === undefined) continue;
      mkdirSync(dirname(link), { recursive: true });
      try {
        symlinkSync(source, link, 'dir');
      } catch {
        // Already linked for another package.
      }
    }
  }
});

beforeAll(() => {
  writeFileSync(join(scratch, 'workers-module-hook.mjs'), WORKERS_MODULE_HOOK);
  writeFileSync(
    join(scratch, 'register-hooks.mjs'),
    "import { register } from 'node:module';\nregister('./workers-module-hook.mjs', import.meta.url);\n",
  );
});

afterAll(() => {
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

describe.each(publicPackages.map(({ dir, manifest }) => [manifest.name, dir, manifest] as const))(
  '%s',
  (name, dir, manifest) => {
    it('passes publint with no errors or warnings', async () => {
      const { messages } = await publint({ pkgDir: dir, pack: 'pnpm', level: 'warning' });
      expect(messages.map((m) => `${m.type}: ${m.code} ${JSON.stringify(m.args)}`)).toEqual([]);
    });

    it(`passes are-the-types-wrong for ${esmOnly(manifest) ? 'ESM' : 'ESM and CJS'} consumers`, () => {
      const tarball = tarballs.get(name) as string;
      const attwPackage = createRequire(import.meta.url).resolve('@arethetypeswrong/cli/package.json');
      const attw = join(dirname(attwPackage), 'dist/index.js');
      const profile = esmOnly(manifest) ? 'esm-only' : 'node16';
      const output = execFileSync(process.execPath, [attw, tarball, '--profile', profile, '--format', 'json'], {
        encoding: 'utf8',
      });
      const report = JSON.parse(output) as { analysis: { problems: { resolutionKind?: string }[] } };
      // The JSON lists every resolution mode; like --profile node16 we leave out node10, which ignores `exports`
      // (every Node release ratecard supports, and every bundler, reads `exports`), and for an ESM-only package, as
      // --profile esm-only does, a require from CommonJS.
      const ignored = esmOnly(manifest) ? ['node10', 'node16-cjs'] : ['node10'];
      const problems = report.analysis.problems.filter((problem) => !ignored.includes(problem.resolutionKind ?? ''));
      expect(problems).toEqual([]);
    });

    it(`imports every export path from ${esmOnly(manifest) ? 'an ESM program' : 'an ESM and a CJS program'}`, () => {
      const specifiers = entryPoints(manifest);
      const esm = join(scratch, `${name.replace('/', '-')}.mjs`);
      const cjs = join(scratch, `${name.replace('/', '-')}.cjs`);
      writeFileSync(
        esm,
        specifiers
          .map((s, i) => `import * as m${i} from '${s}';\nconsole.log('${s}', Object.keys(m${i}).length);`)
          .join('\n'),
      );
      writeFileSync(cjs, specifiers.map((s) => `console.log('${s}', Object.keys(require('${s}')).length);`).join('\n'));
      for (const program of esmOnly(manifest) ? [esm] : [esm, cjs]) {
        const lines = execFileSync(process.execPath, ['--import', './register-hooks.mjs', program], {
          cwd: scratch,
          encoding: 'utf8',
        })
          .trim()
          .split('\n');
        expect(lines.map((line) => line.split(' ')[0])).toEqual(specifiers);
        for (const line of lines) expect(Number(line.split(' ')[1])).toBeGreaterThan(0);
      }
    });
  },
);

describe('the packed packages together', () => {
  it('limit one request by two limits from ESM and CJS: the limit helpers, limitStates and the IETF items', () => {
    const program = (load: (specifier: string) => string): string => `
${load('@ratecard/core')}
${load('@ratecard/memory')}
${load('@ratecard/http')}
const { createLimiter, limitStates, perDay, perHour, perMinute, perSecond, SPEC_PLANS, tokenBucket } = core;
const limiter = createLimiter({ store: memory.memoryStore() });
const limits = [perSecond(10), perHour(1000)];
const run = async () => {
  let decision;
  for (let i = 0; i < 11; i++) {
    decision = await limiter.consume({ organization: 'ip-1', endpoint: 'POST /upload', limits });
  }
  const headers = http.rateLimitHeaders(decision, { ietf: true });
  console.log(JSON.stringify([
    typeof perMinute, typeof perDay, typeof tokenBucket, SPEC_PLANS.developer.name,
    limitStates(decision).map((state) => state.limited),
    headers['RateLimit-Policy'], headers['Retry-After'],
  ]));
};
run();
`;
    const esm = join(scratch, 'two-limits.mjs');
    const cjs = join(scratch, 'two-limits.cjs');
    const names: Record<string, string> = {
      '@ratecard/core': 'core',
      '@ratecard/memory': 'memory',
      '@ratecard/http': 'http',
    };
    writeFileSync(
      esm,
      program((s) => `import * as ${names[s]} from '${s}';`),
    );
    writeFileSync(
      cjs,
      program((s) => `const ${names[s]} = require('${s}');`),
    );
    for (const file of [esm, cjs]) {
      const output = execFileSync(process.execPath, [file], { cwd: scratch, encoding: 'utf8' }).trim();
      expect(JSON.parse(output)).toEqual([
        'function',
        'function',
        'function',
        '1m',
        [true, false],
        '"1s";q=10;w=1, "1h";q=1000;w=3600',
        '1',
      ]);
    }
  });
});
