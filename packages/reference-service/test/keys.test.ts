import { PLANS } from '@ratecard/core';
import { describe, expect, it } from 'vitest';
import { KeysFileError, SCOPES, validateKeys } from '../src/auth.js';
import { DEMO_KEYS_FILE, loadKeysFile } from '../src/config.js';

function problem(value: unknown): string {
  try {
    validateKeys(value, 'keys.json');
  } catch (error) {
    expect(error).toBeInstanceOf(KeysFileError);
    return (error as Error).message;
  }
  throw new Error('the keys were accepted');
}

const good = { organization: 'org_a', plan: 'developer', scopes: ['browsers'] };

describe('the keys file', () => {
  it('ships demo keys with one key per plan, a trial key and a key lacking a scope', () => {
    const keys = Object.values(loadKeysFile(DEMO_KEYS_FILE));
    for (const plan of Object.keys(PLANS)) {
      expect(keys.some((key) => key.plan === plan && key.trial !== true && key.override === undefined)).toBe(true);
    }
    expect(keys.some((key) => key.trial === true)).toBe(true);
    expect(keys.some((key) => SCOPES.some((scope) => !key.scopes.includes(scope)))).toBe(true);
  });

  it('accepts optional trial and override', () => {
    const keys = validateKeys({ tok_1: { ...good, trial: true, override: 1000 } });
    expect(keys.tok_1).toEqual({ ...good, trial: true, override: 1000 });
  });

  it.each([
    [[], 'keys.json: must be a JSON object of "<token>": { organization, plan, scopes }, got an array'],
    [{ tok_1: 'org_a' }, 'keys.json: key #1: must be an object { organization, plan, scopes }, got "org_a"'],
    [
      { 'has space': good },
      'keys.json: key #1: a token must be 1 to 512 characters of A-Z a-z 0-9 - . _ ~ + / (then optional =), got 9 characters',
    ],
    [
      { tok_1: { ...good, organization: '' } },
      'keys.json: key #1: organization must be a non-empty string of at most 256 characters, got ""',
    ],
    [
      { tok_1: { ...good, plan: 'gold' } },
      'keys.json: key #1: plan must be one of developer, hobbyist, startup, enterprise, got "gold"',
    ],
    [{ tok_1: { ...good, trial: 'yes' } }, 'keys.json: key #1: trial must be true or false, got "yes"'],
    [
      { tok_1: { ...good, override: 1.5 } },
      'keys.json: key #1: override must be a whole number of requests per minute from 1 to 1000000000, got 1.5',
    ],
    [
      { tok_1: { ...good, scopes: 'browsers' } },
      'keys.json: key #1: scopes must be an array of browsers, browser_pools, invocations, got "browsers"',
    ],
    [
      { tok_1: { ...good, scopes: ['browser-pools'] } },
      'keys.json: key #1: unknown scope "browser-pools" (known: browsers, browser_pools, invocations)',
    ],
    [
      { tok_1: { ...good, sopes: [] } },
      'keys.json: key #1: unknown field "sopes" (allowed: organization, plan, trial, override, scopes)',
    ],
    [
      { tok_1: good, tok_2: { ...good, plan: 'enterprise' } },
      'keys.json: key #2: organization "org_a" has another key (key #1) with a different plan, trial or override; keys of one organization must agree on them',
    ],
  ])('refuses %j with a message naming the key and the field', (value, message) => {
    expect(problem(value)).toBe(`reference-service: ${message}`);
  });

  it('never puts a token in an error message', () => {
    expect(problem({ super_secret_token: { ...good, plan: 'gold' } })).not.toContain('super_secret');
  });
});
