// In charge of format=xlsx: one sheet, 'result', a header row, then a row per result row, with typed
// cells; written whole for a page and as it goes for ?stream=true. Library: exceljs, the maintained,
// widely used xlsx writer for Node (SheetJS's npm package stopped at 0.18.5). Its streaming
// WorkbookWriter is used even for a page: rows are serialised as they are added instead of kept as a
// workbook model.
//
// A stream stays in bounded memory only if rows wait for the zip: exceljs 4.4 hands the sheet's XML
// to archiver's input (a PassThrough) without heeding its write() result, so rows added faster than
// zlib deflates them pile up there (measured: 1 MB of a 4.6 MB file out after 200,000 rows, array
// buffers growing by 7 MB per 50,000 rows). After each batch the stream waits for that input to
// drain; then the file comes out as the rows go in (4.55 MB of 4.58 MB out after 200,000 rows, no
// array buffers held) and only the last part (styles, workbook, zip directory) waits for the end.
//
// Cells: numbers as numbers (a 64-bit integer past 2^53 stays its exact digit string, as in JSON:
// Excel would round it); booleans as booleans; dates and timestamps as Excel dates (yyyy-mm-dd,
// yyyy-mm-dd hh:mm:ss), also when the source hands them over as text (a PostgreSQL date, an SQLite
// timestamp column); NULL as an empty cell; anything else as its CSV text (JSON, bytes decoded as
// UTF-8, times), with the characters XML cannot carry replaced by U+FFFD. The column formats come
// from the source's column types alone, so a stream types its columns as a page does.
import { createRequire } from 'node:module';
import { once } from 'node:events';
import { PassThrough, type Writable } from 'node:stream';
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
 * exceljs hands them out: once over, no more is kept and no more rows are added.
 */
export async function writeXlsx(
  columns: readonly string[],
  rows: Rows,
  hints: ColumnTypes | undefined,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<Uint8Array> {
  const book = openBook(columns, hints, maxBytes);
  for (let r = 0; r < rows.length && book.bytes <= maxBytes; r++) book.add(rows[r]);
  await book.commit();
  if (book.bytes > maxBytes) throw answerTooLarge(maxBytes);
  return book.take();
}

/** An xlsx file written as rows come: each call hands back the bytes the zip has let out since the last. */
export interface XlsxStream {
  rows(rows: Rows): Promise<Uint8Array>;
  /** The rest of the file; `truncatedAfter` (the row cap's count) goes in the document's description. */
  end(truncatedAfter: number | null): Promise<Uint8Array>;
}

/** The text a capped stream's workbook carries as its description (File > Info in Excel). */
export const truncatedNote = (rows: number) => `queryapigate.truncated: after ${rows} rows`;

export function openXlsxStream(columns: readonly string[], hints: ColumnTypes | undefined): XlsxStream {
  const book = openBook(columns, hints, Number.POSITIVE_INFINITY);
  const zipInput = book.zipInput();
  return {
    async rows(rows) {
      for (let r = 0; r < rows.length; r++) book.add(rows[r]);
      // The backpressure exceljs leaves out: wait until zlib has taken what was written.
      while (needsDrain(zipInput)) await once(zipInput, 'drain');
      return book.take();
    },
    async end(truncatedAfter) {
      if (truncatedAfter !== null) book.describe(truncatedNote(truncatedAfter));
      await book.commit();
      return book.take();
    },
  };
}

/** A writable's "write() said wait" flag (archiver's readable-stream PassThrough keeps it in _writableState). */
function needsDrain(w: Writable): boolean {
  return (w as unknown as { _writableState: { needDrain: boolean } })._writableState.needDrain;
}

/** exceljs's writer for one sheet of these columns, its output collected as it comes. */
function openBook(columns: readonly string[], hints: ColumnTypes | undefined, maxBytes: number) {
  const names = uniqueColumnNames(columns).map(xmlSafe);
  const kinds = names.map((_, c) => hints?.[c]?.kind);
  const out = new PassThrough();
  let chunks: Buffer[] = [];
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
  return {
    get bytes() {
      return bytes;
    },
    add(row: readonly unknown[]): void {
      const loose: number[] = []; // cells holding a Date the column's style does not format
      for (let c = 0; c < width; c++) {
        const cell = cellValue(row[c], kinds[c]);
        cells[c] = cell;
        if (cell instanceof Date && kinds[c] !== 'date' && kinds[c] !== 'timestamp') loose.push(c);
      }
      const added = sheet.addRow(cells);
      for (const c of loose) added.getCell(c + 1).numFmt = TIMESTAMP_FORMAT;
      added.commit();
    },
    /** The sheet's zip entry input: archiver's PassThrough the sheet's stream writes into (exceljs 4.4). */
    zipInput(): Writable {
      const pipes = (sheet as unknown as { stream: { pipes?: Writable[] } }).stream.pipes;
      const input = pipes?.[0];
      if (pipes?.length !== 1 || !input || typeof (input as Partial<{ _writableState: unknown }>)._writableState !== 'object') {
        // Another exceljs: streaming without a way to wait for the zip would not be bounded.
        throw new Error('exceljs: the worksheet stream is not piped into one zip entry as 4.4 does');
      }
      return input;
    },
    describe(text: string): void {
      (book as unknown as { description?: string }).description = text; // docProps/core.xml's dc:description
    },
    async commit(): Promise<void> {
      sheet.commit();
      await book.commit();
      await ended;
    },
    /** The bytes out since the last take, in a buffer of their own (a stream moves it to the acceptor). */
    take(): Uint8Array {
      const taken = chunks;
      chunks = [];
      if (taken.length === 0) return new Uint8Array(0);
      return ownBytes(taken.length === 1 ? taken[0] : Buffer.concat(taken));
    },
  };
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
