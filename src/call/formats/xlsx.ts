// In charge of format=xlsx: one sheet, 'result', a header row, then a row per result row, with typed
// cells. Library: exceljs, the maintained, widely used xlsx writer for Node (SheetJS's npm package
// stopped at 0.18.5). Its streaming WorkbookWriter is used even for a page: rows are serialised as
// they are added instead of kept as a workbook model. It is not offered for ?stream=true: measured,
// its zip output stays inside exceljs until the workbook is committed (51 KB of a 2.6 MB file out
// after 100,000 rows, memory growing with them), so it would not stream in bounded memory, and
// xlsx streams are refused as the contract says (invalid_stream).
//
// Cells: numbers as numbers (a 64-bit integer past 2^53 stays its exact digit string, as in JSON:
// Excel would round it); booleans as booleans; dates and timestamps as Excel dates (yyyy-mm-dd,
// yyyy-mm-dd hh:mm:ss), also when the source hands them over as text (a PostgreSQL date, an SQLite
// timestamp column); NULL as an empty cell; anything else as its CSV text (JSON, bytes decoded as
// UTF-8, times), with the characters XML cannot carry replaced by U+FFFD.
import { createRequire } from 'node:module';
import { PassThrough } from 'node:stream';
import type ExcelJSModule from 'exceljs';
import type { ColumnTypes } from '../../sources/types.js';
import { answerTooLarge, textValue, uniqueColumnNames } from '../formats.js';
import { dateMsOf, ownBytes, timestampDateOf, xmlSafe } from './values.js';

type Rows = readonly (readonly unknown[])[];

const DATE_FORMAT = 'yyyy-mm-dd';
const TIMESTAMP_FORMAT = 'yyyy-mm-dd hh:mm:ss';

/** exceljs, required on the first xlsx answer: loaded up front it costs every thread about 27 MB of RSS. */
let excel: typeof ExcelJSModule | null = null;
const requireCjs = createRequire(import.meta.url);

/**
 * A page as an xlsx file; past `maxBytes` of output it is answer_too_large. The bytes are counted as
 * exceljs hands them out (most come at the commit, as its zip holds them till then): once over, no
 * more is kept and no more rows are added.
 */
export async function writeXlsx(
  columns: readonly string[],
  rows: Rows,
  hints: ColumnTypes | undefined,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<Uint8Array> {
  const names = uniqueColumnNames(columns).map(xmlSafe);
  const kinds = names.map((_, c) => hints?.[c]?.kind);
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  let bytes = 0;
  out.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes <= maxBytes) chunks.push(chunk);
    else chunks.length = 0;
  });
  const ended = new Promise<void>((resolve, reject) => {
    out.on('end', resolve);
    out.on('error', reject);
  });
  excel ??= requireCjs('exceljs') as typeof ExcelJSModule;
  const book = new excel.stream.xlsx.WorkbookWriter({ stream: out, useStyles: true, useSharedStrings: false });
  const sheet = book.addWorksheet('result');
  sheet.columns = names.map((header, c) => ({
    header,
    style: kinds[c] === 'date' ? { numFmt: DATE_FORMAT } : kinds[c] === 'timestamp' ? { numFmt: TIMESTAMP_FORMAT } : {},
  }));
  const width = names.length;
  const cells = new Array<unknown>(width);
  for (let r = 0; r < rows.length && bytes <= maxBytes; r++) {
    const row = rows[r];
    const loose: number[] = []; // cells holding a Date the column's style does not format
    for (let c = 0; c < width; c++) {
      const cell = cellValue(row[c], kinds[c]);
      cells[c] = cell;
      if (cell instanceof Date && kinds[c] !== 'date' && kinds[c] !== 'timestamp') loose.push(c);
    }
    const added = sheet.addRow(cells);
    for (const c of loose) added.getCell(c + 1).numFmt = TIMESTAMP_FORMAT;
    added.commit();
  }
  sheet.commit();
  await book.commit();
  await ended;
  if (bytes > maxBytes) throw answerTooLarge(maxBytes);
  return ownBytes(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
}

/** One value as the cell exceljs writes: number, boolean, Date, string or null. */
function cellValue(v: unknown, kind: string | undefined): unknown {
  switch (typeof v) {
    case 'number':
      return Number.isFinite(v) ? v : null;
    case 'boolean':
      return v;
    case 'bigint':
      return v >= -9007199254740991n && v <= 9007199254740991n ? Number(v) : v.toString();
    case 'undefined':
      return null;
    case 'string':
      if (kind === 'date') {
        const ms = dateMsOf(v);
        if (ms !== null) return new Date(ms);
      } else if (kind === 'timestamp') {
        const d = timestampDateOf(v);
        if (d) return d;
      }
      return xmlSafe(v);
    default:
      if (v === null) return null;
      if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v;
      return xmlSafe(textValue(v));
  }
}
