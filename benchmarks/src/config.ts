/** Sizes and durations of every suite, full and quick. Every figure's method text is built from these. */
export interface BenchConfig {
  quick: boolean;
  memory: {
    organizations: number;
    /** Passes over the whole list of cases; each case runs once per pass, in a fresh process. */
    passes: number;
    warmupCalls: number;
    rounds: number;
    callsPerRound: number;
    maxRoundMs: number;
    chunk: number;
    latencyCalls: number;
  };
  heap: { organizations: number };
  redis: {
    organizations: number;
    /** Organizations of the over-limit shape: 10 tokens each, drained early in a round even on a slow run. */
    overLimitOrganizations: number;
    inFlight: number;
    /** Rounds per contender of the 256-in-flight shapes; contenders alternate round by round. */
    rounds: number;
    roundMs: number;
    limitedRoundMs: number;
    latencyRounds: number;
    latencyRoundMs: number;
    latencyMaxCalls: number;
    warmupMs: number;
    memorySample: number;
  };
  http: { connections: number; organizations: number; durationMs: number; warmupMs: number; rounds: number };
}

export function benchConfig(quick: boolean): BenchConfig {
  return {
    quick,
    memory: {
      organizations: 10_000,
      // Figures vary more between processes (JIT, hash seeds) than between rounds of one: several short passes.
      passes: quick ? 1 : 4,
      warmupCalls: quick ? 200_000 : 300_000,
      rounds: 2,
      callsPerRound: quick ? 1_000_000 : 3_000_000,
      maxRoundMs: quick ? 400 : 600,
      chunk: 10_000,
      latencyCalls: quick ? 50_000 : 100_000,
    },
    heap: { organizations: quick ? 100_000 : 1_000_000 },
    redis: {
      organizations: 10_000,
      overLimitOrganizations: 2_000,
      inFlight: 256,
      rounds: quick ? 1 : 2,
      roundMs: quick ? 1500 : 4000,
      limitedRoundMs: quick ? 1000 : 2500,
      latencyRounds: quick ? 1 : 3,
      latencyRoundMs: quick ? 1000 : 1500,
      latencyMaxCalls: quick ? 20_000 : 50_000,
      warmupMs: quick ? 300 : 1000,
      memorySample: quick ? 200 : 2000,
    },
    http: {
      connections: 64,
      organizations: 100,
      durationMs: quick ? 1500 : 3000,
      warmupMs: quick ? 500 : 1000,
      rounds: quick ? 1 : 3,
    },
  };
}
