import { defineConfig } from 'tsup';
import { base } from '../tsup.base.ts';

// ES modules only: the package runs in Workers, which load ES modules, and `cloudflare:workers` (the Durable Object
// base class) is a module of that runtime alone.
export default defineConfig({
  ...base,
  entry: ['src/index.ts'],
  format: ['esm'],
  target: 'es2022',
  external: ['cloudflare:workers'],
});
