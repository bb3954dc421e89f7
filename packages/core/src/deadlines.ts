/**
 * Time budgets for store calls without a timer per call. Every call gets the same budget, so deadlines arrive in
 * the order calls were made: a FIFO of pending calls and one timer, armed for the oldest deadline only while
 * something is pending, cover them all. When the store answers in time the entry is marked settled and dropped when
 * it reaches the head of the queue.
 */
export interface PendingCall {
  /** performance.now() value after which the call is over budget. */
  readonly deadline: number;
  /** False once the store answered or the budget ran out: whichever happens first wins. */
  open: boolean;
  /** Called once if the budget runs out first. */
  expire(): void;
}

export class DeadlineQueue {
  private queue: PendingCall[] = [];
  private head = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly budgetMs: number) {}

  /** Starts watching a call; returns its deadline. */
  deadlineFromNow(): number {
    return performance.now() + this.budgetMs;
  }

  watch(call: PendingCall): void {
    this.queue.push(call);
    if (this.timer === undefined) this.arm(this.budgetMs);
  }

  /** Number of calls not yet settled nor expired (for tests and diagnostics). */
  get pending(): number {
    let open = 0;
    for (let i = this.head; i < this.queue.length; i++) if (this.queue[i]?.open) open++;
    return open;
  }

  /** Expires every open call now and stops the timer (used by close()). */
  expireAll(): void {
    const calls = this.queue;
    const from = this.head;
    this.queue = [];
    this.head = 0;
    this.disarm();
    for (let i = from; i < calls.length; i++) {
      const call = calls[i] as PendingCall;
      if (call.open) {
        call.open = false;
        call.expire();
      }
    }
  }

  private arm(delay: number): void {
    // +1 ms: timers may fire a fraction early, and a call must not be expired before its budget is spent.
    this.timer = setTimeout(this.check, Math.max(0, Math.ceil(delay)) + 1);
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private readonly check = (): void => {
    this.timer = undefined;
    const now = performance.now();
    const queue = this.queue;
    while (this.head < queue.length) {
      const call = queue[this.head] as PendingCall;
      if (call.open && call.deadline > now) break;
      this.head++;
      if (call.open) {
        call.open = false;
        call.expire();
      }
    }
    if (this.head === queue.length) {
      this.queue = [];
      this.head = 0;
      return;
    }
    // Compact now and then so a long-busy queue does not keep every settled entry alive.
    if (this.head > 1024 && this.head * 2 > queue.length) {
      this.queue = queue.slice(this.head);
      this.head = 0;
    }
    this.arm((this.queue[this.head] as PendingCall).deadline - now);
  };
}
