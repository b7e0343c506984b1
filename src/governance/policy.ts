// In charge of the governance decisions on an analysed statement: one statement only, read-only unless
// the caller may write, allowed write verbs, allowed tables. Throws GatewayError with the contract's codes;
// must not import HTTP/uWS or sources.
import { type CodeOf, GatewayError } from '../contract/errors.js';
import type { SqlDialect, StatementAnalysis, StatementScan } from './analysis.js';
import { PURE_GENERATORS } from './lineage.js';
import { parseTableName, type Schema, showRef, tableKey } from './names.js';
import { readsOutsideTables, SESSION_OR_WRITE_FUNCTIONS } from './scan.js';

export const READ_ONLY_MESSAGE = 'Only read-only statements (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN) are allowed';

export function governanceError(code: CodeOf<'govern'>, message: string): GatewayError {
  return new GatewayError(code, message);
}

/** multiple_statements when the text holds more than one statement. */
export function checkSingleStatement(a: StatementScan): void {
  if (a.statements > 1) throw governanceError('multiple_statements', 'Only a single SQL statement can be executed at a time');
}

/**
 * read_only when the caller may not write and the statement writes: its verb, a write hidden in a
 * CTE or under EXPLAIN, SELECT ... INTO, a MySQL executable comment, or a function that changes the
 * session or writes (set_config, nextval, lo_import, ...); or when its tokens cannot be read as the
 * database reads them (then a write could hide in them).
 */
export function checkReadOnly(a: StatementScan, mayWrite: boolean): void {
  checkSingleStatement(a);
  if (mayWrite) return;
  if (a.unreadable) {
    throw governanceError('read_only', `${READ_ONLY_MESSAGE}, and this one cannot be read with certainty (${a.unreadable}).`);
  }
  const why: string[] = [...a.writeVerbs];
  if (a.executableComment) why.push('an executable comment');
  for (const f of a.unsafeFunctions) if (writesOrChangesSession(f)) why.push(`${f}()`);
  if (why.length === 0) return;
  throw governanceError(
    'read_only',
    `${READ_ONLY_MESSAGE} - not one that writes (${why.join(', ')}). Set QUERYAPIGATE_ALLOW_WRITES=1 to lift this restriction.`,
  );
}

/**
 * write_op_not_allowed when a write verb (hidden ones included) is outside the key's list, or a function called writes or
 * changes the session (setval, lo_unlink, pg_terminate_backend, ...): a write no verb in the list names; null = any.
 * The functions the connection's catalog cannot vouch for are refused at the call (call/govern.ts).
 */
export function checkWriteOps(a: StatementScan, allowedWriteOps: string[] | null): void {
  // Every call of a writer runs this: a read that calls nothing costs no allocation.
  if (allowedWriteOps === null || (a.writeVerbs.length === 0 && a.unsafeFunctions.length === 0)) return;
  const allowed = new Set(allowedWriteOps.map((op) => op.toLowerCase()));
  const writing = a.unsafeFunctions.filter(writesOrChangesSession);
  if (writing.length === 0 && a.writeVerbs.every((v) => allowed.has(v))) return;
  throw writeOpsError(
    allowedWriteOps,
    writing.map((f) => `${f}()`),
  );
}

/**
 * The views (relations whose rows the gateway does not trace) that a statement the parsers could not read may read:
 * those whose name, in any schema, case aside, is one of its `words` (Inspection.words). More than it reads, perhaps,
 * never fewer: the database reads a view only by naming it.
 */
export function viewsNamed(words: ReadonlySet<string>, schema: Schema): string[] {
  const named: string[] = [];
  for (const r of schema.relations.values()) if (r.columns === null && words.has(r.name.toLowerCase())) named.push(r.name);
  return named;
}

/** The refusal of a write outside `allowed_write_ops`; `through`, what would have written unseen (`f()`, `operator ###`, `view v`). */
export function writeOpsError(allowedWriteOps: string[], through: string[] = []): GatewayError {
  const list = [...new Set(allowedWriteOps.map((op) => op.toLowerCase()))].sort().join(', ');
  const why = through.length > 0 ? ` Not through code that can change anything (${through.join(', ')}).` : '';
  return governanceError('write_op_not_allowed', `This API key may only perform these write operations: ${list}.${why}`);
}

function writesOrChangesSession(f: string): boolean {
  return SESSION_OR_WRITE_FUNCTIONS.has(f) || f.startsWith('dblink_exec');
}

/**
 * Statements that change the pooled session beyond the call (SET without LOCAL, set_config(..., false),
 * RESET, SET ROLE, LISTEN, PREPARE, temporary tables, session locks, MySQL user variables, PRAGMA,
 * ATTACH, ...): a later call, anyone's, would run in that state. A caller that may not write is told
 * `read_only`; any other caller, the admin included, `forbidden`: the gateway sets the session.
 */
export function checkSession(a: StatementScan, mayWrite: boolean): void {
  if (a.sessionChanges.length === 0) return;
  const what = a.sessionChanges.join(', ');
  if (!mayWrite) throw governanceError('read_only', `${READ_ONLY_MESSAGE} - not one that changes the session (${what}).`);
  throw governanceError(
    'forbidden',
    `Statements that change the session for later calls are not run through the gateway (${what}); the gateway sets each call's session.`,
  );
}

/**
 * For a key with `allowed_tables` (null = unrestricted): 403 table_check_failed when the statement
 * could not be analysed (`a` null), 403 table_not_allowed when it touches a table outside the list,
 * reads through a table function that is not a pure generator or a data-reading function, CASCADEs to the tables that
 * refer to those it names (TRUNCATE t CASCADE empties them), or is a SHOW of no table. Tables are
 * compared as the connection resolves them (names.ts): an entry `customers` is the table an
 * unqualified `customers` reads there (the search path's first), `private.customers` that schema's.
 */
export function checkTables(a: StatementAnalysis | null, allowedTables: string[] | null, schema: Schema): void {
  if (allowedTables === null) return;
  if (a === null) throw governanceError('table_check_failed', 'This query could not be analyzed to enforce its table access restrictions');
  const allowed = allowedKeys(allowedTables, schema);
  const forbidden = new Set<string>();
  for (const t of a.tables) {
    const key = tableKey(schema, t);
    if (key === null || !allowed.has(key)) forbidden.add(showRef(t));
  }
  for (const f of a.tableFunctions) if (!PURE_GENERATORS.has(f)) forbidden.add(`${f}()`);
  if (a.cascades) forbidden.add('the tables CASCADE reaches');
  for (const f of a.unsafeFunctions) if (readsOutsideTables(f)) forbidden.add(`${f}()`);
  // SHOW without a table reads the server's state, which holds other sessions' statements as written (MySQL's
  // PROCESSLIST, ENGINE INNODB STATUS, BINLOG EVENTS) and names every table (SHOW TABLES).
  if (a.verb === 'show' && a.tables.length === 0) forbidden.add("SHOW (the server's state)");
  if (forbidden.size === 0) return;
  const list = [...allowedTables].sort().join(', ') || '(none)';
  throw governanceError('table_not_allowed', `This API key may only query these tables: ${list}. Forbidden: ${[...forbidden].sort().join(', ')}.`);
}

/** The relation keys `allowed_tables` entries name on this connection (entries naming none left out). */
export function allowedKeys(entries: string[], schema: Schema): Set<string> {
  const keys = new Set<string>();
  for (const e of entries) {
    const key = tableKey(schema, parseTableName(e, schema.dialect as SqlDialect));
    if (key !== null) keys.add(key);
  }
  return keys;
}

/**
 * Ad-hoc SQL from a scoped key never reads data the statement does not name as a table (files,
 * large objects, other servers: load_file, pg_read_file, dblink, ...), whatever its table list: the
 * text is the caller's, and a saved query that does so was at least written by an administrator.
 */
export function checkOutsideReads(a: StatementScan): void {
  const outside = a.unsafeFunctions.filter(readsOutsideTables);
  if (outside.length === 0) return;
  throw governanceError('table_not_allowed', `Ad-hoc SQL from an API key may only read tables, not through ${outside.map((f) => `${f}()`).join(', ')}.`);
}

export interface GovernanceGrants {
  mayWrite: boolean;
  allowedWriteOps: string[] | null;
}

/** The statement checks that need no schema, in the contract's order: statements, read-only, session, write ops. */
export function checkStatement(scan: StatementScan, grants: GovernanceGrants): void {
  checkReadOnly(scan, grants.mayWrite);
  checkSession(scan, grants.mayWrite);
  if (grants.mayWrite) checkWriteOps(scan, grants.allowedWriteOps);
}
