// In charge of analysing one saved statement once: the keyword guard's reading (statements, verb, write
// verbs, risky functions) and, when a parser can read it, the tables it reads and writes and the
// lineage of its output columns, in one dialect-neutral description. Must not import HTTP/uWS or
// sources. Pure and deterministic: callers cache the result per statement and dialect.
//
// Parsers: PostgreSQL and SQLite text goes to pgsql-ast-parser first and, when it can't read it
// (INTERSECT, EXCEPT, window frames, SELECT INTO, backtick names...), to node-sql-parser's grammar for
// the dialect; MySQL text goes to node-sql-parser's MySQL grammar. node-sql-parser is only trusted
// where its lexing matches the database's (see `nspUnsafe`); anything else is refused, never guessed.
import { createRequire } from 'node:module';
import type * as pg from 'pgsql-ast-parser';
import { countStatements, scanMarkers } from './markers.js';
import { type ColumnSource, describe, type OutputColumn, type Query } from './lineage.js';
import { lowerNspTop } from './lowerNsp.js';
import { lowerPgStatement } from './lowerPg.js';
import { foldUnquoted, splitRef, tableRef } from './names.js';
import { isUnsafeFunction, judgeTokens, lex, type LexicalRisks, type Token } from './scan.js';

export type { ColumnSource, OutputColumn } from './lineage.js';

export type SqlDialect = 'postgres' | 'sqlite' | 'mysql';

/** What the keyword guard reads from the text alone; available for every statement. */
export interface StatementScan {
  /** Non-empty statements (a trailing `;` does not make a second one). */
  statements: number;
  /** First keyword, lower-case; '' when the statement starts with something else. */
  verb: string;
  /** Every write verb seen (insert, update, delete, merge, replace, 'select into', or a non-read first keyword), sorted. */
  writeVerbs: string[];
  selectInto: boolean;
  /** mysql: a `/*! *\/` or `/*M! *\/` comment, which the server executes. */
  executableComment: boolean;
  /** Functions called that change the session, write, or read data outside named tables, sorted. */
  unsafeFunctions: string[];
  /** Why the tokens may not be what the database reads (then nothing of this scan can be trusted), or null. */
  unreadable: string | null;
  /** Every name called as a function (followed by `(`), as the database folds it, sorted; keywords included. */
  calls: string[];
  /** What would change the pooled session beyond the call (SET, set_config(..., false), LISTEN, ...), sorted. */
  sessionChanges: string[];
}

export interface StatementAnalysis extends StatementScan {
  /** True when nothing in the statement writes. */
  reads: boolean;
  /** Bare lower-case tables read or written (CTE names excluded, schema prefixes dropped), sorted. */
  tables: string[];
  writeTargets: string[];
  /** Functions used as row sources (FROM generate_series(...)), sorted. */
  tableFunctions: string[];
  /** The output columns in order; null when the statement's rows can't be described (SHOW, EXPLAIN, DDL). */
  outputs: OutputColumn[] | null;
  /** The columns that decide which rows come back and their order (WHERE, JOIN, GROUP BY, HAVING, ORDER BY). */
  predicates: { sources: ColumnSource[]; traced: boolean };
  /** A CASCADE reaches tables the statement does not name: those that refer to the ones it names (lineage.ts). */
  cascades: boolean;
  /** The columns every value it computes is read from, shown or not (lineage.ts Lineage.computed). */
  computed: { sources: ColumnSource[]; traced: boolean };
  /** What its writes store, as columns (empty when it writes nothing): a value from a masked column must not land there. */
  written: OutputColumn[];
  /** Which reader produced the description. */
  parser: 'pgsql-ast-parser' | 'node-sql-parser' | 'lexical';
}

/**
 * The statement could not be analysed; `scan` still holds the keyword guard's reading. `syntax` is
 * true when the parsers rejected the text itself (most likely a syntax error, though the parsers
 * also reject some valid SQL), false when the gateway declined to read a statement it could not read
 * with certainty (an executable comment, a lexis the fallback parser reads differently, ...).
 */
export class AnalysisError extends Error {
  readonly scan: StatementScan;
  readonly syntax: boolean;
  constructor(message: string, scan: StatementScan, syntax = false) {
    super(message);
    this.name = 'AnalysisError';
    this.scan = scan;
    this.syntax = syntax;
  }
}

/** Both readings at once, for callers that cache one value per statement: never throws. */
export interface Inspection {
  scan: StatementScan;
  analysis: StatementAnalysis | null;
  /** Why `analysis` is null. */
  failure: string | null;
  /** True when `analysis` is null because the parsers rejected the text (see AnalysisError.syntax). */
  rejectedByParser: boolean;
  /**
   * Of a statement no parser could read, its words and quoted names, lower-case: what a check of the relations it may
   * read has to go on (policy.ts viewsNamed). Empty when `analysis` is given.
   */
  words: ReadonlySet<string>;
}

const NO_WORDS: ReadonlySet<string> = new Set();

/** A statement of the usual shape (a join, a parameter, an order and a limit) in each dialect's spelling. */
const WARM_UP: Record<SqlDialect, string> = {
  postgres: 'SELECT a.x, b.y FROM t a JOIN u b ON a.id = b.id WHERE a.z = :p ORDER BY a.x LIMIT 10',
  sqlite: 'SELECT a.x, b.y FROM t a JOIN u b ON a.id = b.id WHERE a.z = :p ORDER BY a.x LIMIT 10',
  mysql: 'SELECT a.x, b.y FROM t a JOIN u b ON a.id = b.id WHERE a.z = :p ORDER BY a.x LIMIT 10, 5',
};

/**
 * Loads the parser a dialect's statements go to and runs it once, so that no call pays for loading
 * it (about 100 ms) or for its cold code. Only for dialects in use: a parser costs up to 15 MB.
 */
export function warmParser(dialect: SqlDialect): void {
  inspectStatement(WARM_UP[dialect], dialect);
}

export function inspectStatement(sql: string, dialect: SqlDialect): Inspection {
  try {
    const analysis = analyzeStatement(sql, dialect);
    return { scan: analysis, analysis, failure: null, rejectedByParser: false, words: NO_WORDS };
  } catch (e) {
    if (!(e instanceof AnalysisError)) throw e;
    const words = new Set(lex(trimStatement(sql), dialect).tokens.flatMap((t) => (t.kind === 'word' || t.kind === 'name' ? [t.text.toLowerCase()] : [])));
    return { scan: e.scan, analysis: null, failure: e.message, rejectedByParser: e.syntax, words };
  }
}

/** The keyword guard's reading only. */
export function scanStatement(sql: string, dialect: SqlDialect): StatementScan {
  return scanParts(trimStatement(sql), dialect).scan;
}

/** The full description; throws AnalysisError when no parser can read the statement safely. */
export function analyzeStatement(sql: string, dialect: SqlDialect): StatementAnalysis {
  const text = trimStatement(sql);
  const { scan, tokens, risks, explainedAt } = scanParts(text, dialect);
  if (scan.statements !== 1) {
    throw scan.statements === 0 ? new AnalysisError('empty statement', scan, true) : new AnalysisError('more than one statement', scan);
  }
  if (scan.executableComment) throw new AnalysisError('an executable comment (/*! */) can hide SQL from analysis', scan);
  if (risks.nestedComment) throw new AnalysisError('a nested block comment is read differently by the database and the parser', scan);
  if (scan.unreadable) throw new AnalysisError(scan.unreadable, scan);
  if (risks.doubledBacktick) throw new AnalysisError('a `...` name with a doubled backtick, which the parsers read differently from the database', scan);
  if (risks.unicodeFold && dialect !== 'mysql') {
    throw new AnalysisError('an unquoted name with a non-ASCII capital letter, which the database does not fold as the parsers do', scan);
  }

  let q: Query;
  let parser: StatementAnalysis['parser'] = 'lexical';
  if (scan.verb === 'explain' || ((scan.verb === 'describe' || scan.verb === 'desc') && isStatementStart(tokens[1]))) {
    // The explained statement's tables and writes count (EXPLAIN ANALYZE runs it); the plan has no lineage.
    const at = scan.verb === 'explain' ? explainedAt : 1;
    if (at >= tokens.length) throw new AnalysisError('EXPLAIN without a statement', scan, true);
    const inner = analyzeStatement(text.slice(tokens[at].at), dialect);
    q = { k: 'other', verb: null, tables: inner.tables, targets: inner.writeTargets, inner: null };
    parser = inner.parser;
  } else if (scan.verb === 'show' || scan.verb === 'describe' || scan.verb === 'desc') {
    q = { k: 'other', verb: null, tables: showTables(text, tokens, scan.verb, dialect), targets: [], inner: null };
  } else if (scan.verb === 'table') {
    // `TABLE t ...` is `SELECT * FROM t ...` (PostgreSQL, MySQL 8), and may go on (ORDER BY, UNION TABLE u): read so.
    if (tokens.length < 2) throw new AnalysisError('TABLE without a table name', scan, true);
    return analyzeStatement(`SELECT * FROM ${text.slice(tokens[1].at)}`, dialect);
  } else {
    const parsed = parse(text, dialect, risks, scan);
    q = parsed.q;
    parser = parsed.parser;
  }

  const lineage = describe(q);
  const writeVerbs = new Set([...scan.writeVerbs, ...lineage.writeVerbs]);
  const selectInto = scan.selectInto || lineage.selectInto;
  if (selectInto) writeVerbs.add('select into');
  const unsafe = new Set(scan.unsafeFunctions);
  for (const f of [...lineage.calls, ...lineage.tableFunctions]) {
    if (isUnsafeFunction(f)) unsafe.add(f);
  }
  const verbs = [...writeVerbs].sort();
  return {
    statements: scan.statements,
    verb: scan.verb,
    writeVerbs: verbs,
    selectInto,
    executableComment: scan.executableComment,
    unsafeFunctions: [...unsafe].sort(),
    unreadable: null,
    calls: scan.calls,
    sessionChanges: scan.sessionChanges,
    reads: verbs.length === 0,
    tables: lineage.tables,
    writeTargets: lineage.writeTargets,
    cascades: lineage.cascades,
    tableFunctions: lineage.tableFunctions,
    outputs: lineage.outputs,
    predicates: lineage.predicates,
    computed: lineage.computed,
    written: lineage.written,
    parser,
  };
}

function trimStatement(sql: string): string {
  return sql.replace(/[\s;]+$/, '');
}

function scanParts(text: string, dialect: SqlDialect): { scan: StatementScan; tokens: Token[]; risks: LexicalRisks; explainedAt: number } {
  const { tokens, risks } = lex(text, dialect);
  const v = judgeTokens(tokens, dialect);
  const scan: StatementScan = {
    statements: countStatements(text, dialect),
    verb: v.verb,
    writeVerbs: v.writeVerbs,
    selectInto: v.selectInto,
    executableComment: risks.executableComment,
    unsafeFunctions: v.unsafeFunctions,
    calls: v.calls,
    sessionChanges: v.sessionChanges,
    unreadable: risks.unicodeEscape ? 'a Unicode-escaped name or string (U&"..." or U&\'...\')' : null,
  };
  return { scan, tokens, risks, explainedAt: v.explainedAt };
}

const STATEMENT_STARTS = new Set(['select', 'with', 'insert', 'update', 'delete', 'replace', 'values', 'table']);

function isStatementStart(t: Token | undefined): boolean {
  return !!t && t.kind === 'word' && STATEMENT_STARTS.has(t.text);
}

/** An identifier token as the database names it: a quoted one as written, a bare one folded as the dialect folds it. */
function identifier(text: string, t: Token, dialect: SqlDialect): string {
  if (t.kind === 'name') return t.text;
  const raw = text.substr(t.at, t.text.length);
  return foldUnquoted(raw.toLowerCase() === t.text ? raw : t.text, dialect);
}

/** The table reference at token k (`t`, `s.t`, "T"), as the IR keeps one (names.ts tableRef), and the token after it. */
function tableAt(text: string, tokens: Token[], k: number, dialect: SqlDialect): { ref: string; next: number } | null {
  const parts: string[] = [];
  while (k < tokens.length && (tokens[k].kind === 'word' || tokens[k].kind === 'name')) {
    parts.push(identifier(text, tokens[k], dialect));
    k++;
    if (tokens[k]?.kind === 'punct' && tokens[k].text === '.') k++;
    else break;
  }
  if (parts.length === 0) return null;
  return { ref: tableRef(parts.length > 1 ? parts[parts.length - 2] : null, parts[parts.length - 1]), next: k };
}

/**
 * The table a SHOW or DESCRIBE statement reads metadata of, if any (`DESCRIBE t`, `SHOW COLUMNS FROM t`), with its
 * database: `d.t`, or MySQL's `SHOW COLUMNS FROM t FROM d` (or `IN d`), which names another database's table as well.
 */
function showTables(text: string, tokens: Token[], verb: string, dialect: SqlDialect): string[] {
  if (verb !== 'show') {
    const at = tableAt(text, tokens, 1, dialect);
    return at ? [at.ref] : [];
  }
  const what = tokens[1]?.text;
  for (let k = 1; k < tokens.length; k++) {
    const t = tokens[k];
    if (t.kind === 'word' && (t.text === 'from' || t.text === 'in' || t.text === 'table' || t.text === 'view')) {
      const at = tableAt(text, tokens, k + 1, dialect);
      // SHOW TABLES FROM db names a database, not a table: only the first FROM/IN after COLUMNS/INDEX/KEYS counts
      if (at && (t.text === 'table' || t.text === 'view' || ['columns', 'fields', 'index', 'indexes', 'keys', 'full'].includes(what ?? ''))) {
        const next = tokens[at.next];
        const db = next?.kind === 'word' && (next.text === 'from' || next.text === 'in') ? tableAt(text, tokens, at.next + 1, dialect) : null;
        if (!db) return [at.ref];
        // Both named (`FROM d1.t FROM d2`): each must be allowed.
        const { name } = splitRef(at.ref);
        return [...new Set([tableRef(splitRef(db.ref).name, name), at.ref])];
      }
    }
  }
  return [];
}

// --- parsers -----------------------------------------------------------------------------------

const requireCjs = createRequire(import.meta.url);
let pgParse: ((sql: string) => pg.Statement[]) | null = null;
const nspParsers = new Map<string, { astify(sql: string): unknown }>();

function pgsqlParse(sql: string): pg.Statement[] {
  if (!pgParse) pgParse = (requireCjs('pgsql-ast-parser') as typeof pg).parse;
  return pgParse(sql);
}

const NSP_BUILD: Record<SqlDialect, string> = { postgres: 'postgresql', sqlite: 'sqlite', mysql: 'mysql' };

function nspAstify(sql: string, dialect: SqlDialect): unknown {
  let p = nspParsers.get(dialect);
  if (!p) {
    const { Parser } = requireCjs(`node-sql-parser/build/${NSP_BUILD[dialect]}.js`) as { Parser: new () => { astify(sql: string): unknown } };
    p = new Parser();
    nspParsers.set(dialect, p);
  }
  return p.astify(sql);
}

/** Why node-sql-parser's reading of this text could differ from the database's, or null. */
function nspUnsafe(risks: LexicalRisks, dialect: SqlDialect): string | null {
  if (risks.backslashInString) return 'a backslash in a string literal';
  if (risks.dashDashNoSpace) return "'--' without a following space";
  if (risks.hashOutsideComment && dialect !== 'mysql') return "a '#' outside a comment";
  if (risks.dollarQuote) return 'a dollar-quoted string';
  if (risks.quotedUpper && dialect === 'postgres') return 'a quoted name with capital letters';
  if (risks.onlyKeyword) return 'ONLY';
  return null;
}

/** The statement with each :name marker replaced by something the parser reads as a value. */
function withPlaceholders(text: string, dialect: SqlDialect, style: 'dollar' | 'qmark' | 'one'): string {
  const { pieces, refs } = scanMarkers(text, dialect);
  let out = pieces[0];
  for (let m = 0; m < refs.length; m++) {
    out += (style === 'dollar' ? `$${refs[m] + 1}` : style === 'qmark' ? '?' : '1') + pieces[m + 1];
  }
  return out;
}

function parse(text: string, dialect: SqlDialect, risks: LexicalRisks, scan: StatementScan): { q: Query; parser: StatementAnalysis['parser'] } {
  let first = '';
  // Whether a parser read the text at all: when one did, a later failure (lowering a construct the
  // description does not cover) is the gateway declining, not a syntax error.
  let read = false;
  if (dialect !== 'mysql') {
    try {
      const stmts = pgsqlParse(withPlaceholders(text, dialect, 'dollar'));
      read = true;
      if (stmts.length !== 1) throw new AnalysisError('more than one statement', scan);
      return { q: lowerPgStatement(stmts[0], dialect), parser: 'pgsql-ast-parser' };
    } catch (e) {
      if (e instanceof AnalysisError) throw e;
      first = firstLine(e);
    }
  }
  const unsafe = nspUnsafe(risks, dialect);
  if (unsafe) throw new AnalysisError(`could not parse the statement${first ? ` (${first})` : ''}; the fallback parser is not used with ${unsafe}`, scan);
  try {
    const ast = nspAstify(withPlaceholders(text, dialect, dialect === 'mysql' ? 'qmark' : dialect === 'postgres' ? 'dollar' : 'one'), dialect);
    read = true;
    const list = Array.isArray(ast) ? ast : [ast];
    if (list.length !== 1) throw new AnalysisError('more than one statement', scan);
    return { q: lowerNspTop(list[0] as Record<string, unknown>, dialect), parser: 'node-sql-parser' };
  } catch (e) {
    if (e instanceof AnalysisError) throw e;
    throw new AnalysisError(`could not parse the statement: ${first ? `${first}; ` : ''}${firstLine(e)}`, scan, !read);
  }
}

function firstLine(e: unknown): string {
  const m = e instanceof Error ? e.message : String(e);
  const line = m.split('\n')[0];
  return line.length > 160 ? `${line.slice(0, 160)}…` : line;
}
