// The few members of the Workers runtime's own module that this package uses, declared here for building it without
// @cloudflare/workers-types (whose globals clash with @types/node's in one program). A user's Worker gets the full
// declarations from @cloudflare/workers-types or `wrangler types`; the built .d.ts only names `DurableObject`.
declare module 'cloudflare:workers' {
  type SqlValue = ArrayBuffer | string | number | null;

  interface SqlStorage {
    exec<Row extends Record<string, SqlValue>>(query: string, ...bindings: unknown[]): Iterable<Row>;
  }

  interface DurableObjectState {
    readonly storage: {
      readonly sql: SqlStorage;
      transactionSync<T>(body: () => T): T;
      setAlarm(scheduledTime: number): Promise<void>;
    };
  }

  /** Keeps the request that calls it alive until `promise` settles (workerd from 2025; absent before). */
  export const waitUntil: ((promise: Promise<unknown>) => void) | undefined;

  export abstract class DurableObject<Env = unknown> {
    /** The object's state: its storage. */
    protected ctx: DurableObjectState;
    /** The Worker's bindings. */
    protected env: Env;
    constructor(ctx: DurableObjectState, env: Env);
  }
}
