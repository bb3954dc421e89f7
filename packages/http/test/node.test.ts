import { createServer } from 'node:http';
import { withRateLimit } from '../src/node.js';
import { adapterSuite } from './adapter-suite.js';
import { listen, nodeHeader } from './support.js';

adapterSuite({
  name: 'node:http',
  identifyErrorsGoToApp: false,
  start: (config) => {
    const listener = withRateLimit(
      (_request, response) => {
        config.reached();
        response.end('ok');
      },
      {
        limiter: config.limiter,
        identify: (request) => {
          if (config.identifyThrows !== undefined) throw config.identifyThrows;
          return config.identify({ header: nodeHeader(request.headers), ip: request.socket.remoteAddress });
        },
        onError: config.onError,
        ietf: config.ietf,
        policy: config.policy,
        shadowHeaders: config.shadowHeaders,
      },
    );
    return listen(createServer(listener));
  },
});
