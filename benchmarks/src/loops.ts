import type { Operation } from './memory-cases.js';

/** Yields to the event loop, so the next chunk of calls runs in a new turn (timers, setImmediate and I/O run between). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export interface LoopShape {
  /** Organizations cycled through, in order: call n goes to organization n mod organizations. */
  organizations: number;
  /** Most calls; the loop also stops at the first chunk boundary after `maxMs`. */
  calls: number;
  maxMs: number;
  /** Calls per event-loop turn. */
  chunk: number;
}

export interface LoopResult {
  calls: number;
  ns: number;
  admitted: number;
  denied: number;
}

/**
 * A tight loop over the organizations, `chunk` calls per event-loop turn, timed as a whole with hrtime. One call in
 * flight: an async operation is awaited before the next call starts.
 */
export async function timeLoop(operation: Operation, shape: LoopShape): Promise<LoopResult> {
  const { organizations, calls, chunk } = shape;
  const deadline = performance.now() + shape.maxMs;
  let admitted = 0;
  let denied = 0;
  let done = 0;
  let org = 0;
  const started = process.hrtime.bigint();
  while (done < calls && performance.now() < deadline) {
    const end = Math.min(calls, done + chunk);
    if ('sync' in operation) {
      const { sync, admitted: isAdmitted } = operation;
      for (; done < end; done++) {
        if (isAdmitted(sync(org))) admitted++;
        else denied++;
        if (++org === organizations) org = 0;
      }
    } else {
      const { async, admitted: isAdmitted } = operation;
      for (; done < end; done++) {
        try {
          if (isAdmitted(await async(org))) admitted++;
          else denied++;
        } catch {
          denied++;
        }
        if (++org === organizations) org = 0;
      }
    }
    await nextTurn();
  }
  return { calls: done, ns: Number(process.hrtime.bigint() - started), admitted, denied };
}

/** The same loop with every call timed by performance.now(); returns the latencies in ms. */
export async function latencyLoop(operation: Operation, shape: LoopShape): Promise<Float64Array> {
  const { organizations, calls, chunk } = shape;
  const samples = new Float64Array(calls);
  const deadline = performance.now() + shape.maxMs;
  let done = 0;
  let org = 0;
  while (done < calls && performance.now() < deadline) {
    const end = Math.min(calls, done + chunk);
    if ('sync' in operation) {
      const { sync } = operation;
      for (; done < end; done++) {
        const t0 = performance.now();
        sync(org);
        samples[done] = performance.now() - t0;
        if (++org === organizations) org = 0;
      }
    } else {
      const { async } = operation;
      for (; done < end; done++) {
        const t0 = performance.now();
        try {
          await async(org);
        } catch {
          // A denial; its latency counts like any other.
        }
        samples[done] = performance.now() - t0;
        if (++org === organizations) org = 0;
      }
    }
    await nextTurn();
  }
  return samples.subarray(0, done);
}
