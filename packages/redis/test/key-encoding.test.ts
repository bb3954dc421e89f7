import calculateSlot from 'cluster-key-slot';
import fc from 'fast-check';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointKey } from '../src/index.js';
import { decodeName, encodeName } from '../src/keys.js';
import { CLUSTER_NODES, connectCluster } from './support/redis.js';

/** Any JS string, lone surrogates and the characters the encoding escapes included. */
const names = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({
    unit: fc.constantFrom('%', '{', '}', ':', ' ', 'a', '7', 'B', 'u', '\uD83D', '\uDE00', 'é'),
    maxLength: 20,
  }),
);

/** Organizations: any non-empty name (the limiter and the store refuse an empty one). */
const organizations = names.filter((name) => name.length > 0);

/** Endpoints: any non-empty name too (endpointKey refuses an empty one, as the limiter does). */
const endpoints = organizations;

/** Redis' hash tag rule: the text between the first `{` and the first `}` after it. */
function hashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return open === -1 || close === -1 ? undefined : key.slice(open + 1, close);
}

describe('key encoding', () => {
  it('decodes back to the name it encoded, so no two names share an encoding', () => {
    fc.assert(fc.property(names, (name) => decodeName(encodeName(name)) === name));
  });

  it('gives distinct keys to distinct (organization, endpoint) pairs', () => {
    fc.assert(
      fc.property(organizations, endpoints, organizations, endpoints, (o1, e1, o2, e2) => {
        fc.pre(o1 !== o2 || e1 !== e2);
        return endpointKey(o1, e1) !== endpointKey(o2, e2);
      }),
    );
  });

  it('makes the encoded organization, and nothing else, the hash tag', () => {
    fc.assert(
      fc.property(organizations, endpoints, (organization, endpoint) => {
        expect(hashTag(endpointKey(organization, endpoint))).toBe(encodeName(organization));
      }),
    );
  });

  it('leaves no lone surrogate in a key, since UTF-8 cannot carry one', () => {
    fc.assert(
      fc.property(organizations, endpoints, (org, endpoint) => {
        const key = endpointKey(org, endpoint);
        // A UTF-8 round trip changes exactly the strings that hold a lone surrogate.
        return Buffer.from(key, 'utf8').toString('utf8') === key;
      }),
    );
  });

  it('keeps plain names, spaces and unicode as they are', () => {
    expect(endpointKey('org-1', 'POST /browsers')).toBe('ratecard:{org-1}:POST /browsers');
    expect(endpointKey('Zoë 🚀', 'e')).toBe('ratecard:{Zoë 🚀}:e');
    expect(endpointKey('a}b', 'PUT /browser-pools/:id')).toBe('ratecard:{a%7Db}:PUT /browser-pools/%3Aid');
    expect(endpointKey('org', 'a:b', 'app:')).toBe('app:{org}:a%3Ab');
  });

  it('puts every key of an organization, whatever the endpoint, in the slot of its hash tag', () => {
    expect(calculateSlot(endpointKey('org-1', 'POST /browsers'))).toBe(calculateSlot('org-1'));
    expect(calculateSlot(endpointKey('org-1', 'PUT /browser-pools/:id'))).toBe(calculateSlot('org-1'));
  });

  it('refuses a name that is not a non-empty string, and a prefix that is not a string without braces', () => {
    const refused = (organization: unknown, endpoint: unknown, prefix?: unknown) =>
      expect(() => endpointKey(organization as string, endpoint as string, prefix as string)).toThrowError(
        expect.objectContaining({ code: 'invalid_argument' }),
      );
    refused('org', '');
    refused(undefined, 'POST /browsers');
    refused('org', 42);
    refused('org', 'POST /browsers', null);
    expect(() => endpointKey('org', '')).toThrowError(
      'ratecard: endpointKey needs an endpoint that is a non-empty string, got "" (0 characters)',
    );
    // The store used without a limiter takes names of any length, so endpointKey does too.
    expect(endpointKey('ü'.repeat(300), 'e')).toBe(`ratecard:{${'ü'.repeat(300)}}:e`);
  });

  it('never makes a key whose first hash tag is empty', () => {
    expect(() => endpointKey('', 'POST /browsers')).toThrowError(expect.objectContaining({ code: 'invalid_argument' }));
    expect(() => endpointKey('org', 'e', 'x{}')).toThrowError(expect.objectContaining({ code: 'invalid_argument' }));
    fc.assert(
      fc.property(organizations, endpoints, (org, endpoint) => {
        const key = endpointKey(org, endpoint);
        const open = key.indexOf('{');
        return open === 'ratecard:'.length && key.indexOf('}', open) > open + 1;
      }),
    );
  });
});

describe.skipIf(CLUSTER_NODES === null)('key slots on a cluster', () => {
  let client: Cluster;
  beforeAll(async () => {
    client = await connectCluster();
  });
  afterAll(() => client.disconnect());

  it('are the slots Redis computes (CLUSTER KEYSLOT), for any names', async () => {
    const samples = fc.sample(fc.tuple(organizations, endpoints), { numRuns: 300, seed: 42 });
    const keys = samples.map(([org, endpoint]) => endpointKey(org, endpoint));
    const slots = await Promise.all(keys.map((key) => client.cluster('KEYSLOT', key)));
    expect(slots).toEqual(keys.map((key) => calculateSlot(key)));
  });

  // Why the store refuses an empty organization and a prefix with braces: on such keys the two disagree.
  it('differ from cluster-key-slot only on keys whose first hash tag is empty, which ratecard never makes', async () => {
    for (const key of ['{}{a}', 'x{}y{z}']) {
      expect(await client.cluster('KEYSLOT', key)).not.toBe(calculateSlot(key));
    }
  });
});
