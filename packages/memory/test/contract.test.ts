import { storeContractSuite } from '@ratecard/core/testing';
import { describe, it } from 'vitest';
import { memoryStore } from '../src/index.js';

storeContractSuite('memory', { create: (now) => memoryStore({ now }) }, { describe, it });
