// In charge of deciding once per saved-query version and connection what a call needs: the
// positional SQL (plain and paged), the parameter binder, whether it writes, and the row writers.
// Built on the first call and cached; the per-call path only fills values.
import type { Dialect } from '../sources/types.js';
import type { VersionRow } from '../store/types.js';
import { CallError } from './errors.js';
import { compileWriter, type Format } from './formats.js';
import { compileBinder, type ParamRule } from './params.js';
import { firstKeyword, splitsIntoMultipleStatements, toPositional } from './sqlMarkers.js';

/** Statements that only read; anything else is a write and needs write permission. */
const READ_VERBS = new Set(['select', 'with', 'show', 'describe', 'desc', 'explain', 'values', 'table']);

export interface CallPlan {
  bind: ReturnType<typeof compileBinder>;
  verb: string;
  write: boolean;
  /** SELECT and WITH page inside the database; other reads (SHOW, EXPLAIN, ...) are sliced here. */
  pageable: boolean;
  /** The statement as saved, for writes and unpageable reads (no paging window). */
  text: string;
  order: number[];
  /** The statement inside the page window: two more values, limit (page_size + 1) and offset. */
  pagedText: string;
  pagedOrder: number[];
  writers: Map<string, (rows: unknown[][]) => string>;
}

export function planCall(version: VersionRow, dialect: Dialect): CallPlan {
  const sql = stripTrailingSemicolons(version.sql);
  if (splitsIntoMultipleStatements(sql, dialect)) throw new CallError('multiple_statements', 'Only one SQL statement is allowed');
  // Markers are scanned in the connection's dialect, so values line up with the positional text.
  const { text, order, placeholders } = toPositional(sql, dialect);
  const bind = compileBinder(placeholders, version.parameters as Record<string, ParamRule>);
  const verb = firstKeyword(sql, dialect);
  // Paging runs inside the statement's own row window: the saved statement, LIMIT included, is a
  // subquery and the page is cut from its rows. One row more than the page tells X-Has-More.
  const n = order.length;
  const window = dialect === 'postgres' ? `LIMIT $${n + 1} OFFSET $${n + 2}` : 'LIMIT ? OFFSET ?';
  return {
    bind,
    verb,
    write: !READ_VERBS.has(verb),
    pageable: verb === 'select' || verb === 'with',
    text,
    order,
    pagedText: `SELECT * FROM (\n${text}\n) AS _qag_page ${window}`,
    pagedOrder: order,
    writers: new Map(),
  };
}

/** The writer for these columns in this format, compiled once per plan. */
export function writerFor(plan: CallPlan, columns: string[], format: Format): (rows: unknown[][]) => string {
  const slot = format + '\u0000' + columns.join('\u0000');
  const have = plan.writers.get(slot);
  if (have) return have;
  if (plan.writers.size > 16) plan.writers.clear(); // columns change only when the schema does
  const w = compileWriter(columns, format);
  plan.writers.set(slot, w);
  return w;
}

function stripTrailingSemicolons(sql: string): string {
  return sql.replace(/[\s;]+$/, '');
}
