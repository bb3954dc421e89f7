import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The password of the server that asks for one: the tests check that no output shows it. */
export const PASSWORD = 'hunter2-sesame-7f3a';

/** The built bin, as `npm i -g @ratecard/cli` runs it. */
export const BIN: string = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built `ratecard` as a child process with `args`, and REDIS_URL only when given: the environment of this
 * process (a developer's REDIS_URL) never reaches it.
 */
export function ratecard(args: readonly string[], redisUrl?: string): Promise<Ran> {
  if (!existsSync(BIN)) throw new Error(`no ${BIN}: run \`pnpm --filter @ratecard/cli build\` first`);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, ...(redisUrl !== undefined && { REDIS_URL: redisUrl }) };
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}
