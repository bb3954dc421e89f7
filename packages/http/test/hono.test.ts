import type { Server } from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { rateLimit } from '../src/hono.js';
import { adapterSuite } from './adapter-suite.js';
import { listen } from './support.js';

adapterSuite({
  name: 'Hono',
  identifyErrorsGoToApp: true,
  // @hono/node-server builds a URL from the target, and `*` makes none.
  asteriskFormStatus: 400,
  start: (config) => {
    const app = new Hono();
    app.use(
      rateLimit({
        limiter: config.limiter,
        identify: (c) => {
          if (config.identifyThrows !== undefined) throw config.identifyThrows;
          return config.identify({ header: (name) => c.req.header(name), ip: getConnInfo(c).remote.address });
        },
        onError: config.onError,
        ietf: config.ietf,
        policy: config.policy,
        shadowHeaders: config.shadowHeaders,
      }),
    );
    app.all('*', (c) => {
      config.reached();
      return c.text('ok');
    });
    app.onError((error, c) => {
      const status = error instanceof HTTPException ? error.status : ((error as { status?: number }).status ?? 500);
      return c.json({ code: 'unauthorized', message: error.message }, status as 401);
    });
    return listen(createAdaptorServer({ fetch: app.fetch }) as Server);
  },
});
