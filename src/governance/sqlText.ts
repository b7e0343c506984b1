// In charge of the lexical pieces both SQL scanners share (governance/scan.ts for the guards,
// governance/markers.ts for bind markers and statement splitting): where a quoted run, a line comment,
// a block comment or a postgres dollar quote that starts at `i` ends. An unterminated one runs to the end.

/** Characters that may continue an unquoted identifier (so a `$` or quote after one is not an opener). */
export function isIdentChar(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x5f || (c >= 0x30 && c <= 0x39) || c === 0x24 || c >= 0x80;
}

export function endOfLine(sql: string, i: number): number {
  const nl = sql.indexOf('\n', i);
  return nl === -1 ? sql.length : nl;
}

/** Index just past the quoted run starting at `i` (a doubled quote stays inside; `backslash`: \ escapes). */
export function endOfQuoted(sql: string, i: number, quote: number, backslash: boolean): number {
  const len = sql.length;
  let j = i + 1;
  while (j < len) {
    const c = sql.charCodeAt(j);
    if (backslash && c === 0x5c) j += 2;
    else if (c === quote) {
      if (sql.charCodeAt(j + 1) === quote) j += 2;
      else return j + 1;
    } else j++;
  }
  return len;
}

/** A `/* ... *\/` comment at `i`; `nested`: comments nest (postgres). */
export function endOfBlockComment(sql: string, i: number, nested: boolean): number {
  if (!nested) {
    const end = sql.indexOf('*/', i + 2);
    return end === -1 ? sql.length : end + 2;
  }
  let depth = 1;
  let j = i + 2;
  const len = sql.length;
  while (j < len) {
    const c = sql.charCodeAt(j);
    if (c === 0x2f && sql.charCodeAt(j + 1) === 0x2a) {
      depth++;
      j += 2;
    } else if (c === 0x2a && sql.charCodeAt(j + 1) === 0x2f) {
      j += 2;
      if (--depth === 0) return j;
    } else j++;
  }
  return len;
}

/** A postgres dollar-quoted string at `i` ($$ or $tag$); returns `i` when `$` opens none (e.g. `$1`, `a$b$`). */
export function endOfDollarQuote(sql: string, i: number): number {
  if (i > 0 && isIdentChar(sql.charCodeAt(i - 1))) return i;
  let j = i + 1;
  const first = sql.charCodeAt(j);
  if (first >= 0x30 && first <= 0x39) return i;
  while (j < sql.length && isIdentChar(sql.charCodeAt(j)) && sql.charCodeAt(j) !== 0x24) j++;
  if (sql.charCodeAt(j) !== 0x24) return i;
  const delimiter = sql.slice(i, j + 1);
  const close = sql.indexOf(delimiter, j + 1);
  return close === -1 ? sql.length : close + delimiter.length;
}
