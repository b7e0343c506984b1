// In charge of finding, in a statement's tokens, what would change the pooled session beyond the
// call: settings (SET without LOCAL, set_config(..., false), RESET), the role, notifications listened
// to, prepared statements and cursors, temporary objects, session-level locks, MySQL user variables,
// SQLite PRAGMA and ATTACH. Reads tokens only, so it holds for statements no parser reads. Must not
// import HTTP/uWS or sources.
/** scan.ts's dialects and tokens, as far as this file reads them (scan.ts imports this one). */
type ScanDialect = 'postgres' | 'sqlite' | 'mysql';
interface Token {
  kind: 'word' | 'name' | 'punct' | 'num' | 'str';
  text: string;
}

/** Statement verbs that change the session whatever follows, per dialect. */
const SESSION_VERBS: Record<ScanDialect, Set<string>> = {
  postgres: new Set([
    'reset',
    'discard',
    'listen',
    'unlisten',
    'prepare',
    'execute',
    'deallocate',
    'load',
    'declare',
    'close',
    'begin',
    'start',
    'commit',
    'end',
    'rollback',
    'abort',
    'savepoint',
    'release',
  ]),
  mysql: new Set([
    'use',
    'prepare',
    'execute',
    'deallocate',
    'lock',
    'unlock',
    'handler',
    'begin',
    'start',
    'commit',
    'rollback',
    'savepoint',
    'release',
    'xa',
    'flush',
    'reset',
  ]),
  sqlite: new Set(['pragma', 'attach', 'detach', 'begin', 'commit', 'end', 'rollback', 'savepoint', 'release']),
};

/** Functions whose effect stays on the session: settings, session-level advisory locks, the random seed, named remote connections. */
const SESSION_FUNCTIONS: Record<ScanDialect, Set<string>> = {
  postgres: new Set([
    'set_config',
    'setseed',
    'pg_advisory_lock',
    'pg_advisory_lock_shared',
    'pg_try_advisory_lock',
    'pg_try_advisory_lock_shared',
    'dblink_connect',
    'dblink_connect_u',
    'dblink_open',
  ]),
  mysql: new Set(['get_lock', 'release_lock', 'release_all_locks', 'last_insert_id', 'set_config']),
  sqlite: new Set([]),
};

/** What in the statement would outlast the call on its session, in words; empty when nothing does. */
export function sessionChanges(tokens: Token[], dialect: ScanDialect, verb: string): string[] {
  const out = new Set<string>();
  if (SESSION_VERBS[dialect].has(verb)) out.add(verb.toUpperCase());
  if (verb === 'set') {
    // PostgreSQL: SET LOCAL and SET TRANSACTION end with the call's own transaction; MySQL's SET
    // TRANSACTION applies to the session's next one, so every MySQL SET counts.
    const next = tokens[1];
    const local = dialect === 'postgres' && next?.kind === 'word' && (next.text === 'local' || next.text === 'transaction');
    if (!local) out.add('SET');
  }
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k];
    const next = tokens[k + 1];
    // CREATE [OR REPLACE] [GLOBAL|LOCAL] TEMP ..., SELECT ... INTO TEMP, a table made in pg_temp
    if (t.kind === 'word' && (t.text === 'temp' || t.text === 'temporary') && (verb === 'create' || tokens[k - 1]?.text === 'into'))
      out.add('a temporary object');
    if (verb === 'create' && dialect === 'postgres' && (t.kind === 'word' || t.kind === 'name') && t.text.toLowerCase().startsWith('pg_temp'))
      out.add('a temporary object');
    // MySQL: @v := ..., SELECT ... INTO @v[, @w] (a user variable set outlives the call; @@name only
    // reads a setting). Reading @v (INSERT ... VALUES (@x), WHERE id = @x) changes nothing, and no call
    // can set one, so it reads NULL.
    if (dialect === 'mysql' && t.kind === 'punct' && t.text === '@' && tokens[k - 1]?.text !== '@' && next?.text !== '@') {
      const after = tokens[k + 2];
      if ((after?.kind === 'punct' && after.text === ':' && tokens[k + 3]?.text === '=') || intoTarget(tokens, k)) out.add('a user variable');
    }
    if ((t.kind === 'word' || t.kind === 'name') && next?.kind === 'punct' && next.text === '(') {
      const name = t.text.toLowerCase();
      if (SESSION_FUNCTIONS[dialect].has(name) && !(name === 'set_config' && localSetConfig(tokens, k + 1))) out.add(`${name}()`);
    }
    if (t.kind === 'word' && t.text === 'with' && next?.kind === 'word' && next.text === 'hold' && dialect === 'postgres') out.add('a cursor WITH HOLD');
  }
  return [...out].sort();
}

/** Whether the `@` at `k` starts a target of INTO: `INTO @a`, or `@b` in `INTO @a, @b`. */
function intoTarget(tokens: Token[], k: number): boolean {
  let j = k - 1;
  while (tokens[j]?.text === ',' && tokens[j - 2]?.text === '@') j -= 3; // back over `@name ,`
  return tokens[j]?.kind === 'word' && tokens[j].text === 'into';
}

/** set_config(a, b, true) with a literal `true` last: the setting ends with the call's transaction. */
function localSetConfig(tokens: Token[], open: number): boolean {
  let depth = 0;
  for (let k = open; k < tokens.length; k++) {
    const t = tokens[k];
    if (t.kind !== 'punct') continue;
    if (t.text === '(') depth++;
    else if (t.text === ')' && --depth === 0) {
      const last = tokens[k - 1];
      const comma = tokens[k - 2];
      return last?.kind === 'word' && last.text === 'true' && comma?.kind === 'punct' && comma.text === ',';
    }
  }
  return false;
}
