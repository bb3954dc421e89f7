/**
 * Time budgets for store calls without a timer per call. Every call gets the same budget, so deadlines arrive in
 * the order calls were made: a FIFO of pending calls and one timer, armed for the oldest deadline only while
 * something is pending, cover them all. A call the store answers in time is marked closed, and dropped as soon as
 * every call before it is closed too: its slot is cleared then, though the array is compacted only now and then.
 * Answers come back about in the order calls went out, so the queue holds about what is in flight. (Kept until the
 * timer fired, a busy limiter's settled calls would outlive V8's young generation and be collected as old ones: that
 * cost a Redis store up to a third of its decisions per second, measured. Kept until the array was compacted, up to
 * a thousand of them survived each young collection, and V8 then allocated every later call in the old generation
 * from the start: node-redis processes ran a fifth slower, measured; see docs/benchmarks.md.)
 */
interface PendingCall {
  /** performance.now() instant after which the caller stops waiting. */
  readonly deadline: number;
  /** False once the store answered or the budget ran out: whichever happens first wins. */
  open: boolean;
  /** Rejects the caller's promise; called once, if the budget runs out first. */
  expire(): void;
}

/**
 * Runs `callback` after the event loop's next poll phase, where it reads what its sockets hold: setImmediate where the
 * runtime has it (Node, Bun, Deno), else a zero-delay timer (Workers, whose I/O completes between tasks).
 */
function afterPoll(callback: () => void): void {
  if (globalThis.setImmediate?.(callback) === undefined) setTimeout(callback, 0);
}

export class DeadlineQueue {
  private queue: (PendingCall | undefined)[] = [];
  private head = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** True from the timer's firing until the look after the poll phase that follows it (see check). */
  private looking = false;

  constructor(
    readonly budgetMs: number,
    private readonly timeoutError: () => Error,
  ) {}

  /**
   * The store's answer, or a rejection with the timeout error once the budget, counted from now, runs out (or on
   * `expireAll`), whichever is first. Called after the store: a store counts the same budget from an earlier instant,
   * so it gives up on a call no later than its caller does.
   */
  race<T>(work: Promise<T>): Promise<T> {
    const now = performance.now();
    const deadline = now + this.budgetMs;
    return new Promise<T>((resolve, reject) => {
      const call: PendingCall = { deadline, open: true, expire: () => reject(this.timeoutError()) };
      this.queue.push(call);
      if (this.timer === undefined && !this.looking) this.arm(deadline - now);
      work.then(
        (value) => {
          if (!call.open) return;
          call.open = false;
          this.dropClosed();
          resolve(value);
        },
        (error: unknown) => {
          if (!call.open) return;
          call.open = false;
          this.dropClosed();
          reject(error);
        },
      );
    });
  }

  /** Calls the queue still holds: those waiting, and those answered behind one that waits. */
  get held(): number {
    return this.queue.length - this.head;
  }

  /** Expires every waiting call now and stops the timer (the limiter's close). */
  expireAll(): void {
    const calls = this.queue;
    const from = this.head;
    this.queue = [];
    this.head = 0;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    for (let i = from; i < calls.length; i++) expire(calls[i] as PendingCall);
  }

  private arm(delay: number): void {
    // +1 ms: timers may fire a fraction early, and a call must not be expired before its budget is spent.
    this.timer = setTimeout(this.check, Math.max(0, Math.ceil(delay)) + 1);
  }

  /**
   * The timer is due, but the calls it is due for may have been answered already: after a stall of this process (a
   * long synchronous task, a garbage collection, a starved CPU), timers run before the event loop reads the replies
   * that came meanwhile. So the deadlines are judged after the next poll phase, once those replies are read: a stall
   * of this process is not taken for the store's.
   */
  private readonly check = (): void => {
    this.timer = undefined;
    this.looking = true;
    afterPoll(this.look);
  };

  private readonly look = (): void => {
    this.looking = false;
    const now = performance.now();
    const queue = this.queue;
    while (this.head < queue.length) {
      const call = queue[this.head] as PendingCall;
      if (call.open && call.deadline > now) break;
      queue[this.head++] = undefined;
      expire(call);
    }
    this.dropClosed();
    if (this.head < this.queue.length) this.arm((this.queue[this.head] as PendingCall).deadline - now);
  };

  /** Drops the closed calls at the head of the queue; compacts it now and then, so a busy queue stays small. */
  private dropClosed(): void {
    const queue = this.queue;
    let head = this.head;
    while (head < queue.length && !(queue[head] as PendingCall).open) queue[head++] = undefined;
    if (head === queue.length) {
      this.queue = [];
      this.head = 0;
    } else if (head > 1024 && head * 2 > queue.length) {
      this.queue = queue.slice(head);
      this.head = 0;
    } else {
      this.head = head;
    }
  }
}

function expire(call: PendingCall): void {
  if (!call.open) return;
  call.open = false;
  call.expire();
}
