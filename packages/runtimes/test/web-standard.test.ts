import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The shared path, as published: what a Worker, Deno or Bun app loads for the memory store, the Hono middleware, the
 * headers and the pacing client, and what a Worker loads for the Durable Objects store.
 * Each entry is built without code splitting, so a file holds all of its package's code it reaches; `imports` is
 * everything it may import from outside.
 */
const SHARED_PATH = [
  { file: '../../core/dist/index.js', imports: [] },
  { file: '../../memory/dist/index.js', imports: ['@ratecard/core'] },
  { file: '../../http/dist/index.js', imports: ['@ratecard/core'] },
  { file: '../../http/dist/hono.js', imports: ['@ratecard/core'] },
  // structured-headers parses RFC 9651 fields with web-standard APIs only (ArrayBuffer, atob/btoa).
  { file: '../../http/dist/client.js', imports: ['@ratecard/core', 'structured-headers'] },
  // The Workers runtime's own module: the Durable Object base class.
  { file: '../../cloudflare/dist/index.js', imports: ['cloudflare:workers', '@ratecard/core'] },
];

/** Node-only globals: absent in workerd (without nodejs_compat) and in browsers. */
const NODE_GLOBALS = new Set([
  'process',
  'Buffer',
  'setImmediate',
  'clearImmediate',
  'require',
  '__dirname',
  '__filename',
  'global',
]);
/** Methods that exist only on Node's objects (a Node timer's unref, process.nextTick). */
const NODE_METHODS = new Set(['unref', 'nextTick', 'emitWarning']);

/**
 * Every use of a Node-only API in `source`, as `line: text`. A use guarded by optional chaining off `globalThis`
 * (`globalThis.process?.emitWarning?.(…)`) is allowed: it does nothing where the runtime lacks it.
 */
function nodeOnlyUses(fileName: string, source: string): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const found: string[] = [];
  const report = (node: ts.Node, what: string) => {
    const { line } = file.getLineAndCharacterOfPosition(node.getStart(file));
    found.push(`${line + 1}: ${what} in ${node.getText(file).slice(0, 80)}`);
  };
  const guarded = (node: ts.Node): boolean => {
    // The chain from globalThis down to this node uses ?. at every step after globalThis.
    let current: ts.Node = node;
    while (ts.isPropertyAccessExpression(current.parent) || ts.isCallExpression(current.parent)) {
      current = current.parent;
    }
    const text = current.getText(file);
    return /^globalThis\.\w+\?\./.test(text) && !/[^?]\.\w+\(/.test(text.replace(/^globalThis\./, ''));
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
      const specifier = node.moduleSpecifier;
      if (specifier !== undefined && ts.isStringLiteral(specifier) && specifier.text.startsWith('node:')) {
        report(node, `import of ${specifier.text}`);
      }
    }
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      report(node, 'dynamic import');
    }
    if (ts.isIdentifier(node) && NODE_GLOBALS.has(node.text)) {
      const parent = node.parent;
      const isPropertyName = ts.isPropertyAccessExpression(parent) && parent.name === node;
      const isDeclaredName =
        (ts.isPropertyAssignment(parent) || ts.isMethodDeclaration(parent) || ts.isPropertyDeclaration(parent)) &&
        parent.name === node;
      if (isPropertyName) {
        const owner = parent.expression;
        if (ts.isIdentifier(owner) && owner.text === 'globalThis' && !guarded(parent)) {
          report(node, `unguarded globalThis.${node.text}`);
        }
      } else if (!isDeclaredName) {
        report(node, `Node global ${node.text}`);
      }
    }
    if (ts.isPropertyAccessExpression(node) && NODE_METHODS.has(node.name.text) && !guarded(node)) {
      report(node, `Node method .${node.name.text}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** Bare specifiers the file imports (static imports and re-exports). */
function importsOf(source: string): string[] {
  const file = ts.createSourceFile('x.js', source, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const specifiers: string[] = [];
  for (const statement of file.statements) {
    if ((ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) && statement.moduleSpecifier) {
      specifiers.push((statement.moduleSpecifier as ts.StringLiteral).text);
    }
  }
  return [...new Set(specifiers)];
}

describe('the shared path uses web-standard APIs only (Node-only ones guarded)', () => {
  it.each(SHARED_PATH.map((entry) => [entry.file.replace('../../', 'packages/'), entry] as const))(
    '%s',
    (_name, entry) => {
      const source = readFileSync(fileURLToPath(new URL(entry.file, import.meta.url)), 'utf8');
      expect(nodeOnlyUses(entry.file, source)).toEqual([]);
      // Hono is a type-only import there: the app brings the framework.
      expect(importsOf(source).filter((specifier) => specifier !== 'hono')).toEqual(entry.imports);
    },
  );

  it('finds what it looks for: each kind of Node-only use in a sample', () => {
    const sample = [
      "import { strict as assert } from 'node:assert';",
      'const pid = process.pid;',
      'setImmediate(() => {}).unref();',
      'setTimeout(() => {}, 1).unref();',
      'const b = Buffer.from("x");',
      'globalThis.process.emitWarning("x");',
      'globalThis.process?.emitWarning?.("fine");',
      'const o = { process: 1 }; o.process; const n = performance.now();',
    ].join('\n');
    expect(nodeOnlyUses('sample.js', sample)).toEqual([
      "1: import of node:assert in import { strict as assert } from 'node:assert';",
      '2: Node global process in process',
      '3: Node method .unref in setImmediate(() => {}).unref',
      '3: Node global setImmediate in setImmediate',
      '4: Node method .unref in setTimeout(() => {}, 1).unref',
      '5: Node global Buffer in Buffer',
      '6: Node method .emitWarning in globalThis.process.emitWarning',
      '6: unguarded globalThis.process in process',
    ]);
  });
});
