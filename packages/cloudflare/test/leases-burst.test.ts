import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLeaseWorker } from './support/burst.js';
import { type Workerd, workerdRuns } from './support/workerd.js';

// The README's Worker (its limiter, its wrangler configuration) with routes that reserve a slot of one organization's
// concurrency(5) through limiter.reserve, served by workerd in four isolates sharing its object: bursts of concurrent
// reserves from all four, while held reservations end in the isolates that hold them. The test tracks every lease
// held: the first burst, with none ending, admits exactly 5; each later one admits no more than the slots freed
// meanwhile; and the object's free slots always equal 5 minus the leases the test counts as held, never below 0.

const ISOLATES = 4;
const N = 5;
const BURST = 100;

interface Reserved {
  allowed: boolean;
  source: string;
  handle: string | null;
}

describe.runIf(workerdRuns())('leases of one concurrency limit reserved from four isolates at once', () => {
  let worker: Awaited<ReturnType<typeof startLeaseWorker>>;
  let workerd: Workerd;

  beforeAll(async () => {
    worker = await startLeaseWorker(ISOLATES);
    workerd = worker.workerd;
  });

  afterAll(async () => {
    await worker?.stop();
  });

  it(`holds at most ${N} leases: exactly ${N} of a first burst, then no more than were freed`, async () => {
    const organization = `leases-burst-${process.pid}-${Date.now()}`;
    const query = `organization=${encodeURIComponent(organization)}&n=${N}`;
    /** The leases held, each with the isolate that holds its Reservation. */
    const held: { url: string; handle: string }[] = [];

    const reserve = async (i: number): Promise<boolean> => {
      const url = workerd.urls[i % workerd.urls.length] as string;
      const response = await fetch(`${url}/sessions?${query}`, { method: 'POST' });
      expect(response.status).toBe(200);
      const answer = (await response.json()) as Reserved;
      // Decided by the object, not by an isolate's fallback.
      expect(answer.source).toBe('store');
      if (answer.allowed) held.push({ url, handle: answer.handle as string });
      return answer.allowed;
    };
    const end = async ({ url, handle }: { url: string; handle: string }): Promise<boolean> => {
      const response = await fetch(`${url}/sessions/end?handle=${handle}`, { method: 'POST' });
      return ((await response.json()) as { ended: boolean }).ended;
    };
    const free = async (): Promise<number> => {
      const answer = (await (await fetch(`${workerd.url}/sessions?${query}`)).json()) as { outcome: number };
      // A peek of one slot: admitted, the free slots less one; refused, -1 - free.
      return answer.outcome >= 0 ? answer.outcome + 1 : -1 - answer.outcome;
    };
    const burst = () => Promise.all(Array.from({ length: BURST }, (_, i) => reserve(i)));

    const first = await burst();
    expect(first.filter(Boolean)).toHaveLength(N);
    expect(await free()).toBe(0);

    for (const ending of [1, 2, 3, 5]) {
      const before = held.length;
      const ended = held.splice(0, ending);
      const [answers, admitted] = await Promise.all([Promise.all(ended.map(end)), burst()]);
      expect(answers).toEqual(ended.map(() => true));
      const count = admitted.filter(Boolean).length;
      expect(count).toBeLessThanOrEqual(N - before + ended.length);
      expect(held.length).toBeLessThanOrEqual(N);
      expect(await free()).toBe(N - held.length);
    }
  });

  it('logged no uncaught exception', () => {
    expect(workerd.output()).not.toMatch(/Uncaught|ReferenceError|TypeError/);
  });
});
