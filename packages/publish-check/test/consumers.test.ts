import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { entryPoints, esmOnly, type Manifest, publicPackages, WORKSPACE } from './support/workspace.js';

// What a user gets from the registry, as near as it can be had before publishing: every public package's tarball
// installed into a fresh project outside the workspace, by npm and by pnpm, then used from an ESM, a CommonJS and a
// strict NodeNext TypeScript program. npm resolves the packages' `@ratecard/*` ranges against the tarballs (a wrong
// range goes to the registry and fails); pnpm's isolated node_modules fail an import of anything a package does not
// declare. Both reuse their caches (`--prefer-offline`), so only a first run downloads.

const scratch = inject('scratch');
const tarballs = inject('tarballs');
const packages = publicPackages();
const specifiers = packages.flatMap(({ manifest }) => entryPoints(manifest));
/**
 * The export paths a CommonJS program can require, and a Node TypeScript program can check: those of every package
 * but the ES-modules-only ones (@ratecard/cloudflare runs in Workers, and its types name the Workers runtime's own
 * module, whose declarations, @cloudflare/workers-types, clash with @types/node in one program; its own tests
 * type-check a Worker against them).
 */
const nodeSpecifiers = packages
  .filter(({ manifest }) => !esmOnly(manifest))
  .flatMap(({ manifest }) => entryPoints(manifest));

/**
 * Node has no `cloudflare:workers`, the Workers runtime's own module that @ratecard/cloudflare imports: this hook stands
 * in for it with an empty DurableObject class, so that Node loads the rest of the packed package's graph (the package
 * runs for real in workerd in its own tests).
 */
const WORKERS_MODULE_HOOK = `export async function resolve(specifier, context, next) {
  if (specifier !== 'cloudflare:workers') return next(specifier, context);
  return { url: 'data:text/javascript,export class DurableObject {}', shortCircuit: true };
}
`;
const REGISTER_HOOKS =
  "import { register } from 'node:module';\nregister('./workers-module-hook.mjs', import.meta.url);\n";
const rootManifest = JSON.parse(readFileSync(join(WORKSPACE, 'package.json'), 'utf8')) as Manifest;

/**
 * What the consumer installs besides the tarballs: every peer dependency of a public package, at the version that
 * package is developed against, with its `@types/` package where it has one, and the Node types the workspace uses.
 */
function companions(): Record<string, string> {
  const chosen: Record<string, string> = { '@types/node': rootManifest.devDependencies?.['@types/node'] as string };
  for (const { manifest } of packages) {
    for (const peer of Object.keys(manifest.peerDependencies ?? {})) {
      for (const name of [peer, `@types/${peer}`]) {
        const version = manifest.devDependencies?.[name];
        if (version !== undefined) chosen[name] = version;
      }
    }
  }
  return chosen;
}

const tarballDependencies = Object.fromEntries(
  packages.map(({ manifest }) => [manifest.name, `file:${tarballs[manifest.name]}`]),
);

/** Keeps the workspace's pnpm script variables (npm_package_*, npm_config_*) from steering the consumer's install. */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^(npm|pnpm)_/i.test(key)));
}

const INSTALLERS = {
  npm: {
    manifest: {},
    command: ['npm', 'install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
  },
  // Unpublished, `@ratecard/core` cannot come from the registry when a tarball asks for it; the override is what
  // `pnpm add` of the tarballs alone would need. Published, the plain ranges resolve it.
  pnpm: {
    manifest: { pnpm: { overrides: tarballDependencies } },
    command: ['pnpm', 'install', '--prefer-offline', '--reporter=silent', '--config.strict-peer-dependencies=false'],
  },
} as const;

/** ESM: imports every export path and prints how many names each has. */
const everyPathEsm = specifiers
  .map((s, i) => `import * as m${i} from '${s}';\nconsole.log('${s}', Object.keys(m${i}).length);`)
  .join('\n');
const everyPathCjs = nodeSpecifiers.map((s) => `console.log('${s}', Object.keys(require('${s}')).length);`).join('\n');

/** One request limited by two limits, through core, memory and http together. */
const twoLimits = (load: (specifier: string, binding: string) => string): string => `
${load('@ratecard/core', 'core')}
${load('@ratecard/memory', 'memory')}
${load('@ratecard/http', 'http')}
const { createLimiter, limitStates, perDay, perHour, perMinute, perSecond, SPEC_PLANS, tokenBucket } = core;
// A clock that stands still: on the real one, 100 ms spent among the 11 calls (a busy machine) refills a token of 1s.
const limiter = createLimiter({ store: memory.memoryStore({ now: () => 1_700_000_000_000 }) });
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

/**
 * Both builds of core in one process, as when an ES-modules application uses a CommonJS dependency that requires
 * ratecard: limits made by either build are taken by the other's limiter, in plans and in a request.
 */
const bothBuilds = `
import { createRequire } from 'node:module';
import * as esm from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
const cjs = createRequire(import.meta.url)('@ratecard/core');
const run = async () => {
  const byCjs = cjs.createLimiter({ store: memoryStore(), plans: { free: esm.perMinute(2) } });
  const byEsm = esm.createLimiter({ store: memoryStore() });
  const seen = [esm.createLimiter === cjs.createLimiter];
  for (let i = 0; i < 3; i++) {
    seen.push((await byCjs.consume({ organization: 'o', endpoint: 'POST /a', plan: 'free' })).allowed);
  }
  const own = await byEsm.consume({ organization: 'o', endpoint: 'POST /a', limits: cjs.perSecond(5, { burst: 7 }) });
  seen.push(own.limit, own.remaining);
  console.log(JSON.stringify(seen));
};
run();
`;

/**
 * Strict TypeScript: every export path type-checks from ESM and from CommonJS (their declarations included:
 * skipLibCheck is off), and a typed use of the limiter whose `@ts-expect-error` lines fail if a type widened to any.
 */
const TSCONFIG = {
  compilerOptions: {
    strict: true,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2022',
    types: ['node'],
    noEmit: true,
    skipLibCheck: false,
  },
  files: ['typed.ts', 'every-path.ts', 'every-path.cts'],
};
const everyPathTs = nodeSpecifiers
  .map((s, i) => `import * as m${i} from '${s}';\nexport const n${i} = m${i};`)
  .join('\n');
const everyPathCts = nodeSpecifiers
  .map((s, i) => `import m${i} = require('${s}');\nexport const n${i} = m${i};`)
  .join('\n');
const TYPED = `
import { createLimiter, type Decision, perMinute, RateLimitError, type RateLimitErrorCode } from '@ratecard/core';
import { rateLimitHeaders } from '@ratecard/http';
import { memoryStore } from '@ratecard/memory';

const limiter = createLimiter({ store: memoryStore({ maxBuckets: 1_000 }) });
const decision: Decision = await limiter.consume({ organization: 'acme', endpoint: 'GET /items', limits: perMinute(5) });
const remaining: number = decision.remaining;
const headers: Record<string, string> = rateLimitHeaders(decision);
const code: RateLimitErrorCode | undefined = new Error('x') instanceof RateLimitError ? 'invalid_argument' : undefined;
console.log(remaining, headers, code);

// @ts-expect-error: cost is a number
await limiter.consume({ organization: 'acme', endpoint: 'GET /items', cost: '1' });
// @ts-expect-error: memoryStore has no such option
memoryStore({ maxBucket: 1 });
// @ts-expect-error: a decision's remaining is not a string
const wrong: string = decision.remaining;
console.log(wrong);
`;

function run(command: readonly string[], cwd: string): string {
  const [file, ...args] = command as [string, ...string[]];
  return execFileSync(file, args, { cwd, encoding: 'utf8', env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
}

describe.each(Object.entries(INSTALLERS))(
  'every public package installed from its tarball with %s',
  (name, installer) => {
    const project = join(scratch, `consumer-${name}`);

    beforeAll(() => {
      mkdirSync(project);
      const manifest = {
        name: `ratecard-consumer-${name}`,
        private: true,
        type: 'module',
        dependencies: { ...tarballDependencies, ...companions() },
        ...installer.manifest,
      };
      writeFileSync(join(project, 'package.json'), JSON.stringify(manifest, null, 2));
      writeFileSync(join(project, 'workers-module-hook.mjs'), WORKERS_MODULE_HOOK);
      writeFileSync(join(project, 'register-hooks.mjs'), REGISTER_HOOKS);
      run(installer.command, project);
    });

    it.each([
      ['an ESM', 'every-path.mjs', everyPathEsm, specifiers],
      ['a CommonJS', 'every-path.cjs', everyPathCjs, nodeSpecifiers],
    ])('imports every export path from %s program', (_kind, file, source, expected) => {
      writeFileSync(join(project, file), source);
      const lines = run([process.execPath, '--import', './register-hooks.mjs', file], project).trim().split('\n');
      expect(lines.map((line) => line.split(' ')[0])).toEqual(expected);
      for (const line of lines) expect(Number(line.split(' ')[1]), line).toBeGreaterThan(0);
    });

    it.each([
      ['an ESM', 'two-limits.mjs', twoLimits((s, binding) => `import * as ${binding} from '${s}';`)],
      ['a CommonJS', 'two-limits.cjs', twoLimits((s, binding) => `const ${binding} = require('${s}');`)],
    ])(
      'limits one request by two limits from %s program: the limit helpers, limitStates, the IETF items',
      (_kind, file, source) => {
        writeFileSync(join(project, file), source);
        expect(JSON.parse(run([process.execPath, file], project))).toEqual([
          'function',
          'function',
          'function',
          '1m',
          [true, false],
          '"1s";q=10;w=1, "1h";q=1000;w=3600',
          '1',
        ]);
      },
    );

    it('takes limits made by the ES-modules build of core in the CommonJS build, and the other way round', () => {
      writeFileSync(join(project, 'both-builds.mjs'), bothBuilds);
      expect(JSON.parse(run([process.execPath, 'both-builds.mjs'], project))).toEqual([false, true, true, false, 7, 6]);
    });

    it('type-checks with tsc --strict, module nodenext: every export path from ESM and CommonJS, and a typed use', () => {
      writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
      writeFileSync(join(project, 'every-path.ts'), everyPathTs);
      writeFileSync(join(project, 'every-path.cts'), everyPathCts);
      writeFileSync(join(project, 'typed.ts'), TYPED);
      const tsc = join(WORKSPACE, 'node_modules/typescript/bin/tsc');
      let output = '';
      try {
        output = run([process.execPath, tsc, '-p', 'tsconfig.json', '--pretty', 'false'], project);
      } catch (error) {
        output = String((error as { stdout?: string }).stdout ?? error);
      }
      expect(output).toBe('');
    });
  },
);
