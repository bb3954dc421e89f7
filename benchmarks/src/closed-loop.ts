/** One call of a contender: resolves true when admitted, false when denied; rejects on an error. */
export type Call = (org: number) => Promise<boolean>;

export interface ClosedLoopShape {
  /** Calls kept in flight: each of this many workers awaits its answer, then starts the next call. */
  inFlight: number;
  organizations: number;
  /** Stops starting calls after this long... */
  durationMs: number;
  /** ...or after this many calls, whichever comes first. */
  maxCalls: number;
  /** Records every call's latency with performance.now(). */
  recordLatency: boolean;
}

export interface ClosedLoopResult {
  calls: number;
  admitted: number;
  denied: number;
  errors: number;
  firstError: string | null;
  elapsedMs: number;
  /** Admitted calls per organization, for the exactness check. */
  admittedPerOrganization: Int32Array;
  /** Latencies in ms, in completion order (empty unless recorded). */
  latencies: Float64Array;
}

/** Calls started, across all workers, before every worker waits for the event loop to turn once. */
const CALLS_PER_TURN = 1024;

/**
 * A closed loop: `inFlight` workers, each starting its next call when the last one answers; call n goes to
 * organization n mod organizations. Bounded by time and by count.
 *
 * Every CALLS_PER_TURN calls the workers wait for one event-loop turn (setImmediate). A server's decisions start from
 * socket reads, one macrotask each; without these turns, calls answered locally (a deny cache) would chain as
 * microtasks, starve the socket reads of the calls still waiting on Redis, and make them miss their time budget.
 */
export async function closedLoop(call: Call, shape: ClosedLoopShape): Promise<ClosedLoopResult> {
  const admittedPerOrganization = new Int32Array(shape.organizations);
  const latencies = new Float64Array(shape.recordLatency ? shape.maxCalls : 0);
  let started = 0;
  let finished = 0;
  let admitted = 0;
  let denied = 0;
  let errors = 0;
  let firstError: string | null = null;
  const t0 = performance.now();
  const deadline = t0 + shape.durationMs;
  let sinceTurn = 0;
  let turn: Promise<void> | undefined;
  async function worker(): Promise<void> {
    while (started < shape.maxCalls && performance.now() < deadline) {
      if (sinceTurn >= CALLS_PER_TURN) {
        turn ??= new Promise<void>((resolve) =>
          setImmediate(() => {
            sinceTurn = 0;
            turn = undefined;
            resolve();
          }),
        );
        await turn;
        continue;
      }
      sinceTurn++;
      const org = started++ % shape.organizations;
      const callStart = shape.recordLatency ? performance.now() : 0;
      try {
        if (await call(org)) {
          admitted++;
          admittedPerOrganization[org] = (admittedPerOrganization[org] as number) + 1;
        } else {
          denied++;
        }
      } catch (error) {
        errors++;
        firstError ??= error instanceof Error ? error.message : String(error);
      }
      if (shape.recordLatency) latencies[finished] = performance.now() - callStart;
      finished++;
    }
  }
  await Promise.all(Array.from({ length: shape.inFlight }, worker));
  return {
    calls: finished,
    admitted,
    denied,
    errors,
    firstError,
    elapsedMs: performance.now() - t0,
    admittedPerOrganization,
    latencies: latencies.subarray(0, finished),
  };
}

/** Admitted beyond C + C·T/60 in each bucket, summed: what an exact token bucket of capacity C can never do. */
export function overAdmitted(admittedPerOrganization: Int32Array, capacity: number, windowSeconds: number): number {
  const bound = Math.floor(capacity + (capacity * windowSeconds) / 60);
  let over = 0;
  for (const admitted of admittedPerOrganization) if (admitted > bound) over += admitted - bound;
  return over;
}
