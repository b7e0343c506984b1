// In charge of the plan stage: deciding once per saved-query version and connection what a call needs: the
// statement's governance reading (writes, tables, lineage), the positional SQL (plain and paged),
// the parameter binder, and the row writers. Built on the first call and cached; the per-call path
// only checks the caller's grants against it and fills values.
import { inspectStatement, type Inspection } from '../governance/analysis.js';
import { checkSingleStatement } from '../governance/policy.js';
import type { Dialect } from '../sources/types.js';
import type { VersionRow } from '../store/types.js';
import type { LRUCache } from 'lru-cache';
import { GatewayError } from '../contract/errors.js';
import type { Format } from './formats.js';
import { type AnyWriter, compileAnyWriter } from './formats/index.js';
import { compileBinder } from './binder.js';
import { type ClaimParam, claimParams } from './claims.js';
import type { ParamRule } from './paramValues.js';
import { toPositional } from '../governance/markers.js';

export interface CallPlan {
  /** Identifies the plan in the caches built on it (mask traces). */
  id: string;
  bind: ReturnType<typeof compileBinder>;
  /** Parameters bound from the caller's sign-in token (`from_claim`); empty for nearly every version. */
  claims: ClaimParam[];
  /** The statement's distinct parameter names, in first-use order (declared or not: the binder's inputs). */
  params: string[];
  inspection: Inspection;
  /** True when the statement writes (its verb, a write hidden in a CTE, SELECT INTO, ...). */
  write: boolean;
  /** SELECT and WITH page inside the database; other reads (SHOW, EXPLAIN, ...) are sliced here. */
  pageable: boolean;
  /** The statement as saved, for writes and unpageable reads (no paging window). */
  text: string;
  order: number[];
  /** The statement inside the page window: two more values, limit (page_size + 1) and offset. */
  pagedText: string;
  /**
   * The first page's window: one more value, the limit, and no OFFSET. PostgreSQL plans a statement
   * with OFFSET $n afresh on every execution (a generic plan counts the unknown offset as a row more
   * than a custom plan does, so it never wins); without it the prepared statement settles on its
   * generic plan after five calls. Measured on the pgbench lookup: 221 against 79 µs of the
   * database's CPU a call (bench/threads.ts).
   */
  firstPageText: string;
  writers: Map<string, AnyWriter>;
  /** The writer writerFor gave last, with the column list (by identity) and format it was for. */
  lastWriter: { columns: string[]; format: Format; writer: AnyWriter } | null;
}

/** What a plan is cached under: a version runs the same way on every connection of one dialect, but each is kept apart. */
export function planKey(version: Pick<VersionRow, 'uuid'>, connection: string, dialect: Dialect): string {
  return `${version.uuid}\u0000${connection}\u0000${dialect}`;
}

/** The plan for this version on this connection, built on its first call (or ahead of it, call/planWarmer.ts) and cached. */
export function planFor(plans: LRUCache<string, CallPlan>, version: VersionRow, connection: string, dialect: Dialect): CallPlan {
  const key = planKey(version, connection, dialect);
  let plan = plans.get(key);
  if (!plan) {
    plan = planCall(key, version, dialect);
    plans.set(key, plan);
  }
  return plan;
}

/** `version` is a saved version, or an ad-hoc statement (no declared parameters: every marker is required). */
export function planCall(id: string, version: VersionRow | { sql: string; parameters: null }, dialect: Dialect): CallPlan {
  const sql = version.sql.replace(/[\s;]+$/, '');
  const inspection = inspectStatement(sql, dialect);
  checkSingleStatement(inspection.scan);
  // Markers are scanned in the connection's dialect, so values line up with the positional text.
  const { text, order, placeholders } = toPositional(sql, dialect);
  const bind = compileBinder(placeholders, version.parameters as Record<string, ParamRule>);
  const verb = inspection.scan.verb;
  const write = inspection.scan.writeVerbs.length > 0 || inspection.scan.selectInto;
  // Paging runs inside the statement's own row window: the saved statement, LIMIT included, is a
  // subquery and the page is cut from its rows. One row more than the page tells X-Has-More.
  const n = order.length;
  const [limit, offset] = dialect === 'postgres' ? [`$${n + 1}`, `$${n + 2}`] : ['?', '?'];
  return {
    id,
    bind,
    claims: claimParams(placeholders, version.parameters as Record<string, unknown> | null),
    params: placeholders,
    inspection,
    write,
    pageable: !write && (verb === 'select' || verb === 'with'),
    text,
    order,
    pagedText: `SELECT * FROM (\n${text}\n) AS _qag_page LIMIT ${limit} OFFSET ${offset}`,
    firstPageText: `SELECT * FROM (\n${text}\n) AS _qag_page LIMIT ${limit}`,
    writers: new Map(),
    lastWriter: null,
  };
}

/**
 * The writer for these columns in this format, compiled once per plan. Sources hand the same column
 * list (the same array) for every run of a statement, so the last one is found without a key.
 */
export function writerFor(plan: CallPlan, columns: string[], format: Format): AnyWriter {
  const last = plan.lastWriter;
  if (last !== null && last.columns === columns && last.format === format) return last.writer;
  const slot = `${format}\u0000${columns.join('\u0000')}`;
  let w = plan.writers.get(slot);
  if (!w) {
    if (plan.writers.size > 16) plan.writers.clear(); // columns change only when the schema does
    w = compileAnyWriter(columns, format);
    plan.writers.set(slot, w);
  }
  plan.lastWriter = { columns, format, writer: w };
  return w;
}

/**
 * A source's refusal of a bound value names its position in the positional text (`$2`); the caller
 * named parameters, so its `errors` are keyed by those names. Any other error passes as it is.
 */
export function namedParamError(plan: CallPlan, e: unknown): unknown {
  if (!(e instanceof GatewayError) || e.code !== 'param_invalid' || !e.extras?.errors) return e;
  const errors: Record<string, string> = {};
  const names: string[] = [];
  for (const [key, problem] of Object.entries(e.extras.errors)) {
    const at = /^\$(\d+)$/.exec(key);
    const slot = at ? plan.order[Number(at[1]) - 1] : undefined;
    const name = slot === undefined ? key : plan.params[slot];
    errors[name] = problem;
    names.push(`${name} ${problem}`);
  }
  return new GatewayError('param_invalid', `Invalid parameters: ${names.join('; ')}`, { ...e.extras, errors });
}

/**
 * Bound values in the statement's placeholder order, with the paging window's when `paged`: the
 * limit, and the offset unless it is 0 (pagedStatement gives the text they go with).
 */
export function fillValues(plan: CallPlan, bound: unknown[], limit: number, offset: number, paged = plan.pageable): unknown[] {
  const order = plan.order;
  const n = order.length;
  const values = new Array(paged ? (offset ? n + 2 : n + 1) : n);
  for (let i = 0; i < n; i++) values[i] = bound[order[i]];
  if (paged) {
    values[n] = limit;
    if (offset) values[n + 1] = offset;
  }
  return values;
}

/** The text fillValues' values (paged as the plan says) go with. */
export function pagedStatement(plan: CallPlan, offset: number): string {
  return !plan.pageable ? plan.text : offset ? plan.pagedText : plan.firstPageText;
}
