import { defineConfig } from 'tsup';
import { base } from '../tsup.base.ts';

export default defineConfig({
  ...base,
  entry: ['src/index.ts', 'src/node.ts', 'src/express.ts', 'src/fastify.ts', 'src/hono.ts', 'src/client.ts'],
  // Optional peers: an adapter imports only types from its framework, and the app brings the framework itself.
  external: ['express', 'fastify', 'hono'],
});
