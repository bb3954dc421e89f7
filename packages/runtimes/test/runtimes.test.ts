import { storeContractSuite } from '@ratecard/core/testing';
import { memoryStore } from '@ratecard/memory';
import { type RedisTarget, redisForTests } from '@ratecard/redis/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConcurrentHobbyist, checkDeveloperBurst, checkOwnLimits, checkUnlimited } from './support/http.js';
import { probe, RUNTIMES, runFixture, runs, type Served, serveFixture, type TestResult } from './support/runtimes.js';

/** The test names storeContractSuite declares, collected here without running them: each runtime must pass all. */
function contractNames(name: string): string[] {
  const names: string[] = [];
  const path: string[] = [];
  storeContractSuite(
    name,
    { create: () => memoryStore() },
    {
      describe: (title, body) => {
        path.push(title);
        body();
        path.pop();
      },
      it: (title) => {
        names.push([...path, title].join(' > '));
      },
    },
  );
  return names;
}

function passed(results: readonly TestResult[], prefix: string): TestResult[] {
  const chosen = results.filter((result) => result.name.startsWith(prefix));
  const failures = chosen.filter((result) => !result.ok).map((result) => `${result.name}\n${result.error}`);
  expect(failures, failures.join('\n\n')).toEqual([]);
  return chosen;
}

// Started while the tests are collected, so that the Redis checks are declared, or skipped loudly, up front.
const redis: RedisTarget | undefined = await redisForTests('@ratecard/runtimes Redis store checks');

afterAll(async () => {
  await redis?.stop();
});

describe.each(RUNTIMES.map((runtime) => [runtime.name, runtime] as const))('on %s', (name, runtime) => {
  const available = runs(name, runtime.command);

  if (runtime.major !== undefined) {
    it.runIf(available)(`is the Node.js ${runtime.major} line`, () => {
      expect(probe(runtime.command)).toEqual({ version: expect.stringMatching(new RegExp(`^v${runtime.major}\\.`)) });
    });
  }

  describe.runIf(available)('the built packages', () => {
    let results: TestResult[] = [];

    beforeAll(async () => {
      results = await runFixture(
        runtime,
        'suite.mjs',
        redis === undefined ? {} : { RATECARD_REDIS_URL: redis.url },
        90_000,
      );
    }, 100_000);

    it("pass the core's store contract suite on the memory store, every test of it", () => {
      const ran = passed(results, 'store contract: memory >');
      expect(ran.map((result) => result.name)).toEqual(contractNames('memory'));
    });

    it('decide exactly as the exact model does, on the memory store', () => {
      const [exact] = passed(results, 'exactness: memory store');
      expect(exact?.detail).toEqual({ steps: 600, admitted: expect.any(Number) });
      expect(exact?.detail?.admitted).toBeGreaterThan(100);
    });

    it('charge two limits of one request all or nothing, on the memory store', () => {
      const [two] = passed(results, 'two limits: memory store');
      expect(two?.detail).toEqual({ admitted: 12, of: 14 });
    });

    it('follow the failure policy: fallback to the memory store, deny, allow, throw, and the time budget', () => {
      const ran = passed(results, 'failure policy:');
      expect(ran).toHaveLength(5);
      expect(ran[0]?.detail).toEqual({ admitted: 10, of: 12 });
    });

    describe.runIf(redis !== undefined)('with the Redis store through ioredis', () => {
      it('pass the store contract suite against a real redis-server', () => {
        const ran = passed(results, 'store contract: redis (ioredis) >');
        expect(ran.map((result) => result.name)).toEqual(contractNames('redis (ioredis)'));
      });

      it('decide exactly as the exact model does', () => {
        const [exact] = passed(results, 'exactness: redis store (ioredis)');
        expect(exact?.detail).toEqual({ steps: 600, admitted: expect.any(Number) });
      });

      it('charge two limits of one request all or nothing', () => {
        const [two] = passed(results, 'two limits: redis store (ioredis)');
        expect(two?.detail).toEqual({ admitted: 12, of: 14 });
      });

      it('share one bucket between two connections: 25 of 40 admitted', () => {
        const ran = passed(results, 'redis (ioredis):');
        expect(ran.map((result) => result.detail)).toEqual([{ admitted: 25, of: 40 }, null]);
      });
    });
  });

  describe.runIf(available)('HTTP middleware, served by this runtime', () => {
    let served: Served;

    beforeAll(async () => {
      served = await serveFixture(runtime, 30_000);
    }, 40_000);

    afterAll(async () => {
      await served?.stop();
    });

    describe.each(runtime.adapters.map((adapter) => [adapter]))('%s', (adapter) => {
      const url = () => served.urls[adapter] as string;

      it("answers a Developer's 11th request with the spec's 429: exact headers and body", async () => {
        await checkDeveloperBurst(url());
      });

      it('admits exactly 25 of 40 concurrent Hobbyist requests', async () => {
        await checkConcurrentHobbyist(url());
      });

      it('lets unidentified requests and unlimited endpoints through untouched', async () => {
        await checkUnlimited(url());
      });

      it('limits per IP by limits identify gives, on a path no rule matches: the 11th at once is a 429', async () => {
        await checkOwnLimits(url());
      });
    });
  });
});
