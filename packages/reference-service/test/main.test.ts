import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { redisClusterForTests, redisForTests, startRedis } from '@ratecard/redis/testing';
import { build } from 'tsup';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureOutput } from './output.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const main = join(packageDir, 'dist', 'main.js');
let scratch: string;

beforeAll(async () => {
  // `pnpm start` builds first; so does this, so the process under test is the current source.
  await build({ config: join(packageDir, 'tsup.config.ts'), silent: true });
  scratch = mkdtempSync(join(tmpdir(), 'ratecard-service-'));
}, 30_000);

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

interface Started {
  child: ChildProcess;
  output: () => string;
  errors: () => string;
  exited: Promise<number | null>;
}

/** `node dist/main.js`, as `pnpm start` runs it, with the environment given. */
function run(env: Record<string, string>): Started {
  const child = spawn(process.execPath, [main], {
    cwd: packageDir,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const printed = captureOutput(child);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: printed.stdout, errors: printed.stderr, exited };
}

async function urlOf(started: Started): Promise<string> {
  for (let waited = 0; waited < 10_000; waited += 20) {
    const url = /listening on (http:\/\/\S+)/.exec(started.output())?.[1];
    if (url !== undefined) return url;
    if (started.child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`the service printed no URL; stdout: ${started.output()} stderr: ${started.errors()}`);
}

/** Waits until the service has printed `line`, as it does once it has taken a signal. */
async function printed(started: Started, line: string): Promise<void> {
  for (let waited = 0; waited < 10_000; waited += 20) {
    if (started.output().includes(line)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`the service did not print "${line}"; stdout: ${started.output()} stderr: ${started.errors()}`);
}

it('starts like pnpm start, prints URL, store and demo tokens, serves, and drains on SIGTERM to exit 0', async () => {
  const started = run({ PORT: '0' });
  const url = await urlOf(started);
  expect(started.output()).toContain('store: memory');
  expect(started.output()).toMatch(/rc_demo_developer\s+org_developer\s+developer\s+10\/min/);

  const created = await fetch(`${url}/browsers`, {
    method: 'POST',
    headers: { authorization: 'Bearer rc_demo_developer' },
  });
  expect(created.status).toBe(201);
  expect(created.headers.get('x-ratelimit-remaining')).toBe('9');
  expect(await created.json()).toMatchObject({ session_id: expect.stringMatching(/^br_/), headless: false });

  // A request still arriving when SIGTERM lands is finished, not cut.
  const held = heldRequest(url);
  await held.arrived;
  started.child.kill('SIGTERM');
  await printed(started, 'SIGTERM: finishing in-flight requests');
  held.finish();
  const answer = await held.answer;
  expect(answer.statusCode).toBe(202);
  expect(answer.headers.connection).toBe('close');
  expect(await started.exited).toBe(0);
  expect(started.output()).toContain('SIGTERM: finishing in-flight requests');
  expect(started.errors()).toBe('');
}, 20_000);

/**
 * A POST /invocations whose body arrives only when `finish` is called: a request held in flight. `arrived` resolves
 * once the service holds it: the 100 Continue it asks for is sent as node hands the request to the service, so a signal
 * sent after that finds it in flight, however long a busy machine took to get it there (a fixed wait did not).
 */
function heldRequest(url: string): { arrived: Promise<void>; answer: Promise<IncomingMessage>; finish: () => void } {
  const request = httpRequest(`${url}/invocations`, {
    method: 'POST',
    headers: {
      authorization: 'Bearer rc_demo_developer',
      'content-type': 'application/json',
      expect: '100-continue',
    },
  });
  const arrived = new Promise<void>((resolve) => {
    request.once('continue', () => {
      request.write('{"action":');
      resolve();
    });
  });
  const answer = new Promise<IncomingMessage>((resolve, reject) => {
    request.once('response', (response) => {
      response.resume();
      resolve(response);
    });
    request.on('error', reject);
  });
  request.flushHeaders();
  return { arrived, answer, finish: () => request.end('"run"}') };
}

it('takes a SIGINT repeated at once (a relayed Ctrl-C) as one, and a later second signal as "stop now"', async () => {
  const relayed = run({ PORT: '0' });
  const held = heldRequest(await urlOf(relayed));
  await held.arrived;
  relayed.child.kill('SIGINT');
  // Once the first is taken, so the two arrive as two signals (the kernel merges two sent back to back), as a relayed
  // one does.
  await printed(relayed, 'SIGINT: finishing in-flight requests');
  relayed.child.kill('SIGINT');
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(relayed.child.exitCode).toBeNull();
  held.finish();
  expect((await held.answer).statusCode).toBe(202);
  expect(await relayed.exited).toBe(0);
  expect(relayed.output()).not.toContain('again');

  const impatient = run({ PORT: '0' });
  const stuck = heldRequest(await urlOf(impatient));
  stuck.answer.catch(() => {});
  await stuck.arrived;
  impatient.child.kill('SIGINT');
  // 1.1 s counted from when the service took the first signal, which a busy machine may do late: more than its 1 s.
  await printed(impatient, 'SIGINT: finishing in-flight requests');
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  impatient.child.kill('SIGTERM');
  expect(await impatient.exited).toBe(1);
  expect(impatient.output()).toContain('SIGTERM again: exiting without waiting');
}, 20_000);

it('refuses to start with a clear message when the keys file is broken', async () => {
  const broken = join(scratch, 'keys.json');
  writeFileSync(broken, JSON.stringify({ secret_token_1: { organization: 'org_a', plan: 'gold', scopes: [] } }));
  const started = run({ PORT: '0', API_KEYS_FILE: broken });
  expect(await started.exited).toBe(1);
  expect(started.errors().trim()).toBe(
    `reference-service: ${broken}: key #1: plan must be one of developer, hobbyist, startup, enterprise, got "gold"`,
  );
  expect(started.errors()).not.toContain('secret_token_1');
});

it('does not print the tokens of a keys file other than the demo one', async () => {
  const keys = join(scratch, 'private.json');
  writeFileSync(
    keys,
    JSON.stringify({ private_token_1: { organization: 'org_a', plan: 'developer', scopes: ['browsers'] } }),
  );
  const started = run({ PORT: '0', API_KEYS_FILE: keys });
  const url = await urlOf(started);
  const answer = await fetch(`${url}/browsers`, {
    method: 'POST',
    headers: { authorization: 'Bearer private_token_1' },
  });
  expect(answer.status).toBe(201);
  started.child.kill('SIGINT');
  expect(await started.exited).toBe(0);
  expect(started.output()).toContain(`API keys: 1 from ${keys}`);
  expect(started.output()).not.toContain('private_token_1');
}, 20_000);

it('refuses a PORT that is not a port number', async () => {
  const started = run({ PORT: 'eighty' });
  expect(await started.exited).toBe(1);
  expect(started.errors().trim()).toBe('reference-service: PORT must be a port number from 0 to 65535, got "eighty"');
});

it.each([
  ['redis://default:SECRETPASS@127.0.0.1:99999', 'redis://***@127.0.0.1:99999', 'SECRETPASS'],
  ['redis://default:Zm9v/YmFy+cXV4@redis.internal:6379', 'redis://***@redis.internal:6379', 'YmFy'],
  ['rediss://admin:p#ssw0rd@host', 'rediss://***@host', 'ssw0rd'],
  ['redis://admin:what?ever@cache:6379', 'redis://***@cache:6379', 'ever'],
  ['redis://:s3cr/et@host:99999', 'redis://***@host:99999', 's3cr'],
  ['redis://127.0.0.1:6379/#password=s3cret', 'redis://127.0.0.1:6379/#***', 's3cret'],
])('refuses REDIS_URL=%s in one line, its credentials masked', async (url, shown, secret) => {
  const started = run({ REDIS_URL: url });
  expect(await started.exited).toBe(1);
  expect(started.errors().trim()).toBe(
    `reference-service: REDIS_URL is not a valid URL (a port from 0 to 65535, no spaces, and / ? # @ in a user or password written %2F %3F %23 %40), got ${shown}`,
  );
  expect(started.output() + started.errors()).not.toContain(secret);
});

it('masks a password given in the query string when Redis cannot be reached', async () => {
  // Port 1 on loopback: nothing listens there, so the service gives up after its connect timeout.
  const started = run({ PORT: '0', REDIS_URL: 'redis://127.0.0.1:1/?password=SECRETPASS' });
  expect(await started.exited).toBe(1);
  expect(started.errors()).toContain('cannot reach Redis at redis://127.0.0.1:1/?password=***');
  expect(started.output() + started.errors()).not.toContain('SECRETPASS');
}, 20_000);

// Under CI=true these throw when no Redis can be had, so the suite fails instead of passing by skipping.
const redis = await redisForTests('reference-service main in Redis mode');
const cluster = redis === undefined ? undefined : await redisClusterForTests('reference-service main on Redis Cluster');

describe.skipIf(redis === undefined)('in Redis mode', () => {
  afterAll(async () => {
    await redis?.stop();
    await cluster?.stop();
  });

  it('shares the buckets between two replicas on one Redis, masks the password it prints, and exits 0', async () => {
    const url = redis?.url ?? '';
    const withPassword = url.replace('redis://', 'redis://:hunter2@');
    const replicas = [run({ PORT: '0', REDIS_URL: url }), run({ PORT: '0', REDIS_URL: withPassword })];
    const [first, second] = await Promise.all(replicas.map(urlOf));
    expect(replicas[0]?.output()).toContain(`store: redis (${url})`);
    expect(replicas[1]?.output()).toContain(`store: redis (${url.replace('redis://', 'redis://***@')})`);
    expect(replicas[1]?.output()).not.toContain('hunter2');
    // rc_demo_developer's organization may hold tokens from an earlier run on a shared Redis: drain it first.
    const post = (base: string | undefined): Promise<Response> =>
      fetch(`${base}/browsers`, { method: 'POST', headers: { authorization: 'Bearer rc_demo_developer' } });
    for (let i = 0; i < 10; i++) await post(i % 2 === 0 ? first : second);
    const refused = await post(second);
    expect(refused.status).toBe(429);
    expect(await refused.text()).toBe(
      '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}',
    );
    expect((await post(first)).status).toBe(429);
    for (const replica of replicas) replica.child.kill('SIGTERM');
    expect(await Promise.all(replicas.map((replica) => replica.exited))).toEqual([0, 0]);
  }, 30_000);

  it.skipIf(cluster === undefined)(
    'runs on a Redis Cluster given by REDIS_CLUSTER_NODES',
    async () => {
      const nodes = (cluster?.nodes ?? []).map((node) => `${node.host}:${node.port}`).join(',');
      const started = run({ PORT: '0', REDIS_CLUSTER_NODES: nodes });
      const url = await urlOf(started);
      expect(started.output()).toContain(`store: redis cluster (${nodes.replaceAll(',', ', ')})`);
      const answer = await fetch(`${url}/browsers`, {
        method: 'POST',
        headers: { authorization: 'Bearer rc_demo_trial' },
      });
      expect(answer.status).toBe(201);
      expect(answer.headers.get('x-ratelimit-limit')).toBe('100');
      started.child.kill('SIGTERM');
      expect(await started.exited).toBe(0);
    },
    30_000,
  );
});

describe.skipIf(redis === undefined)('when its Redis goes away', () => {
  it('says once that decisions moved to the fallback, with the error, and once that they came back, with the count', async () => {
    const server = await startRedis();
    const started = run({ PORT: '0', REDIS_URL: server.url });
    try {
      const url = await urlOf(started);
      const post = async (): Promise<number> =>
        (await fetch(`${url}/browsers`, { method: 'POST', headers: { authorization: 'Bearer rc_demo_enterprise' } }))
          .status;
      const moved = "decisions go to the failure policy 'fallback' until it answers again";
      const back = 'ratecard: the store answers again since';
      const count = (text: string) => started.errors().split(text).length - 1;
      const postUntil = async (text: string): Promise<number[]> => {
        const statuses: number[] = [];
        for (let waited = 0; count(text) === 0; waited += 20) {
          if (waited > 15_000) throw new Error(`no "${text}" in ${started.errors()}`);
          statuses.push(await post());
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return statuses;
      };
      expect(await post()).toBe(201);
      await server.kill();
      const away = await postUntil(moved);
      for (let i = 0; i < 20; i++) away.push(await post());
      // Answered all along, by the per-process fallback while Redis was away.
      expect(new Set(away)).toEqual(new Set([201]));
      await server.restart();
      await postUntil(back);
      expect([count(moved), count(back)]).toEqual([1, 1]);
      // The call in flight when Redis died waited out its budget (store_timeout); the calls after it were refused.
      expect(started.errors()).toMatch(/ratecard: the store failed \(store_(unavailable|timeout): .+\); decisions go/);
      expect(started.errors()).toMatch(/the failure policy 'fallback' answered \d+ decisions over/);
      started.child.kill('SIGTERM');
      expect(await started.exited).toBe(0);
    } finally {
      started.child.kill('SIGKILL');
      await server.stop();
    }
  }, 40_000);
});
