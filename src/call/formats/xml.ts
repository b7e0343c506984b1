// In charge of format=xml: <data><item><col>v</col>…</item></data> (the contract's shape). A writer
// of our own rather than a library: the document is one flat shape, and the only rules are XML's
// (names, escaping, characters it cannot carry), so a builder would add a dependency and a pass
// over every row for nothing.
// - Column names become XML names: characters a name cannot hold become '_', a name that cannot
//   start with its first character gets a leading '_', then repeats get the usual _2, _3.
// - A value is its CSV text (formats.ts textValue: timestamps, numbers, 64-bit integers, JSON,
//   bytes alike); NULL is an empty element <col/>. &, < and > are escaped, and CR as &#13; so a
//   parser's line-end normalisation keeps it; characters XML 1.0 cannot carry become U+FFFD.
import { textValue, uniqueColumnNames, type Writer } from '../formats.js';
import { CONTENT_TYPES } from '../formats.js';
import { xmlSafe } from './values.js';

type Rows = readonly (readonly unknown[])[];

const HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<data>';

/** A column name as an XML element name. */
export function xmlName(name: string): string {
  let out = name.replace(/[^\p{L}\p{N}_.\-\u00B7]/gu, '_');
  if (!/^[\p{L}_]/u.test(out)) out = `_${out}`;
  return out;
}

export function compileXmlWriter(columns: readonly string[]): Writer {
  const names = uniqueColumnNames(uniqueColumnNames(columns).map(xmlName));
  const open = names.map((n) => `<${n}>`);
  const close = names.map((n) => `</${n}>`);
  const empty = names.map((n) => `<${n}/>`);
  const chunk = (rows: Rows): string => {
    let out = '';
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r];
      out += '<item>';
      for (let c = 0; c < names.length; c++) {
        const v = row[c];
        out += v === null || v === undefined ? empty[c] : open[c] + escapeText(textValue(v)) + close[c];
      }
      out += '</item>';
    }
    return out;
  };
  return Object.assign((rows: Rows) => `${HEAD + chunk(rows)}</data>\n`, { format: 'xml' as const, contentType: CONTENT_TYPES.xml, head: HEAD, chunk });
}

function escapeText(text: string): string {
  const safe = xmlSafe(text);
  return /[&<>\r]/.test(safe) ? safe.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\r/g, '&#13;') : safe;
}
