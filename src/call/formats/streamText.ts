// In charge of a text stream's rows as bytes (CSV, TSV, NDJSON for ?stream=true): rows are written
// straight into a frame's buffer, the same bytes the text writers of formats.ts give once the HTTP
// layer has encoded their strings, with no string built per row or per chunk.
//
// The writers of formats.ts build a chunk as one string, which is then cloned to the acceptor and
// encoded to UTF-8 by uWS: measured on a 3-column export, that chain cost about as much CPU as the
// driver reading the rows. Here the common values (ASCII strings, integers, Dates, booleans, null) are
// written byte by byte; anything else goes through the writers' own value functions (textValue,
// jsonValue), so the rules live in one place. Strings are encoded as uWS encodes a JS string (UTF-8,
// a lone surrogate as its 3-byte form), so a stream has exactly the bytes of the paged answer.
//
// Raw rows (a source's values as the bytes of their text, StreamOptions.raw) are copied where the
// column's kind says the bytes are already the text the writer would give (plain ASCII text,
// integers, decimals in their shortest form, booleans, timestamps of the usual shape), and read into
// values for the rest: no string, number or Date is made for the common columns at all.
import type { RawColumn } from '../../sources/types.js';
import { formatDateTime, jsonValue, textValue, uniqueColumnNames } from '../formats.js';

type Rows = readonly (readonly unknown[])[];

/** Where rows are written: a buffer and the next free byte in it. */
export interface ByteSink {
  buf: Uint8Array;
  pos: number;
}

/**
 * Writes rows of one column set into a sink. `write(rows, from, sink)` writes rows[from], rows[from + 1],
 * ... while each whole row fits, and answers the index of the first row not written (rows.length when
 * all were); a row that did not fit leaves no bytes behind. A row that fits in no buffer of `size`
 * bytes can be measured with `rowBytes` to get one that does.
 */
export interface TextRowEncoder {
  readonly format: 'csv' | 'tsv' | 'ndjson';
  write(rows: Rows, from: number, sink: ByteSink): number;
  /** The exact bytes one row takes. */
  rowBytes(row: readonly unknown[]): number;
}

const TAB = 9;
const LF = 10;
const CR = 13;
const QUOTE = 34;
const COMMA = 44;
const BACKSLASH = 92;
/** A row that does not fit: a position no buffer has. */
const FULL = -1;

/** RawColumn kinds as numbers, for the row writers' switch. */
const OTHER = 0;
const TEXT = 1;
const INTEGER = 2;
const BOOLEAN = 3;
const TIMESTAMP = 4;
const DECIMAL = 5;
const KINDS: Record<RawColumn['kind'], number> = { other: OTHER, text: TEXT, integer: INTEGER, decimal: DECIMAL, boolean: BOOLEAN, timestamp: TIMESTAMP };

/** The encoder of rows of these columns; with `raw`, of raw rows (see RawColumn), one per column. */
export function compileTextRowEncoder(columns: readonly string[], format: 'csv' | 'tsv' | 'ndjson', raw?: readonly RawColumn[]): TextRowEncoder {
  const names = uniqueColumnNames(columns);
  const n = names.length;
  const kinds = raw ? names.map((_, c) => KINDS[raw[c]?.kind ?? 'other']) : null;
  const reads = raw ? names.map((_, c) => raw[c]?.read ?? ((b: Uint8Array) => b)) : null;
  let row: (r: readonly unknown[], buf: Uint8Array, p: number) => number;
  if (format === 'ndjson') {
    // keys[0] = '{"a":', keys[c] = ',"b":', as bytes; no columns: '{}' per row.
    const keys = names.map((name, c) => encode(`${c ? ',' : '{'}${JSON.stringify(name)}:`));
    row = (r, buf, p) => {
      if (n === 0) p = putBytes(buf, p, EMPTY_OBJECT);
      for (let c = 0; c < n && p !== FULL; c++) {
        p = putBytes(buf, p, keys[c]);
        if (p === FULL) break;
        const v = r[c];
        p = kinds && v !== null && v !== undefined ? putRawJson(buf, p, v as Uint8Array, kinds[c], reads![c]) : putJson(buf, p, v);
      }
      if (n && p !== FULL) p = putByte(buf, p, 125); // }
      return p === FULL ? FULL : putByte(buf, p, LF);
    };
  } else {
    const delimiter = format === 'csv' ? COMMA : TAB;
    const needsQuotes = format === 'csv' ? /[",\r\n]/ : /[\t"\r\n]/;
    row = (r, buf, p) => {
      const start = p;
      for (let c = 0; c < n && p !== FULL; c++) {
        if (c) p = putByte(buf, p, delimiter);
        if (p === FULL) break;
        const v = r[c];
        p =
          kinds && v !== null && v !== undefined
            ? putRawField(buf, p, v as Uint8Array, kinds[c], reads![c], delimiter, needsQuotes)
            : putField(buf, p, v, delimiter, needsQuotes);
      }
      if (n === 1 && p === start) p = putBytes(buf, p, EMPTY_FIELD); // a lone empty field is "", not a blank line
      if (p !== FULL) p = putByte(buf, p, CR);
      return p === FULL ? FULL : putByte(buf, p, LF);
    };
  }
  return {
    format,
    write(rows, from, sink) {
      const buf = sink.buf;
      let i = from;
      for (; i < rows.length; i++) {
        const p = row(rows[i]!, buf, sink.pos);
        if (p === FULL) break;
        sink.pos = p;
      }
      return i;
    },
    rowBytes(r) {
      // Big enough for any row: every UTF-16 unit takes at most 3 bytes, quoted and escaped at most 6.
      let size = 1024;
      for (;;) {
        const p = row(r, new Uint8Array(size), 0);
        if (p !== FULL) return p;
        size *= 4;
      }
    },
  };
}

const EMPTY_OBJECT = encode('{}');
const EMPTY_FIELD = encode('""');
const NULL = encode('null');
const TRUE_JSON = encode('true');
const FALSE_JSON = encode('false');
const TRUE_TEXT = encode('True');
const FALSE_TEXT = encode('False');

function encode(text: string): Uint8Array {
  const out = new Uint8Array(text.length * 3);
  return out.subarray(0, putString(out, 0, text));
}

function putByte(buf: Uint8Array, p: number, b: number): number {
  if (p >= buf.length) return FULL;
  buf[p] = b;
  return p + 1;
}

function putBytes(buf: Uint8Array, p: number, bytes: Uint8Array): number {
  const n = bytes.length;
  if (p + n > buf.length) return FULL;
  for (let i = 0; i < n; i++) buf[p + i] = bytes[i]!;
  return p + n;
}

/**
 * A string as UTF-8, as uWS writes a JS string: a surrogate pair as 4 bytes, any other unit of 0x800
 * and up (a lone surrogate included) as 3.
 */
function putString(buf: Uint8Array, p: number, s: string): number {
  const n = s.length;
  if (p + n > buf.length) return FULL;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) {
      if (p >= buf.length) return FULL;
      buf[p++] = c;
    } else if (c < 0x800) {
      if (p + 2 > buf.length) return FULL;
      buf[p++] = 0xc0 | (c >> 6);
      buf[p++] = 0x80 | (c & 0x3f);
    } else {
      const d = c >= 0xd800 && c < 0xdc00 && i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (d >= 0xdc00 && d < 0xe000) {
        if (p + 4 > buf.length) return FULL;
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        buf[p++] = 0xf0 | (cp >> 18);
        buf[p++] = 0x80 | ((cp >> 12) & 0x3f);
        buf[p++] = 0x80 | ((cp >> 6) & 0x3f);
        buf[p++] = 0x80 | (cp & 0x3f);
        i++;
      } else {
        if (p + 3 > buf.length) return FULL;
        buf[p++] = 0xe0 | (c >> 12);
        buf[p++] = 0x80 | ((c >> 6) & 0x3f);
        buf[p++] = 0x80 | (c & 0x3f);
      }
    }
  }
  return p;
}

/** An integer's digits (|v| < 2^31, as `(v | 0) === v` says). */
function putInt(buf: Uint8Array, p: number, v: number): number {
  if (v < 0) {
    if (p >= buf.length) return FULL;
    buf[p++] = 45; // -
    v = -v;
  }
  let digits = 1;
  for (let x = v; x >= 10; x = Math.floor(x / 10)) digits++;
  if (p + digits > buf.length) return FULL;
  for (let i = p + digits - 1; i >= p; i--) {
    const q = Math.floor(v / 10);
    buf[i] = 48 + v - q * 10;
    v = q;
  }
  return p + digits;
}

function put2(buf: Uint8Array, p: number, v: number): void {
  const q = (v / 10) | 0;
  buf[p] = 48 + q;
  buf[p + 1] = 48 + v - q * 10;
}

/**
 * A valid Date of year 1000..9999 as "YYYY-MM-DD HH:MM:SS" (formatDateTime's text), and when `fraction`
 * and it has milliseconds ".mmm000" (textValue's); answers null for any other Date so the caller takes
 * the general path.
 */
function putDate(buf: Uint8Array, p: number, d: Date, fraction: boolean): number | null {
  const y = d.getUTCFullYear();
  if (!(y >= 1000 && y <= 9999)) return null; // NaN (an invalid Date) too
  const ms = fraction ? d.getUTCMilliseconds() : 0;
  const size = ms ? 26 : 19;
  if (p + size > buf.length) return FULL;
  put2(buf, p, (y / 100) | 0);
  put2(buf, p + 2, y % 100);
  buf[p + 4] = 45;
  put2(buf, p + 5, d.getUTCMonth() + 1);
  buf[p + 7] = 45;
  put2(buf, p + 8, d.getUTCDate());
  buf[p + 10] = 32;
  put2(buf, p + 11, d.getUTCHours());
  buf[p + 13] = 58;
  put2(buf, p + 14, d.getUTCMinutes());
  buf[p + 16] = 58;
  put2(buf, p + 17, d.getUTCSeconds());
  if (ms) {
    buf[p + 19] = 46;
    buf[p + 20] = 48 + ((ms / 100) | 0);
    put2(buf, p + 21, ms % 100);
    buf[p + 23] = 48;
    buf[p + 24] = 48;
    buf[p + 25] = 48;
  }
  return p + size;
}

/** One CSV/TSV field: textValue's text, quoted as formats.ts quotes it. */
function putField(buf: Uint8Array, p: number, v: unknown, delimiter: number, needsQuotes: RegExp): number {
  if (typeof v === 'string') {
    // ASCII that needs no quotes, copied as it is read; anything else is taken again below.
    const n = v.length;
    if (p + n <= buf.length) {
      let i = 0;
      for (; i < n; i++) {
        const c = v.charCodeAt(i);
        if (c >= 0x80 || c === QUOTE || c === delimiter || c === CR || c === LF) break;
        buf[p + i] = c;
      }
      if (i === n) return p + n;
    }
    return putString(buf, p, needsQuotes.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
  }
  if (typeof v === 'number' && (v | 0) === v) return putInt(buf, p, v);
  if (v === null || v === undefined) return p;
  if (v instanceof Date) {
    const q = putDate(buf, p, v, true);
    if (q !== null) return q;
  }
  if (typeof v === 'boolean') return putBytes(buf, p, v ? TRUE_TEXT : FALSE_TEXT);
  const text = textValue(v);
  return putString(buf, p, needsQuotes.test(text) ? `"${text.replace(/"/g, '""')}"` : text);
}

/** One value as JSON: jsonValue's text. */
function putJson(buf: Uint8Array, p: number, v: unknown): number {
  if (typeof v === 'string') {
    // ASCII that JSON.stringify leaves alone, copied as it is read; anything else goes to it.
    const n = v.length;
    if (p + n + 2 <= buf.length) {
      buf[p] = QUOTE;
      let i = 0;
      for (; i < n; i++) {
        const c = v.charCodeAt(i);
        if (c >= 0x80 || c < 0x20 || c === QUOTE || c === BACKSLASH) break;
        buf[p + 1 + i] = c;
      }
      if (i === n) {
        buf[p + 1 + n] = QUOTE;
        return p + n + 2;
      }
    }
    return putString(buf, p, JSON.stringify(v));
  }
  if (typeof v === 'number' && (v | 0) === v) return putInt(buf, p, v);
  if (v === null || v === undefined) return putBytes(buf, p, NULL);
  if (v instanceof Date) {
    if (p + 2 > buf.length) return FULL;
    buf[p] = QUOTE;
    const q = putDate(buf, p + 1, v, false);
    if (q === FULL) return FULL;
    if (q !== null) return putByte(buf, q, QUOTE);
    const text = formatDateTime(v);
    return text === null ? putBytes(buf, p, NULL) : putString(buf, p, `"${text}"`);
  }
  if (typeof v === 'boolean') return putBytes(buf, p, v ? TRUE_JSON : FALSE_JSON);
  return putString(buf, p, jsonValue(v));
}

/** What the copy functions answer for bytes that are not theirs to copy: the value is read instead. */
const NOT_PLAIN = -2;

/** Copies bytes that are plain for CSV/TSV (ASCII, no delimiter, quote, CR or LF); NOT_PLAIN for others. */
function copyPlainField(buf: Uint8Array, p: number, v: Uint8Array, delimiter: number): number {
  const n = v.length;
  if (p + n > buf.length) return FULL;
  for (let i = 0; i < n; i++) {
    const b = v[i]!;
    if (b >= 0x80 || b === QUOTE || b === delimiter || b === CR || b === LF) return NOT_PLAIN;
    buf[p + i] = b;
  }
  return p + n;
}

/** Copies bytes that JSON.stringify would leave as they are (ASCII but control characters, quote, backslash), quoted; NOT_PLAIN for others. */
function copyPlainJson(buf: Uint8Array, p: number, v: Uint8Array): number {
  const n = v.length;
  if (p + n + 2 > buf.length) return FULL;
  buf[p] = QUOTE;
  for (let i = 0; i < n; i++) {
    const b = v[i]!;
    if (b >= 0x80 || b < 0x20 || b === QUOTE || b === BACKSLASH) return NOT_PLAIN;
    buf[p + 1 + i] = b;
  }
  buf[p + 1 + n] = QUOTE;
  return p + n + 2;
}

/** Digits (with an optional '-') a safe integer is sure to have: at most 15 of them. */
function copyInteger(buf: Uint8Array, p: number, v: Uint8Array): number {
  const n = v.length;
  if (n > 16 || (n === 16 && v[0] !== 45)) return NOT_PLAIN;
  if (p + n > buf.length) return FULL;
  for (let i = 0; i < n; i++) buf[p + i] = v[i]!;
  return p + n;
}

/**
 * Copies a number's text that is already what String() gives for the number read from it: '-'?, an
 * integer part without leading zeros, and a fraction without trailing zeros, at most 15 significant
 * digits in all (so the number's shortest text has those very digits), not '-0', and not below 1e-6
 * (where String() turns to an exponent). NOT_PLAIN for any other text.
 */
function copyDecimal(buf: Uint8Array, p: number, v: Uint8Array): number {
  const n = v.length;
  let i = v[0] === 45 ? 1 : 0; // -
  const intStart = i;
  while (i < n && v[i]! >= 48 && v[i]! <= 57) i++;
  const intDigits = i - intStart;
  if (intDigits === 0 || (intDigits > 1 && v[intStart] === 48)) return NOT_PLAIN;
  let significant = v[intStart] === 48 ? 0 : intDigits;
  if (i < n) {
    if (v[i] !== 46 || i === n - 1 || v[n - 1] === 48) return NOT_PLAIN; // a point, then digits not ending in 0
    let zeros = 0;
    for (let j = i + 1; j < n; j++) {
      const d = v[j]!;
      if (d < 48 || d > 57) return NOT_PLAIN;
      if (significant > 0) significant++;
      else if (d === 48) zeros++;
      else significant = 1;
    }
    if (intDigits === 1 && v[intStart] === 48 && zeros > 5) return NOT_PLAIN;
  } else if (intStart === 1 && intDigits === 1 && v[1] === 48) return NOT_PLAIN; // -0
  if (significant > 15) return NOT_PLAIN;
  if (p + n > buf.length) return FULL;
  for (let j = 0; j < n; j++) buf[p + j] = v[j]!;
  return p + n;
}

/** True when the bytes are 'YYYY-MM-DD HH:MM:SS' with up to 6 fraction digits and a year of 1000 or later. */
function usualTimestamp(v: Uint8Array): boolean {
  const n = v.length;
  if (n < 19 || n > 26 || n === 20) return false;
  if (v[4] !== 45 || v[7] !== 45 || v[10] !== 32 || v[13] !== 58 || v[16] !== 58 || (n > 19 && v[19] !== 46)) return false;
  if (v[0]! < 49 || v[0]! > 57) return false; // a year from 1000
  for (let i = 0; i < n; i++) {
    if (i === 4 || i === 7 || i === 10 || i === 13 || i === 16 || i === 19) continue;
    if (v[i]! < 48 || v[i]! > 57) return false;
  }
  return true;
}

function putRawField(
  buf: Uint8Array,
  p: number,
  v: Uint8Array,
  kind: number,
  read: (b: Uint8Array) => unknown,
  delimiter: number,
  needsQuotes: RegExp,
): number {
  let q = NOT_PLAIN;
  switch (kind) {
    case TEXT:
      q = copyPlainField(buf, p, v, delimiter);
      break;
    case INTEGER:
      q = copyInteger(buf, p, v);
      break;
    case DECIMAL:
      q = copyDecimal(buf, p, v);
      break;
    case BOOLEAN:
      if (v.length === 1) return putBytes(buf, p, v[0] === 116 ? TRUE_TEXT : FALSE_TEXT);
      break;
    case TIMESTAMP:
      if (usualTimestamp(v)) {
        // The Date's text: the seconds as they are, and the milliseconds (the fraction cut to 3
        // digits) as textValue writes them, when there are any.
        const ms = v.length > 20 && (v[20] !== 48 || (v.length > 21 && v[21] !== 48) || (v.length > 22 && v[22] !== 48));
        if (p + (ms ? 26 : 19) > buf.length) return FULL;
        for (let i = 0; i < 19; i++) buf[p + i] = v[i]!;
        if (!ms) return p + 19;
        buf[p + 19] = 46;
        for (let i = 20; i < 23; i++) buf[p + i] = i < v.length ? v[i]! : 48;
        buf[p + 23] = 48;
        buf[p + 24] = 48;
        buf[p + 25] = 48;
        return p + 26;
      }
      break;
  }
  return q === NOT_PLAIN ? putField(buf, p, read(v), delimiter, needsQuotes) : q;
}

function putRawJson(buf: Uint8Array, p: number, v: Uint8Array, kind: number, read: (b: Uint8Array) => unknown): number {
  let q = NOT_PLAIN;
  switch (kind) {
    case TEXT:
      q = copyPlainJson(buf, p, v);
      break;
    case INTEGER:
      q = copyInteger(buf, p, v);
      break;
    case DECIMAL:
      q = copyDecimal(buf, p, v);
      break;
    case BOOLEAN:
      if (v.length === 1) return putBytes(buf, p, v[0] === 116 ? TRUE_JSON : FALSE_JSON);
      break;
    case TIMESTAMP:
      if (usualTimestamp(v)) {
        if (p + 21 > buf.length) return FULL;
        buf[p] = QUOTE;
        for (let i = 0; i < 19; i++) buf[p + 1 + i] = v[i]!;
        buf[p + 20] = QUOTE;
        return p + 21;
      }
      break;
  }
  return q === NOT_PLAIN ? putJson(buf, p, read(v)) : q;
}
