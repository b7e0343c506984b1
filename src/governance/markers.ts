// In charge of reading SQL text lexically: `:name` bind markers and their positional rewrite per driver,
// statement splitting and the first keyword, all skipping string literals, quoted identifiers and comments.
//
// Run once per saved-query version (and dialect), never per call. It is a scanner, not a parser.
//
// Lexical rules, by dialect (none given = generic, the conservative common subset):
// - '...' strings with '' doubling everywhere; mysql also honours backslash escapes (\'), and so do
//   postgres E'...' strings. "..." and `...` are quoted identifiers ("..." is a string in mysql, with
//   backslash escapes); sqlite also has [bracketed] identifiers.
// - `--` starts a comment in postgres and sqlite; in mysql and generic only when followed by whitespace,
//   a control character or the end (as MySQL reads it and as the reference guard does), so `1--x` is not
//   a comment there and a `;` after it is not hidden. mysql also has `#` comments.
// - `/* ... */` comments; they nest in postgres only.
// - $$...$$ and $tag$...$tag$ dollar quoting in postgres only: in MySQL `$a$` is an identifier, so
//   treating it as a quote there would let a `;` hide from the single-statement guard.
// - A marker is `:` then [A-Za-z_][A-Za-z0-9_]*. `::` is consumed as a pair (a cast), so `x::int` and
//   `:a::text` bind only `a`.
//
// Names are ASCII (the reference's Python `\w` would also take non-ASCII letters).
// Callers must scan and rewrite with the same dialect: `toPositional(...).order` indexes the
// placeholders of `scanMarkers(sql, dialect)`, which it also returns.

import { endOfBlockComment, endOfDollarQuote, endOfLine, endOfQuoted, isIdentChar } from './sqlText.js';

export type MarkerDialect = 'postgres' | 'sqlite' | 'mysql';

export interface MarkerScan {
  /** Distinct marker names, in order of first use. */
  placeholders: string[];
  /** SQL text around the markers: `pieces.length === refs.length + 1`. */
  pieces: string[];
  /** For each marker occurrence, in order, its index in `placeholders`. */
  refs: number[];
}

export interface Positional {
  /** The statement with `$1..$n` (postgres) or `?` (sqlite, mysql) in place of the markers. */
  text: string;
  /** `order[k]` = index into `placeholders` of the value for positional slot k: bind `order.map(i => values[i])`. */
  order: number[];
  placeholders: string[];
}

const QUOTE = 0x27; // '
const DQUOTE = 0x22; // "
const BACKTICK = 0x60; // `
const BRACKET = 0x5b; // [
const DASH = 0x2d; // -
const HASH = 0x23; // #
const SLASH = 0x2f; // /
const STAR = 0x2a; // *
const DOLLAR = 0x24; // $
const COLON = 0x3a; // :
const SEMI = 0x3b; // ;
const LPAREN = 0x28;

function isNameStart(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x5f;
}

function isNameChar(c: number): boolean {
  return isNameStart(c) || (c >= 0x30 && c <= 0x39);
}

function isSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d);
}

/**
 * When a string, quoted identifier or comment starts at `i`, the index just past it; otherwise `i`.
 * Only called for characters that can open one.
 */
function skipOpaque(sql: string, i: number, dialect: MarkerDialect | undefined): number {
  switch (sql.charCodeAt(i)) {
    case QUOTE: {
      // postgres E'...' (not part of a longer word) honours backslash escapes
      const escaped =
        dialect === 'mysql' || (dialect === 'postgres' && (sql.charCodeAt(i - 1) | 0x20) === 0x65 && !(i > 1 && isIdentChar(sql.charCodeAt(i - 2))));
      return endOfQuoted(sql, i, QUOTE, escaped);
    }
    case DQUOTE:
      return endOfQuoted(sql, i, DQUOTE, dialect === 'mysql');
    case BACKTICK:
      return endOfQuoted(sql, i, BACKTICK, false);
    case BRACKET: {
      if (dialect !== 'sqlite') return i;
      const end = sql.indexOf(']', i + 1);
      return end === -1 ? sql.length : end + 1;
    }
    case DASH: {
      if (sql.charCodeAt(i + 1) !== DASH) return i;
      if (dialect === 'postgres' || dialect === 'sqlite') return endOfLine(sql, i + 2);
      const next = sql.charCodeAt(i + 2);
      return Number.isNaN(next) || next <= 0x20 ? endOfLine(sql, i + 2) : i; // NaN: end of input
    }
    case HASH:
      return dialect === 'mysql' ? endOfLine(sql, i + 1) : i;
    case SLASH:
      return sql.charCodeAt(i + 1) === STAR ? endOfBlockComment(sql, i, dialect === 'postgres') : i;
    case DOLLAR:
      return dialect === 'postgres' ? endOfDollarQuote(sql, i) : i;
    default:
      return i;
  }
}

/** True for the characters that can open a comment (as opposed to a literal or identifier). */
function opensComment(c: number): boolean {
  return c === DASH || c === HASH || c === SLASH;
}

/** Every `:name` marker outside literals and comments, with the text around them. */
export function scanMarkers(sql: string, dialect?: MarkerDialect): MarkerScan {
  const placeholders: string[] = [];
  const index = new Map<string, number>();
  const pieces: string[] = [];
  const refs: number[] = [];
  const len = sql.length;
  let last = 0;
  let i = 0;
  while (i < len) {
    const c = sql.charCodeAt(i);
    if (c === COLON) {
      const next = sql.charCodeAt(i + 1);
      if (next === COLON) {
        i += 2; // a `::` cast
        continue;
      }
      if (!isNameStart(next)) {
        i++;
        continue;
      }
      let end = i + 2;
      while (end < len && isNameChar(sql.charCodeAt(end))) end++;
      const name = sql.slice(i + 1, end);
      let k = index.get(name);
      if (k === undefined) {
        k = placeholders.length;
        index.set(name, k);
        placeholders.push(name);
      }
      pieces.push(sql.slice(last, i));
      refs.push(k);
      last = i = end;
      continue;
    }
    const j = skipOpaque(sql, i, dialect);
    i = j > i ? j : i + 1;
  }
  pieces.push(sql.slice(last));
  return { placeholders, pieces, refs };
}

/** The statement rewritten for the driver: `$k` per distinct name (postgres) or `?` per occurrence. */
export function toPositional(sql: string, dialect: MarkerDialect): Positional {
  const { placeholders, pieces, refs } = scanMarkers(sql, dialect);
  let text = pieces[0];
  let order: number[];
  if (dialect === 'postgres') {
    // Names are numbered in first-use order, so $k is placeholder k-1 and a repeat reuses its $k.
    for (let m = 0; m < refs.length; m++) text += `$${refs[m] + 1}${pieces[m + 1]}`;
    order = placeholders.map((_, k) => k);
  } else {
    for (let m = 0; m < refs.length; m++) text += `?${pieces[m + 1]}`;
    order = refs.slice();
  }
  return { text, order, placeholders };
}

/** The number of non-empty statements, splitting on `;` outside literals and comments. */
export function countStatements(sql: string, dialect?: MarkerDialect): number {
  return walkStatements(sql, dialect, false);
}

/**
 * True when a `;` outside literals and comments is followed by anything but whitespace, comments or
 * more `;` — so a trailing `;` (or `; -- note`) is one statement, `SELECT 1; SELECT 2` is two.
 */
export function splitsIntoMultipleStatements(sql: string, dialect?: MarkerDialect): boolean {
  return walkStatements(sql, dialect, true) !== 0;
}

/** Counts statements, or with `stopAtSplit` returns 1 at the first content after a `;` (else 0). */
function walkStatements(sql: string, dialect: MarkerDialect | undefined, stopAtSplit: boolean): number {
  const len = sql.length;
  let count = 0;
  let content = false; // the current statement has something besides whitespace and comments
  let afterSemicolon = false;
  let i = 0;
  while (i < len) {
    const c = sql.charCodeAt(i);
    if (isSpace(c)) {
      i++;
      continue;
    }
    if (c === SEMI) {
      if (content) count++;
      content = false;
      afterSemicolon = true;
      i++;
      continue;
    }
    const j = skipOpaque(sql, i, dialect);
    if (j > i && opensComment(c)) {
      i = j;
      continue;
    }
    if (afterSemicolon && stopAtSplit) return 1;
    content = true;
    i = j > i ? j : i + 1;
  }
  if (stopAtSplit) return 0;
  return content ? count + 1 : count;
}

/**
 * The first keyword, lower-cased, skipping leading whitespace, comments and `(`; '' when the statement
 * starts with anything else (a literal, a quoted name, a number). Starting with a quote gives '' rather
 * than looking past it (the reference masks it and reads on), so a read-only check treats it as a write.
 */
export function firstKeyword(sql: string, dialect?: MarkerDialect): string {
  const len = sql.length;
  let i = 0;
  while (i < len) {
    const c = sql.charCodeAt(i);
    if (isSpace(c) || c === LPAREN) {
      i++;
      continue;
    }
    if (opensComment(c)) {
      const j = skipOpaque(sql, i, dialect);
      if (j > i) {
        i = j;
        continue;
      }
    }
    break;
  }
  let end = i;
  while (end < len) {
    const c = sql.charCodeAt(end) | 0x20; // ASCII lower case
    if (c >= 0x61 && c <= 0x7a) end++;
    else break;
  }
  return sql.slice(i, end).toLowerCase();
}
