import { describeOnRedis } from './helpers.js';
import { serviceSuite } from './service-suite.js';

await describeOnRedis('the reference service on the Redis store', serviceSuite);
