/**
 * Fastify plugin (4 and 5): `rateLimit`, registered with its options.
 *
 * @module @ratecard/http/fastify
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { endLease, evaluate, type RateLimitOptions, reportError, resolveOptions } from './evaluate.js';
import { whenDone } from './write-node.js';

export type { ActualCost, Identify, Identity, LeaseOptions, RateLimitOptions } from './evaluate.js';

/**
 * Options of the Fastify plugin; `identify` gets the Fastify request (the body is not parsed yet: onRequest),
 * `lease.settle` the request and reply.
 */
export type FastifyRateLimitOptions = RateLimitOptions<FastifyRequest, FastifyReply>;

async function rateLimitPlugin(fastify: FastifyInstance, options: FastifyRateLimitOptions): Promise<void> {
  const settings = resolveOptions(options);
  fastify.addHook(
    'onRequest',
    async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
      const verdict = await evaluate(settings, request.method, request.url, request);
      if (verdict.action === 'next') {
        const lease = verdict.lease;
        if (lease !== undefined) {
          whenDone(reply.raw, (finished) => {
            void endLease(settings, lease, request, reply, finished, (error) =>
              reportError(settings, error, request, (cause) =>
                request.log.error({ err: cause }, 'ratecard: a lease could not be settled as asked'),
              ),
            );
          });
        }
        reply.headers(verdict.headers);
        return undefined;
      }
      if (verdict.status === 500) {
        reportError(settings, verdict.error, request, (error) =>
          request.log.error({ err: error }, 'ratecard: the rate limiter failed, so the request was answered 500'),
        );
      }
      // A Buffer, because Fastify appends `; charset=utf-8` to a JSON content type when the payload is a string.
      return reply.code(verdict.status).headers(verdict.headers).send(Buffer.from(verdict.body));
    },
  );
}

// The plugin's hook must see every route, not only those registered inside it: skip Fastify's encapsulation, which is
// what fastify-plugin does, without depending on it.
Object.defineProperty(rateLimitPlugin, Symbol.for('skip-override'), { value: true });
Object.defineProperty(rateLimitPlugin, Symbol.for('fastify.display-name'), { value: '@ratecard/http' });

/**
 * The Fastify plugin (4 and 5): `app.register(rateLimit, { limiter, identify })`. It adds an onRequest hook to the
 * instance it is registered on and to everything registered after it. An exception in `identify` goes to Fastify's
 * error handler.
 */
export const rateLimit: FastifyPluginAsync<FastifyRateLimitOptions> = rateLimitPlugin;
