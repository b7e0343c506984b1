// In charge of the shape stage: a statement's rows made into the answer's body: the page cut (when
// the database could not cut it), masks applied before anything is rendered, the format written,
// and the paging headers. The contract's empty answer when no row is left. A body past `maxBytes`
// (QUERYAPIGATE_MAX_ANSWER_BYTES) is answer_too_large, found while it is written, not after.
import type { ResultSet } from '../sources/types.js';
import { answerTooLarge, CONTENT_TYPES, EMPTY_JSON, type Format } from './formats.js';
import { typesAfterMask } from './formats/index.js';
import type { Governed } from './govern.js';
import { writerFor, type CallPlan } from './plan.js';
import type { Paging } from './request.js';

/** The answer, and how many rows it holds (for the record and the metrics). */
export interface Shaped {
  status: number;
  headers: string[];
  /** Text; bytes for parquet; a promise of bytes for xlsx (its writer is asynchronous). */
  body: string | Uint8Array | Promise<Uint8Array>;
  rows: number;
}

export function shape(plan: CallPlan, result: ResultSet, paging: Paging, governed: Governed, format: Format, maxBytes: number): Shaped {
  const offset = (paging.page - 1) * paging.pageSize;
  let rows = plan.pageable || plan.write ? result.rows : result.rows.slice(offset, offset + paging.pageSize + 1);
  const hasMore = !plan.write && rows.length > paging.pageSize; // one row more than the page was asked for
  if (hasMore) rows.length = paging.pageSize;
  let columns = result.columns;
  if (governed.masker && rows.length) ({ columns, rows } = governed.masker(columns, rows)); // before any rendering
  const headers = [
    'Content-Type',
    CONTENT_TYPES.json,
    'X-Page',
    String(paging.page),
    'X-Page-Size',
    String(paging.pageSize),
    'X-Has-More',
    hasMore ? 'true' : 'false',
  ];
  if (plan.write) headers.push('X-Rows-Affected', String(result.rowCount));
  if (rows.length === 0) return { status: 200, headers, body: EMPTY_JSON, rows: 0 }; // the contract's empty answer, whatever the format
  headers[1] = CONTENT_TYPES[format];
  const writer = writerFor(plan, columns, format);
  if ('binary' in writer) {
    if (format === 'xlsx') headers.push('Content-Disposition', 'attachment;filename=result.xlsx'); // the contract's spelling
    return { status: 200, headers, body: writer(rows, typesAfterMask(result.columns, result.types, columns), maxBytes), rows: rows.length };
  }
  let body: string;
  try {
    body = writer(rows, maxBytes);
  } catch (e) {
    // A single row can be longer than V8 lets a string grow: that answer is too large as well.
    throw e instanceof RangeError ? answerTooLarge(maxBytes) : e;
  }
  return { status: 200, headers, body, rows: rows.length };
}
