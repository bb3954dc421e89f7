/**
 * An independent model of ratecard's token buckets in exact rational arithmetic (BigInt), used to check stores and
 * the limiter step by step. It shares no code with bucket.ts and thinks in tokens and milliseconds, not scaled units:
 * a bucket of a limit (capacity C, refill r every I ms) holds a rational number of tokens and gains r/I per ms, up to C.
 *
 * The one place units show through is a limit change under one name: the bucket refills at the old limit's rate up
 * to its capacity, then what it holds is rounded DOWN to a whole multiple of the new limit's smallest step,
 * 1/U token with U = I / gcd(r, I) (the finest amount that bucket can hold), and capped at the new capacity.
 */

/** A rational n/d in lowest terms, d > 0. */
class Ratio {
  constructor(
    readonly n: bigint,
    readonly d: bigint,
  ) {}

  static of(n: bigint, d = 1n): Ratio {
    const sign = d < 0n ? -1n : 1n;
    const g = gcd(n < 0n ? -n : n, d < 0n ? -d : d);
    return new Ratio((sign * n) / g, (sign * d) / g);
  }

  add(o: Ratio): Ratio {
    return Ratio.of(this.n * o.d + o.n * this.d, this.d * o.d);
  }

  sub(o: Ratio): Ratio {
    return Ratio.of(this.n * o.d - o.n * this.d, this.d * o.d);
  }

  mul(o: Ratio): Ratio {
    return Ratio.of(this.n * o.n, this.d * o.d);
  }

  div(o: Ratio): Ratio {
    return Ratio.of(this.n * o.d, this.d * o.n);
  }

  cmp(o: Ratio): number {
    const a = this.n * o.d;
    const b = o.n * this.d;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  min(o: Ratio): Ratio {
    return this.cmp(o) <= 0 ? this : o;
  }

  floor(): bigint {
    return this.n >= 0n ? this.n / this.d : -((-this.n + this.d - 1n) / this.d);
  }

  ceil(): bigint {
    return -Ratio.of(-this.n, this.d).floor();
  }
}

function gcd(a: bigint, b: bigint): bigint {
  let x = a;
  let y = b;
  while (y !== 0n) [x, y] = [y, x % y];
  return x === 0n ? 1n : x;
}

/**
 * A limit as the model reads it: a core `Limit` fits. `name` tells the buckets of one key apart (default ''); a bare
 * number n stands for the spec's `perMinute(n)` (named '1m', as core names it).
 */
export type ModelLimit =
  | {
      /** Most tokens the bucket holds. */
      capacity: number;
      /** Tokens added every `intervalMs`. */
      refill: number;
      /** The refill period in ms. */
      intervalMs: number;
      /** Tells the buckets of one key apart; default ''. */
      name?: string;
      /**
       * 'concurrency': at most `capacity` slots held by leases at once; 'quota': at most `capacity` in the period
       * ending at `periodEnd` (for both, refill and intervalMs unread).
       */
      kind?: 'bucket' | 'concurrency' | 'quota';
      /** A quota's period: the bucket counts for it, and is full again in a later one. */
      periodEnd?: number;
    }
  | number;

/** A lease the model holds (docs/stores.md, "Leases"): per limit name, tokens set aside or slots taken. */
interface ModelLease {
  id: string;
  expiresAt: bigint;
  holds: { name: string; amount: Ratio; shape: Shape }[];
}

/** One limit's figures in a model decision. */
export interface ExactDecision {
  /** This limit's bucket lacked `cost` tokens (for a single limit: the request was limited). */
  limited: boolean;
  /** Tokens held after the request (after the charge if admitted) × U: must be an exact integer, the store's units. */
  units: number;
  /**
   * Whole tokens the bucket holds after the request. In a multi-limit decision's `limits`, what it holds even when the
   * request was refused (limitStates' figure); from consume and peek, 0 when limited (the decision's figure).
   */
  remaining: number;
  /** Whole seconds until this bucket holds `cost` tokens, at least 1; 0 when it holds them. */
  retryAfter: number;
  /** Whole seconds until this bucket is full again. */
  resetAfter: number;
}

/** A decision over several limits, all or nothing, with the figures a limiter's Decision reports. */
export interface ExactMultiDecision {
  /** Some limit lacked `cost` tokens: nothing was charged anywhere. */
  limited: boolean;
  /** Whole seconds until every limit holds `cost` tokens (the longest wait); 0 when admitted. */
  retryAfter: number;
  /** The most restrictive limit, by index: when limited the one waiting longest, else the one with fewest whole tokens left; ties go to the first. */
  most: number;
  /** The most restrictive limit's capacity. */
  limit: number;
  /** Whole tokens it holds after the request; 0 when limited. */
  remaining: number;
  /** Whole seconds until it is full again. */
  resetAfter: number;
  /** Each limit's own figures, in order. */
  limits: ExactDecision[];
}

interface Shape {
  name: string;
  /** A concurrency limit: capacity slots, no bucket. */
  slots: boolean;
  /** A quota's period end: it never refills, and a later period starts full. */
  periodEnd?: bigint;
  capacity: Ratio;
  /** Tokens per ms: r / I. */
  rate: Ratio;
  /** The smallest step a bucket of this limit holds: U = I / gcd(r, I) steps per token. */
  steps: bigint;
}

interface ModelBucket {
  tokens: Ratio;
  at: bigint;
  shape: Shape;
}

function shapeOf(limit: ModelLimit): Shape {
  const { capacity, refill, intervalMs, name, kind, periodEnd } =
    typeof limit === 'number'
      ? { capacity: limit, refill: limit, intervalMs: 60_000, name: '1m', kind: 'bucket', periodEnd: undefined }
      : limit;
  if (kind === 'concurrency' || kind === 'quota') {
    return {
      name: name ?? '',
      slots: kind === 'concurrency',
      periodEnd: kind === 'quota' ? BigInt(periodEnd as number) : undefined,
      capacity: Ratio.of(BigInt(capacity)),
      rate: Ratio.of(0n),
      steps: 1n,
    };
  }
  const r = BigInt(refill);
  const i = BigInt(intervalMs);
  return {
    name: name ?? '',
    slots: false,
    capacity: Ratio.of(BigInt(capacity)),
    rate: Ratio.of(r, i),
    steps: i / gcd(r, i),
  };
}

function sameShape(a: Shape, b: Shape): boolean {
  return a.capacity.cmp(b.capacity) === 0 && a.rate.cmp(b.rate) === 0 && a.steps === b.steps;
}

/**
 * When a bucket is written: now, or when it was written if later (time never moves backwards in a bucket, or the same
 * interval would refill twice); a quota's, the end of its period, the later of the stored one and the call's.
 */
function whenWritten(previous: ModelBucket | undefined, at: bigint, shape: Shape): bigint {
  const now = shape.periodEnd ?? at;
  return previous !== undefined && previous.at > now ? previous.at : now;
}

/** Buckets by (key, limit name), moved by explicit times in ms. */
export class ExactBucketModel {
  private readonly buckets = new Map<string, ModelBucket>();
  private readonly leases = new Map<string, ModelLease[]>();

  /** Tokens the bucket holds at `atMs` under `shape`: refilled under the shape then in force, converted, capped. */
  private tokensAt(bucketKey: string, at: bigint, shape: Shape): Ratio {
    const bucket = this.buckets.get(bucketKey);
    if (bucket === undefined) return shape.capacity;
    // A quota's bucket counts for the period ending at `at`; a later period starts full.
    if (shape.periodEnd !== undefined) {
      return bucket.at < shape.periodEnd ? shape.capacity : bucket.tokens.min(shape.capacity);
    }
    const elapsed = at > bucket.at ? at - bucket.at : 0n;
    const old = bucket.shape;
    const refilled = bucket.tokens.add(old.rate.mul(Ratio.of(elapsed))).min(old.capacity);
    // Rounded down to the new limit's step; a no-op when the step is unchanged (the amount already sits on it).
    const converted = Ratio.of(refilled.mul(Ratio.of(shape.steps)).floor(), shape.steps);
    return converted.min(shape.capacity);
  }

  private figures(shape: Shape, tokens: Ratio, after: Ratio, cost: Ratio, at: bigint): ExactDecision {
    const missing = cost.sub(tokens);
    const lacks = missing.cmp(Ratio.of(0n)) > 0;
    const units = after.mul(Ratio.of(shape.steps));
    if (units.d !== 1n) throw new Error(`exact model: ${units.n}/${units.d} units is not whole`);
    const whole = after.floor();
    // What the bucket holds after the call, in whole tokens (a refused call charged nothing; a debt shows as 0).
    const remaining = Number(whole < 0n ? 0n : whole);
    if (shape.slots) {
      // A slot frees when a holder settles, which nobody foresees: retry after the shortest wait; nothing refills.
      return { limited: lacks, units: Number(units.n), remaining, retryAfter: lacks ? 1 : 0, resetAfter: 0 };
    }
    if (shape.periodEnd !== undefined) {
      // A quota is full again when its next period starts.
      const left = shape.periodEnd > at ? Number(Ratio.of(shape.periodEnd - at, 1000n).ceil()) : 0;
      return {
        limited: lacks,
        units: Number(units.n),
        remaining,
        retryAfter: lacks ? Math.max(1, left) : 0,
        resetAfter: left,
      };
    }
    const perSecond = shape.rate.mul(Ratio.of(1000n));
    return {
      limited: lacks,
      units: Number(units.n),
      remaining,
      // The ceiling of a positive wait is at least 1 s.
      retryAfter: lacks ? Number(missing.div(perSecond).ceil()) : 0,
      resetAfter: Number(shape.capacity.sub(after).div(perSecond).ceil()),
    };
  }

  /** What the key's held leases set aside under a limit name (tokens, or slots). */
  private aside(key: string, name: string): Ratio {
    let sum = Ratio.of(0n);
    for (const lease of this.leases.get(key) ?? []) {
      for (const hold of lease.holds) if (hold.name === name) sum = sum.add(hold.amount);
    }
    return sum;
  }

  /**
   * Expires the key's leases whose instant has come, in order of it: each bucket a lease names is refilled to that
   * instant and charged what the lease set aside (it keeps its charge); its slots are free.
   */
  private expire(key: string, at: bigint): void {
    const held = this.leases.get(key);
    if (held === undefined) return;
    const due = held.filter((lease) => lease.expiresAt <= at).sort((a, b) => (a.expiresAt < b.expiresAt ? -1 : 1));
    for (const lease of due) {
      held.splice(held.indexOf(lease), 1);
      for (const hold of lease.holds) {
        if (!hold.shape.slots)
          this.charge(
            key,
            hold.name,
            this.buckets.get(`${key}\u0000${hold.name}`)?.shape ?? hold.shape,
            hold.amount,
            lease.expiresAt,
          );
      }
    }
  }

  /** Charges `tokens` at `at` under `shape`, floored so that what the bucket holds stays at least minus its capacity. */
  private charge(key: string, name: string, shape: Shape, tokens: Ratio, at: bigint): void {
    const bucketKey = `${key}\u0000${name}`;
    const previous = this.buckets.get(bucketKey);
    const q = this.tokensAt(bucketKey, at, shape);
    const floor = this.aside(key, name).sub(shape.capacity);
    const charged = q.sub(tokens);
    const when = whenWritten(previous, at, shape);
    this.buckets.set(bucketKey, { tokens: charged.cmp(floor) < 0 ? floor : charged, at: when, shape });
  }

  private decide(
    key: string,
    atMs: number,
    limits: readonly ModelLimit[],
    cost: number | readonly number[],
    charge: boolean,
    lease?: { id: string; ms: number },
  ) {
    const at = BigInt(atMs);
    this.expire(key, at);
    const needs = limits.map((_, i) => Ratio.of(BigInt(typeof cost === 'number' ? cost : (cost[i] as number))));
    const shapes = limits.map(shapeOf);
    // Q, refilled to now (a concurrency limit: its capacity), and what held leases set aside (P): it holds Q − P.
    const qs = shapes.map((shape) =>
      shape.slots ? shape.capacity : this.tokensAt(`${key}\u0000${shape.name}`, at, shape),
    );
    const held = shapes.map((shape, i) => (qs[i] as Ratio).sub(this.aside(key, shape.name)));
    const admitted = held.every((tokens, i) => tokens.cmp(needs[i] as Ratio) >= 0);
    const figures = shapes.map((shape, i) => {
      const tokens = held[i] as Ratio;
      const need = needs[i] as Ratio;
      return this.figures(shape, tokens, admitted ? tokens.sub(need) : tokens, need, at);
    });
    if (charge) {
      shapes.forEach((shape, i) => {
        if (shape.slots) return;
        const bucketKey = `${key}\u0000${shape.name}`;
        const previous = this.buckets.get(bucketKey);
        // A refused call charges nothing, but a bucket last moved under another shape takes this one (what it holds,
        // converted), so that it refills at the rate the refusal's Retry-After counts with. A reserving call charges
        // nothing either: its lease sets the cost aside.
        if (!admitted && (previous === undefined || sameShape(previous.shape, shape))) return;
        if (admitted && lease !== undefined && previous === undefined) return;
        const when = whenWritten(previous, at, shape);
        const q = qs[i] as Ratio;
        this.buckets.set(bucketKey, {
          tokens: admitted && lease === undefined ? q.sub(needs[i] as Ratio) : q,
          at: when,
          shape,
        });
      });
      if (admitted && lease !== undefined) {
        const held = this.leases.get(key) ?? [];
        held.push({
          id: lease.id,
          expiresAt: at + BigInt(lease.ms),
          holds: shapes.map((shape, i) => ({ name: shape.name, amount: needs[i] as Ratio, shape })),
        });
        this.leases.set(key, held);
      }
    }
    let most = 0;
    for (let i = 1; i < figures.length; i++) {
      const a = figures[i] as ExactDecision;
      const b = figures[most] as ExactDecision;
      if (admitted ? a.remaining < b.remaining : a.retryAfter > b.retryAfter) most = i;
    }
    const top = figures[most] as ExactDecision;
    return {
      limited: !admitted,
      retryAfter: admitted ? 0 : top.retryAfter,
      most,
      limit: Number((shapes[most] as Shape).capacity.n),
      remaining: admitted ? top.remaining : 0,
      resetAfter: top.resetAfter,
      limits: figures,
    };
  }

  /** Charges `cost` tokens of `limit` from bucket `key` if it holds them. */
  consume(key: string, atMs: number, limit: ModelLimit, cost: number): ExactDecision {
    return this.single(this.decide(key, atMs, [limit], cost, true));
  }

  /** What consume would answer, charging nothing. */
  peek(key: string, atMs: number, limit: ModelLimit, cost: number): ExactDecision {
    return this.single(this.decide(key, atMs, [limit], cost, false));
  }

  /** A one-limit decision's figures: its limit's, with the decision's `remaining` (0 when limited). */
  private single(decision: ExactMultiDecision): ExactDecision {
    return { ...(decision.limits[0] as ExactDecision), remaining: decision.remaining };
  }

  /**
   * Charges `cost` tokens (one number, or one per limit) from the bucket of every limit of key `key` if each holds
   * them, else from none.
   */
  consumeAll(
    key: string,
    atMs: number,
    limits: readonly ModelLimit[],
    cost: number | readonly number[],
  ): ExactMultiDecision {
    return this.decide(key, atMs, limits, cost, true);
  }

  /** What consumeAll would answer, charging nothing. */
  peekAll(
    key: string,
    atMs: number,
    limits: readonly ModelLimit[],
    cost: number | readonly number[],
  ): ExactMultiDecision {
    return this.decide(key, atMs, limits, cost, false);
  }

  /**
   * Reserves as consumeAll admits: admitted, the cost is set aside in each bucket and the slots taken, under lease
   * `id`, until `ms` from `atMs`.
   */
  reserve(
    key: string,
    atMs: number,
    limits: readonly ModelLimit[],
    cost: number | readonly number[],
    id: string,
    ms: number,
  ): ExactMultiDecision {
    return this.decide(key, atMs, limits, cost, true, { id, ms });
  }

  /**
   * Settles lease `id` at `atMs`: each bucket of `limits` is charged `actual` tokens (one per limit; a concurrency
   * limit's is unread) in place of what was set aside, down to minus its capacity; a bucket the lease holds that
   * `limits` does not name is charged what was set aside. False, changing nothing, when the lease is not held.
   */
  settle(key: string, atMs: number, limits: readonly ModelLimit[], id: string, actual: readonly number[]): boolean {
    const at = BigInt(atMs);
    this.expire(key, at);
    const held = this.leases.get(key) ?? [];
    const lease = held.find((each) => each.id === id);
    if (lease === undefined) return false;
    held.splice(held.indexOf(lease), 1);
    const shapes = limits.map(shapeOf);
    for (const hold of lease.holds) {
      if (hold.shape.slots) continue;
      const i = shapes.findIndex((shape) => shape.name === hold.name);
      const stored = this.buckets.get(`${key}\u0000${hold.name}`)?.shape ?? hold.shape;
      const shape = i === -1 ? stored : (shapes[i] as Shape);
      const tokens = i === -1 ? hold.amount : Ratio.of(BigInt(actual[i] as number));
      this.charge(key, hold.name, shape, tokens, at);
    }
    return true;
  }

  /** Holds lease `id` until `holdMs` from `atMs`; false when it is not held. */
  extend(key: string, atMs: number, id: string, holdMs: number): boolean {
    const at = BigInt(atMs);
    this.expire(key, at);
    const lease = this.leases.get(key)?.find((each) => each.id === id);
    if (lease === undefined) return false;
    lease.expiresAt = at + BigInt(holdMs);
    return true;
  }

  /**
   * Forgets the buckets of key `key` for the given limits (every limit when none are given), and every lease's hold on
   * them (a lease left holding nothing is gone).
   */
  reset(key: string, limits?: readonly ModelLimit[]): void {
    if (limits === undefined) {
      for (const bucketKey of [...this.buckets.keys()]) {
        if (bucketKey.startsWith(`${key}\u0000`)) this.buckets.delete(bucketKey);
      }
      this.leases.delete(key);
      return;
    }
    const names = limits.map((limit) => shapeOf(limit).name);
    for (const name of names) this.buckets.delete(`${key}\u0000${name}`);
    const held = this.leases.get(key) ?? [];
    for (const lease of held) lease.holds = lease.holds.filter((hold) => !names.includes(hold.name));
    this.leases.set(
      key,
      held.filter((lease) => lease.holds.length > 0),
    );
  }
}
