// A user's Worker in TypeScript, checked against @cloudflare/workers-types and this package's built declarations
// (as an installed copy would give them): the binding's type must fit durableObjectStore's namespace.

import { env } from 'cloudflare:workers';
import { durableObjectStore, RatecardBuckets } from '@ratecard/cloudflare';
import { createLimiter, perHour } from '@ratecard/core';
import { rateLimit } from '@ratecard/http/hono';
import { memoryStore } from '@ratecard/memory';
import { Hono } from 'hono';

export { RatecardBuckets };

// As `wrangler types` declares the bindings of wrangler.json.
declare global {
  namespace Cloudflare {
    interface Env {
      BUCKETS: DurableObjectNamespace<RatecardBuckets>;
    }
  }
}

const limiter = createLimiter({
  store: durableObjectStore({ namespace: env.BUCKETS }),
  plans: { free: perHour(100) },
  fallback: memoryStore(),
});

const app = new Hono<{ Bindings: Cloudflare.Env }>();
app.use(
  rateLimit({ limiter, identify: (c) => ({ organization: c.req.header('x-api-key') ?? 'anonymous', plan: 'free' }) }),
);
app.get('/', (c) => {
  // The store also fits a binding taken from the handler's env, and a namespace restricted to a jurisdiction.
  durableObjectStore({ namespace: c.env.BUCKETS, clock: 'client', now: () => Date.now() });
  durableObjectStore({ namespace: c.env.BUCKETS.jurisdiction('eu') });
  return c.text('ok');
});

export default app;
