#!/usr/bin/env node
// The `ratecard` bin: the command line of ./index.ts, exiting with its code.
import { main } from './index.js';

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
