/**
 * Date.now read once per event-loop turn. On the machines we measured, Date.now costs as much as the whole bucket
 * update, so the default clock caches it until the turn ends: one setImmediate per turn that made calls, never one
 * per call. Calls in one turn share an instant (a server's requests are separate turns, so each gets a fresh
 * read). A cached instant is never ahead of real time, so it can only refill less, never admit more.
 */
let cached = -1;

function forget(): void {
  cached = -1;
}

export function turnClock(): number {
  if (cached < 0) {
    cached = Date.now();
    setImmediate(forget).unref();
  }
  return cached;
}
