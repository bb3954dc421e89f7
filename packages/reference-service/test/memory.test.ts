import { memoryStore } from '@ratecard/memory';
import { describe } from 'vitest';
import { serviceSuite } from './service-suite.js';

describe('the reference service on the memory store', () => {
  serviceSuite(() => memoryStore());
});
