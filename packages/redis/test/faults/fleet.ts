/**
 * The parent side of the fault tests: one child process per failure policy (test/fixtures/fault-traffic.ts), all
 * charging Redis at once while a test breaks it, and the checks every fault shares.
 */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { StoreErrorPolicy } from '@ratecard/core';
import { expect } from 'vitest';
import { spawnFixture } from '../support/fixture-process.js';
import type { CallKind, FaultTrafficOptions, FaultTrafficReport } from './protocol.js';

/** The limiter's budget in every child (the default; a fault may set its own), and what a call may take beyond it: the deadline timer's 1 ms
 * and event-loop lag on a busy two-core machine. */
export const BUDGET_MS = 100;
export const SLACK_MS = 50;
/**
 * Longest a child may live after it has closed its limiter and client; a leaked timer or socket would keep it alive
 * for good. A Cluster client that lost a node gives a socket that does not close on QUIT up to its disconnectTimeout
 * (ioredis' default 2 s) before destroying it; the process exits when that timer fires.
 */
export const EXIT_BOUND_MS = 3_000;

export const POLICIES: readonly StoreErrorPolicy[] = ['fallback', 'deny', 'allow', 'throw'];

/** Who answers while Redis is away, per policy. */
const BY_POLICY: Record<StoreErrorPolicy, readonly CallKind[]> = {
  fallback: ['fallback'],
  deny: ['fail-closed'],
  allow: ['fail-open'],
  throw: ['store_unavailable', 'store_timeout'],
};

export interface PolicyRun {
  policy: StoreErrorPolicy;
  report: FaultTrafficReport;
  exitCode: number | null;
  /** From the report line to the process's exit. */
  exitMs: number;
}

class TrafficProcess {
  /** Who answered the child's latest call. */
  latest: CallKind | undefined;
  readonly ready: Promise<void>;
  readonly report: Promise<{ report: FaultTrafficReport; at: number }>;
  readonly exited: Promise<{ code: number | null; at: number }>;

  constructor(
    readonly policy: StoreErrorPolicy,
    readonly child: ChildProcess,
  ) {
    let onReady = (): void => {};
    let onReport = (_: { report: FaultTrafficReport; at: number }): void => {};
    this.ready = new Promise((resolve) => {
      onReady = resolve;
    });
    this.report = new Promise((resolve) => {
      onReport = resolve;
    });
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve({ code, at: performance.now() })));
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      if (line === 'ready') onReady();
      else if (line.startsWith('kind ')) this.latest = line.slice(5);
      else if (line.startsWith('{'))
        onReport({ report: JSON.parse(line) as FaultTrafficReport, at: performance.now() });
    });
  }

  send(line: string): void {
    this.child.stdin?.write(`${line}\n`);
  }
}

async function within<T>(what: string, ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** One child per policy, each charging its own bucket, all against the same Redis. */
export class Fleet {
  private constructor(private readonly processes: TrafficProcess[]) {}

  static async start(
    target: FaultTrafficOptions['target'],
    organizationOf: (policy: StoreErrorPolicy) => string,
    client: string,
    budgetMs: number,
  ): Promise<Fleet> {
    const processes = POLICIES.map((policy) => {
      const options: FaultTrafficOptions = {
        target,
        client,
        policy,
        budgetMs,
        organization: organizationOf(policy),
        loops: 4,
        pauseMs: 2,
      };
      return new TrafficProcess(policy, spawnFixture('fault-traffic', [JSON.stringify(options)]));
    });
    const fleet = new Fleet(processes);
    try {
      await within('the traffic processes to connect', 20_000, Promise.all(processes.map((p) => p.ready)));
    } catch (error) {
      fleet.kill();
      throw error;
    }
    return fleet;
  }

  /** Every child records the time this reaches it. */
  mark(name: string): void {
    for (const process of this.processes) process.send(`mark ${name}`);
  }

  /** Waits until every child's latest call was answered by Redis. */
  untilAllFromRedis(what: string, timeoutMs?: number): Promise<void> {
    return until(what, () => this.processes.every((p) => p.latest === 'store'), timeoutMs);
  }

  /** Ends the traffic, collects every report, and waits for every child to exit by itself. */
  async stop(): Promise<PolicyRun[]> {
    try {
      return await Promise.all(
        this.processes.map(async (p) => {
          p.send('stop');
          p.child.stdin?.end();
          const { report, at } = await within(`the ${p.policy} child's report`, 10_000, p.report);
          const exit = await within(
            `the ${p.policy} child to exit by itself once closed (something was left open)`,
            EXIT_BOUND_MS,
            p.exited,
          );
          return { policy: p.policy, report, exitCode: exit.code, exitMs: exit.at - at };
        }),
      );
    } finally {
      this.kill();
    }
  }

  /** Kills children still running (after a failure). */
  kill(): void {
    for (const p of this.processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill();
  }
}

/** What a fault run measured for one policy, for the report line and docs/reliability.md. */
export interface RunSummary {
  policy: StoreErrorPolicy;
  calls: number;
  /** The slowest call that started once the child was warm (from the 'begin' mark). */
  maxSettleMs: number;
  /** Calls that started after the fault and settled before the repair began. */
  awayCalls: number;
  /** Of those, answered by the policy. */
  awayByPolicy: number;
  /** From the repair to the first call (started after it) that Redis answered. */
  recoveryMs: number;
  /** Who answered calls that started from the 'begin' mark on. */
  kinds: CallKind[];
  /** Consume calls sent to Redis whose answer came after the policy had already answered. */
  lateSends: number;
  /** NOSCRIPT replies answered by sending the script whole. */
  scriptReloads: number;
  exitMs: number;
}

export function summarise(run: PolicyRun): RunSummary {
  const { report } = run;
  const { starts, ends, kindOf, kinds, marks } = report;
  // Settle times count from the first mark on: before it the child was still starting (modules compiling, script
  // loading), which is not what a fault test measures.
  const begin = marks.begin ?? Number.NEGATIVE_INFINITY;
  const down = marks.down ?? Number.POSITIVE_INFINITY;
  const up = marks.up ?? Number.NEGATIVE_INFINITY;
  const storeKind = kinds.indexOf('store');
  const policyKinds = new Set(BY_POLICY[run.policy].map((kind) => kinds.indexOf(kind)));
  let maxSettleMs = 0;
  let awayCalls = 0;
  let awayByPolicy = 0;
  let recoveredAt = Number.POSITIVE_INFINITY;
  let fromStore = 0;
  const seen = new Set<number>();
  for (let i = 0; i < starts.length; i++) {
    const start = starts[i] as number;
    const end = ends[i] as number;
    const kind = kindOf[i] as number;
    if (start >= begin) {
      maxSettleMs = Math.max(maxSettleMs, end - start);
      seen.add(kind);
    }
    if (kind === storeKind) fromStore++;
    if (start >= down && end <= up) {
      awayCalls++;
      if (policyKinds.has(kind)) awayByPolicy++;
    }
    if (kind === storeKind && start >= up) recoveredAt = Math.min(recoveredAt, end);
  }
  return {
    policy: run.policy,
    calls: starts.length,
    maxSettleMs,
    awayCalls,
    awayByPolicy,
    recoveryMs: recoveredAt - up,
    kinds: [...seen].map((kind) => kinds[kind] as CallKind),
    lateSends: report.stats.sent - fromStore,
    scriptReloads: report.stats.scriptReloads,
    exitMs: run.exitMs,
  };
}

/**
 * What Redis does to decisions while the fault lasts: 'away', every call answered by the policy; 'unaffected', every
 * call answered by Redis; 'either', each call by one or the other (a slot migration: most calls follow their key).
 */
export type DuringFault = 'away' | 'unaffected' | 'either';

/** The checks every fault shares, for one policy's run; returns the measured figures. */
export function expectFaultHandled(
  scenario: string,
  run: PolicyRun,
  during: DuringFault,
  budgetMs: number,
): RunSummary {
  const summary = summarise(run);
  const { report } = run;
  if (process.env.RATECARD_REPORT === '1') {
    console.log(
      `${scenario} | ${summary.policy} | calls ${summary.calls} | max settle ${summary.maxSettleMs.toFixed(1)} ms | ` +
        `away ${summary.awayByPolicy}/${summary.awayCalls} by policy | recovery ${summary.recoveryMs.toFixed(0)} ms | ` +
        `late sends ${summary.lateSends} | loop delay ${report.loopDelayMaxMs.toFixed(1)} ms | close ${report.closeMs.toFixed(0)} ms | exit ${summary.exitMs.toFixed(0)} ms | ` +
        `reloads ${summary.scriptReloads} | kinds ${summary.kinds.join(',')} | open after close ${report.resources.join(',')}`,
    );
  }
  const label = `${scenario}, policy '${run.policy}'`;
  expect(report.unhandled, label).toEqual([]);
  expect(run.exitCode, label).toBe(0);
  // A process the machine does not schedule cannot settle anything on time: the worst delay of its event loop (the
  // timer that answers by policy fires that late) is added to the bound, so a busy machine does not fail the run and
  // a store that holds a call past its budget on a punctual loop still does.
  expect(
    summary.maxSettleMs,
    `${label}: slowest call (the child's event loop ran up to ${report.loopDelayMaxMs.toFixed(0)} ms late)`,
  ).toBeLessThanOrEqual(budgetMs + SLACK_MS + report.loopDelayMaxMs);
  // Nobody but Redis and the policy ever answers: no bare Error, no other code.
  const allowed = during === 'unaffected' ? ['store'] : ['store', ...BY_POLICY[run.policy]];
  expect(
    summary.kinds.filter((kind) => !allowed.includes(kind)),
    label,
  ).toEqual([]);
  if (during === 'away') {
    expect(summary.awayCalls, `${label}: calls while Redis was away`).toBeGreaterThanOrEqual(20);
    expect(summary.awayByPolicy, `${label}: calls answered by the policy while Redis was away`).toBe(summary.awayCalls);
  }
  // Redis answers again after the repair.
  expect(summary.recoveryMs, `${label}: recovery`).toBeLessThan(Number.POSITIVE_INFINITY);
  expect(report.kinds[report.kindOf.at(-1) as number], label).toBe('store');
  return summary;
}
