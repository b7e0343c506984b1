// In charge of reading a statement lexically for governance: its tokens outside literals and comments,
// the write verbs and functions a regex-and-tokenizer guard sees, and the constructs where a parser's
// reading could differ from the database's. Must not import HTTP/uWS or sources.
//
// This is the guard that works on every statement, parsed or not (the reference's `validate_sql` is a
// classifier of this kind). Quoting follows the database, as `governance/markers.ts` does:
// - '...' with '' doubling; mysql also honours backslash escapes, and so do postgres E'...' strings;
// - "..." is a quoted identifier, except in mysql where it is a string (unless ANSI_QUOTES);
// - `...` quotes identifiers (mysql, sqlite), and so does [...] in sqlite;
// - `--` comments (in mysql only before whitespace or the end), `#` comments in mysql, `/* */` comments
//   that nest in postgres only, $tag$ quoting in postgres only.

import { sessionChanges } from './session.js';
import { endOfBlockComment, endOfDollarQuote, endOfLine, endOfQuoted, isIdentChar } from './sqlText.js';

export type ScanDialect = 'postgres' | 'sqlite' | 'mysql';

export interface Token {
  /** word: a bare name or keyword (lower-cased); name: a quoted identifier (as written); punct: one character; num; str: a string literal. */
  kind: 'word' | 'name' | 'punct' | 'num' | 'str';
  text: string;
  /** Offset of the token in the statement. */
  at: number;
}

/** Constructs whose reading differs between the database and one of the parsers we use. */
export interface LexicalRisks {
  /** A string literal holds a backslash (escape rules differ by dialect, server mode and parser). */
  backslashInString: boolean;
  /** A `#` outside literals and comments where it is not a comment (node-sql-parser reads one). */
  hashOutsideComment: boolean;
  /** mysql: `--` not followed by whitespace, which MySQL reads as two minus signs. */
  dashDashNoSpace: boolean;
  /** A block comment that opens another `/*` inside it (only postgres nests them). */
  nestedComment: boolean;
  /** postgres: a $tag$ string. */
  dollarQuote: boolean;
  /** mysql: a `/*! ... *\/` or `/*M! ... *\/` comment, which MySQL/MariaDB execute. */
  executableComment: boolean;
  /** mysql: a "..." literal, a string by default but an identifier under ANSI_QUOTES. */
  doubleQuotedString: boolean;
  /**
   * postgres: a U&"..." name or U&'...' string, whose escapes (and UESCAPE) only the database decodes:
   * the parsers read `U & "..."`, so the name the database resolves never reaches the analysis.
   */
  unicodeEscape: boolean;
  /** A `...` name with a doubled backtick inside, which neither parser decodes as the database does. */
  doubledBacktick: boolean;
  /** A quoted name with upper-case letters: node-sql-parser's PostgreSQL grammar can't tell it from an unquoted one, which folds. */
  quotedUpper: boolean;
  /**
   * An unquoted name with a non-ASCII letter that has a lower-case form: PostgreSQL and SQLite fold
   * only ASCII letters, the parsers fold every letter, so the name they give is not the database's.
   */
  unicodeFold: boolean;
  /** postgres: ONLY, which node-sql-parser's PostgreSQL grammar reads as a table's name (`FROM ONLY t`: table `only`, alias t). */
  onlyKeyword: boolean;
}

export interface Lexed {
  tokens: Token[];
  risks: LexicalRisks;
}

const READ_VERBS = new Set(['select', 'with', 'show', 'describe', 'desc', 'explain', 'values', 'table']);

/** Keywords that make an explained statement a write (the reference's `_WRITE_KEYWORDS`). */
const WRITE_KEYWORDS = new Set([
  'insert',
  'update',
  'delete',
  'merge',
  'replace',
  'upsert',
  'copy',
  'create',
  'drop',
  'alter',
  'truncate',
  'attach',
  'detach',
  'grant',
  'revoke',
  'call',
  'do',
  'set',
  'reset',
  'install',
  'load',
  'vacuum',
  'checkpoint',
  'export',
  'import',
  'pragma',
]);

/** EXPLAIN options skipped before the explained statement. */
const EXPLAIN_OPTIONS = new Set([
  'analyze',
  'analyse',
  'verbose',
  'query',
  'plan',
  'pipeline',
  'ast',
  'syntax',
  'estimate',
  'extended',
  'format',
  'costs',
  'buffers',
  'timing',
  'summary',
  'settings',
  'wal',
  'generic_plan',
  'memory',
  'serialize',
  'json',
  'text',
  'xml',
  'yaml',
  'tree',
  'traditional',
  'partitions',
  'true',
  'false',
  'on',
  'off',
  'for',
  'connection',
]);

/** Words before INTO that make it a write's own INTO rather than SELECT ... INTO. */
const INTO_OWNERS = new Set(['insert', 'replace', 'merge', 'ignore', 'low_priority', 'delayed', 'high_priority']);

/**
 * Functions that change the session (and so could lift the read-only wall) or write, refused when the
 * caller may not write. Named without schema, lower-case.
 */
export const SESSION_OR_WRITE_FUNCTIONS = new Set([
  // postgres: settings, sequences, large objects, server signals, WAL, remote execution
  'set_config',
  'nextval',
  'setval',
  'lo_import',
  'lo_export',
  'lo_unlink',
  'lo_create',
  'lo_creat',
  'lo_put',
  'lo_from_bytea',
  'lo_truncate',
  'pg_terminate_backend',
  'pg_cancel_backend',
  'pg_reload_conf',
  'pg_rotate_logfile',
  'pg_promote',
  'pg_switch_wal',
  'pg_create_restore_point',
  'pg_file_write',
  'pg_file_rename',
  'pg_file_unlink',
  'pg_logical_emit_message',
  'pg_create_logical_replication_slot',
  'pg_create_physical_replication_slot',
  'pg_drop_replication_slot',
  'txid_current',
  'pg_current_xact_id',
  'dblink_exec',
  'dblink_connect',
  'dblink_connect_u',
  'dblink_send_query',
  'pg_import_system_collations',
  // sqlite (shell and extension functions)
  'load_extension',
  'writefile',
  'edit',
  // mysql/mariadb user-defined escapes seen in the wild
  'sys_exec',
  'sys_eval',
]);

/**
 * Functions that read data the statement does not name as a table (files, other servers, SQL text run
 * inside the function, other sessions' statements), refused for keys with `allowed_tables` and untraceable for masking.
 */
export const DATA_READING_FUNCTIONS = new Set([
  'pg_read_file',
  'pg_read_binary_file',
  'pg_ls_dir',
  'pg_stat_file',
  'pg_ls_logdir',
  'pg_ls_waldir',
  'pg_ls_tmpdir',
  'pg_ls_archive_statusdir',
  'lo_get',
  'loread',
  'lo_open',
  'dblink',
  'dblink_get_result',
  'dblink_fetch',
  'query_to_xml',
  'query_to_xmlschema',
  'query_to_xml_and_xmlschema',
  'table_to_xml',
  'table_to_xmlschema',
  'table_to_xml_and_xmlschema',
  'cursor_to_xml',
  'cursor_to_xmlschema',
  'schema_to_xml',
  'schema_to_xmlschema',
  'schema_to_xml_and_xmlschema',
  'database_to_xml',
  'database_to_xmlschema',
  'database_to_xml_and_xmlschema',
  'ts_stat',
  'ts_rewrite',
  // other sessions' statements, as they wrote them (a literal value included): the last one of every backend
  'pg_stat_get_activity',
  'pg_stat_get_backend_activity',
  'pg_stat_statements',
  // sqlite (shell and virtual-table functions) and mysql
  'readfile',
  'fsdir',
  'sqlite_dbpage',
  'load_file',
]);

/** Reads data the statement does not name as a table: one of the above, or any dblink function. */
export function readsOutsideTables(f: string): boolean {
  return DATA_READING_FUNCTIONS.has(f) || f.startsWith('dblink');
}

/** A function governance must see: one that changes the session, writes, or reads outside the tables. */
export function isUnsafeFunction(f: string): boolean {
  return SESSION_OR_WRITE_FUNCTIONS.has(f) || readsOutsideTables(f);
}

/** Every token outside comments, and the risky constructs met on the way. Never throws. */
export function lex(sql: string, dialect: ScanDialect): Lexed {
  const tokens: Token[] = [];
  const risks: LexicalRisks = {
    backslashInString: false,
    hashOutsideComment: false,
    dashDashNoSpace: false,
    nestedComment: false,
    dollarQuote: false,
    executableComment: false,
    doubleQuotedString: false,
    unicodeEscape: false,
    doubledBacktick: false,
    quotedUpper: false,
    unicodeFold: false,
    onlyKeyword: false,
  };
  const len = sql.length;
  let i = 0;
  while (i < len) {
    const c = sql.charCodeAt(i);
    if (c <= 0x20) {
      i++;
      continue;
    }
    // comments
    if (c === 0x2d && sql.charCodeAt(i + 1) === 0x2d) {
      const next = sql.charCodeAt(i + 2);
      // NaN: end of input
      if (dialect !== 'mysql' || Number.isNaN(next) || next <= 0x20) {
        i = endOfLine(sql, i + 2);
        continue;
      }
      risks.dashDashNoSpace = true;
    }
    if (c === 0x23 /* # */) {
      if (dialect === 'mysql') {
        i = endOfLine(sql, i + 1);
        continue;
      }
      risks.hashOutsideComment = true;
    }
    if (c === 0x2f && sql.charCodeAt(i + 1) === 0x2a) {
      const end = endOfBlockComment(sql, i, dialect === 'postgres');
      const body = sql.slice(i + 2, end);
      if (body.includes('/*')) risks.nestedComment = true;
      if (dialect === 'mysql' && (body.startsWith('!') || body.startsWith('M!'))) risks.executableComment = true;
      i = end;
      continue;
    }
    // literals and quoted names
    if (c === 0x27 /* ' */) {
      const escaped =
        dialect === 'mysql' || (dialect === 'postgres' && i > 0 && (sql.charCodeAt(i - 1) | 0x20) === 0x65 && !(i > 1 && isIdentChar(sql.charCodeAt(i - 2))));
      const end = endOfQuoted(sql, i, 0x27, escaped);
      const text = sql.slice(i + 1, end - 1);
      if (text.includes('\\')) risks.backslashInString = true;
      tokens.push({ kind: 'str', text, at: i });
      i = end;
      continue;
    }
    if (c === 0x22 /* " */) {
      const end = endOfQuoted(sql, i, 0x22, dialect === 'mysql');
      const text = sql.slice(i + 1, end - 1).replace(/""/g, '"');
      if (dialect === 'mysql') {
        risks.doubleQuotedString = true;
        if (text.includes('\\')) risks.backslashInString = true;
        tokens.push({ kind: 'str', text, at: i });
      } else {
        if (text !== text.toLowerCase()) risks.quotedUpper = true;
        tokens.push({ kind: 'name', text, at: i });
      }
      i = end;
      continue;
    }
    if (c === 0x60 /* ` */) {
      const end = endOfQuoted(sql, i, 0x60, false);
      const raw = sql.slice(i + 1, end - 1);
      if (raw.includes('``')) risks.doubledBacktick = true;
      tokens.push({ kind: 'name', text: raw.replace(/``/g, '`'), at: i });
      i = end;
      continue;
    }
    if (c === 0x5b /* [ */ && dialect === 'sqlite') {
      const close = sql.indexOf(']', i + 1);
      const end = close === -1 ? len : close + 1;
      tokens.push({ kind: 'name', text: sql.slice(i + 1, end - 1), at: i });
      i = end;
      continue;
    }
    if (c === 0x24 /* $ */ && dialect === 'postgres') {
      const end = endOfDollarQuote(sql, i);
      if (end > i) {
        risks.dollarQuote = true;
        tokens.push({ kind: 'str', text: sql.slice(i, end), at: i });
        i = end;
        continue;
      }
    }
    if (isNameStart(c)) {
      let end = i + 1;
      while (end < len && isIdentChar(sql.charCodeAt(end))) end++;
      // E'...' / X'...' / B'...' / N'...' prefixes: the letter stays a word, the literal follows.
      if (dialect === 'postgres' && end === i + 1 && (c | 0x20) === 0x75 && sql.charCodeAt(end) === 0x26) {
        const q = sql.charCodeAt(end + 1);
        if (q === 0x22 || q === 0x27) risks.unicodeEscape = true; // U&"..." or U&'...'
      }
      const word = sql.slice(i, end);
      const beyondAscii = word.replace(/[A-Z]/g, ''); // a capital left is a non-ASCII one
      if (beyondAscii !== beyondAscii.toLowerCase()) risks.unicodeFold = true;
      const text = word.toLowerCase();
      if (text === 'only' && dialect === 'postgres') risks.onlyKeyword = true;
      tokens.push({ kind: 'word', text, at: i });
      i = end;
      continue;
    }
    if (c >= 0x30 && c <= 0x39) {
      let end = i + 1;
      while (end < len && (isIdentChar(sql.charCodeAt(end)) || sql.charCodeAt(end) === 0x2e)) end++;
      tokens.push({ kind: 'num', text: sql.slice(i, end), at: i });
      i = end;
      continue;
    }
    tokens.push({ kind: 'punct', text: sql[i], at: i });
    i++;
  }
  return { tokens, risks };
}

export interface LexicalVerdict {
  /** The first keyword, lower-case ('' when the statement starts with anything else). */
  verb: string;
  /** Write verbs a keyword guard sees, 'select into' included, sorted. */
  writeVerbs: string[];
  selectInto: boolean;
  /** Functions called (a name followed by `(`) that are in one of the two refused lists. */
  unsafeFunctions: string[];
  /** Every name followed by `(`, as the database folds it (bare names lower-cased, quoted ones as written), sorted. */
  calls: string[];
  /** Index of the first token of the explained statement when the verb is EXPLAIN, else -1. */
  explainedAt: number;
  /** What would change the pooled session beyond the call (governance/session.ts), sorted. */
  sessionChanges: string[];
}

/** The keyword guard's reading of the tokens (the reference's `write_operations`, plus function names). */
export function judgeTokens(tokens: Token[], dialect: ScanDialect): LexicalVerdict {
  let start = 0;
  while (start < tokens.length && tokens[start].kind === 'punct' && tokens[start].text === '(') start++;
  const first = tokens[start];
  const verb = first && first.kind === 'word' ? first.text : '';
  const writes = new Set<string>();
  let selectInto = false;
  let explainedAt = -1;
  let scanFrom = start;
  if (!READ_VERBS.has(verb)) writes.add(verb === '' ? 'unknown' : verb);
  else if (verb === 'explain') {
    let k = start + 1;
    while (k < tokens.length) {
      const t = tokens[k];
      if (t.kind === 'punct' && t.text === '(') {
        let depth = 0;
        for (; k < tokens.length; k++) {
          if (tokens[k].text === '(' && tokens[k].kind === 'punct') depth++;
          else if (tokens[k].text === ')' && tokens[k].kind === 'punct' && --depth === 0) break;
        }
        k++;
        continue;
      }
      if ((t.kind === 'word' && EXPLAIN_OPTIONS.has(t.text)) || (t.kind === 'punct' && t.text === '=') || t.kind === 'str' || t.kind === 'num') {
        k++;
        continue;
      }
      break;
    }
    explainedAt = k;
    const inner = tokens[k];
    const innerVerb = inner && inner.kind === 'word' ? inner.text : '';
    if (!READ_VERBS.has(innerVerb) && WRITE_KEYWORDS.has(innerVerb)) writes.add(innerVerb);
    scanFrom = k;
  }
  if (verb !== 'show' && verb !== 'describe' && verb !== 'desc') {
    for (let k = scanFrom; k < tokens.length; k++) {
      const t = tokens[k];
      if (t.kind !== 'word') continue;
      const w = t.text;
      if (w === 'insert' || w === 'delete') writes.add(w);
      else if (w === 'update') {
        // FOR UPDATE and FOR NO KEY UPDATE lock rows. ON DUPLICATE KEY UPDATE changes the row an INSERT met, as
        // ON CONFLICT DO UPDATE does: an update, for a key allowed only inserts.
        const prev = tokens[k - 1];
        const locks = isWord(prev, 'for') || (isWord(prev, 'key') && isWord(tokens[k - 2], 'no'));
        if (!locks) writes.add(w);
      } else if (w === 'merge' || w === 'replace') {
        if (isWord(tokens[k + 1], 'into')) writes.add(w);
      } else if (w === 'into') {
        const prev = k > 0 ? tokens[k - 1] : undefined;
        if (!(prev && prev.kind === 'word' && INTO_OWNERS.has(prev.text))) selectInto = true;
      }
    }
  }
  if (selectInto) writes.add('select into');
  const unsafe = new Set<string>();
  const calls = new Set<string>();
  for (let k = 0; k + 1 < tokens.length; k++) {
    const t = tokens[k];
    // MariaDB's NEXT VALUE FOR s is NEXTVAL(s) written as the standard has it: it moves the sequence.
    if (t.kind === 'word' && t.text === 'next' && isWord(tokens[k + 1], 'value') && isWord(tokens[k + 2], 'for')) {
      calls.add('nextval');
      unsafe.add('nextval');
    }
    if ((t.kind === 'word' || t.kind === 'name') && tokens[k + 1].kind === 'punct' && tokens[k + 1].text === '(') {
      calls.add(t.text); // words are lower-cased by the lexer, quoted names kept as written
      const name = t.text.toLowerCase();
      if (isUnsafeFunction(name)) {
        unsafe.add(name);
      }
    }
  }
  const session = sessionChanges(start ? tokens.slice(start) : tokens, dialect, verb);
  return {
    verb,
    writeVerbs: [...writes].sort(),
    selectInto,
    unsafeFunctions: [...unsafe].sort(),
    calls: [...calls].sort(),
    explainedAt,
    sessionChanges: session,
  };
}

function isWord(t: Token | undefined, text: string): boolean {
  return t !== undefined && t.kind === 'word' && t.text === text;
}

function isNameStart(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x5f || c >= 0x80;
}
