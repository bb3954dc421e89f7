import { it } from 'vitest';
import { burst, PLANS, type Plan, startReadmeWorker } from '../test/support/burst.js';
import { workerdRuns } from '../test/support/workerd.js';

// The README's Worker as written (durableObjectStore, fallback: memoryStore(), the default storeTimeoutMs of 500 ms,
// Hono's middleware), its free plan perMinute(100), then perHour(100), served by workerd in ISOLATES isolates
// sharing its objects: ROUNDS bursts of REQUESTS concurrent POSTs, each of a new organization, sent round-robin to
// the isolates from this process. Per round: admitted, refused, the exact bound over the burst's duration, and how
// many decisions each isolate's fallback store made. `pnpm --filter @ratecard/cloudflare burst` (after `pnpm build`);
// ROUNDS (default 6), REQUESTS (300), ISOLATES (4) from the environment. No targets: figures to read.

const ROUNDS = Number(process.env.ROUNDS ?? 6);
const REQUESTS = Number(process.env.REQUESTS ?? 300);
const ISOLATES = Number(process.env.ISOLATES ?? 4);

it('measured bursts on the README Worker', async () => {
  if (!workerdRuns()) return;
  const lines = [
    `${REQUESTS} concurrent requests of one organization a round, ${ISOLATES} isolate(s), ${ROUNDS} rounds a plan`,
    '',
    '| plan | round | admitted | refused | other | bound | ms | fallback admitted | fallback refused |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const plan of Object.keys(PLANS) as Plan[]) {
    const worker = await startReadmeWorker(plan, ISOLATES);
    try {
      for (let round = 1; round <= ROUNDS; round++) {
        const organization = `burst-${plan}-${Date.now()}-${round}`;
        const r = await burst(worker.workerd, plan, organization, REQUESTS);
        lines.push(
          `| ${plan} | ${round} | ${r.admitted} | ${r.refused} | ${r.other} | ${r.bound} | ${Math.round(r.durationMs)} | ${r.fallbackAdmitted} | ${r.fallbackRefused} |`,
        );
      }
    } finally {
      await worker.stop();
    }
  }
  console.log(lines.join('\n'));
});
