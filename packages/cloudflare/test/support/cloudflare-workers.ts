// Node has no `cloudflare:workers`. The store imports the runtime's `waitUntil` from it (src/store.ts, blocks), which
// may be missing there too; the tests that run the store in Node (test/options.test.ts) get this module, without it.
export const waitUntil: undefined = undefined;
