import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareWorker, startWorkerd, type Workerd, type WranglerConfig, workerdRuns } from './support/workerd.js';

// The README's Worker and wrangler configuration, as written there, bundled and run in workerd.

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const block = (language: string) => {
  const found = readme.match(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``));
  if (found === null) throw new Error(`the README has no ${language} block`);
  return found[1] as string;
};

describe.runIf(workerdRuns())("the README's Worker", () => {
  let dir: string;
  let workerd: Workerd;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ratecard-cloudflare-readme-'));
    const wrangler = JSON.parse(block('jsonc')) as WranglerConfig;
    await prepareWorker({ contents: block('js') }, wrangler, dir, join(dir, 'storage'));
    workerd = await startWorkerd(dir);
  });

  afterAll(async () => {
    await workerd?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('admits a free organization 100 requests, then answers 429', async () => {
    const organization = `readme-${process.pid}-${Date.now()}`;
    const statuses: number[] = [];
    for (let i = 0; i < 101; i++) {
      const response = await fetch(`${workerd.url}/browsers`, {
        method: 'POST',
        headers: { 'x-api-key': organization },
      });
      await response.text();
      statuses.push(response.status);
    }
    expect(statuses).toEqual([...Array(100).fill(200), 429]);
    const anonymous = await fetch(`${workerd.url}/browsers`, { method: 'POST' });
    expect(anonymous.status).toBe(200);
  });
});
