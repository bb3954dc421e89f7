// What metrics add to one decision, without HTTP around it: limiter.consume on the memory store, bare; with its
// decisions counted (onDecision); and with the store's calls timed too (the store duration histogram). A real SDK
// meter provider with a reader; one process, variants taking turns over rounds.
//
//   pnpm build && node packages/otel/bench/limiter-overhead.mjs [--rounds 7 --calls 500000]
import { parseArgs } from 'node:util';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { createLimiter } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { limiterMetrics } from '../dist/index.js';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '7' }, calls: { type: 'string', default: '500000' } },
});
const ROUNDS = Number(values.rounds);
const CALLS = Number(values.calls);
const ORGANIZATIONS = 1_000;

/** A reader that is only ever collected from by hand: the SDK aggregates as it would under any exporter. */
class ManualReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

const VARIANTS = ['off', 'decisions counted', 'decisions counted + store timed'];

function limiter(variant) {
  if (variant === 'off') return createLimiter({ store: memoryStore() });
  const metrics = limiterMetrics({ meterProvider: new MeterProvider({ readers: [new ManualReader()] }) });
  const store = variant === 'decisions counted' ? memoryStore() : metrics.memory(memoryStore());
  return createLimiter({ store, onDecision: metrics.onDecision });
}

const requests = Array.from({ length: ORGANIZATIONS }, (_, i) => ({
  organization: `org_${i}`,
  endpoint: 'POST /browsers',
  plan: 'enterprise',
  override: 1_000_000_000,
}));

async function run(variant) {
  const subject = limiter(variant);
  for (let i = 0; i < 50_000; i++) await subject.consume(requests[i % ORGANIZATIONS]);
  const start = performance.now();
  for (let i = 0; i < CALLS; i++) await subject.consume(requests[i % ORGANIZATIONS]);
  return ((performance.now() - start) * 1e6) / CALLS;
}

const median = (numbers) => [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)];
const times = new Map(VARIANTS.map((variant) => [variant, []]));
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
  for (const variant of order) times.get(variant).push(await run(variant));
}
const off = median(times.get('off'));
console.log(`limiter.consume, memory store, ${CALLS} calls per round, ${ROUNDS} rounds (median ns per call):`);
for (const variant of VARIANTS) {
  const ns = median(times.get(variant));
  console.log(
    `  ${variant.padEnd(32)} ${ns.toFixed(0).padStart(6)} ns${variant === 'off' ? '' : `  (+${(ns - off).toFixed(0)} ns)`}`,
  );
}
