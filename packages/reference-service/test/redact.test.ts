import { describe, expect, it } from 'vitest';
import { readConfig, redactUrl } from '../src/config.js';

const REFUSED =
  'reference-service: REDIS_URL is not a valid URL (a port from 0 to 65535, no spaces, and / ? # @ in a user or password written %2F %3F %23 %40), got';

describe('redactUrl', () => {
  it.each([
    ['redis://default:SECRETPASS@127.0.0.1:6379', 'redis://***@127.0.0.1:6379'],
    ['redis://:SECRETPASS@127.0.0.1:6379', 'redis://***@127.0.0.1:6379'],
    ['rediss://alice@redis.example:6380/0', 'rediss://***@redis.example:6380/0'],
    ['redis://127.0.0.1:6391/?password=SECRETPASS', 'redis://127.0.0.1:6391/?password=***'],
    [
      'redis://127.0.0.1:6391/?username=alice&password=SECRETPASS&db=2',
      'redis://127.0.0.1:6391/?username=***&password=***&db=2',
    ],
    ['redis://127.0.0.1:6391/?sentinelPassword=SECRETPASS', 'redis://127.0.0.1:6391/?sentinelPassword=***'],
    // ioredis decodes a parameter's name, so `pass%77ord` is its password.
    ['redis://127.0.0.1:6391/?pass%77ord=SECRETPASS', 'redis://127.0.0.1:6391/?pass%77ord=***'],
    ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379'],
    ['redis://127.0.0.1:6379/2?family=6', 'redis://127.0.0.1:6379/2?family=6'],
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

  it.each([
    ['redis://default:Zm9v/YmFy+cXV4@redis.internal:6379', 'redis://***@redis.internal:6379', 'YmFy'],
    ['rediss://admin:p#ssw0rd@host', 'rediss://***@host', 'ssw0rd'],
    ['redis://admin:what?ever@cache:6379', 'redis://***@cache:6379', 'ever'],
    ['redis://:s3cr/et@host:99999', 'redis://***@host:99999', 's3cr'],
    ['redis://us@r:p@ss@host:6379', 'redis://***@host:6379', 'ss'],
    // Parses, as host `user` and port 123: the password's tail is a path.
    ['redis://user:123/abc@host:6379', 'redis://***@host:6379', 'abc'],
    ['redis://redis.internal:6379/#password=s3cret', 'redis://redis.internal:6379/#***', 's3cret'],
    ['redis://redis.internal:6379/?db=1#password=s3cret', 'redis://redis.internal:6379/?db=1#***', 's3cret'],
    ['redis://redis.internal:6379/?password=s3#cret', 'redis://redis.internal:6379/?password=***#***', 'cret'],
    // The last `@` may be inside a query value: nothing after the scheme is shown.
    ['redis://redis.internal:6379/?password=s3c@ret', 'redis://***', 'ret'],
    ['redis://redis.internal:6379/#password=s3c@ret', 'redis://***', 'ret'],
    ['user:SECRETPASS@127.0.0.1:6379', '***@127.0.0.1:6379', 'user'],
  ])('masks everything up to the last @ and every credential form in %s', (url, shown, secret) => {
    expect(redactUrl(url)).toBe(shown);
    expect(redactUrl(url)).not.toContain(secret);
  });
});

describe('readConfig', () => {
  it('refuses a REDIS_URL that does not parse in one line that names it and masks the password', () => {
    expect(() => readConfig({ REDIS_URL: 'redis://default:SECRETPASS@127.0.0.1:99999' })).toThrowError(
      `${REFUSED} redis://***@127.0.0.1:99999`,
    );
  });

  it.each([
    ['redis://user:123/abc@host:6379', 'redis://***@host:6379'],
    ['redis://admin:123?ever@cache', 'redis://***@cache'],
    ['redis://redis.internal:6379/#password=s3cret', 'redis://redis.internal:6379/#***'],
  ])(
    'refuses %s, which parses but not as written (a client would connect elsewhere or drop the fragment)',
    (url, shown) => {
      expect(() => readConfig({ REDIS_URL: url })).toThrowError(`${REFUSED} ${shown}`);
    },
  );

  it('takes a password with / ? # @ percent-encoded', () => {
    const url = 'redis://default:Zm9v%2FYmFy%2BcXV4%3F%23%40@redis.internal:6379/?password=a%40b';
    expect(readConfig({ REDIS_URL: url }).redisUrl).toBe(url);
  });
});
