// In charge of lowering a pgsql-ast-parser statement (PostgreSQL, SQLite) to the governance IR in
// lineage.ts. Statement kinds it does not know are refused, never guessed. Must not import HTTP/uWS or
// sources.
import type * as pg from 'pgsql-ast-parser';
import { type Cte, type Ex, type FromItem, type OutputKeys, pickedArgs, type Query, type SelCol } from './lineage.js';
import { tableRef } from './names.js';

export class LoweringError extends Error {}

/**
 * How names compare in the dialect being lowered, set by lowerPgStatement for the one synchronous
 * lowering it runs: PostgreSQL exactly as the parser folded them (unquoted to lower case, quoted as
 * written), SQLite case-insensitively.
 */
let caseless = false;

const SELECT_KINDS = new Set(['select', 'union', 'union all', 'values', 'with', 'with recursive']);

/** TRUNCATE, DROP or ALTER's CASCADE: it reaches the tables that refer to the ones named. */
function cascading(cascades: boolean): { cascades?: true } {
  return cascades ? { cascades: true } : {};
}

export function lowerPgStatement(st: pg.Statement, dialect: 'postgres' | 'sqlite'): Query {
  caseless = dialect === 'sqlite';
  if (SELECT_KINDS.has(st.type)) return lowerQuery(st as pg.SelectStatement);
  switch (st.type) {
    case 'insert':
    case 'update':
    case 'delete':
      return lowerWrite(st, []);
    case 'show':
      return { k: 'other', verb: null, tables: [], targets: [], inner: null };
    case 'truncate table':
      return { k: 'other', verb: 'truncate', tables: [], targets: st.tables.map(tableOf), inner: null, ...cascading(st.cascade === 'cascade') };
    case 'drop table':
      return { k: 'other', verb: 'drop', tables: [], targets: st.names.map(tableOf), inner: null, ...cascading(st.cascade === 'cascade') };
    case 'alter table': {
      const cascades = st.changes.some((c) => 'behaviour' in c && c.behaviour === 'cascade');
      return { k: 'other', verb: 'alter', tables: [], targets: [tableOf(st.table)], inner: null, ...cascading(cascades) };
    }
    case 'create index':
      return { k: 'other', verb: 'create', tables: [], targets: [tableOf(st.table)], inner: null };
    case 'create table':
      return { k: 'other', verb: 'create', tables: [], targets: [tableOf(st.name)], inner: null };
    case 'create view':
    case 'create materialized view':
      return { k: 'other', verb: 'create', tables: [], targets: [tableOf(st.name)], inner: lowerQuery(st.query) };
    default:
      throw new LoweringError(`statement kind '${st.type}' is not analysed`);
  }
}

/** A name as the analysis compares it; pgsql-ast-parser leaves a quoted name's doubled `""` as written. */
function lc(s: string): string {
  const name = s.includes('""') ? s.replaceAll('""', '"') : s;
  return caseless ? name.toLowerCase() : name;
}

/** A table name as the IR keeps it: its schema too, when written. */
function tableOf(n: { name: string; schema?: string }): string {
  return tableRef(n.schema ? lc(n.schema) : null, lc(n.name));
}

function lowerQuery(q: pg.SelectStatement | pg.WithStatementBinding): Query {
  switch (q.type) {
    case 'select':
      return lowerSelect(q, []);
    case 'union':
    case 'union all':
      return { k: 'setop', ctes: [], parts: flattenUnion(q), extra: [], compares: deduplicates(q) };
    case 'values':
      return { k: 'values', rows: q.values.map((row) => row.map((e) => lowerEx(e))) };
    case 'with': {
      const ctes: Cte[] = q.bind.map((b) => ({ name: lc(b.alias.name), cols: null, q: lowerQuery(b.statement), recursive: false }));
      return attachCtes(lowerQuery(q.in), ctes);
    }
    case 'with recursive': {
      const cte: Cte = { name: lc(q.alias.name), cols: q.columnNames.map((n) => lc(n.name)), q: lowerQuery(q.bind), recursive: true };
      return attachCtes(lowerQuery(q.in), [cte]);
    }
    case 'insert':
    case 'update':
    case 'delete':
      return lowerWrite(q, []);
    default:
      throw new LoweringError(`query kind '${(q as { type: string }).type}' is not analysed`);
  }
}

function attachCtes(q: Query, ctes: Cte[]): Query {
  if (q.k === 'select' || q.k === 'setop' || q.k === 'write') return { ...q, ctes: [...ctes, ...q.ctes] };
  // VALUES under WITH: keep the CTEs' tables by wrapping in a select over it
  return {
    k: 'select',
    ctes,
    from: [{ k: 'sub', q, alias: 'values', cols: null }],
    cols: [{ ex: emptyEx(), alias: null, star: { q: null }, implicitName: null }],
    extra: [],
    into: false,
  };
}

function flattenUnion(q: pg.SelectFromUnion): Query[] {
  const parts: Query[] = [];
  for (const side of [q.left, q.right]) {
    if (side.type === 'union' || side.type === 'union all') parts.push(...flattenUnion(side));
    else parts.push(lowerQuery(side));
  }
  return parts;
}

/** Whether some UNION in the chain (not UNION ALL) removes duplicates, which compares rows. */
function deduplicates(q: pg.SelectFromUnion): boolean {
  return q.type === 'union' || [q.left, q.right].some((side) => (side.type === 'union' || side.type === 'union all') && deduplicates(side));
}

function lowerSelect(s: pg.SelectFromStatement, ctes: Cte[]): Query {
  const from: FromItem[] = [];
  const extra: Ex[] = [];
  for (const f of s.from ?? []) {
    from.push(lowerFrom(f));
    if (f.join?.on) extra.push(lowerEx(f.join.on));
    // JOIN ... USING (c): c is read on both sides to match rows
    if (f.join?.using) extra.push({ ...emptyEx(), refs: f.join.using.map((n) => ({ q: null, name: lc(n.name) })) });
  }
  const cols: SelCol[] = (s.columns ?? []).map(lowerSelCol);
  const rest = emptyEx();
  walk(s.where, rest);
  walk(s.groupBy, rest);
  walk(s.having, rest);
  walk(s.orderBy, rest);
  walk(s.limit, rest);
  if (Array.isArray(s.distinct)) walk(s.distinct, rest);
  extra.push(rest);
  const q: Query = { k: 'select', ctes, from, cols, extra, into: false };
  if (s.distinct === 'distinct') q.distinct = true; // DISTINCT ON's expressions are among the predicates already
  const sortBy = (s.orderBy ?? []).map((o) => o.by);
  const keys = outputKeys([...(s.groupBy ?? []), ...(Array.isArray(s.distinct) ? s.distinct : [])], sortBy);
  if (keys) q.keys = keys;
  return q;
}

/** SelectQuery.keys: the items written as a bare position, and the unqualified names ORDER BY reads. */
function outputKeys(grouping: pg.Expr[], sorting: pg.Expr[]): OutputKeys | null {
  const position = (e: pg.Expr): number | null => (e.type === 'integer' ? e.value : null);
  const grouped = grouping.map(position).filter((n): n is number => n !== null);
  const sorted = sorting.map(position).filter((n): n is number => n !== null);
  const names = emptyEx();
  walk(sorting, names);
  const sortNames = names.refs.filter((r) => r.q === null && r.name !== '*').map((r) => r.name);
  return grouped.length || sorted.length || sortNames.length ? { grouped, sorted, sortNames } : null;
}

function lowerSelCol(c: pg.SelectedColumn): SelCol {
  const e = c.expr;
  if (e.type === 'ref' && e.name === '*') {
    return { ex: emptyEx(), alias: null, star: { q: e.table ? qualifier(e.table) : null }, implicitName: null };
  }
  const col: SelCol = { ex: lowerEx(e), alias: c.alias ? lc(c.alias.name) : null, implicitName: implicitName(e) };
  if (e.type === 'ref') col.bare = true;
  if (picks(e)) col.picks = true;
  return col;
}

/** SelCol.picks: the value is a column's or a constant, chosen by conditions; never computed. */
function picks(e: pg.Expr): boolean {
  switch (e.type) {
    case 'ref':
      return e.name !== '*';
    case 'string':
    case 'integer':
    case 'numeric':
    case 'boolean':
    case 'null':
    case 'parameter':
      return true;
    case 'case':
      return e.whens.every((w) => picks(w.value)) && (!e.else || picks(e.else));
    case 'call': {
      const values = e.function.schema ? null : pickedArgs(caseless ? 'sqlite' : 'postgres', lc(e.function.name), e.args);
      return values?.every(picks) === true;
    }
    default:
      return false;
  }
}

function implicitName(e: pg.Expr): string | null {
  if (e.type === 'ref') return lc(e.name);
  if (e.type === 'call') return lc(e.function.name);
  if (e.type === 'cast') return implicitName(e.operand);
  return null;
}

function lowerFrom(f: pg.From): FromItem {
  if (f.type === 'table') {
    return {
      k: 'table',
      name: lc(f.name.name),
      schema: f.name.schema ? lc(f.name.schema) : null,
      alias: f.name.alias ? lc(f.name.alias) : null,
      cols: f.name.columnNames ? f.name.columnNames.map((n) => lc(n.name)) : null,
    };
  }
  if (f.type === 'statement') {
    return { k: 'sub', q: lowerQuery(f.statement), alias: lc(f.alias), cols: f.columnNames ? f.columnNames.map((n) => lc(n.name)) : null };
  }
  const args = emptyEx();
  walk(f.args, args);
  return {
    k: 'func',
    name: lc(f.function.name),
    args,
    argc: f.args.length,
    alias: f.alias ? lc(f.alias.name) : null,
    cols: f.alias?.columns ? f.alias.columns.map((n) => lc(n.name)) : null,
    ordinality: !!f.withOrdinality,
  };
}

function lowerWrite(w: pg.InsertStatement | pg.UpdateStatement | pg.DeleteStatement, ctes: Cte[]): Query {
  const extra = emptyEx();
  const values = emptyEx();
  const returning = w.returning ? w.returning.map(lowerSelCol) : null;
  if (w.type === 'insert') {
    walk(w.onConflict, values); // DO UPDATE SET's values, and its WHERE with them: counted as written, the stricter side
    return {
      k: 'write',
      ctes,
      verb: 'insert',
      targets: [{ name: lc(w.into.name), schema: w.into.schema ? lc(w.into.schema) : null, alias: w.into.alias ? lc(w.into.alias) : null }],
      from: [],
      extra: [extra],
      values: [values],
      source: lowerQuery(w.insert),
      returning,
    };
  }
  if (w.type === 'update') {
    walk(w.sets, values);
    walk(w.where, extra);
    const from: FromItem[] = [];
    if (w.from) {
      from.push(lowerFrom(w.from));
      if (w.from.join) walk(w.from.join, extra);
    }
    return {
      k: 'write',
      ctes,
      verb: 'update',
      targets: [{ name: lc(w.table.name), schema: w.table.schema ? lc(w.table.schema) : null, alias: w.table.alias ? lc(w.table.alias) : null }],
      from,
      extra: [extra],
      values: [values],
      source: null,
      returning,
    };
  }
  walk(w.where, extra);
  return {
    k: 'write',
    ctes,
    verb: 'delete',
    targets: [{ name: lc(w.from.name), schema: w.from.schema ? lc(w.from.schema) : null, alias: w.from.alias ? lc(w.from.alias) : null }],
    from: [],
    extra: [extra],
    values: [],
    source: null,
    returning,
  };
}

/** A column's qualifier: an alias or table name, with its schema when written (`s.t.c`). */
function qualifier(t: { name: string; schema?: string }): string {
  return tableOf(t);
}

function emptyEx(): Ex {
  return { refs: [], subs: [], calls: [], opaque: false };
}

function lowerEx(e: pg.Expr | null): Ex {
  const ex = emptyEx();
  walk(e, ex);
  return ex;
}

/** Every ref, subquery and call under a node; unknown node kinds are walked field by field. */
function walk(node: unknown, ex: Ex): void {
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const n of node) walk(n, ex);
    return;
  }
  const n = node as { type?: unknown } & Record<string, unknown>;
  const type = n.type;
  if (type === 'ref') {
    const r = n as unknown as pg.ExprRef;
    ex.refs.push({ q: r.table ? qualifier(r.table) : null, name: r.name === '*' ? '*' : lc(r.name) });
    return;
  }
  if (typeof type === 'string' && (SELECT_KINDS.has(type) || type === 'insert' || type === 'update' || type === 'delete')) {
    ex.subs.push(lowerQuery(n as unknown as pg.SelectStatement));
    return;
  }
  if (type === 'array select') {
    ex.subs.push(lowerQuery((n as unknown as pg.ExprArrayFromSelect).select));
    return;
  }
  if (type === 'call') {
    const c = n as unknown as pg.ExprCall;
    ex.calls.push(lc(c.function.name));
    walk(c.args, ex);
    walk(c.filter, ex);
    walk(c.orderBy, ex);
    walk(c.withinGroup, ex);
    walk(c.over, ex);
    return;
  }
  for (const key in n) {
    if (key === '_location' || key === 'to' || key === 'dataType') continue;
    walk(n[key], ex);
  }
}
