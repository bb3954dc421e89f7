import {
  type BucketShape,
  costAt,
  type LeaseChange,
  type Limit,
  type Outcome,
  type Store,
  take,
  unitsAt,
} from '../src/index.js';

/** 'throw': throws from the call itself, against the contract; 'hold': answers when the test calls `release`. */
export type Behaviour = 'answer' | 'reject' | 'hang' | 'throw' | 'hold';

/**
 * An asynchronous store for exercising the limiter's failure policy: it keeps buckets with core's arithmetic, all or
 * nothing per call, and answers, rejects, throws, holds or never answers, as the test sets `behaviour`. Calls are
 * counted so tests can prove that bad input reaches no store.
 */
export class ScriptedStore implements Store {
  readonly shared = true;
  behaviour: Behaviour = 'answer';
  calls = 0;
  now = 1_700_000_000_000;
  closed = false;
  /** The budget the limiter passed with the last consume. */
  lastBudgetMs: number | undefined;
  /** The budget the limiter passed with the last reset. */
  lastResetBudgetMs: number | undefined;
  /** The limits of the last call, and the bucket keys each call touched (`endpoint limit-name`). */
  lastLimits: readonly Limit[] = [];
  readonly keys: string[] = [];
  /** Calls held under 'hold': each settles its call with outcomes or an error, once. */
  readonly held: ((answer: Outcome[] | Error) => void)[] = [];
  private readonly buckets = new Map<string, { units: number; at: number; shape: BucketShape }>();

  private answer<T>(work: () => T): Promise<T> {
    this.calls++;
    if (this.behaviour === 'reject') return Promise.reject(new Error('connection refused'));
    if (this.behaviour === 'hang') return new Promise<T>(() => {});
    if (this.behaviour === 'throw') throw new Error('the store broke its contract');
    if (this.behaviour === 'hold') {
      return new Promise<T>((resolve, reject) => {
        this.held.push((answer) => (answer instanceof Error ? reject(answer) : resolve(answer as T)));
      });
    }
    return Promise.resolve().then(work);
  }

  private key(organization: string, endpoint: string, limit: Limit): string {
    return `${organization}\u0000${endpoint}\u0000${limit.name}`;
  }

  private unitsHeld(key: string, limit: Limit): number {
    const bucket = this.buckets.get(key);
    return bucket === undefined
      ? limit.capacity * limit.unitsPerToken
      : unitsAt(bucket.units, bucket.at, bucket.shape, this.now, limit);
  }

  /** Every limit's outcome, all or nothing: when one refuses, each reports what it holds, as a negative outcome. */
  private outcomes(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
  ): Outcome[] {
    this.lastLimits = limits;
    const held = limits.map((limit) => this.unitsHeld(this.key(organization, endpoint, limit), limit));
    const outcomes = limits.map((limit, i) => take(held[i] as number, costAt(cost, i), limit));
    return outcomes.every((outcome) => outcome >= 0) ? outcomes : held.map((units) => -1 - units);
  }

  consume(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
    budgetMs?: number,
  ): Promise<Outcome[]> {
    this.lastBudgetMs = budgetMs;
    return this.answer(() => {
      const outcomes = this.outcomes(organization, endpoint, limits, cost);
      limits.forEach((limit, i) => {
        this.keys.push(`${endpoint} ${limit.name}`);
        const outcome = outcomes[i] as Outcome;
        if (outcome >= 0)
          this.buckets.set(this.key(organization, endpoint, limit), { units: outcome, at: this.now, shape: limit });
      });
      return outcomes;
    });
  }

  /** Lease changes asked for, in order; each answers true (this store keeps no leases: the memory store's tests do). */
  readonly changes: LeaseChange[] = [];

  settle(_organization: string, _endpoint: string, _limits: readonly Limit[], change: LeaseChange): Promise<boolean> {
    return this.answer(() => {
      this.changes.push(change);
      return true;
    });
  }

  peek(
    organization: string,
    endpoint: string,
    limits: readonly Limit[],
    cost: number | readonly number[],
  ): Promise<Outcome[]> {
    return this.answer(() => this.outcomes(organization, endpoint, limits, cost));
  }

  reset(organization: string, endpoint: string, limits: readonly Limit[], budgetMs?: number): Promise<void> {
    this.lastResetBudgetMs = budgetMs;
    return this.answer(() => {
      for (const limit of limits) this.buckets.delete(this.key(organization, endpoint, limit));
    });
  }

  close(): void {
    this.closed = true;
  }
}
