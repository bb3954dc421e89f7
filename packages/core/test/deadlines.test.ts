import { once } from 'node:events';
import { connect } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeadlineQueue } from '../src/deadlines.js';

/** V8's full collection, without starting the process with --expose-gc. */
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

/** A promise and the functions that settle it, to answer calls in any order. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}

const timeout = () => new Error('timed out');

afterEach(() => {
  vi.useRealTimers();
});

describe('DeadlineQueue', () => {
  it('drops an answered call once every call before it is answered, in whatever order they come back', async () => {
    const queue = new DeadlineQueue(60_000, timeout);
    const calls = [deferred<number>(), deferred<number>(), deferred<number>()];
    const raced = calls.map((call) => queue.race(call.promise));
    expect(queue.held).toBe(3);
    calls[1]?.resolve(1);
    expect(await raced[1]).toBe(1);
    // The first call still waits, so nothing can be dropped yet.
    expect(queue.held).toBe(3);
    calls[0]?.reject(new Error('store down'));
    await expect(raced[0]).rejects.toThrowError('store down');
    expect(queue.held).toBe(1);
    calls[2]?.resolve(2);
    expect(await raced[2]).toBe(2);
    expect(queue.held).toBe(0);
  });

  it('holds about what is in flight while calls stream through, not every call of the budget', async () => {
    const queue = new DeadlineQueue(60_000, timeout);
    let inFlight: ReturnType<typeof deferred<number>>[] = [];
    let mostHeld = 0;
    for (let i = 0; i < 5_000; i++) {
      const call = deferred<number>();
      inFlight.push(call);
      void queue.race(call.promise);
      mostHeld = Math.max(mostHeld, queue.held);
      if (inFlight.length === 64) {
        for (const pending of inFlight) pending.resolve(i);
        inFlight = [];
        await Promise.resolve();
        await Promise.resolve();
      }
    }
    for (const pending of inFlight) pending.resolve(0);
    await Promise.resolve();
    await Promise.resolve();
    expect(mostHeld).toBe(64);
    expect(queue.held).toBe(0);
  });

  it('lets go of an answered call once it is dropped, though later calls keep the queue from emptying', async () => {
    const queue = new DeadlineQueue(60_000, timeout);
    // The race's promise stands for the call: the queue's entry reaches it through the call's reject.
    const answered = async (): Promise<WeakRef<Promise<number>>> => {
      const raced = queue.race(Promise.resolve(1));
      void queue.race(new Promise<number>(() => {}));
      await raced;
      return new WeakRef(raced);
    };
    const gone = await answered();
    expect(queue.held).toBe(1);
    // A WeakRef holds its target until the current job ends; then nothing but the queue could.
    await new Promise((resolve) => setTimeout(resolve, 0));
    collectGarbage();
    expect(gone.deref()).toBeUndefined();
  });

  it('still expires a call that waits behind answered ones, when its budget is spent and not before', async () => {
    vi.useFakeTimers();
    const queue = new DeadlineQueue(100, timeout);
    const answered = deferred<number>();
    const first = queue.race(answered.promise);
    vi.advanceTimersByTime(40);
    const hung = queue.race(new Promise<number>(() => undefined));
    const outcome = hung.then(
      () => 'answered',
      (error: Error) => error.message,
    );
    answered.resolve(7);
    expect(await first).toBe(7);
    expect(queue.held).toBe(1);
    // The timer was armed for the first call's deadline (100 ms); the hung call's is at 140 ms.
    await vi.advanceTimersByTimeAsync(100);
    expect(queue.held).toBe(1);
    await vi.advanceTimersByTimeAsync(41);
    expect(await outcome).toBe('timed out');
    expect(queue.held).toBe(0);
  });
});

/**
 * One call raced by a queue of `Queue` with a budget of 100 ms, answered by a server on another thread while this one
 * is stuck in a synchronous loop: the loop ends only once the reply waits in this process's socket, past the budget.
 * Resolves to what the race gave: the reply, or the timeout's message.
 */
async function replyDuringStall(Queue: typeof DeadlineQueue): Promise<string> {
  // The server says over shared memory when its reply is written.
  const written = new Int32Array(new SharedArrayBuffer(4));
  const server = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     const written = new Int32Array(workerData);
     const server = require('node:net').createServer((socket) => {
       socket.on('data', () => socket.write('answer', () => { Atomics.store(written, 0, 1); }));
     });
     server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));`,
    { eval: true, workerData: written.buffer },
  );
  try {
    const [port] = (await once(server, 'message')) as [number];
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    const queue = new Queue(100, timeout);
    const reply = queue.race(once(socket, 'data').then(([data]) => String(data)));
    socket.write('ask');
    const stalledFrom = performance.now();
    while (Atomics.load(written, 0) === 0 || performance.now() - stalledFrom < 250) {
      // The stall: nothing else runs on this thread meanwhile.
    }
    const outcome = await reply.catch((error: Error) => error.message);
    socket.destroy();
    return outcome;
  } finally {
    await server.terminate();
  }
}

describe('DeadlineQueue after a stall of this process', () => {
  it('reads a reply that came during a stall before it calls the deadline', async () => {
    expect(await replyDuringStall(DeadlineQueue)).toBe('answer');
  });

  it('does so with a zero-delay timer where the runtime has no setImmediate, as in Workers', async () => {
    // The queue picks how it looks after the poll phase as its module loads: loaded again without setImmediate. Node
    // runs a due timer before it reads its sockets; a zero-delay timer set then runs only after the next poll phase.
    vi.resetModules();
    vi.stubGlobal('setImmediate', undefined);
    let Queue: typeof DeadlineQueue;
    try {
      ({ DeadlineQueue: Queue } = await import('../src/deadlines.js'));
    } finally {
      vi.unstubAllGlobals();
    }
    expect(Queue).not.toBe(DeadlineQueue);
    expect(await replyDuringStall(Queue)).toBe('answer');
  });

  it('still expires a call left unanswered, at the look after the poll phase that follows its deadline', async () => {
    const queue = new DeadlineQueue(20, timeout);
    const hung = queue.race(new Promise<number>(() => undefined));
    await expect(hung).rejects.toThrowError('timed out');
    expect(queue.held).toBe(0);
  });
});
