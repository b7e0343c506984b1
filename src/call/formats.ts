// In charge of turning a result set (column names and rows of JS values) into response text: JSON,
// NDJSON, CSV and TSV, with writers compiled once per column set.
//
// Value rules (the reference's formats.py, adapted to the values our sources hand over):
// - null/undefined → JSON null, empty CSV field. Non-finite numbers likewise (Python would print NaN).
// - bigint → a JSON number when it is a safe integer, otherwise a JSON string of its digits (JSON
//   readers would round it); CSV always prints the digits.
// - Date → "YYYY-MM-DD HH:MM:SS" from its UTC fields: the sources hand timestamps without a zone as
//   Dates holding the wall-clock value in UTC, and the reference drops any zone without converting.
//   CSV/TSV add ".ffffff" when there are milliseconds, as Python's str(datetime) does. Invalid → null.
// - Buffer/Uint8Array/ArrayBuffer → UTF-8 decoded, bad bytes as U+FFFD, a BOM kept (Python's
//   decode('utf-8', 'replace')).
// - Arrays and plain objects (JSON columns) → a JSON string of them, in every format (the contract:
//   nested values become a JSON string). Other objects → String(value).
// - Booleans → true/false in JSON; True/False in CSV/TSV, as Python's csv module writes them.
// - JSON and NDJSON are compact (no spaces) and keep non-ASCII as UTF-8; the reference's byte spelling
//   (ensure_ascii, ", " in NDJSON) is not part of the contract. Keys follow the column order.
// - CSV and TSV follow Python's csv module defaults (the reference): a header row, every row ending
//   "\r\n", a field quoted only when it holds the delimiter, a double quote, CR or LF, inner quotes
//   doubled; TSV is the same with a tab delimiter (no backslash escaping). A row of one empty field is
//   written `""` so it is not a blank line.
// - A page with no rows: the reference answers {"message": "No results returned"} as JSON whatever the
//   format (internals §1.3 step 21), so writeEmpty() gives that for every format. A stream with no rows
//   sends just `head` (the CSV/TSV header; nothing for NDJSON).

import { GatewayError } from '../contract/errors.js';

export type Format = 'json' | 'ndjson' | 'csv' | 'tsv' | 'xml' | 'yaml' | 'xlsx' | 'parquet';

/** Every format a call may ask for. xml, yaml, xlsx and parquet are written in call/formats/. */
export const FORMATS: readonly Format[] = ['json', 'ndjson', 'csv', 'tsv', 'xml', 'yaml', 'xlsx', 'parquet'];

export const CONTENT_TYPES: Readonly<Record<Format, string>> = {
  json: 'application/json',
  ndjson: 'application/x-ndjson',
  csv: 'text/csv; charset=utf-8',
  tsv: 'text/tab-separated-values; charset=utf-8',
  xml: 'application/xml', // UTF-8, as its declaration says
  yaml: 'application/x-yaml', // YAML is UTF-8
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  parquet: 'application/vnd.apache.parquet',
};

export const EMPTY_JSON = '{"message": "No results returned"}';

type Rows = readonly (readonly unknown[])[];

/**
 * A compiled writer: call it with a page of rows for the whole body. With `maxBytes` it stops as soon
 * as the body passes that many UTF-8 bytes (`answer_too_large`), never building the rest.
 */
export interface Writer {
  (rows: Rows, maxBytes?: number): string;
  readonly format: Format;
  readonly contentType: string;
  /** What a stream sends first: the CSV/TSV header line, '[' for JSON, '' for NDJSON. */
  readonly head: string;
  /** The rows alone, for a stream chunk (CSV/TSV/NDJSON lines; JSON objects joined by ','). */
  chunk(rows: Rows): string;
}

/** The body and content type for a page with no rows (the same for every format). */
export function writeEmpty(_format: Format): { body: string; contentType: string } {
  return EMPTY_RESULT;
}

const EMPTY_RESULT = Object.freeze({ body: EMPTY_JSON, contentType: CONTENT_TYPES.json });

/** Repeated names get a suffix: id, id_2, id_3; a suffix already taken moves on to the next number. */
export function uniqueColumnNames(columns: readonly string[]): string[] {
  const seen = new Map<string, number>();
  const taken = new Set<string>();
  const out: string[] = [];
  for (const column of columns) {
    const name = String(column);
    let n = (seen.get(name) ?? 0) + 1;
    let candidate = n === 1 ? name : `${name}_${n}`;
    while (taken.has(candidate)) candidate = `${name}_${++n}`;
    seen.set(name, n);
    taken.add(candidate);
    out.push(candidate);
  }
  return out;
}

/** Builds the per-column-set state once (JSON keys pre-escaped, the CSV header) and returns the writer. */
export function compileWriter(columns: readonly string[], format: Format): Writer {
  const names = uniqueColumnNames(columns);
  switch (format) {
    case 'json': {
      const rowsText = jsonRows(names, ',');
      return writer(format, '[', (rows, max) => `[${rowsText(rows, max)}]`, rowsText);
    }
    case 'ndjson': {
      const lines = jsonRows(names, '\n');
      const chunk = (rows: Rows, max?: number): string => (rows.length ? `${lines(rows, max)}\n` : '');
      return writer(format, '', chunk, chunk);
    }
    case 'csv':
    case 'tsv': {
      const delimiter = format === 'csv' ? ',' : '\t';
      const needsQuotes = format === 'csv' ? /[",\r\n]/ : /[\t"\r\n]/;
      const head = `${delimitedRow(names, delimiter, needsQuotes)}\r\n`;
      const chunk = (rows: Rows, max = Number.POSITIVE_INFINITY): string => {
        let out = '';
        for (let r = 0; r < rows.length; r++) {
          const row = rows[r];
          let line = '';
          for (let c = 0; c < names.length; c++) {
            if (c) line += delimiter;
            line += delimitedField(textValue(row[c]), needsQuotes);
          }
          out += `${line === '' && names.length === 1 ? '""' : line}\r\n`;
          if (out.length > max) throw answerTooLarge(max);
        }
        return out;
      };
      return writer(format, head, (rows, max) => head + chunk(rows, max), chunk);
    }
    default:
      throw new Error(`unknown format ${String(format)}`);
  }
}

type Render = (rows: Rows, maxBytes?: number) => string;

function writer(format: Format, head: string, body: Render, chunk: (rows: Rows) => string): Writer {
  const limited: Render = (rows, maxBytes) => {
    const text = body(rows, maxBytes);
    return maxBytes === undefined ? text : withinBytes(text, maxBytes);
  };
  return Object.assign(limited, { format, contentType: CONTENT_TYPES[format], head, chunk });
}

/**
 * The writers count UTF-16 units as they go (a string's length, no extra work), which never exceeds
 * its UTF-8 bytes, so passing `maxBytes` units is over for certain. A finished body is at most 3 bytes
 * a unit, so only one longer than a third of the limit is measured exactly.
 */
function withinBytes(text: string, maxBytes: number): string {
  if (text.length * 3 > maxBytes && Buffer.byteLength(text) > maxBytes) throw answerTooLarge(maxBytes);
  return text;
}

/** The error for an answer past QUERYAPIGATE_MAX_ANSWER_BYTES, pointing at what does fit. */
export function answerTooLarge(maxBytes: number): GatewayError {
  return new GatewayError(
    'answer_too_large',
    `The answer is larger than this server's limit of ${byteText(maxBytes)} (QUERYAPIGATE_MAX_ANSWER_BYTES): ask for a smaller page_size, or export the whole result with ?stream=true`,
  );
}

function byteText(n: number): string {
  if (n % (1 << 20) === 0) return `${n / (1 << 20)} MiB`;
  if (n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

/** Rows as JSON objects joined by `separator`. Keys are escaped once; a row is plain concatenation. */
function jsonRows(names: string[], separator: string): Render {
  const n = names.length;
  if (n === 0) {
    return (rows, max = Number.POSITIVE_INFINITY) => {
      let out = '';
      for (let r = 0; r < rows.length; r++) {
        out += `${r ? separator : ''}{}`;
        if (out.length > max) throw answerTooLarge(max);
      }
      return out;
    };
  }
  // keys[0] = '{"a":', keys[c] = ',"b":'
  const keys = names.map((name, c) => `${c ? ',' : '{'}${JSON.stringify(name)}:`);
  return (rows, max = Number.POSITIVE_INFINITY) => {
    let out = '';
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r];
      if (r) out += separator;
      for (let c = 0; c < n; c++) out += keys[c] + jsonValue(row[c]);
      out += '}';
      if (out.length > max) throw answerTooLarge(max); // stop at the limit: the rest is never built
    }
    return out;
  };
}

/** One value as JSON text. */
export function jsonValue(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'number':
      return Number.isFinite(v) ? String(v) : 'null';
    case 'boolean':
      return v ? 'true' : 'false';
    case 'bigint':
      return v >= -9007199254740991n && v <= 9007199254740991n ? v.toString() : `"${v.toString()}"`;
    case 'object': {
      if (v === null) return 'null';
      if (v instanceof Date) {
        const text = formatDateTime(v);
        return text === null ? 'null' : `"${text}"`; // digits, '-', ':' and ' ' need no escaping
      }
      return JSON.stringify(objectText(v));
    }
    case 'undefined':
      return 'null';
    default:
      return JSON.stringify(String(v));
  }
}

/** One value as CSV/TSV text, before quoting (also the text of a value in xml and in untyped cells). */
export function textValue(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
      return Number.isFinite(v) ? String(v) : '';
    case 'boolean':
      return v ? 'True' : 'False';
    case 'bigint':
      return v.toString();
    case 'object': {
      if (v === null) return '';
      if (v instanceof Date) {
        const text = formatDateTime(v);
        if (text === null) return '';
        const ms = v.getUTCMilliseconds();
        return ms ? `${text}.${String(ms * 1000).padStart(6, '0')}` : text;
      }
      return objectText(v);
    }
    case 'undefined':
      return '';
    default:
      return String(v);
  }
}

const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });

/** Bytes decoded, JSON-like values as JSON text, anything else through String(). */
function objectText(v: object): string {
  if (v instanceof Uint8Array) return utf8.decode(v);
  if (v instanceof ArrayBuffer) return utf8.decode(new Uint8Array(v));
  if (Array.isArray(v)) return nestedJson(v);
  const proto = Object.getPrototypeOf(v);
  if (proto === Object.prototype || proto === null) return nestedJson(v);
  return String(v);
}

function nestedJson(v: object): string {
  return JSON.stringify(v, nestedReplacer) ?? 'null';
}

/** Inside a nested value: bigints as numbers (or digit strings past 2^53), Dates as our datetime text. */
function nestedReplacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  if (typeof value === 'bigint') {
    return value >= -9007199254740991n && value <= 9007199254740991n ? Number(value) : value.toString();
  }
  const original = this[key];
  if (original instanceof Date) return formatDateTime(original);
  return value;
}

function delimitedRow(fields: readonly string[], delimiter: string, needsQuotes: RegExp): string {
  let line = '';
  for (let c = 0; c < fields.length; c++) line += (c ? delimiter : '') + delimitedField(fields[c], needsQuotes);
  return line === '' && fields.length === 1 ? '""' : line;
}

function delimitedField(text: string, needsQuotes: RegExp): string {
  return needsQuotes.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** '00'..'99', so a date costs no number-to-string work. */
const TWO_DIGITS = Array.from({ length: 100 }, (_, n) => (n < 10 ? '0' : '') + n);

/** "YYYY-MM-DD HH:MM:SS" from the Date's UTC fields (no zone, no fraction); null for an invalid Date. */
export function formatDateTime(d: Date): string | null {
  const t = d.getTime();
  if (Number.isNaN(t)) return null;
  const y = d.getUTCFullYear();
  const year = y >= 1000 && y <= 9999 ? TWO_DIGITS[(y / 100) | 0] + TWO_DIGITS[y % 100] : (y < 0 ? '-' : '') + String(Math.abs(y)).padStart(4, '0');
  return (
    year +
    '-' +
    TWO_DIGITS[d.getUTCMonth() + 1] +
    '-' +
    TWO_DIGITS[d.getUTCDate()] +
    ' ' +
    TWO_DIGITS[d.getUTCHours()] +
    ':' +
    TWO_DIGITS[d.getUTCMinutes()] +
    ':' +
    TWO_DIGITS[d.getUTCSeconds()]
  );
}
