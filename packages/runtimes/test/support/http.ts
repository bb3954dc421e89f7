import { expect } from 'vitest';

/** The spec's 429 body, byte for byte. */
export const DENIAL = '{"code":"rate_limit_exceeded","message":"Rate limit exceeded. Please retry later."}';

let names = 0;

/** An organization no other check (nor an earlier run) has used. */
function organization(label: string): string {
  return `${label}-${process.pid}-${Date.now().toString(36)}-${names++}`;
}

function post(url: string, org: string, plan = 'developer'): Promise<Response> {
  return fetch(`${url}/browsers`, { method: 'POST', headers: { authorization: `Bearer ${org}`, 'x-plan': plan } });
}

async function reached(url: string): Promise<number> {
  const response = await fetch(`${url}/reached`);
  expect(response.status).toBe(200);
  return Number(await response.text());
}

/** The rate-limit headers of a response, by lower-case name. */
function rateLimitHeaders(response: Response): Record<string, string> {
  const found: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    if (/^(x-ratelimit-|retry-after$|ratelimit)/.test(name)) found[name] = value;
  });
  return found;
}

/**
 * A Developer organization's burst of 12 sequential requests: 10 admitted with remaining 9 down to 0, then the spec's
 * 429 with exactly its headers and body, twice; only the admitted ones reach the handler.
 */
export async function checkDeveloperBurst(url: string): Promise<void> {
  const org = organization('burst');
  const before = await reached(url);
  const started = performance.now();
  const responses: Response[] = [];
  const bodies: string[] = [];
  for (let i = 0; i < 12; i++) {
    const response = await post(url, org);
    responses.push(response);
    bodies.push(await response.text());
  }
  const elapsed = performance.now() - started;
  expect(responses.map((response) => response.status)).toEqual([...Array(10).fill(200), 429, 429]);
  for (let i = 0; i < 10; i++) {
    expect(bodies[i]).toBe('ok');
    expect(rateLimitHeaders(responses[i] as Response)).toEqual({
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': String(9 - i),
    });
  }
  // The app reads the real clock: a token refills every 6 s, so Retry-After is 6 when the first and the 11th request
  // were decided within one second; this client's span bounds the server's from above.
  const retryAfter = elapsed < 1_000 ? ['6'] : ['1', '2', '3', '4', '5', '6'];
  for (const denied of [10, 11]) {
    const response = responses[denied] as Response;
    expect(bodies[denied]).toBe(DENIAL);
    expect(response.headers.get('content-type')).toBe('application/json');
    const headers = rateLimitHeaders(response);
    expect(retryAfter).toContain(headers['retry-after']);
    expect(headers).toEqual({
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': '0',
      'retry-after': headers['retry-after'],
    });
  }
  expect((await reached(url)) - before).toBe(10);
}

/** 40 concurrent requests of a Hobbyist organization (25 per minute): exactly 25 admitted and reach the handler. */
export async function checkConcurrentHobbyist(url: string): Promise<void> {
  const org = organization('hot');
  const before = await reached(url);
  const responses = await Promise.all(Array.from({ length: 40 }, () => post(url, org, 'hobbyist')));
  const bodies = await Promise.all(responses.map((response) => response.text()));
  expect(responses.filter((response) => response.status === 200)).toHaveLength(25);
  expect(responses.filter((response) => response.status === 429)).toHaveLength(15);
  expect(bodies.filter((body) => body === DENIAL)).toHaveLength(15);
  const remaining = responses
    .filter((response) => response.status === 200)
    .map((response) => Number(response.headers.get('x-ratelimit-remaining')))
    .sort((a, b) => b - a);
  expect(remaining).toEqual(Array.from({ length: 25 }, (_, i) => 24 - i));
  expect((await reached(url)) - before).toBe(25);
}

/** A request the middleware does not identify, or an endpoint with no rule, reaches the handler with no limit headers. */
export async function checkUnlimited(url: string): Promise<void> {
  const anonymous = await fetch(`${url}/browsers`, { method: 'POST' });
  expect(anonymous.status).toBe(200);
  expect(await anonymous.text()).toBe('ok');
  expect(rateLimitHeaders(anonymous)).toEqual({});
  const other = await fetch(`${url}/sessions`, { method: 'POST', headers: { authorization: 'Bearer someone' } });
  expect(other.status).toBe(200);
  expect(rateLimitHeaders(other)).toEqual({});
}

/**
 * A client limited by the limit identify gives it (5 a second, bursts of 10; `x-client` stands for its IP address)
 * on a path no rule matches: of 20 concurrent requests, the burst of 10 and whatever refilled while they were decided
 * pass, the rest get the 429 with Retry-After: 1 and the limit's headers.
 */
export async function checkOwnLimits(url: string): Promise<void> {
  const client = organization('client');
  const before = await reached(url);
  const started = performance.now();
  const responses = await Promise.all(
    Array.from({ length: 20 }, () => fetch(`${url}/api/upload`, { method: 'POST', headers: { 'x-client': client } })),
  );
  const elapsed = performance.now() - started;
  const bodies = await Promise.all(responses.map((response) => response.text()));
  const admitted = responses.filter((response) => response.status === 200).length;
  // One token comes back every 200 ms of the server's clock, which this client's span bounds from above.
  expect(admitted).toBeGreaterThanOrEqual(10);
  expect(admitted).toBeLessThanOrEqual(10 + Math.ceil(elapsed / 200));
  expect(responses.filter((response) => response.status === 429)).toHaveLength(20 - admitted);
  expect((await reached(url)) - before).toBe(admitted);
  const denied = responses.findIndex((response) => response.status === 429);
  if (elapsed < 1_000) expect(denied).toBeGreaterThanOrEqual(0);
  if (denied >= 0) {
    expect(bodies[denied]).toBe(DENIAL);
    expect(rateLimitHeaders(responses[denied] as Response)).toEqual({
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': '0',
      'retry-after': '1',
    });
  }
}
