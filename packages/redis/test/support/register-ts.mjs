// `node --import ./register-ts.mjs file.ts` runs a TypeScript file of this package (see ts-hooks.mjs).
import { register } from 'node:module';

register('./ts-hooks.mjs', import.meta.url);
