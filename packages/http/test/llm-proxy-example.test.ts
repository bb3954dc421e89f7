import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { decodeEndpointLeases, decodeEndpointValue, endpointKey } from '@ratecard/redis';
import { redisForTests } from '@ratecard/redis/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listeningUrl, T0 } from './support.js';

// docs/redis.md's LLM proxy, run as written in two processes against one redis-server, with real HTTP requests to
// both. Each process runs on a clock that stands still at T0 (fixtures/client-clock.mjs): no token refills during the
// run and no lease expires, so every figure below holds at any machine speed.

const guide = readFileSync(new URL('../../../docs/redis.md', import.meta.url), 'utf8');
const HEADING = 'An LLM proxy with leases';
const code = guide.split(/^## /m).find((part) => part.startsWith(`${HEADING}\n`));
const example = code === undefined ? undefined : /```js\n([\s\S]*?)```/.exec(code)?.[1];
/** The Redis value the section shows, a key's after 60 requests. */
const shownValue = code === undefined ? undefined : /```text\n(.*)\n```/.exec(code)?.[1];
const ENDPOINT = 'POST /v1/chat/completions';
const FULL = { requests: 60, tokens: 100_000 };

interface Answer {
  status: number;
  retryAfter: string | null;
  remaining: string | null;
  usage: number | undefined;
}

const target = await redisForTests('the LLM proxy example in docs/redis.md');

describe.skipIf(target === undefined)('the LLM proxy example in docs/redis.md, in two processes on one Redis', () => {
  const file = fileURLToPath(new URL('../docs-llm-proxy.tmp.mjs', import.meta.url));
  const children: ChildProcess[] = [];
  const urls: string[] = [];
  let admin: Redis;
  let keys = 0;

  /** An API key no other test (nor an earlier run against a shared server) uses. */
  const apiKey = (label: string): string => `${label}-${process.pid}-${Date.now().toString(36)}-${keys++}`;

  /** A process running the example as written, resolved with the URL it prints. */
  function startProxy(): Promise<string> {
    const child = spawn(
      process.execPath,
      [`--import=${new URL('./fixtures/client-clock.mjs', import.meta.url).href}`, file],
      {
        env: { ...process.env, REDIS_URL: target?.url, PORT: '0', RATECARD_NOW: String(T0) },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    children.push(child);
    return listeningUrl(child, 'LLM proxy');
  }

  /** A completion asked of one process: `prompt` is the one message's content. */
  async function complete(
    url: string,
    key: string,
    maxTokens: number,
    prompt: string,
    model = 'stand-in',
  ): Promise<Answer> {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, max_tokens: maxTokens, messages: [{ role: 'user', content: prompt }] }),
    });
    const body = (await response.json()) as { usage?: { total_tokens: number } };
    return {
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      remaining: response.headers.get('x-ratelimit-remaining'),
      usage: body.usage?.total_tokens,
    };
  }

  /** The tokens each bucket of a key holds in Redis (negative in debt), by limit name; a missing key is full. */
  async function held(key: string): Promise<Record<string, number>> {
    const value = await admin.get(endpointKey(key, ENDPOINT));
    if (value === null) return FULL;
    expect(decodeEndpointLeases(value)).toEqual([]);
    const buckets = decodeEndpointValue(value) ?? [];
    // Written at T0: the store read the clock the test set, not Redis' TIME.
    expect(buckets.map((bucket) => bucket.updatedAt)).toEqual(buckets.map(() => T0));
    return Object.fromEntries(buckets.map((bucket) => [bucket.name, bucket.units / bucket.unitsPerToken]));
  }

  beforeAll(async () => {
    if (example === undefined) throw new Error(`docs/redis.md has no js example under "## ${HEADING}"`);
    // Written inside this package so that imports resolve through the workspace; the packages resolve to dist/.
    writeFileSync(file, example);
    admin = new Redis(target?.url ?? '');
    urls.push(...(await Promise.all([startProxy(), startProxy()])));
  }, 30_000);

  afterAll(async () => {
    for (const child of children) child.kill();
    rmSync(file, { force: true });
    admin?.disconnect();
    await target?.stop();
  });

  it('admits 60 requests a minute per key across both processes, and charges the tokens used, not those reserved', async () => {
    const keys = [apiKey('requests'), apiKey('requests')];
    // 70 requests per key, 35 to each process (either alone would admit all 35), each reserving 4 000 tokens; the
    // model reports 10 prompt tokens (40 characters) and 500 answered.
    const prompt = 'Name the colours of the rainbow, please.';
    const jobs = Array.from({ length: 140 }, (_, i) => ({
      key: keys[i % 2] as string,
      url: urls[(i >> 1) % 2] as string,
    }));
    const answers = new Map<string, Answer[]>(keys.map((key) => [key, []]));
    // 16 at once: at most 16 of a key's leases are held, 64 000 tokens, beside at most 59 × 510 settled, so its
    // tokens never refuse a request and every refusal is the requests limit's.
    let next = 0;
    const sender = async (): Promise<void> => {
      for (let job = jobs[next++]; job !== undefined; job = jobs[next++]) {
        answers.get(job.key)?.push(await complete(job.url, job.key, 4_000, prompt));
      }
    };
    await Promise.all(Array.from({ length: 16 }, sender));
    for (const key of keys) {
      const admitted = answers.get(key)?.filter((answer) => answer.status === 200) ?? [];
      const refused = answers.get(key)?.filter((answer) => answer.status === 429) ?? [];
      expect([admitted.length, refused.length]).toEqual([60, 10]);
      expect(admitted.map((answer) => answer.usage)).toEqual(admitted.map(() => 510));
      // The requests bucket is empty and refills a request a second.
      expect(refused.map((answer) => [answer.retryAfter, answer.remaining])).toEqual(refused.map(() => ['1', '0']));
      // Reserved: 60 × 4 000 = 240 000, more than the minute's 100 000; settled: 60 × 510 = 30 600.
      expect(await held(key)).toEqual({ requests: 0, tokens: 100_000 - 60 * 510 });
    }
    expect(shownValue).toContain(` ${T0} `);
    expect(await admin.get(endpointKey(keys[0] as string, ENDPOINT))).toBe(shownValue);
  }, 60_000);

  it('makes the next request wait, in the other process too, when a prompt takes the tokens below empty', async () => {
    const key = apiKey('debt');
    // 104 500 prompt tokens and 500 answered: 105 000 used against 4 000 reserved, 5 000 more than the key held.
    const long = await complete(urls[0] as string, key, 4_000, 'x'.repeat(4 * 104_500));
    expect([long.status, long.usage]).toEqual([200, 105_000]);
    expect(await held(key)).toEqual({ requests: 59, tokens: -5_000 });
    const next = await complete(urls[1] as string, key, 4_000, 'Hello');
    // It waits for the debt and its own 4 000 to refill, 9 000 tokens at 100 000 a minute: 5.4 s (without the debt,
    // an empty bucket, 2.4 s).
    expect([next.status, next.retryAfter, next.remaining]).toEqual([429, '6', '0']);
    expect(await held(key)).toEqual({ requests: 59, tokens: -5_000 });
  }, 30_000);

  it('gives the request and its tokens back when the model fails', async () => {
    const key = apiKey('failed');
    const failed = await complete(urls[0] as string, key, 4_000, 'Hello', 'no-such-model');
    expect(failed.status).toBe(502);
    expect(await held(key)).toEqual(FULL);
    const answered = await complete(urls[1] as string, key, 4_000, 'Hello');
    expect([answered.status, answered.usage, answered.remaining]).toEqual([200, 502, '59']);
    expect(await held(key)).toEqual({ requests: 59, tokens: 100_000 - 502 });
  }, 30_000);
});
