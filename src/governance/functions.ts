// In charge of deciding, from the database's own catalog, which functions a call that may not write
// can run. A list of dangerous names always misses one (dblink, advisory locks, large objects,
// pg_notify, pg_terminate_backend, a user's own function...), so PostgreSQL's pg_proc decides: a
// function is safe when every overload of its name is non-volatile (IMMUTABLE or STABLE, which the
// server does not let write), owned by a superuser, and either native (built in at initdb, or written
// in C: no SQL inside it to call a volatile function) or an SQL function whose body calls only native
// safe functions (read here: a non-volatile function may still call a volatile one, which the server
// allows). A PL/pgSQL (or any other language's) body is not analysed, so such a function is refused,
// as a DO block is (a write verb); plus a short list of volatile functions known to change nothing.
// Must not import HTTP/uWS or sources: the caller runs the query through its source.
import { GatewayError } from '../contract/errors.js';
import type { OpaqueOperator } from './names.js';
import { READ_ONLY_MESSAGE } from './policy.js';
import { lex, type Token } from './scan.js';

/**
 * Every function name the connection can see, and whether a read-only call may run it: `true`, `false`, or `'reads'`
 * for an SQL function vouched for whose body reads relations (FROM, TABLE): it changes nothing, but what it answers
 * comes from tables the statement does not name, so no mask rule or allowed_tables entry reaches it.
 */
export type FunctionCatalog = ReadonlyMap<string, FunctionTrust>;
export type FunctionTrust = boolean | 'reads';

/** Volatile only because their answer changes from call to call: they change nothing. */
const HARMLESS_VOLATILE: readonly string[] = [
  'random',
  'random_normal',
  'clock_timestamp',
  'timeofday',
  'gen_random_uuid',
  'uuid_generate_v4',
  'pg_sleep',
  'pg_sleep_for',
  'pg_sleep_until',
];

// SQL on p (pg_proc), r (its owner's pg_roles row) and l (its pg_language row). A user's aggregate is `internal` in
// pg_proc whatever its transition function is written in (PL/pgSQL, which could write), so it is not native.
const NATIVE = `(p.oid < 16384 OR l.lanname IN ('internal', 'c') AND p.prokind <> 'a')`;
const CHANGES_NOTHING = `(p.provolatile <> 'v' OR ${NATIVE} AND p.proname IN (${HARMLESS_VOLATILE.map((n) => `'${n}'`).join(', ')})) AND r.rolsuper`;
/** SQL, true for a function vouched for without reading a body: a superuser's native function that changes nothing. */
export const VOUCHED_NATIVE = `${CHANGES_NOTHING} AND ${NATIVE}`;

/**
 * One row per overload: its name, whether it is a superuser's and changes nothing (non-volatile, or a native function
 * of HARMLESS_VOLATILE's names: not a user's namesake, whose body could write), whether it is native (an initdb
 * object, oid below FirstNormalObjectId, or internal/C), and an SQL function's body.
 */
export const POSTGRES_FUNCTIONS = `SELECT p.proname::text, ${CHANGES_NOTHING}, ${NATIVE}, CASE WHEN l.lanname = 'sql' THEN p.prosrc END
FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner JOIN pg_language l ON l.oid = p.prolang`;

/**
 * MySQL/MariaDB: the stored functions the connection can see, none vouched for (a stored function
 * may set user variables or take locks that stay on the session). Built-in functions are not listed,
 * so the catalog does not know them. Names compare case-insensitively there, so lower case.
 */
export const MYSQL_FUNCTIONS = `SELECT DISTINCT LOWER(ROUTINE_NAME), 0 FROM information_schema.ROUTINES WHERE ROUTINE_TYPE = 'FUNCTION'`;

const truthy = (v: unknown) => v === true || v === 't' || v === 1;

/** POSTGRES_FUNCTIONS's rows as the catalog: a name is safe when every overload of it is. */
export function toPostgresFunctionCatalog(rows: unknown[][]): FunctionCatalog {
  const native = new Map<string, boolean>();
  for (const [name, vouched, isNative] of rows) {
    const n = String(name);
    native.set(n, (native.get(n) ?? true) && truthy(vouched) && truthy(isNative));
  }
  // What an SQL function's body calls is judged against native functions only: one that calls
  // another user function (whose body this does not follow) is not vouched for, nor is a BEGIN
  // ATOMIC body (kept parsed, prosrc empty).
  const out = new Map<string, FunctionTrust>();
  for (const [name, vouched, isNative, body] of rows) {
    const n = String(name);
    let trust: FunctionTrust = truthy(vouched);
    if (trust && !truthy(isNative)) {
      const tokens = typeof body === 'string' && body.trim() !== '' ? tokensOf(body) : null;
      trust = tokens !== null && callsOnly(tokens, native) && (readsRelations(tokens) ? 'reads' : true);
    }
    const before = out.get(n) ?? true;
    out.set(n, before === false || trust === false ? false : before === 'reads' || trust === 'reads' ? 'reads' : true);
  }
  return out;
}

function tokensOf(body: string): Token[] | null {
  try {
    return lex(body, 'postgres').tokens;
  } catch {
    return null;
  }
}

/** Whether an SQL body names a relation to read: a FROM (or JOIN, which needs one), or PostgreSQL's `TABLE t`. */
function readsRelations(tokens: Token[]): boolean {
  return tokens.some((t) => t.kind === 'word' && (t.text === 'from' || t.text === 'table'));
}

/** Whether every function an SQL body calls is safe by `known` (names it does not know are keywords). */
function callsOnly(tokens: Token[], known: ReadonlyMap<string, boolean>): boolean {
  for (let k = 0; k + 1 < tokens.length; k++) {
    const t = tokens[k];
    if ((t.kind === 'word' || t.kind === 'name') && tokens[k + 1].kind === 'punct' && tokens[k + 1].text === '(') {
      if (!isSafe(t.text, known)) return false;
    }
  }
  return true;
}

export function toFunctionCatalog(rows: unknown[][]): FunctionCatalog {
  const out = new Map<string, FunctionTrust>();
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
  const refused = unsafeCalls(calls, catalog);
  if (refused) {
    throw new GatewayError(
      'read_only',
      `${READ_ONLY_MESSAGE} - and only functions that cannot change anything (${refused.join(', ')} can). Set QUERYAPIGATE_ALLOW_WRITES=1 to lift this restriction.`,
    );
  }
}

/** The functions called that the catalog does not vouch for, as `name()`; null when there are none. */
export function unsafeCalls(calls: readonly string[], catalog: FunctionCatalog): string[] | null {
  return named(calls, (name) => !isSafe(name, catalog));
}

/** True when every function called is one the catalog vouches for (or a keyword, which it does not know). */
export function allSafe(calls: readonly string[], catalog: FunctionCatalog): boolean {
  return calls.every((name) => isSafe(name, catalog));
}

function isSafe(name: string, catalog: ReadonlyMap<string, FunctionTrust>): boolean {
  return catalog.get(name) !== false;
}

/**
 * The functions called whose answer the gateway cannot trace, as `name()`: a body it does not read (not vouched for:
 * PL/pgSQL, a MySQL stored function) or one that reads relations ('reads'). A key whose rules follow columns or tables
 * (mask, allowed_tables) calls none: `email_of(1)` answered the address in clear to a key hashing customers.email.
 */
export function opaqueCalls(calls: readonly string[], catalog: FunctionCatalog): string[] | null {
  return named(calls, (name) => catalog.get(name) === false || catalog.get(name) === 'reads');
}

/**
 * The user's operators and casts (names.ts OpaqueOperator) whose function may answer what the gateway cannot trace: a
 * body it does not read, or one that reads relations. The database picks them by the values' types wherever a
 * statement fits them, with no call naming the function, so a key whose rules follow columns or tables is refused every
 * statement where one exists (`+(text,integer)` over an SQL function reading customers answered `'x' + 1` with an
 * address in clear). Null when there is none.
 */
export function untracedOperators(operators: readonly OpaqueOperator[] | undefined, catalog: FunctionCatalog | null): string[] | null {
  const untraced = (operators ?? []).filter((o) => catalog === null || catalog.get(o.fn) !== true).map((o) => o.name);
  return untraced.length > 0 ? untraced : null;
}

/** The calls `refused` picks, as `name()` for a message, or null. Run on governed calls: no array unless one is picked. */
function named(calls: readonly string[], refused: (name: string) => boolean): string[] | null {
  return calls.some(refused) ? calls.filter(refused).map((name) => `${name}()`) : null;
}
