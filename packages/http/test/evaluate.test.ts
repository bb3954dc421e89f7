import { createLimiter, type Limiter, perSecond, RateLimitError } from '@ratecard/core';
import { memoryStore } from '@ratecard/memory';
import { describe, expect, it } from 'vitest';
import { evaluate, type Identity, requestPath, resolveOptions } from '../src/evaluate.js';
import { asynchronous } from './support.js';

describe('requestPath', () => {
  it('leaves an ordinary origin-form target alone', () => {
    expect(requestPath('/browsers?x=%20')).toBe('/browsers?x=%20');
  });

  it('reduces an absolute-form target to its path', () => {
    expect(requestPath('http://api.example.com/browsers?x=1')).toBe('/browsers?x=1');
    expect(requestPath('https://api.example.com')).toBe('/');
  });

  it('decodes percent-encoded bytes in the path but keeps encoded slash, ? and #', () => {
    expect(requestPath('/%62rowser%5Fpools/%C3%A9')).toBe('/browser_pools/é');
    expect(requestPath('/browsers%2Fx%3Fy%23z?q=%62')).toBe('/browsers%2Fx%3Fy%23z?q=%62');
  });

  it('keeps a malformed escape as it came', () => {
    expect(requestPath('/browsers/%E0%A4%A')).toBe('/browsers/%E0%A4%A');
  });

  it('passes an asterisk-form target through, which matches no rule', () => {
    expect(requestPath('*')).toBe('*');
  });
});

describe('resolveOptions', () => {
  const limiter = createLimiter({ store: memoryStore() });

  const none = (): null => null;
  it.each<[string, unknown]>([
    ['no options', undefined],
    ['no limiter', { identify: none }],
    ['a limiter that is not one', { limiter: {}, identify: none }],
    ['no identify', { limiter }],
    ['a non-function onError', { limiter, identify: none, onError: 'log' }],
    ['a non-boolean ietf', { limiter, identify: none, ietf: 'yes' }],
    ['a bad policy name', { limiter, identify: none, policy: 'ünicode' }],
  ])('rejects %s with invalid_option', (_label, options) => {
    let caught: unknown;
    try {
      resolveOptions(options as never);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(RateLimitError);
    expect((caught as RateLimitError).code).toBe('invalid_option');
  });
});

describe('evaluate', () => {
  const options = resolveOptions<string>({
    limiter: createLimiter({ store: memoryStore({ now: () => 0 }) }),
    identify: (token) => (token === 'anonymous' ? null : { organization: token, plan: 'developer' }),
  });

  it('passes a request without a rule with no headers and no decision', async () => {
    expect(await evaluate(options, 'GET', '/browsers', 'org-1')).toEqual({
      action: 'next',
      headers: {},
      decision: null,
    });
  });

  it('passes an unidentified request the same way', async () => {
    expect(await evaluate(options, 'POST', '/browsers', 'anonymous')).toMatchObject({ action: 'next', headers: {} });
  });

  it('answers the 11th request 429 with the body and the headers', async () => {
    for (let i = 0; i < 10; i++) await evaluate(options, 'POST', '/browsers', 'org-burst');
    expect(await evaluate(options, 'POST', '/browsers', 'org-burst')).toMatchObject({
      action: 'respond',
      status: 429,
      body: '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}',
      headers: {
        'content-type': 'application/json',
        'X-RateLimit-Limit': '10',
        'X-RateLimit-Remaining': '0',
        'Retry-After': '6',
      },
    });
  });

  it('answers 500 when identify hands over an unknown plan, and keeps the error for onError', async () => {
    const broken = resolveOptions<string>({
      limiter: createLimiter({ store: memoryStore() }),
      identify: () => ({ organization: 'org-1', plan: 'platinum' as never }),
    });
    const verdict = await evaluate(broken, 'POST', '/browsers', 'x');
    expect(verdict).toMatchObject({ action: 'respond', status: 500 });
    expect(verdict.action === 'respond' && (verdict.error as RateLimitError).code).toBe('unknown_plan');
  });

  it.each<[string, unknown, RegExp]>([
    ['a key an identity lacks', { organization: 'org-1', limit: 5 }, /unknown key "limit"; did you mean "limits"\?/],
    [
      'the endpoint, which the middleware finds',
      { organization: 'org-1', endpoint: 'GET /x' },
      /unknown key "endpoint"/,
    ],
    [
      'a key set to undefined',
      { organization: 'org-1', plans: undefined },
      /unknown key "plans"; did you mean "plan"\?/,
    ],
    ['a string', 'org-1', /identify must return \{ organization, .*got "org-1"/],
    ['true', true, /identify must return .*got true/],
  ])(
    'answers 500 for %s, on a route with a rule and one without, keeping the error',
    async (_label, identity, message) => {
      const odd = resolveOptions<string>({
        limiter: createLimiter({ store: memoryStore() }),
        identify: () => identity as never,
      });
      for (const [method, path] of [
        ['POST', '/browsers'],
        ['GET', '/health'],
      ]) {
        const verdict = await evaluate(odd, method as string, path as string, 'x');
        expect(verdict).toMatchObject({ action: 'respond', status: 500, decision: null });
        const error = verdict.action === 'respond' ? (verdict.error as RateLimitError) : undefined;
        expect(error).toBeInstanceOf(RateLimitError);
        expect(error?.code).toBe('invalid_argument');
        expect(error?.message).toMatch(message);
      }
    },
  );

  it('takes every key of an Identity', async () => {
    const every: Required<Identity> = {
      organization: 'o',
      plan: 'developer',
      trial: false,
      override: 5,
      limits: perSecond(3),
      cost: 2,
      leaseMs: 1_000,
    };
    const full = resolveOptions<string>({ limiter: createLimiter({ store: memoryStore() }), identify: () => every });
    expect(await evaluate(full, 'GET', '/health', 'x')).toMatchObject({
      action: 'next',
      decision: { limit: 3, remaining: 1 },
    });
  });

  it('rejects with the error identify throws', async () => {
    const error = new Error('no session');
    const throwing = resolveOptions<string>({
      limiter: createLimiter({ store: memoryStore() }),
      identify: async () => {
        throw error;
      },
    });
    await expect(evaluate(throwing, 'POST', '/browsers', 'x')).rejects.toBe(error);
  });
});

const who = { organization: 'org-1', plan: 'developer' } as const;

function settingsWith(store: ReturnType<typeof memoryStore> | ReturnType<typeof asynchronous>, identify = () => who) {
  return resolveOptions<null>({ limiter: createLimiter({ store }), identify });
}

describe('evaluate, one path for every store', () => {
  it('gives the same verdict on a store answering with values and one answering with promises', async () => {
    for (const store of [memoryStore(), asynchronous(memoryStore())]) {
      const settings = settingsWith(store);
      expect(await evaluate(settings, 'POST', '/browsers', null)).toMatchObject({
        action: 'next',
        headers: { 'X-RateLimit-Remaining': '9' },
      });
      expect(await evaluate(settings, 'GET', '/browsers', null)).toMatchObject({ action: 'next', decision: null });
    }
  });

  it('matches the request against the rules once, and hands the limiter the rule key', async () => {
    const limiter = createLimiter({ store: memoryStore() });
    let matched = 0;
    const endpoints: string[] = [];
    const watched: Limiter = {
      rules: limiter.rules,
      ruleFor: (method, path) => {
        matched++;
        return limiter.ruleFor(method, path);
      },
      consume: (request) => {
        endpoints.push(request.endpoint);
        return limiter.consume(request);
      },
      peek: (request) => limiter.peek(request),
      reserve: (request) => limiter.reserve(request),
      reset: (bucket) => limiter.reset(bucket),
      inspect: (ref) => limiter.inspect(ref),
      block: (ref) => limiter.block(ref),
      unblock: (ref) => limiter.unblock(ref),
      close: () => limiter.close(),
    };
    const settings = resolveOptions<null>({ limiter: watched, identify: () => who });
    await evaluate(settings, 'PUT', '/browser_pools/pool-7?x=1', null);
    expect(matched).toBe(1);
    expect(endpoints).toEqual(['PUT /browser-pools/:id']);
  });

  it('rejects with what identify throws, the application error', async () => {
    const boom = new Error('identify broke');
    const settings = settingsWith(memoryStore(), () => {
      throw boom;
    });
    await expect(evaluate(settings, 'POST', '/browsers', null)).rejects.toBe(boom);
  });

  it('turns a limiter error into a 500 verdict', async () => {
    const settings = settingsWith(memoryStore());
    await settings.limiter.close();
    expect(await evaluate(settings, 'POST', '/browsers', null)).toMatchObject({ action: 'respond', status: 500 });
  });
});
