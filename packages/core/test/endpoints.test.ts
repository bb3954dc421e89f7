import { describe, expect, it } from 'vitest';
import { DEFAULT_ENDPOINTS, EndpointRules } from '../src/index.js';

describe('endpoint rules', () => {
  const rules = new EndpointRules(DEFAULT_ENDPOINTS);

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
    expect(rules.forEndpoint('whatever')).toBeUndefined();
  });

  it.each(['browsers', 'POST browsers', 'post /browsers', 'POST  /browsers', ''])('rejects the rule key %j', (key) => {
    expect(() => new EndpointRules({ [key]: 'enforce' })).toThrowError(
      expect.objectContaining({ code: 'invalid_option' }),
    );
  });

  it('rejects a mode other than enforce or shadow', () => {
    expect(() => new EndpointRules({ 'POST /x': 'block' as 'enforce' })).toThrowError(/must be 'enforce' or 'shadow'/);
  });

  it('rejects two rules that match the same paths', () => {
    expect(() => new EndpointRules({ 'PUT /pools/:id': 'enforce', 'PUT /pools/:name': 'shadow' })).toThrowError(
      /match the same paths/,
    );
  });
});
