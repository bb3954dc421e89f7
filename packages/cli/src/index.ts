/**
 * ratecard's command line, `ratecard inspect | reset | block | unblock | blocks`, for the on-call engineer: what an
 * organization's limits hold on Redis or Redis Cluster, and acting on them during an incident (docs/operations.md).
 * The `ratecard` bin runs `main`; it is exported for running the command line from a program of your own.
 *
 * @module @ratecard/cli
 */
import { describeKept, type Limit, RateLimitError, type Store, tokenBucket } from '@ratecard/core';
import { redisStore } from '@ratecard/redis';
import { Command, CommanderError } from 'commander';
import { connect, masked, secretsIn, type Target, UnreachableError, UsageError } from './connect.js';
import { blocksText, blockText, endpointText, inspectionText, parseDuration, when } from './format.js';

/** The exit codes of `ratecard`, for scripts. */
export const EXIT_CODES = {
  /** Done. */
  ok: 0,
  /** A usage error: an unknown command or option, a missing argument, a bad duration or URL. */
  usage: 1,
  /** Nothing stored under that organization and endpoint (inspect, reset), or no such block (unblock). */
  notFound: 2,
  /** Redis could not be reached or used: refused, timed out, wrong password. */
  unreachable: 3,
  /** Redis answered with an error, or something else failed. */
  failed: 4,
} as const;

/** Where `main` writes and what environment it reads; default the process's own. */
export interface CliIo {
  /** Writes normal output (stdout). */
  stdout(text: string): void;
  /** Writes errors (stderr). */
  stderr(text: string): void;
  /** The environment, for REDIS_URL. */
  env: Readonly<Record<string, string | undefined>>;
}

const EXAMPLES = `
The endpoint is the key the limiter stores under: a rule's key such as 'POST /browsers', or 'ALL /*' for the
catch-all (the command line has no rules to match a path against). Quote it: it holds a space.

Redis: --redis <url> or REDIS_URL (redis://[user:password@]host:port, rediss:// for TLS). For a Redis Cluster give
--cluster, or several --redis for its seed nodes. Passwords are shown as *** in every output.

Examples:
  $ REDIS_URL=redis://:secret@10.0.0.5:6379 ratecard inspect acme 'POST /browsers'
  $ ratecard --redis redis://10.0.0.5:6379 --json inspect acme 'ALL /*' | jq '.limits[] | {name, tokens}'
  $ ratecard reset acme 'POST /browsers'
  $ ratecard block acme --for 2h --reason 'abuse report 17'
  $ ratecard block acme 'POST /browsers' --for 15m
  $ ratecard unblock acme
  $ ratecard --cluster --redis redis://10.0.0.5:7000 blocks

Exit codes: 0 done; 1 usage error; 2 nothing stored there, or no such block; 3 Redis unreachable (refused, timed
out, wrong password); 4 Redis answered with an error, or another failure.
`;

/** Options every command takes. */
interface GlobalOptions {
  redis?: string[];
  cluster?: boolean;
  prefix: string;
  json?: boolean;
  timeout: string;
  /** block's own. */
  for?: string;
  reason?: string;
}

/**
 * Runs the command line with `argv` (the arguments after the program's name) and resolves to its exit code
 * (EXIT_CODES); it never exits the process itself.
 */
export async function main(argv: readonly string[], io: Partial<CliIo> = {}): Promise<number> {
  const env = io.env ?? process.env;
  const secrets = secretsIn(argv, env);
  const out = (text: string) => (io.stdout ?? ((t: string) => process.stdout.write(t)))(masked(text, secrets));
  const err = (text: string) => (io.stderr ?? ((t: string) => process.stderr.write(t)))(masked(text, secrets));
  let code: number = EXIT_CODES.ok;
  const program = new Command('ratecard')
    .description("Look at and act on ratecard's limits in Redis or Redis Cluster.")
    .exitOverride()
    .configureOutput({ writeOut: out, writeErr: err })
    .option('--redis <url>', "Redis URL; repeat for a cluster's seed nodes (default: REDIS_URL)", collect)
    .option('--cluster', 'the Redis URLs are Redis Cluster seed nodes')
    .option('--prefix <prefix>', 'the key prefix the store was given', 'ratecard:')
    .option('--json', 'print JSON, for scripts')
    .option('--timeout <ms>', 'how long connecting and the command may take', '5000')
    .addHelpText('after', EXAMPLES);

  /** An action on the store; `check` sees the options first, so that a usage error is told before connecting. */
  const run =
    (
      action: (store: Store, options: GlobalOptions, args: readonly (string | undefined)[]) => Promise<number>,
      check?: (options: GlobalOptions) => void,
    ) =>
    async (...params: unknown[]) => {
      // Commander calls an action with the arguments, the command's options, then the command.
      const command = params[params.length - 1] as Command;
      const options = command.optsWithGlobals<GlobalOptions>();
      check?.(options);
      code = await withStore(options, env, (store) => action(store, options, command.processedArgs));
    };

  program
    .command('inspect')
    .description('show every bucket, quota and lease stored under an organization and endpoint')
    .argument('<organization>', 'the organization (or user, key, IP) the requests name')
    .argument('<endpoint>', "the endpoint key: 'POST /browsers', or 'ALL /*' for the catch-all")
    .action(
      run(async (store, options, [organization = '', endpoint = '']) => {
        const inspection = describeKept(organization, endpoint, await store.inspect(organization, endpoint));
        out(options.json ? `${JSON.stringify(inspection, null, 2)}\n` : inspectionText(inspection));
        return inspection.limits.length === 0 && inspection.leases.length === 0 ? EXIT_CODES.notFound : EXIT_CODES.ok;
      }),
    );

  program
    .command('reset')
    .description('forget every bucket and lease stored under an organization and endpoint: its limits are full again')
    .argument('<organization>', 'the organization')
    .argument('<endpoint>', "the endpoint key: 'POST /browsers', or 'ALL /*' for the catch-all")
    .action(
      run(async (store, options, [organization = '', endpoint = '']) => {
        const state = await store.inspect(organization, endpoint);
        const names = [
          ...new Set([
            ...state.buckets.map((bucket) => bucket.name),
            ...state.leases.flatMap((lease) => lease.holds.map((hold) => hold.name)),
          ]),
        ];
        if (names.length === 0) {
          if (options.json) out(`${JSON.stringify({ organization, endpoint, reset: [], leases: 0 })}\n`);
          else out(`nothing stored for ${organization} on ${endpoint}: every limit is full already\n`);
          return EXIT_CODES.notFound;
        }
        // The reset script reads only the names: the shape is a placeholder.
        const limits: Limit[] = names.map((name) => tokenBucket({ capacity: 1, refill: 1, intervalMs: 1_000, name }));
        await store.reset(organization, endpoint, limits);
        const leases = state.leases.length;
        if (options.json) out(`${JSON.stringify({ organization, endpoint, reset: names, leases })}\n`);
        else {
          out(
            `reset ${organization} on ${endpoint}: ${names.join(', ')} full again, ${leases} lease${leases === 1 ? '' : 's'} released\n` +
              "processes that refused it may go on refusing for up to 1 s (their deny cache's horizon)\n",
          );
        }
        return EXIT_CODES.ok;
      }),
    );

  program
    .command('block')
    .description('refuse an organization on every endpoint (or one) until the block ends, in every process within 1 s')
    .argument('<organization>', 'the organization')
    .argument('[endpoint]', "one endpoint key, such as 'POST /browsers' (default: every endpoint)")
    .requiredOption('--for <duration>', 'how long: 90s, 15m, 2h, 1d, 1h30m (at most 366d)')
    .option('--reason <text>', 'why, for error bodies and logs (at most 256 characters)', '')
    .action(
      run(async (store, options, [organization = '', endpoint = '*']) => {
        const ms = parseDuration(options.for ?? '');
        const reason = options.reason ?? '';
        const answer = await store.blocks({ organization, endpoint, ms, reason });
        const block = answer.blocks.find((b) => b.organization === organization && b.endpoint === endpoint) ?? {
          organization,
          endpoint,
          until: answer.now + ms,
          reason,
        };
        if (options.json) out(`${JSON.stringify({ ...block, now: answer.now })}\n`);
        else out(`${blockText(block, answer.now)}; every process refuses it within 1 s\n`);
        return EXIT_CODES.ok;
      }, checkBlock),
    );

  program
    .command('unblock')
    .description('lift a block made by `ratecard block` or limiter.block (the same organization and endpoint)')
    .argument('<organization>', 'the organization')
    .argument('[endpoint]', 'the endpoint key the block names (default: the block on every endpoint)')
    .action(
      run(async (store, options, [organization = '', endpoint = '*']) => {
        const before = await store.blocks();
        const found = before.blocks.find((b) => b.organization === organization && b.endpoint === endpoint);
        if (found === undefined) {
          if (options.json) out(`${JSON.stringify({ organization, endpoint, unblocked: false })}\n`);
          else out(`no block on ${organization} on ${endpointText(endpoint)}\n`);
          return EXIT_CODES.notFound;
        }
        await store.blocks({ organization, endpoint, ms: 0, reason: '' });
        if (options.json) out(`${JSON.stringify({ organization, endpoint, unblocked: true })}\n`);
        else {
          out(
            `unblocked ${organization} on ${endpointText(endpoint)} (it was blocked until ${when(found.until, before.now)}); every process admits it again within 1 s\n`,
          );
        }
        return EXIT_CODES.ok;
      }),
    );

  program
    .command('blocks')
    .description('list the blocks in force')
    .action(
      run(async (store, options) => {
        const answer = await store.blocks();
        out(options.json ? `${JSON.stringify(answer, null, 2)}\n` : blocksText(answer));
        return EXIT_CODES.ok;
      }),
    );

  try {
    await program.parseAsync(argv, { from: 'user' });
    return code;
  } catch (error) {
    // Help and usage errors: commander has written them already.
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT_CODES.ok : EXIT_CODES.usage;
    err(`${error instanceof Error ? error.message : String(error)}\n`);
    if (error instanceof UsageError) return EXIT_CODES.usage;
    if (error instanceof UnreachableError) return EXIT_CODES.unreachable;
    if (error instanceof RateLimitError) {
      if (error.code === 'store_unavailable' || error.code === 'store_timeout') return EXIT_CODES.unreachable;
      if (error.code === 'invalid_argument' || error.code === 'invalid_option') return EXIT_CODES.usage;
    }
    return EXIT_CODES.failed;
  }
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** A block's options, checked before connecting. */
function checkBlock(options: GlobalOptions): void {
  parseDuration(options.for ?? '');
  if ((options.reason ?? '').length > 256) throw new UsageError('ratecard: --reason takes at most 256 characters');
}

/** Connects, makes a store on the client, runs `action` within the timeout, and lets go of both. */
async function withStore(
  options: GlobalOptions,
  env: Readonly<Record<string, string | undefined>>,
  action: (store: Store) => Promise<number>,
): Promise<number> {
  const timeoutMs = Number(options.timeout);
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new UsageError(`ratecard: --timeout takes a whole number of ms, got ${options.timeout}`);
  }
  const given = options.redis !== undefined ? options.redis : env.REDIS_URL ? [env.REDIS_URL] : [];
  const target: Target = { urls: given, cluster: options.cluster === true, timeoutMs };
  const client = await connect(target);
  const store = redisStore({ client, prefix: options.prefix });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      action(store),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new UnreachableError(`ratecard: Redis did not answer within ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
    store.close();
    client.disconnect();
  }
}
