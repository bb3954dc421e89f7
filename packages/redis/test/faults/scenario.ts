import type { StoreErrorPolicy } from '@ratecard/core';
import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { expect } from 'vitest';
import { endpointKey, redisStore } from '../../src/index.js';
import { consumeRpm, peekRpm } from '../support/limits.js';
import { uniqueOrg } from '../support/redis.js';
import { BUDGET_MS, type DuringFault, expectFaultHandled, Fleet, type RunSummary, sleep } from './fleet.js';
import type { FaultTrafficOptions } from './protocol.js';

export const ENDPOINT = 'POST /browsers';

/** A fault: how to break Redis and how to mend it. */
export interface Fault {
  name: string;
  /** Breaks Redis; resolves once it is broken. */
  inflict(): Promise<void>;
  /** How long Redis stays broken before `repair` starts. */
  holdMs: number;
  /** Mends Redis (restart, SIGCONT, UNPAUSE, promotion); resolves once it is done. */
  repair(): Promise<void>;
  during: DuringFault;
  /**
   * The limiter's budget in each child; default BUDGET_MS. A fault Redis answers through ('unaffected') tests that
   * every call is answered by Redis, not how fast: on a busy machine a call can take longer than 100 ms without any
   * fault, so such a fault gives the calls room.
   */
  budgetMs?: number;
  /** Runs once the surviving bucket is drained, before the fault (e.g. SAVE, so a restart keeps the data). */
  afterDrain?(): Promise<void>;
}

export interface FaultRun {
  summaries: RunSummary[];
  /** The surviving bucket's check. */
  bucket: RefillCheck;
}

/**
 * Runs a fault under steady traffic from one child per policy, with a drained bucket on the same Redis (and, when
 * `organizationOf` places them so, on the same node or slot) that must come through it untouched.
 */
/** The client kinds (test/support/clients.ts) the fault tests run on. */
export const FAULT_CLIENTS: readonly string[] = ['ioredis 6', 'node-redis 6 RESP3'];

export async function runFault(
  target: FaultTrafficOptions['target'],
  client: Redis | Cluster,
  fault: Fault,
  organizationOf: (policy: StoreErrorPolicy | 'drained') => string = (policy) => uniqueOrg(`fault-${policy}`),
  clientName = 'ioredis 6',
): Promise<FaultRun> {
  const budgetMs = fault.budgetMs ?? BUDGET_MS;
  const fleet = await Fleet.start(target, organizationOf, clientName, budgetMs);
  let runs: Awaited<ReturnType<Fleet['stop']>>;
  let bucket: RefillCheck;
  try {
    await fleet.untilAllFromRedis('every child to get decisions from Redis');
    fleet.mark('begin');
    const drained = await drainBucket(client, organizationOf('drained'));
    await fault.afterDrain?.();
    await sleep(200);
    await fault.inflict();
    fleet.mark('down');
    await sleep(fault.holdMs);
    fleet.mark('up');
    await fault.repair();
    await fleet.untilAllFromRedis(`every child to get decisions from Redis again after ${fault.name}`);
    await sleep(200);
    bucket = await checkRefill(client, drained);
    runs = await fleet.stop();
  } finally {
    fleet.kill();
  }
  const summaries = runs.map((run) => expectFaultHandled(fault.name, run, fault.during, budgetMs));
  expectRefilledByTimeAlone(fault.name, bucket);
  return { summaries, bucket };
}

// ---------------------------------------------------------------------------------------------------------------
// A bucket drained before the fault must hold, after it, exactly what refilled meanwhile: neither reset to full nor
// charged again.

/** 60 requests per minute: refills 60 units per ms, one token a second, so a few seconds' test stays far from full. */
const LIMIT = 60;

export interface DrainedBucket {
  organization: string;
  /** Redis TIME (ms) just before and just after the drain. */
  from: number;
  to: number;
}

export interface RefillCheck {
  /** Units the bucket held when checked. */
  held: number;
  /** Units it may hold if refill alone moved it. */
  least: number;
  most: number;
}

async function redisTimeMs(client: Redis | Cluster): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

export async function drainBucket(client: Redis | Cluster, organization: string): Promise<DrainedBucket> {
  const store = redisStore({ client, denyCacheSize: 0 });
  const from = await redisTimeMs(client);
  const outcome = await consumeRpm(store, organization, ENDPOINT, LIMIT, LIMIT);
  const to = await redisTimeMs(client);
  expect(outcome, 'the bucket was full and is now empty').toBe(0);
  return { organization, from, to };
}

async function checkRefill(client: Redis | Cluster, drained: DrainedBucket): Promise<RefillCheck> {
  const store = redisStore({ client, denyCacheSize: 0 });
  const from = await redisTimeMs(client);
  // A peek for the whole capacity is limited, so its outcome tells the units held: -1 - outcome.
  const outcome = await peekRpm(store, drained.organization, ENDPOINT, LIMIT, LIMIT);
  const to = await redisTimeMs(client);
  return { held: -1 - outcome, least: (from - drained.to) * LIMIT, most: (to - drained.from) * LIMIT };
}

function expectRefilledByTimeAlone(scenario: string, check: RefillCheck): void {
  if (process.env.RATECARD_REPORT === '1') {
    console.log(
      `${scenario} | drained bucket holds ${check.held} units, refill alone allows ${check.least}..${check.most}`,
    );
  }
  expect(check.held, `${scenario}: the drained bucket after the fault`).toBeGreaterThanOrEqual(check.least);
  expect(check.held, `${scenario}: the drained bucket after the fault`).toBeLessThanOrEqual(check.most);
}

// ---------------------------------------------------------------------------------------------------------------

/** Organization ids, each new, whose buckets on ENDPOINT all live in `slot`. */
export function organizationsInSlot(label: string, slot: number, count: number): string[] {
  const found: string[] = [];
  const base = uniqueOrg(label);
  for (let i = 0; found.length < count; i++) {
    const organization = `${base}-${i}`;
    if (calculateSlot(endpointKey(organization, ENDPOINT)) === slot) found.push(organization);
  }
  return found;
}

export function slotOf(organization: string): number {
  return calculateSlot(endpointKey(organization, ENDPOINT));
}
