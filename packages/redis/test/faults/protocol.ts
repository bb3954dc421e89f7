import type { StoreErrorPolicy } from '@ratecard/core';
import type { RedisStoreStats } from '../../src/index.js';
import type { RedisAddress } from '../../src/testing.js';

/** What one fault-traffic child process runs against and how (JSON in its first argument). */
export interface FaultTrafficOptions {
  /** A standalone server's URL, or a cluster's nodes. */
  target: { url: string } | { nodes: RedisAddress[] };
  /** The client kind to connect with (test/support/clients.ts). */
  client: string;
  policy: StoreErrorPolicy;
  /** The limiter's storeTimeoutMs. */
  budgetMs: number;
  /** The one bucket this process charges: (organization, 'POST /browsers'). */
  organization: string;
  /** Consume loops running at once. */
  loops: number;
  /** Pause of each loop between calls, so traffic is steady rather than a busy loop. */
  pauseMs: number;
}

/**
 * Who answered a call: a `Decision.source`, or for a rejected call its `RateLimitError` code, or
 * 'not-a-RateLimitError' when something else was thrown.
 */
export type CallKind = string;

/** One JSON line the child prints after it has closed its limiter and client. */
export interface FaultTrafficReport {
  /** Per call, in settling order: when it started and settled (the child's performance.now()) and who answered. */
  starts: number[];
  ends: number[];
  /** Index into `kinds`. */
  kindOf: number[];
  kinds: CallKind[];
  /** `mark <name>` lines the parent sent, timed on arrival. */
  marks: Record<string, number>;
  /** Unhandled rejections and uncaught exceptions seen, described. */
  unhandled: string[];
  /** The store's counters at the end. */
  stats: RedisStoreStats;
  /** How long limiter.close() and the client's quit took, in ms. */
  closeMs: number;
  /** The event loop's worst delay from the 'begin' mark to 'stop' (10 ms resolution), in ms. */
  loopDelayMaxMs: number;
  /** process.getActiveResourcesInfo() once everything was closed: what could still keep the process alive. */
  resources: string[];
}
