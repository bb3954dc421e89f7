// `pnpm start`: builds what the service runs, when it is missing or older than its sources, then runs the service in
// this same process (one process, so Ctrl-C reaches the service's own shutdown and nothing else reports on it).
// The build is ESM JavaScript only, no declarations: `pnpm build` makes the full set, and `pnpm test` runs it.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packages = fileURLToPath(new URL('..', import.meta.url));
/** The service and the workspace packages it imports, each after the ones it depends on. */
const ORDER = ['core', 'memory', 'http', 'redis', 'otel', 'reference-service'];

/** Newest (or oldest) modification time of the files under `path` whose names pass `keep`. */
function times(path, keep) {
  if (!existsSync(path)) return [];
  const stat = statSync(path);
  if (!stat.isDirectory()) return keep(path) ? [stat.mtimeMs] : [];
  return readdirSync(path).flatMap((name) => times(join(path, name), keep));
}

function stale(dir) {
  const built = times(join(dir, 'dist'), (file) => file.endsWith('.js'));
  if (built.length === 0) return true;
  const sources = [
    join(dir, 'src'),
    join(dir, 'package.json'),
    join(dir, 'tsup.config.ts'),
    join(packages, 'tsup.base.ts'),
  ];
  const newest = Math.max(...sources.flatMap((path) => times(path, () => true)));
  return newest > Math.min(...built);
}

const due = ORDER.map((name) => join(packages, name)).filter(stale);
if (due.length > 0) {
  const started = performance.now();
  const { build } = await import('tsup');
  const home = process.cwd();
  for (const dir of due) {
    process.chdir(dir);
    // esbuild keeps the working directory it first saw unless told, and the entries are relative to the package.
    const esbuildOptions = (options) => {
      options.absWorkingDir = dir;
    };
    const config = join(dir, 'tsup.config.ts');
    await build({ config, format: ['esm'], dts: false, clean: false, silent: true, esbuildOptions });
  }
  process.chdir(home);
  const names = due.map((dir) => dir.slice(packages.length)).join(', ');
  console.log(`built ${names} (JavaScript only) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
// `pnpm start` serves Prometheus metrics on 9464 unless METRICS_PORT says otherwise (an empty value turns them off).
process.env.METRICS_PORT ??= '9464';
await import('./dist/main.js');
