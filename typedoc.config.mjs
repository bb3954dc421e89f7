// TypeDoc's options for `pnpm docs:api`: the API reference in docs/api/, one page per export path of every public
// package of the workspace (as pnpm lists them, so a new package is in without a word here), from the sources' doc
// comments. The check in packages/publish-check runs the same options and fails on a public export without a doc
// comment, or on a docs/api/ that is not what this writes.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = import.meta.dirname;
const listed = JSON.parse(
  execFileSync('pnpm', ['ls', '--recursive', '--depth', '-1', '--json'], { cwd: root, encoding: 'utf8' }),
);

/** Each JavaScript export path of a package, [import specifier, source]: tsup builds src/<x>.ts into dist/<x>.js. */
function sources(dir) {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  return Object.entries(manifest.exports)
    .filter(([path]) => path !== './package.json' && !path.endsWith('.json'))
    .map(([path, target]) => {
      const source = join(dir, target.import.default.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts'));
      if (!existsSync(source))
        throw new Error(`typedoc.config.mjs: no source for ${manifest.name} ${path} at ${source}`);
      return [path === '.' ? manifest.name : `${manifest.name}/${path.slice(2)}`, source];
    });
}

const entries = listed.filter((entry) => entry.private !== true).flatMap((entry) => sources(entry.path));

/** @type {Partial<import('typedoc').TypeDocOptions & import('typedoc-plugin-markdown').PluginOptions>} */
export default {
  name: 'ratecard API reference',
  entryPoints: entries.map(([, source]) => relative(root, source)),
  tsconfig: 'tsconfig.typedoc.json',
  // One package's types as another imports them link to their own page: each specifier resolves to its source.
  compilerOptions: { paths: Object.fromEntries(entries.map(([specifier, source]) => [specifier, [source]])) },
  plugin: ['typedoc-plugin-markdown'],
  out: 'docs/api',
  readme: 'none',
  outputFileStrategy: 'modules',
  // Every export documented, nothing left out silently: a warning fails `pnpm test`.
  validation: { notExported: true, invalidLink: true, notDocumented: true },
  // TypeDoc asks documentation of the symbols of these packages only (by default, of the workspace root's).
  packagesRequiringDocumentation: listed.filter((entry) => entry.private !== true).map((entry) => entry.name),
  treatValidationWarningsAsErrors: true,
  disableSources: true,
  hideGenerator: true,
};
