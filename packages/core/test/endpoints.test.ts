import { describe, expect, it } from 'vitest';
import { DEFAULT_ENDPOINTS, EndpointRules, EVERY_ENDPOINT, perMinute, perSecond } from '../src/index.js';

const PLAN_NAMES = new Set(['developer', 'hobbyist', 'startup', 'enterprise']);
const rulesOf = (endpoints: ConstructorParameters<typeof EndpointRules>[0]) => new EndpointRules(endpoints, PLAN_NAMES);

describe('endpoint rules', () => {
  const rules = rulesOf(DEFAULT_ENDPOINTS);

  it('enforces POST /browsers and shadows the other three spec endpoints', () => {
    expect(DEFAULT_ENDPOINTS).toEqual({
      'POST /browsers': 'enforce',
      'POST /browser-pools': 'shadow',
      'PUT /browser-pools/:id': 'shadow',
      'POST /invocations': 'shadow',
    });
  });

  it('matches a concrete path against :name patterns', () => {
    expect(rules.forRequest('PUT', '/browser-pools/abc')?.key).toBe('PUT /browser-pools/:id');
    expect(rules.forEndpoint('PUT /browser-pools/abc')?.key).toBe('PUT /browser-pools/:id');
  });

  it('ignores the query string, the fragment and a trailing slash', () => {
    expect(rules.forRequest('POST', '/browsers/?x=1')?.key).toBe('POST /browsers');
    expect(rules.forRequest('POST', '/browsers#top')?.key).toBe('POST /browsers');
  });

  it('treats browser_pools and browser-pools, and letter case, as one spelling', () => {
    expect(rules.forRequest('POST', '/browser_pools')?.key).toBe('POST /browser-pools');
    expect(rules.forRequest('put', '/Browser_Pools/p1')?.key).toBe('PUT /browser-pools/:id');
  });

  it('matches nothing for other methods, deeper paths or unknown endpoints', () => {
    expect(rules.forRequest('GET', '/browsers')).toBeUndefined();
    expect(rules.forRequest('POST', '/browser-pools/p1/flush')).toBeUndefined();
    expect(rules.forEndpoint('GET /whatever')).toBeUndefined();
  });

  it('answers a concrete endpoint the same every time, past the bound on endpoints it keeps matched', () => {
    const own = rulesOf({ 'PUT /browser-pools/:id': 'enforce', 'ALL /*': 'shadow' });
    // Each id is a new endpoint: 5 000 of them pass the bound (4 096) on what is kept, and empty it once.
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 5_000; i++) {
        expect(own.forEndpoint(`PUT /browser-pools/p${i}`)?.key).toBe('PUT /browser-pools/:id');
        expect(own.forEndpoint(`GET /browser-pools/p${i}`)?.key).toBe('ALL /*');
      }
    }
    // An endpoint no rule matches is kept as such, and answers undefined again, not a rule.
    expect(rules.forEndpoint('GET /whatever')).toBeUndefined();
    expect(rules.forEndpoint('GET /whatever')).toBeUndefined();
    expect(rules.forEndpoint('POST /browsers/')?.key).toBe('POST /browsers');
    expect(rules.forEndpoint('POST /browsers/')?.key).toBe('POST /browsers');
    // A malformed endpoint is refused every time: it is never kept.
    for (let i = 0; i < 2; i++) expect(() => rules.forEndpoint('POST browsers')).toThrowError(/<METHOD> <path>/);
  });

  it("answers a request's method and path the same every time, kept with the concrete endpoints, past the bound", () => {
    const own = rulesOf({ 'PUT /browser-pools/:id': 'enforce', 'ALL /*': 'shadow' });
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 5_000; i++) {
        expect(own.forRequest('put', `/browser-pools/p${i}`)?.key).toBe('PUT /browser-pools/:id');
        expect(own.forEndpoint(`PUT /browser-pools/p${i}`)?.key).toBe('PUT /browser-pools/:id');
        expect(own.forRequest('GET', `/browser-pools/p${i}`)?.key).toBe('ALL /*');
      }
    }
  });

  it.each([
    [undefined, '/browsers'],
    ['POST', undefined],
    ['POST', ['/browsers']],
    [null, null],
  ])('refuses the method %j and path %j with invalid_argument, not as no rule', (method, path) => {
    expect(() => rules.forRequest(method as unknown as string, path as unknown as string)).toThrowError(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining('ruleFor takes') }),
    );
  });

  it('matches a request target of kilobytes every time rather than keep it', () => {
    const own = rulesOf(DEFAULT_ENDPOINTS);
    const kept = () => (own as unknown as { matched: Map<string, unknown> }).matched.size;
    for (let i = 0; i < 100; i++) {
      expect(own.forRequest('POST', `/browsers?cursor=${String(i).padStart(8_000, 'x')}`)?.key).toBe('POST /browsers');
      expect(own.forRequest('GET', `/${String(i).padStart(8_000, 'x')}`)).toBeUndefined();
    }
    expect(kept()).toBe(0);
    // Up to 256 characters, as long as an endpoint a request may name, it is kept.
    expect(own.forRequest('POST', `/browsers?cursor=${'x'.repeat(200)}`)?.key).toBe('POST /browsers');
    expect(kept()).toBe(1);
  });

  it.each([
    ['OPTIONS', '*'],
    ['GET', 'browsers'],
    ['POST', ''],
  ])('keeps the request %s %j as matching no rule, and still refuses it as an endpoint', (method, path) => {
    // A server can be sent these targets; what forRequest keeps of them must not let the endpoint through unchecked.
    for (let i = 0; i < 2; i++) expect(rules.forRequest(method, path)).toBeUndefined();
    for (let i = 0; i < 2; i++) {
      expect(() => rules.forEndpoint(`${method} ${path}`)).toThrowError(
        expect.objectContaining({ code: 'invalid_argument' }),
      );
    }
  });

  it.each(['whatever', '/browsers', 'POST', 'POST browsers', ' /browsers'])(
    'refuses the endpoint %j, which could match no rule, with invalid_argument',
    (endpoint) => {
      expect(() => rules.forEndpoint(endpoint)).toThrowError(
        expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining("'<METHOD> <path>'") }),
      );
    },
  );

  it.each(['browsers', 'POST browsers', 'post /browsers', 'POST  /browsers', ''])('rejects the rule key %j', (key) => {
    expect(() => rulesOf({ [key]: 'enforce' })).toThrowError(expect.objectContaining({ code: 'invalid_option' }));
  });

  it('rejects a mode other than enforce or shadow', () => {
    expect(() => rulesOf({ 'POST /x': 'block' as 'enforce' })).toThrowError(/must be 'enforce', 'shadow', a limit/);
    expect(() => rulesOf({ 'POST /x': { mode: 'block' as 'enforce' } })).toThrowError(
      /mode must be 'enforce' or 'shadow'/,
    );
  });

  it('rejects two rules that match the same paths', () => {
    expect(() => rulesOf({ 'PUT /pools/:id': 'enforce', 'PUT /pools/:name': 'shadow' })).toThrowError(
      /match the same paths/,
    );
    expect(() => rulesOf({ 'ALL /api/*': 'enforce', 'ALL /api/*/': 'shadow' })).toThrowError(/match the same paths/);
  });
});

describe('endpoint rules: ALL and a trailing *', () => {
  it('matches any method under ALL', () => {
    const rules = rulesOf({ 'ALL /upload': 'enforce' });
    for (const method of ['GET', 'POST', 'delete', 'PATCH'])
      expect(rules.forRequest(method, '/upload')?.key).toBe('ALL /upload');
    expect(rules.forRequest('POST', '/upload/x')).toBeUndefined();
  });

  it('matches any number of segments under a trailing *, none included', () => {
    const rules = rulesOf({ 'POST /api/*': 'enforce' });
    expect(rules.forRequest('POST', '/api')?.key).toBe('POST /api/*');
    expect(rules.forRequest('POST', '/api/upload')?.key).toBe('POST /api/*');
    expect(rules.forRequest('POST', '/api/a/b/c?x=1')?.key).toBe('POST /api/*');
    expect(rules.forRequest('POST', '/apix')).toBeUndefined();
    expect(rules.forRequest('GET', '/api/upload')).toBeUndefined();
  });

  it("limits every request under the own-plans default, 'ALL /*'", () => {
    const rules = rulesOf(EVERY_ENDPOINT);
    expect(EVERY_ENDPOINT).toEqual({ 'ALL /*': 'enforce' });
    expect(rules.forRequest('GET', '/')?.key).toBe('ALL /*');
    expect(rules.forRequest('POST', '/api/upload')?.key).toBe('ALL /*');
  });

  it("reads 'ALL /*' as no rule when no rule has that key, not as a path '/*' that ALL /:name would match", () => {
    const rules = rulesOf({ 'ALL /:tenant': 'shadow', 'POST /browsers': 'enforce' });
    expect(rules.forEndpoint('ALL /*')).toBeUndefined();
    expect(rules.forEndpoint('GET /*')?.key).toBe('ALL /:tenant');
    expect(rulesOf(EVERY_ENDPOINT).forEndpoint('ALL /*')?.key).toBe('ALL /*');
  });

  it('tries the most specific rule first, whatever the order given', () => {
    const rules = rulesOf({
      'ALL /*': 'shadow',
      'ALL /api/*': 'enforce',
      'POST /api/*': 'enforce',
      'ALL /api/users': 'enforce',
      'POST /api/users/:id': 'enforce',
      'POST /api/users/me': 'enforce',
    });
    expect(rules.forRequest('POST', '/api/users/me')?.key).toBe('POST /api/users/me');
    expect(rules.forRequest('POST', '/api/users/42')?.key).toBe('POST /api/users/:id');
    expect(rules.forRequest('POST', '/api/users')?.key).toBe('ALL /api/users');
    expect(rules.forRequest('POST', '/api/orders')?.key).toBe('POST /api/*');
    expect(rules.forRequest('GET', '/api/orders')?.key).toBe('ALL /api/*');
    expect(rules.forRequest('GET', '/health')?.key).toBe('ALL /*');
  });

  it.each(['POST /api/*/x', 'POST /api*', 'POST /*x', 'ALL /a/b*c'])(
    "refuses the rule key %j: '*' stands only as the whole last segment",
    (key) => {
      expect(() => rulesOf({ [key]: 'enforce' })).toThrowError(
        expect.objectContaining({ code: 'invalid_option', message: expect.stringMatching(/'\*' may only stand/) }),
      );
    },
  );
});

describe('endpoint rules with limits of their own', () => {
  it('reads a limit, a list of limits, or { mode, limits } as the rule', () => {
    const export2 = perMinute(2);
    const burst = [perSecond(5, { burst: 10 }), perMinute(100)];
    const rules = rulesOf({
      'POST /export': export2,
      'POST /search': burst,
      'POST /quiet': { mode: 'shadow', limits: export2 },
      'POST /plain': { mode: 'shadow' },
    });
    expect(rules.forEndpoint('POST /export')).toMatchObject({ mode: 'enforce', limits: [export2] });
    expect(rules.forEndpoint('POST /search')).toMatchObject({ mode: 'enforce', limits: burst });
    expect(rules.forEndpoint('POST /quiet')).toMatchObject({ mode: 'shadow', limits: [export2] });
    expect(rules.forEndpoint('POST /plain')).toMatchObject({ mode: 'shadow', limits: undefined });
  });

  it('reads limits per plan', () => {
    const rule = rulesOf({ 'POST /search': { limits: { developer: perMinute(30), enterprise: [perSecond(10)] } } })
      .rules[0];
    expect(rule?.limits).toBeUndefined();
    expect(rule?.planLimits?.get('developer')).toEqual([perMinute(30)]);
    expect(rule?.planLimits?.has('hobbyist')).toBe(false);
  });

  it('refuses limits per plan that name an unknown plan, naming the plans', () => {
    expect(() => rulesOf({ 'POST /search': { limits: { gold: perMinute(30) } } })).toThrowError(
      expect.objectContaining({ code: 'unknown_plan', message: expect.stringMatching(/developer, hobbyist/) }),
    );
  });

  it('refuses values that are neither a mode nor limits', () => {
    for (const spec of [
      5,
      null,
      { capacity: 5, refill: 5, intervalMs: 1_000 },
      { limits: 5 },
      { mode: 'enforce', x: 1 },
    ]) {
      expect(() => rulesOf({ 'POST /x': spec as unknown as 'enforce' }), JSON.stringify(spec)).toThrowError(
        expect.objectContaining({ code: 'invalid_option' }),
      );
    }
    expect(() => rulesOf({ 'POST /x': [perSecond(1), perSecond(2)] })).toThrowError(/two limits named "1s"/);
  });
});
