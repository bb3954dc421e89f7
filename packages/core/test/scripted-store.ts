import { type Outcome, type Store, take, UNITS_PER_TOKEN, unitsAt } from '../src/index.js';

/** 'throw': throws from the call itself, against the contract; 'hold': answers when the test calls `release`. */
export type Behaviour = 'answer' | 'reject' | 'hang' | 'throw' | 'hold';

/**
 * An asynchronous store for exercising the limiter's failure policy: it keeps buckets with core's arithmetic and
 * answers, rejects, throws, holds or never answers, as the test sets `behaviour`. Calls are counted so tests can prove that bad
 * input reaches no store.
 */
export class ScriptedStore implements Store {
  readonly shared = true;
  behaviour: Behaviour = 'answer';
  calls = 0;
  now = 1_700_000_000_000;
  closed = false;
  /** The budget the limiter passed with the last consume. */
  lastBudgetMs: number | undefined;
  /** Calls held under 'hold': each settles its call with an outcome or an error, once. */
  readonly held: ((answer: Outcome | Error) => void)[] = [];
  private readonly buckets = new Map<string, { units: number; at: number; limit: number }>();

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

  private unitsHeld(key: string, limit: number): number {
    const bucket = this.buckets.get(key);
    return bucket === undefined
      ? limit * UNITS_PER_TOKEN
      : unitsAt(bucket.units, bucket.at, bucket.limit, this.now, limit);
  }

  consume(organization: string, endpoint: string, limit: number, cost: number, budgetMs?: number): Promise<Outcome> {
    this.lastBudgetMs = budgetMs;
    return this.answer(() => {
      const key = `${organization}\u0000${endpoint}`;
      const outcome = take(this.unitsHeld(key, limit), cost);
      if (outcome >= 0) this.buckets.set(key, { units: outcome, at: this.now, limit });
      return outcome;
    });
  }

  peek(organization: string, endpoint: string, limit: number, cost: number): Promise<Outcome> {
    return this.answer(() => take(this.unitsHeld(`${organization}\u0000${endpoint}`, limit), cost));
  }

  reset(organization: string, endpoint: string): Promise<void> {
    return this.answer(() => {
      this.buckets.delete(`${organization}\u0000${endpoint}`);
    });
  }

  close(): void {
    this.closed = true;
  }
}
