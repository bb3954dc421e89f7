import { createLimiter, type Limiter, perHour } from '@ratecard/core';
import { redisStore } from '@ratecard/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PASSWORD, ratecard } from './support/run.js';

// The built `ratecard` run as a child process against a real redis-server and a real 3-master cluster, beside a
// limiter of this process's on the same Redis making real decisions.

const REDIS_URL = inject('redisUrl');
const PASSWORD_URL = inject('passwordUrl');
const CLUSTER_NODES = inject('clusterNodes');
const ENDPOINT = 'POST /browsers';

let names = 0;
function uniqueOrg(label: string): string {
  return `${label}-${process.pid}-${Date.now().toString(36)}-${names++}`;
}

function ready(client: Redis | Cluster): Promise<void> {
  return new Promise((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('end', () => reject(new Error('the client ended before it was ready')));
  });
}

interface Topology {
  name: string;
  /** The arguments that point the command line at it. */
  args: () => string[];
  client: () => Redis | Cluster;
}

const TOPOLOGIES: Topology[] = [
  {
    name: 'standalone',
    args: () => ['--redis', REDIS_URL as string],
    client: () => new Redis(REDIS_URL as string),
  },
  {
    name: '3-master cluster',
    args: () => ['--cluster', '--redis', `redis://${CLUSTER_NODES?.[0]?.host}:${CLUSTER_NODES?.[0]?.port}`],
    client: () => new Cluster(CLUSTER_NODES ?? []),
  },
];

for (const topology of TOPOLOGIES) {
  describe.skipIf(REDIS_URL === null)(`ratecard against ${topology.name}`, () => {
    let client: Redis | Cluster;
    /** A limiter with one rule, perHour(10) on POST /browsers (a token every 6 minutes), as an application would have. */
    const limiter = (): Limiter =>
      createLimiter({ store: redisStore({ client }), endpoints: { [ENDPOINT]: perHour(10) }, onStoreError: 'throw' });
    const cli = (...args: string[]) => ratecard([...topology.args(), ...args]);
    beforeAll(async () => {
      client = topology.client();
      await ready(client);
    });
    afterAll(() => client.disconnect());

    it('inspects a key after real decisions: tokens, capacity, when full, leases held', async () => {
      const org = uniqueOrg('inspect');
      const app = limiter();
      for (let i = 0; i < 3; i++)
        expect((await app.consume({ organization: org, endpoint: ENDPOINT })).allowed).toBe(true);
      const held = await app.reserve({ organization: org, endpoint: ENDPOINT, cost: 2 });
      expect(held.allowed).toBe(true);
      const human = await cli('inspect', org, ENDPOINT);
      expect(human.code).toBe(0);
      expect(human.stdout).toMatch(new RegExp(`^${org} on POST /browsers, at \\d{4}-\\d\\d-\\d\\dT`));
      // 10 less 3 consumed less 2 reserved: 5 tokens, 2 reserved, full again in 30 minutes (less the time gone by).
      expect(human.stdout).toMatch(/ 1h +bucket +5 +10 +2 +\d{4}-[^ ]+Z \(in \d+m \d\ds\)\n/);
      expect(human.stdout).toMatch(/leases held: 1\n {2}\S+ {2}expires \S+Z \(in [^)]+\) {2}1h=2\n$/);

      const json = await cli('--json', 'inspect', org, ENDPOINT);
      expect(json.code).toBe(0);
      const inspection = JSON.parse(json.stdout);
      expect(inspection).toMatchObject({ organization: org, endpoint: ENDPOINT });
      expect(inspection.limits).toEqual([
        { name: '1h', kind: 'bucket', capacity: 10, tokens: 5, reserved: 2, fullAt: expect.any(Number) },
      ]);
      expect(inspection.leases).toEqual([
        { id: expect.any(String), expiresAt: expect.any(Number), holds: { '1h': 2 } },
      ]);
      const fullIn = inspection.limits[0].fullAt - inspection.at;
      expect(fullIn).toBeLessThanOrEqual(30 * 60_000);
      expect(fullIn).toBeGreaterThan(20 * 60_000);
      await held.cancel?.();
      await app.close();
    });

    it('says nothing is stored, with exit code 2, for a key with no bucket', async () => {
      const ran = await cli('inspect', uniqueOrg('none'), ENDPOINT);
      expect(ran.code).toBe(2);
      expect(ran.stdout).toContain('nothing stored: every limit is full');
      const json = await cli('--json', 'inspect', uniqueOrg('none'), ENDPOINT);
      expect(json.code).toBe(2);
      expect(JSON.parse(json.stdout)).toMatchObject({ limits: [], leases: [] });
    });

    it('resets every bucket and lease of a key, says what it reset, and the limiter admits again', async () => {
      const org = uniqueOrg('reset');
      const app = limiter();
      for (let i = 0; i < 10; i++) await app.consume({ organization: org, endpoint: ENDPOINT });
      expect((await app.consume({ organization: org, endpoint: ENDPOINT })).allowed).toBe(false);
      const ran = await cli('reset', org, ENDPOINT);
      expect(ran.code).toBe(0);
      expect(ran.stdout).toContain(`reset ${org} on POST /browsers: 1h full again, 0 leases released`);
      expect((await cli('inspect', org, ENDPOINT)).code).toBe(2);
      // A fresh limiter (no deny cache) is admitted at once; the first one within its deny cache's second.
      const fresh = limiter();
      expect((await fresh.consume({ organization: org, endpoint: ENDPOINT })).allowed).toBe(true);
      const again = await cli('--json', 'reset', org, ENDPOINT);
      expect(JSON.parse(again.stdout)).toEqual({ organization: org, endpoint: ENDPOINT, reset: ['1h'], leases: 0 });
      expect((await cli('reset', org, 'GET /other')).code).toBe(2);
      await Promise.all([app.close(), fresh.close()]);
    });

    it('blocks an organization, which a limiter then refuses, lists it, and unblocks it', async () => {
      const org = uniqueOrg('block');
      const blocked = await cli('block', org, '--for', '15m', '--reason', 'abuse report 17');
      expect(blocked.code).toBe(0);
      expect(blocked.stdout).toMatch(
        new RegExp(`^${org} is blocked on every endpoint until \\S+Z \\(in 15m 00s\\) \\(abuse report 17\\)`),
      );
      // A limiter made now reads the blocks before its first decision.
      const app = limiter();
      const refused = await app.consume({ organization: org, endpoint: ENDPOINT });
      expect(refused).toMatchObject({ allowed: false, source: 'block', block: { reason: 'abuse report 17' } });
      expect(refused.retryAfter).toBeLessThanOrEqual(900);
      expect(refused.retryAfter).toBeGreaterThan(600);

      const listed = await cli('blocks');
      expect(listed.stdout).toMatch(
        new RegExp(`${org} +every endpoint +\\S+Z \\(in 1[45]m \\d\\ds\\) +abuse report 17`),
      );
      const json = JSON.parse((await cli('--json', 'blocks')).stdout);
      expect(json.blocks.filter((block: { organization: string }) => block.organization === org)).toEqual([
        { organization: org, endpoint: '*', until: expect.any(Number), reason: 'abuse report 17' },
      ]);

      const unblocked = await cli('unblock', org);
      expect(unblocked.code).toBe(0);
      expect(unblocked.stdout).toContain(`unblocked ${org} on every endpoint`);
      const after = limiter();
      expect((await after.consume({ organization: org, endpoint: ENDPOINT })).allowed).toBe(true);
      expect((await cli('unblock', org)).code).toBe(2);
      await Promise.all([app.close(), after.close()]);
    });

    it('blocks one endpoint only', async () => {
      const org = uniqueOrg('block-one');
      const ran = await cli('--json', 'block', org, ENDPOINT, '--for', '1h30m');
      expect(ran.code).toBe(0);
      const made = JSON.parse(ran.stdout);
      expect(made).toMatchObject({ organization: org, endpoint: ENDPOINT, reason: '' });
      expect(made.until - made.now).toBe(5_400_000);
      const app = createLimiter({
        store: redisStore({ client }),
        endpoints: { [ENDPOINT]: perHour(10), 'GET /items': perHour(10) },
        onStoreError: 'throw',
      });
      expect((await app.consume({ organization: org, endpoint: ENDPOINT })).allowed).toBe(false);
      expect((await app.consume({ organization: org, endpoint: 'GET /items' })).allowed).toBe(true);
      expect((await cli('unblock', org)).code).toBe(2);
      expect((await cli('unblock', org, ENDPOINT)).code).toBe(0);
      await app.close();
    });
  });
}

describe.skipIf(CLUSTER_NODES === null)('ratecard against a cluster given by its seed nodes', () => {
  it('takes several --redis as the seed nodes of one cluster, and --prefix for the keys', async () => {
    const seeds = (CLUSTER_NODES ?? []).flatMap(({ host, port }) => ['--redis', `redis://${host}:${port}`]);
    const org = uniqueOrg('seeds');
    const client = new Cluster(CLUSTER_NODES ?? []);
    await ready(client);
    const app = createLimiter({
      store: redisStore({ client, prefix: 'other:' }),
      endpoints: { [ENDPOINT]: perHour(10) },
      onStoreError: 'throw',
    });
    await app.consume({ organization: org, endpoint: ENDPOINT });
    expect((await ratecard([...seeds, 'inspect', org, ENDPOINT])).code).toBe(2);
    const ran = await ratecard([...seeds, '--prefix', 'other:', '--json', 'inspect', org, ENDPOINT]);
    expect(ran.code).toBe(0);
    expect(JSON.parse(ran.stdout).limits).toMatchObject([{ name: '1h', tokens: 9 }]);
    await app.close();
    client.disconnect();
  });
});

describe.skipIf(REDIS_URL === null)('ratecard usage and exit codes', () => {
  it('prints help with examples, the endpoint note and the exit codes, exit code 0', async () => {
    const ran = await ratecard(['--help']);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toContain('Usage: ratecard [options] [command]');
    expect(ran.stdout).toContain("ratecard block acme --for 2h --reason 'abuse report 17'");
    expect(ran.stdout).toContain("'ALL /*' for the");
    expect(ran.stdout).toContain('Exit codes: 0 done; 1 usage error; 2 nothing stored there');
    const block = await ratecard(['block', '--help']);
    expect(block.code).toBe(0);
    expect(block.stdout).toContain('--for <duration>');
  });

  it('exits 1 on a usage error, before connecting', async () => {
    for (const args of [
      ['nope'],
      ['inspect', 'acme'],
      ['block', 'acme'],
      ['block', 'acme', '--for', '2 hours'],
      ['block', 'acme', '--for', '0s'],
      ['--redis', 'http://example.com', 'blocks'],
      ['--timeout', 'soon', 'blocks'],
    ]) {
      const ran = await ratecard(args, REDIS_URL as string);
      expect({ args, code: ran.code }).toEqual({ args, code: 1 });
      expect(ran.stderr).not.toBe('');
    }
    const unset = await ratecard(['blocks']);
    expect(unset.code).toBe(1);
    expect(unset.stderr).toContain('set REDIS_URL or pass --redis');
  });

  it('reads REDIS_URL, and exits 3 when Redis is unreachable', async () => {
    expect((await ratecard(['blocks'], REDIS_URL as string)).code).toBe(0);
    // A port nothing listens on: the server started and stopped here would do as well; port 1 is never a Redis.
    const ran = await ratecard(['--redis', 'redis://127.0.0.1:1', 'blocks']);
    expect(ran.code).toBe(3);
    expect(ran.stderr).toContain('ratecard: could not use Redis at redis://127.0.0.1:1');
  });
});

describe.skipIf(PASSWORD_URL === null)('ratecard and a password', () => {
  it('works with the password and never shows it: output, JSON, errors', async () => {
    const url = PASSWORD_URL as string;
    const org = uniqueOrg('secret');
    const client = new Redis(url);
    await ready(client);
    const app = createLimiter({
      store: redisStore({ client }),
      endpoints: { [ENDPOINT]: perHour(10) },
      onStoreError: 'throw',
    });
    await app.consume({ organization: org, endpoint: ENDPOINT });
    // The organization holds the password too: masking covers every line written.
    const runs = [
      await ratecard(['inspect', org, ENDPOINT], url),
      await ratecard(['--json', 'inspect', org, ENDPOINT], url),
      await ratecard(['--redis', url, 'block', `${org}-${PASSWORD}`, '--for', '1m', '--reason', PASSWORD]),
      await ratecard(['--redis', url, 'blocks']),
      await ratecard([`--redis=${url}`, '--json', 'blocks']),
    ];
    expect(runs.map((ran) => ran.code)).toEqual([0, 0, 0, 0, 0]);
    expect(runs[0]?.stdout).toContain(' 1h ');
    expect(runs[3]?.stdout).toContain(`${org}-***`);
    for (const ran of runs) expect(`${ran.stdout}${ran.stderr}`).not.toContain(PASSWORD);
    await app.close();
    client.disconnect();
  });

  it('exits 3 on a wrong or missing password, showing neither', async () => {
    const wrong = PASSWORD_URL?.replace(PASSWORD, 'not-the-password-9c1e') as string;
    const refused = await ratecard(['--redis', wrong, 'blocks']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/WRONGPASS|invalid password|invalid username-password/);
    expect(refused.stderr).not.toContain('not-the-password-9c1e');
    const bare = PASSWORD_URL?.replace(`:${PASSWORD}@`, '') as string;
    const none = await ratecard(['blocks'], bare);
    expect(none.code).toBe(3);
    expect(none.stderr).toContain('NOAUTH');
    // Refused connections and URLs with a password: the message names the host, never the password.
    const closed = await ratecard(['--redis', `redis://:${PASSWORD}@127.0.0.1:1`, 'blocks']);
    expect(closed.code).toBe(3);
    expect(closed.stderr).toContain('redis://127.0.0.1:1');
    expect(closed.stderr).not.toContain(PASSWORD);
  });
});
