// In charge of deciding, from the database's own catalog, which functions a call that may not write
// can run. A list of dangerous names always misses one (dblink, advisory locks, large objects,
// pg_notify, pg_terminate_backend, a user's own function...), so PostgreSQL's pg_proc decides: a
// function is safe when every overload of its name is non-volatile (IMMUTABLE or STABLE, which the
// server does not let write) and owned by a superuser (a non-volatile function of an ordinary role
// could still call a volatile one); plus a short list of volatile functions known to change nothing.
// Must not import HTTP/uWS or sources: the caller runs the query through its source.
import { GatewayError } from '../contract/errors.js';
import { READ_ONLY_MESSAGE } from './policy.js';

/** Every function name the connection can see, and whether a read-only call may run it. */
export type FunctionCatalog = ReadonlyMap<string, boolean>;

export const POSTGRES_FUNCTIONS = `SELECT p.proname::text, bool_and(p.provolatile <> 'v' AND r.rolsuper)
FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
GROUP BY p.proname`;

/**
 * MySQL/MariaDB: the stored functions the connection can see, none vouched for (a stored function
 * may set user variables or take locks that stay on the session). Built-in functions are not listed,
 * so the catalog does not know them. Names compare case-insensitively there, so lower case.
 */
export const MYSQL_FUNCTIONS = `SELECT DISTINCT LOWER(ROUTINE_NAME), 0 FROM information_schema.ROUTINES WHERE ROUTINE_TYPE = 'FUNCTION'`;

/** Volatile only because their answer changes from call to call: they change nothing. */
const HARMLESS_VOLATILE = new Set([
  'random',
  'random_normal',
  'clock_timestamp',
  'timeofday',
  'gen_random_uuid',
  'uuid_generate_v4',
  'pg_sleep',
  'pg_sleep_for',
  'pg_sleep_until',
]);

export function toFunctionCatalog(rows: unknown[][]): FunctionCatalog {
  const out = new Map<string, boolean>();
  for (const [name, safe] of rows) out.set(String(name), safe === true || safe === 't' || safe === 1);
  return out;
}

/**
 * read_only when the statement calls a function that could change something: outside the statement's
 * own rows (another session through dblink, a lock that outlives the call, a notification, a large
 * object, statistics, another backend) or the pooled session's state. `calls` are the names the
 * statement calls, as the database folds them; a name the catalog does not know is a keyword or a
 * function that does not exist (the database refuses it).
 */
export function checkFunctions(calls: readonly string[], catalog: FunctionCatalog): void {
  const refused = calls.filter((name) => !isSafe(name, catalog)).map((name) => `${name}()`);
  if (refused.length) {
    throw new GatewayError(
      'read_only',
      `${READ_ONLY_MESSAGE} - and only functions that cannot change anything (${refused.join(', ')} can). Set QUERYAPIGATE_ALLOW_WRITES=1 to lift this restriction.`,
    );
  }
}

/** True when every function called is one the catalog vouches for (or a keyword, which it does not know). */
export function allSafe(calls: readonly string[], catalog: FunctionCatalog): boolean {
  return calls.every((name) => isSafe(name, catalog));
}

function isSafe(name: string, catalog: FunctionCatalog): boolean {
  return catalog.get(name) !== false || HARMLESS_VOLATILE.has(name);
}
