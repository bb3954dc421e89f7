import {
  type BucketCall,
  type Outcome,
  type OutcomeReceiver,
  type Store,
  take,
  UNITS_PER_TOKEN,
  unitsAt,
} from '../src/index.js';

export type Behaviour = 'answer' | 'reject' | 'hang';

/**
 * An asynchronous store for exercising the limiter's failure policy: it keeps buckets with core's arithmetic and
 * answers, rejects or never answers, as the test sets `behaviour`. Calls are counted so tests can prove that bad
 * input reaches no store.
 */
export class ScriptedStore implements Store {
  readonly capabilities = { shared: true, synchronous: false };
  behaviour: Behaviour = 'answer';
  calls = 0;
  now = 1_700_000_000_000;
  closed = false;
  /** The deadline the limiter passed with the last consume. */
  lastDeadline: number | undefined;
  private readonly buckets = new Map<string, { units: number; at: number; limit: number }>();

  private answer<T>(work: () => T): Promise<T> {
    this.calls++;
    if (this.behaviour === 'reject') return Promise.reject(new Error('connection refused'));
    if (this.behaviour === 'hang') return new Promise<T>(() => {});
    return Promise.resolve().then(work);
  }

  private held(key: string, limit: number): number {
    const bucket = this.buckets.get(key);
    return bucket === undefined
      ? limit * UNITS_PER_TOKEN
      : unitsAt(bucket.units, bucket.at, bucket.limit, this.now, limit);
  }

  consume(organization: string, endpoint: string, limit: number, cost: number, deadline?: number): Promise<Outcome> {
    this.lastDeadline = deadline;
    return this.answer(() => {
      const key = `${organization}\u0000${endpoint}`;
      const outcome = take(this.held(key, limit), cost);
      if (outcome >= 0) this.buckets.set(key, { units: outcome, at: this.now, limit });
      return outcome;
    });
  }

  peek(organization: string, endpoint: string, limit: number, cost: number): Promise<Outcome> {
    return this.answer(() => take(this.held(`${organization}\u0000${endpoint}`, limit), cost));
  }

  consumeBatch(calls: readonly BucketCall[]): Promise<Outcome[]> {
    return Promise.all(calls.map((c) => this.consume(c.organization, c.endpoint, c.limit, c.cost)));
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

/**
 * The same store offering `consumeTo`, the limiter's one-promise path: it answers through the receiver, and can be
 * told to break the contract by throwing, or to hold receivers for the test to settle by hand.
 */
export class ReceivingStore extends ScriptedStore {
  receiverCalls = 0;
  throwFromConsumeTo = false;
  /** When set, every consumeTo is answered before it returns, with this outcome (a deny cache's hit), or failed. */
  answerAtOnce: number | Error | undefined = undefined;
  /** When true, receivers are kept in `heldReceivers` instead of being answered. */
  holdReceivers = false;
  readonly heldReceivers: OutcomeReceiver[] = [];

  consumeTo(
    organization: string,
    endpoint: string,
    limit: number,
    cost: number,
    deadline: number,
    receiver: OutcomeReceiver,
  ): void {
    this.receiverCalls++;
    if (this.throwFromConsumeTo) throw new Error('consumeTo broke its contract');
    if (this.answerAtOnce !== undefined) {
      if (this.answerAtOnce instanceof Error) receiver.fail(this.answerAtOnce);
      else receiver.settle(this.answerAtOnce);
      return;
    }
    if (this.holdReceivers) {
      this.heldReceivers.push(receiver);
      return;
    }
    this.consume(organization, endpoint, limit, cost, deadline).then(
      (outcome) => receiver.settle(outcome),
      (error: unknown) => receiver.fail(error),
    );
  }
}
