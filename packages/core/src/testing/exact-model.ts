/**
 * An independent model of the spec's token bucket in exact rational arithmetic (BigInt), used to check stores and
 * the limiter step by step. It shares no code with bucket.ts and thinks in tokens and seconds, not scaled units:
 * a bucket of capacity C holds a rational number of tokens and gains C/60 per second, capped at C.
 */

/** A non-negative rational n/d in lowest terms. */
class Ratio {
  constructor(
    readonly n: bigint,
    readonly d: bigint,
  ) {}

  static of(n: bigint, d = 1n): Ratio {
    const g = gcd(n < 0n ? -n : n, d);
    return new Ratio(n / g, d / g);
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

export interface ExactDecision {
  limited: boolean;
  /** Tokens the bucket holds after the request (after the charge if admitted), × 60 000: an exact integer. */
  units: number;
  remaining: number;
  retryAfter: number;
  resetAfter: number;
}

interface ModelBucket {
  tokens: Ratio;
  at: bigint;
  limit: bigint;
}

/** Buckets by name, moved by explicit times in ms. */
export class ExactBucketModel {
  private readonly buckets = new Map<string, ModelBucket>();

  /** Tokens the bucket holds at `atMs` under `limit`: refilled at the rate then in force, capped at `limit`. */
  private tokensAt(name: string, atMs: number, limit: number): Ratio {
    const bucket = this.buckets.get(name);
    const capacity = Ratio.of(BigInt(limit));
    if (bucket === undefined) return capacity;
    const elapsedMs = BigInt(atMs) > bucket.at ? BigInt(atMs) - bucket.at : 0n;
    // rate C/60 tokens per second = C/60000 tokens per ms.
    const refilled = bucket.tokens.add(Ratio.of(elapsedMs * bucket.limit, 60_000n)).min(Ratio.of(bucket.limit));
    return refilled.min(capacity);
  }

  private decision(tokens: Ratio, limited: boolean, limit: number, cost: number): ExactDecision {
    const perSecond = Ratio.of(BigInt(limit), 60n);
    const missingForCost = Ratio.of(BigInt(cost)).sub(tokens);
    const retry = limited ? missingForCost.div(perSecond).ceil() : 0n;
    const resetAfter = Ratio.of(BigInt(limit)).sub(tokens).div(perSecond).ceil();
    const units = tokens.mul(Ratio.of(60_000n));
    if (units.d !== 1n) throw new Error(`exact model: ${units.n}/${units.d} units is not whole`);
    return {
      limited,
      units: Number(units.n),
      remaining: limited ? 0 : Number(tokens.floor()),
      retryAfter: limited ? Number(retry < 1n ? 1n : retry) : 0,
      resetAfter: Number(resetAfter),
    };
  }

  consume(name: string, atMs: number, limit: number, cost: number): ExactDecision {
    const tokens = this.tokensAt(name, atMs, limit);
    if (tokens.cmp(Ratio.of(BigInt(cost))) < 0) return this.decision(tokens, true, limit, cost);
    const left = tokens.sub(Ratio.of(BigInt(cost)));
    const previous = this.buckets.get(name);
    const at = previous !== undefined && previous.at > BigInt(atMs) ? previous.at : BigInt(atMs);
    this.buckets.set(name, { tokens: left, at, limit: BigInt(limit) });
    return this.decision(left, false, limit, cost);
  }

  peek(name: string, atMs: number, limit: number, cost: number): ExactDecision {
    const tokens = this.tokensAt(name, atMs, limit);
    if (tokens.cmp(Ratio.of(BigInt(cost))) < 0) return this.decision(tokens, true, limit, cost);
    return this.decision(tokens.sub(Ratio.of(BigInt(cost))), false, limit, cost);
  }

  reset(name: string): void {
    this.buckets.delete(name);
  }
}
