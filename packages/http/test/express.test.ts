import { createServer } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { rateLimit } from '../src/express.js';
import { adapterSuite } from './adapter-suite.js';
import { listen } from './support.js';

adapterSuite({
  name: 'Express',
  identifyErrorsGoToApp: true,
  start: (config) => {
    const app = express();
    app.use(
      rateLimit({
        limiter: config.limiter,
        identify: (request) => {
          if (config.identifyThrows !== undefined) throw config.identifyThrows;
          return config.identify({ header: (name) => request.get(name), ip: request.ip });
        },
        onError: config.onError,
        ietf: config.ietf,
        policy: config.policy,
        shadowHeaders: config.shadowHeaders,
      }),
    );
    app.use((_request: Request, response: Response) => {
      config.reached();
      response.send('ok');
    });
    app.use((error: Error & { status?: number }, _request: Request, response: Response, _next: NextFunction) => {
      response.status(error.status ?? 500).json({ code: 'unauthorized', message: error.message });
    });
    return listen(createServer(app));
  },
});
