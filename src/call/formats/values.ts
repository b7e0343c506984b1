// In charge of reading a value as the typed formats (xlsx, parquet) and XML need it: text safe to put
// in XML (the sheet's cells are XML too), integers and dates out of the text forms the sources hand
// over (a big integer as its digit string, a PostgreSQL date as 'YYYY-MM-DD', an SQLite timestamp as
// text), and bytes that own their buffer (so a thread hop clones only them).

/** Characters XML 1.0 does not allow, lone surrogates, and U+FFFE/U+FFFF. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it finds
const NOT_XML = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const NOT_XML_ALL = new RegExp(NOT_XML.source, 'g');

/** The text with every character XML cannot carry replaced by U+FFFD (as bytes that are not UTF-8 are). */
export function xmlSafe(text: string): string {
  return NOT_XML.test(text) ? text.replace(NOT_XML_ALL, '\uFFFD') : text;
}

const INTEGER = /^-?\d+$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATETIME = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$/;

/** An integer value as a bigint: a number that is an integer, a bigint, or a digit string; else null. */
export function integerOf(v: unknown): bigint | null {
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : null;
  if (typeof v === 'bigint') return v;
  if (typeof v === 'string' && INTEGER.test(v)) return BigInt(v);
  return null;
}

/** Milliseconds since 1970 of a calendar date at midnight UTC, from a Date or 'YYYY-MM-DD'; else null. */
export function dateMsOf(v: unknown): number | null {
  if (v instanceof Date) {
    const t = v.getTime();
    return Number.isNaN(t) ? null : t - (((t % 86400000) + 86400000) % 86400000);
  }
  if (typeof v !== 'string') return null;
  const m = DATE.exec(v);
  return m ? civil(+m[1], +m[2], +m[3], 0, 0, 0, 0) : null;
}

/**
 * Microseconds since 1970 of a wall-clock timestamp (the sources' Dates hold it in UTC), from a Date
 * or 'YYYY-MM-DD HH:MM:SS[.ffffff]' (SQLite's text form, which keeps the microseconds); else null.
 */
export function timestampUsOf(v: unknown): bigint | null {
  if (v instanceof Date) {
    const t = v.getTime();
    return Number.isNaN(t) ? null : BigInt(t) * 1000n;
  }
  if (typeof v !== 'string') return null;
  const m = DATETIME.exec(v);
  if (!m) return null;
  const ms = civil(+m[1], +m[2], +m[3], +m[4], +m[5], +m[6], 0);
  if (ms === null) return null;
  const micros = m[7] ? Number(`${m[7]}00000`.slice(0, 6)) : 0;
  return BigInt(ms) * 1000n + BigInt(micros);
}

/** The Date of a timestamp value (see timestampUsOf), to the millisecond; else null. */
export function timestampDateOf(v: unknown): Date | null {
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v;
  const us = timestampUsOf(v);
  return us === null ? null : new Date(Number(us / 1000n));
}

/** A valid calendar date-time in UTC as ms, or null (2024-02-30 is not one). */
function civil(y: number, mo: number, d: number, h: number, mi: number, s: number, ms: number): number | null {
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return null;
  const date = new Date(Date.UTC(2000, mo - 1, d, h, mi, s, ms));
  date.setUTCFullYear(y); // Date.UTC maps years 0..99 to 1900..1999
  return date.getUTCDate() === d ? date.getTime() : null;
}

/**
 * A decimal value as its unscaled integer at `scale` digits after the point (123.45 at 2 → 12345n),
 * read from the number's shortest text so 1.005 stays 1.005 (no float multiply); else null.
 */
export function unscaledOf(v: unknown, scale: number): bigint | null {
  let text: string;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return null;
    text = String(v);
    // Exponent forms: a huge float is an integer (its exact digits); a tiny one reads fine fixed.
    if (text.includes('e')) text = Number.isInteger(v) ? BigInt(v).toString() : v.toFixed(Math.min(100, scale + 1));
  } else if (typeof v === 'bigint') text = v.toString();
  else if (typeof v === 'string' && /^-?\d+(?:\.\d+)?$/.test(v)) text = v;
  else return null;
  const negative = text.startsWith('-');
  if (negative) text = text.slice(1);
  const dot = text.indexOf('.');
  const whole = dot === -1 ? text : text.slice(0, dot);
  let fraction = dot === -1 ? '' : text.slice(dot + 1);
  let roundUp = false;
  if (fraction.length > scale) {
    roundUp = fraction.charCodeAt(scale) >= 53; // '5': half away from zero
    fraction = fraction.slice(0, scale);
  }
  let n = BigInt(whole + fraction.padEnd(scale, '0'));
  if (roundUp) n += 1n;
  return negative ? -n : n;
}

/** Bytes in a buffer of their own, so a structured clone copies them and nothing around them. */
export function ownBytes(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
}
