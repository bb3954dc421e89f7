import Fastify from 'fastify';
import { rateLimit } from '../src/fastify.js';
import { adapterSuite } from './adapter-suite.js';
import { nodeHeader } from './support.js';

adapterSuite({
  name: 'Fastify',
  identifyErrorsGoToApp: true,
  start: async (config) => {
    const app = Fastify();
    await app.register(rateLimit, {
      limiter: config.limiter,
      identify: (request) => {
        if (config.identifyThrows !== undefined) throw config.identifyThrows;
        return config.identify({ header: nodeHeader(request.headers), ip: request.ip });
      },
      onError: config.onError,
      ietf: config.ietf,
      policy: config.policy,
      shadowHeaders: config.shadowHeaders,
    });
    app.setErrorHandler((error: Error & { status?: number }, _request, reply) => {
      reply.code(error.status ?? 500).send({ code: 'unauthorized', message: error.message });
    });
    // Registered after the plugin and outside it: the hook still applies, since the plugin is not encapsulated.
    await app.register(async (routes) => {
      routes.all('/*', async () => {
        config.reached();
        return 'ok';
      });
    });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    return { url, close: () => app.close() };
  },
});
