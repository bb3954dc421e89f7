// Preloaded (node --expose-gc --import) into the service under load: on the IPC message 'heap' it collects garbage
// fully and answers with the heap still in use, so a load run can compare the heap before and after.
process.on('message', (message) => {
  if (message !== 'heap') return;
  globalThis.gc();
  process.send({ heapUsed: process.memoryUsage().heapUsed, rss: process.memoryUsage().rss });
});
// The channel must not keep the service alive on its own: it exits when told to, as without the probe.
process.channel?.unref();
