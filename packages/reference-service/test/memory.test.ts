import { describe } from 'vitest';
import { stillMemoryStore } from './helpers.js';
import { serviceSuite } from './service-suite.js';

describe('the reference service on the memory store', () => {
  serviceSuite(stillMemoryStore);
});
