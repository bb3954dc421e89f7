import type { Decision, Limiter } from '@ratecard/core';

export interface TrafficResult {
  decisions: Decision[];
  failures: unknown[];
}

/** `total` consume calls over `orgs`, `concurrency` at a time, each loop awaiting its previous call. */
export async function runTraffic(
  limiter: Limiter,
  orgs: readonly string[],
  total: number,
  concurrency: number,
  override = 1_000_000,
): Promise<TrafficResult> {
  const decisions: Decision[] = [];
  const failures: unknown[] = [];
  let issued = 0;
  const loop = async (): Promise<void> => {
    while (issued < total) {
      const organization = orgs[issued++ % orgs.length] as string;
      try {
        decisions.push(
          await limiter.consume({ organization, endpoint: 'POST /browsers', plan: 'developer', override }),
        );
      } catch (error) {
        failures.push(error);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return { decisions, failures };
}
