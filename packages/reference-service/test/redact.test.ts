import { describe, expect, it } from 'vitest';
import { readConfig, redactUrl } from '../src/config.js';

describe('redactUrl', () => {
  it.each([
    ['redis://default:SECRETPASS@127.0.0.1:6379', 'redis://***:***@127.0.0.1:6379'],
    ['redis://:SECRETPASS@127.0.0.1:6379', 'redis://:***@127.0.0.1:6379'],
    ['rediss://alice@redis.example:6380/0', 'rediss://***@redis.example:6380/0'],
    ['redis://127.0.0.1:6391/?password=SECRETPASS', 'redis://127.0.0.1:6391/?password=***'],
    [
      'redis://127.0.0.1:6391/?username=alice&password=SECRETPASS&db=2',
      'redis://127.0.0.1:6391/?username=***&password=***&db=2',
    ],
    ['redis://127.0.0.1:6391/?sentinelPassword=SECRETPASS', 'redis://127.0.0.1:6391/?sentinelPassword=***'],
    ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379'],
  ])('masks every credential of %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });

  it.each([
    ['redis://default:SECRETPASS@127.0.0.1:99999', 'redis://***@127.0.0.1:99999'],
    ['redis://127.0.0.1:99999/?password=SECRETPASS&db=1', 'redis://127.0.0.1:99999/?password=***&db=1'],
    ['redis://us er:SECRET PASS@ho st/?token=SECRETPASS', 'redis://***@ho st/?token=***'],
  ])('masks a URL that does not parse by its text: %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });
});

describe('readConfig', () => {
  it('refuses a REDIS_URL that does not parse in one line that names it and masks the password', () => {
    expect(() => readConfig({ REDIS_URL: 'redis://default:SECRETPASS@127.0.0.1:99999' })).toThrowError(
      'reference-service: REDIS_URL is not a valid URL (a port from 0 to 65535, no spaces), got redis://***@127.0.0.1:99999',
    );
  });
});
