// In charge of lowering a node-sql-parser statement (MySQL/MariaDB, and PostgreSQL or SQLite text that
// pgsql-ast-parser can't read) to the governance IR in lineage.ts. Statement kinds it does not know are
// refused, never guessed. Must not import HTTP/uWS or sources.
import { type Cte, type Ex, type FromItem, type OutputKeys, pickedArgs, type Query, type SelCol } from './lineage.js';
import { LoweringError } from './lowerPg.js';
import { tableRef } from './names.js';

/**
 * Whether table, database and alias names keep their case, set by lowerNspStatement for the one
 * synchronous lowering it runs: on MySQL/MariaDB they compare per lower_case_table_names (decided
 * with the schema), so they stay as written; column names, and every name on SQLite and on
 * PostgreSQL text (which analysis.ts only hands over without mixed-case quoted names), fold to lower case.
 */
let tableCase = false;
/** The dialect lowerNspTop is lowering (set for its one synchronous pass, as tableCase is). */
let lowering: 'postgres' | 'sqlite' | 'mysql' = 'mysql';

/**
 * A node of node-sql-parser's AST. Its published types don't describe what every dialect build emits,
 * so a node's fields are unknown until narrowed, and taken as nodes where the grammar puts one.
 */
type Node = Record<string, unknown>;

/** A name as node-sql-parser spells it: a string, `{value}`, or `{expr: {value}}`. */
function ident(x: unknown): string | null {
  if (x === null || x === undefined) return null;
  if (typeof x === 'string') return x;
  if (typeof x === 'number') return String(x);
  if (typeof x === 'object') {
    const o = x as Node;
    if (o.expr !== undefined) return ident(o.expr);
    if (o.value !== undefined) return ident(o.value);
    if (o.column !== undefined) return ident(o.column);
  }
  return null;
}

function lcIdent(x: unknown): string | null {
  const s = ident(x);
  return s === null ? null : s.toLowerCase();
}

/** A table, database or alias name: as written on MySQL, folded elsewhere. */
function tblIdent(x: unknown): string | null {
  const s = ident(x);
  return s === null ? null : tableCase ? s : s.toLowerCase();
}

export function lowerNspTop(st: Node, dialect: 'postgres' | 'sqlite' | 'mysql'): Query {
  tableCase = dialect === 'mysql';
  lowering = dialect;
  return lowerNspStatement(st);
}

function lowerNspStatement(st: Node): Query {
  switch (st.type) {
    case 'select':
      return lowerSelectChain(st);
    case 'insert':
    case 'replace':
    case 'update':
    case 'delete':
      return lowerWrite(st);
    default:
      throw new LoweringError(`statement kind '${String(st.type)}' is not analysed`);
  }
}

function lowerCtes(withList: unknown): Cte[] {
  if (!Array.isArray(withList)) return [];
  return withList.map((w: Node) => {
    const stmt = ((w.stmt as Node | undefined)?.ast ?? w.stmt) as Node;
    const cols = Array.isArray(w.columns) ? w.columns.map((c: unknown) => lcIdent(c) ?? '?') : null;
    return { name: lcIdent(w.name) ?? '?', cols, q: lowerNspStatement(stmt), recursive: !!w.recursive };
  });
}

function lowerSelectChain(st: Node): Query {
  const ctes = lowerCtes(st.with);
  if (!st._next) return lowerSelect(st, ctes);
  const parts: Query[] = [];
  let compares = false;
  for (let n: Node | null = st; n; n = (n._next as Node | undefined) ?? null) {
    parts.push(lowerSelect(n, []));
    // set_op joins this part to the next: UNION [DISTINCT], INTERSECT, EXCEPT, MINUS compare rows; UNION ALL does not
    const op = String(n.set_op ?? 'union').toLowerCase();
    if (n._next && op.replace(/\s+/g, ' ') !== 'union all') compares = true;
  }
  return { k: 'setop', ctes, parts, extra: [], compares };
}

function lowerSelect(s: Node, ctes: Cte[]): Query {
  if (s.type !== 'select') return lowerNspStatement(s);
  const from: FromItem[] = [];
  const extra: Ex[] = [];
  const froms = openGroups(s.from);
  for (const f of froms) {
    const item = lowerFrom(f);
    if (item) from.push(item);
    if (f.on) extra.push(lowerEx(f.on));
    // TABLESAMPLE's arguments decide which rows come back, and may read any table: `SYSTEM ((SELECT ...))`.
    if (f.tablesample) extra.push(lowerEx(f.tablesample));
    // JOIN ... USING (c): c is read on both sides to match rows
    if (Array.isArray(f.using)) extra.push({ ...emptyEx(), refs: f.using.map((n: unknown) => ({ q: null, name: usingName(n) })) });
  }
  const cols: SelCol[] = [];
  if (s.columns === '*') cols.push({ ex: emptyEx(), alias: null, star: { q: null }, implicitName: null });
  else for (const c of (s.columns ?? []) as Node[]) cols.push(lowerSelCol(c));
  if (froms.some(isNatural)) extra.push(naturalMatch(from));
  const rest = emptyEx();
  for (const key of ['where', 'groupby', 'having', 'orderby', 'limit', 'window', 'qualify']) walk(s[key], rest);
  if (s.distinct && typeof s.distinct === 'object') walk(s.distinct, rest);
  extra.push(rest);
  const target = s.into as Node | null | undefined;
  const into = !!(target && (target.expr || target.type || target.keyword));
  const q: Query = { k: 'select', ctes, from, cols, extra, into };
  if (typeof s.distinct === 'string' && s.distinct.toUpperCase() === 'DISTINCT') q.distinct = true;
  const listed = (n: unknown): Node[] => (Array.isArray(n) ? n : Array.isArray((n as Node | null)?.columns) ? ((n as Node).columns as Node[]) : []);
  const grouping = listed(s.groupby);
  const distinctOn = typeof s.distinct === 'object' ? listed(s.distinct) : [];
  const sorting = (Array.isArray(s.orderby) ? s.orderby : []).map((o: Node) => o.expr as Node);
  const keys = outputKeys([...grouping, ...distinctOn.map((d) => (d.expr ?? d) as Node)], sorting);
  if (keys) q.keys = keys;
  return q;
}

/** SelectQuery.keys: the items written as a bare position, and the unqualified names ORDER BY reads. */
function outputKeys(grouping: Node[], sorting: Node[]): OutputKeys | null {
  const position = (e: Node | undefined): number | null => (e?.type === 'number' && Number.isInteger(e.value) ? Number(e.value) : null);
  const grouped = grouping.map(position).filter((n): n is number => n !== null);
  const sorted = sorting.map(position).filter((n): n is number => n !== null);
  const sortNames = lowerEx(sorting)
    .refs.filter((r) => r.q === null && r.name !== '*')
    .map((r) => r.name);
  return grouped.length || sorted.length || sortNames.length ? { grouped, sorted, sortNames } : null;
}

function lowerSelCol(c: Node): SelCol {
  const e = (c.expr ?? c) as Node;
  if (e.type === 'column_ref' && ident(e.column) === '*') {
    const table = tblIdent(e.table);
    return { ex: emptyEx(), alias: null, star: { q: table === null ? null : tableRef(tblIdent(e.schema) ?? tblIdent(e.db), table) }, implicitName: null };
  }
  const col: SelCol = { ex: lowerEx(e), alias: lcIdent(c.as), implicitName: implicitName(e) };
  if (e.type === 'column_ref') col.bare = true;
  if (picks(e)) col.picks = true;
  return col;
}

const CONSTANTS = new Set(['single_quote_string', 'double_quote_string', 'string', 'number', 'bool', 'null', 'origin']);

/** SelCol.picks: the value is a column's or a constant, chosen by conditions; never computed. */
function picks(e: Node): boolean {
  if (e.type === 'column_ref') return ident(e.column) !== '*';
  if (CONSTANTS.has(String(e.type))) return e.type !== 'origin' || e.value === '?';
  if (e.type === 'case') return ((e.args ?? []) as Node[]).every((arm) => picks((arm.result ?? {}) as Node));
  const qualified = (e.name as Node | null)?.name;
  if (e.type !== 'function' || (Array.isArray(qualified) && qualified.length !== 1)) return false;
  const values = pickedArgs(lowering, funcName(e), ((e.args as Node | undefined)?.value ?? []) as Node[]);
  return values?.every(picks) === true;
}

function implicitName(e: Node): string | null {
  if (e.type === 'column_ref') return lcIdent(e.column);
  if (e.type === 'function') return funcName(e);
  if (e.type === 'aggr_func') return String(e.name).toLowerCase();
  if (e.type === 'cast') return implicitName((e.expr ?? {}) as Node);
  return null;
}

function funcName(e: Node): string {
  const n = e.name as Node | string | null | undefined;
  if (typeof n === 'string') return n.toLowerCase();
  if (n && Array.isArray(n.name) && n.name.length) return String(n.name[n.name.length - 1].value).toLowerCase();
  return lcIdent(n) ?? '?';
}

/** `g(i, j)` as node-sql-parser keeps a PostgreSQL alias with a column list. */
function splitAlias(as: unknown): { alias: string | null; cols: string[] | null } {
  const a = tblIdent(as);
  if (a === null) return { alias: null, cols: null };
  const m = /^([^()]+)\(([^()]*)\)$/.exec(a);
  if (!m) return { alias: a, cols: null };
  return { alias: m[1].trim(), cols: m[2].split(',').map((s) => s.trim().replace(/^"|"$/g, '').toLowerCase()) };
}

/**
 * `a NATURAL JOIN b` reads here as `a` aliased NATURAL, joined to `b` with no ON, where PostgreSQL and SQLite match the
 * rows on every column the two share (which only the schema names). Whether a FROM item is such a left side.
 */
function isNatural(f: Node): boolean {
  return typeof f.as === 'string' && f.as.toLowerCase() === 'natural';
}

/** What a FROM list with a NATURAL JOIN matches rows by: the whole rows of its items (the shared columns among them). */
function naturalMatch(from: FromItem[]): Ex {
  const ex = emptyEx();
  for (const item of from) {
    const q = item.alias ?? (item.k === 'table' ? tableRef(item.schema, item.name) : item.k === 'func' ? item.name : null);
    if (q === null)
      ex.opaque = true; // a subquery without a name: what it shares can't be named
    else ex.refs.push({ q, name: '*' });
  }
  return ex;
}

/**
 * A FROM clause's items (or a write's tables), parenthesized groups opened. MariaDB reads `FROM (a, b)`, `FROM ((a))`
 * and `FROM (a JOIN b)`, which node-sql-parser gives as one object, not a list, its tables in `expr`: read as no FROM at
 * all, a key allowed only `a` read `b`. A group's own ON, USING or NATURAL follows its items, on an item of no table.
 */
function openGroups(from: unknown): Node[] {
  if (from === null || from === undefined) return [];
  const out: Node[] = [];
  for (const f of (Array.isArray(from) ? from : [from]) as Node[]) {
    if (!Array.isArray(f.expr)) {
      out.push(f);
      continue;
    }
    out.push(...openGroups(f.expr), ...openGroups(f.joins));
    if (f.on || f.using || f.join) out.push({ type: 'dual', on: f.on, using: f.using, join: f.join });
  }
  return out;
}

/** What a FROM item may carry besides TABLESAMPLE (read as a predicate where it is met): anything else is not analysed. */
const FROM_ITEM_KEYS = new Set(['type', 'db', 'schema', 'table', 'as', 'join', 'on', 'using', 'expr', 'prefix', 'tablesample', 'parentheses', 'joins']);

function lowerFrom(f: Node): FromItem | null {
  for (const key in f) {
    if (f[key] !== null && f[key] !== undefined && !FROM_ITEM_KEYS.has(key)) throw new LoweringError(`a FROM item's ${key} is not analysed`);
  }
  if (f.type === 'dual') return null;
  const { alias, cols } = splitAlias(isNatural(f) ? null : f.as);
  if (f.table !== undefined && f.expr === undefined) {
    const name = tblIdent(f.table);
    if (!name) throw new LoweringError('a table without a name');
    const schema = tblIdent(f.schema) ?? tblIdent(f.db);
    return { k: 'table', name, schema, alias, cols };
  }
  const e = f.expr as Node | undefined;
  if (e) {
    if (e.ast) return { k: 'sub', q: lowerNspStatement(e.ast as Node), alias, cols };
    if (e.type === 'select') return { k: 'sub', q: lowerNspStatement(e), alias, cols };
    if (e.type === 'values' && Array.isArray(e.values)) {
      const rows = e.values.map((row: Node) => (Array.isArray(row.value) ? row.value : [row]).map((x: Node) => lowerEx(x)));
      return { k: 'sub', q: { k: 'values', rows }, alias, cols };
    }
    if (e.type === 'function') {
      const args = emptyEx();
      walk(e.args, args);
      const argv = (e.args as Node | undefined)?.value;
      const argc = Array.isArray(argv) ? argv.length : 0;
      return { k: 'func', name: funcName(e), args, argc, alias, cols, ordinality: false };
    }
  }
  throw new LoweringError('a FROM item that is not analysed');
}

function lowerWrite(st: Node): Query {
  const ctes = lowerCtes(st.with);
  const extra = emptyEx();
  const targets: Array<{ name: string; schema: string | null; alias: string | null }> = [];
  const from: FromItem[] = [];
  let source: Query | null = null;
  const tableItems = openGroups(st.table);
  const fromItems = openGroups(st.from);
  if (st.type === 'delete' && fromItems.length) {
    // DELETE t1 FROM t1 JOIN t2 ...: targets may be aliases of the FROM items
    const lowered = fromItems.map((f) => {
      if (f.on) walk(f.on, extra);
      return lowerFrom(f);
    });
    for (const t of tableItems) {
      const name = tblIdent(t.table);
      const hit = lowered.find((l) => l && l.k === 'table' && (l.alias === name || l.name === name));
      if (hit && hit.k === 'table') targets.push({ name: hit.name, schema: hit.schema, alias: hit.alias });
      else if (name) targets.push({ name, schema: tblIdent(t.db), alias: null });
    }
    for (const l of lowered) if (l) from.push(l);
  } else {
    for (const t of tableItems) {
      const item = lowerFrom(t);
      if (t.on) walk(t.on, extra);
      if (item && item.k === 'table') targets.push({ name: item.name, schema: item.schema, alias: item.alias });
      else if (item) from.push(item);
    }
    for (const f of fromItems) {
      const item = lowerFrom(f);
      if (f.on) walk(f.on, extra);
      if (item) from.push(item);
    }
  }
  if (targets.length === 0) throw new LoweringError('a write without a target table');
  if (fromItems.some(isNatural) || tableItems.some(isNatural)) {
    const matched = naturalMatch(from);
    extra.refs.push(...matched.refs);
    extra.opaque ||= matched.opaque;
  }
  const stored = emptyEx();
  const values = st.values as Node | null | undefined;
  if (values && typeof values === 'object' && (values.type === 'select' || values.ast)) source = lowerNspStatement((values.ast ?? values) as Node);
  else walk(values, stored);
  for (const key of ['set', 'on_duplicate_update', 'conflict']) walk(st[key], stored);
  for (const key of ['where', 'orderby', 'limit']) walk(st[key], extra);
  let returning: SelCol[] | null = null;
  if (st.returning) {
    const ret = st.returning as Node;
    const cols = Array.isArray(ret.columns) ? ret.columns : Array.isArray(ret) ? ret : [];
    returning = cols.map(lowerSelCol);
  }
  return { k: 'write', ctes, verb: String(st.type), targets, from, extra: [extra], values: [stored], source, returning };
}

function emptyEx(): Ex {
  return { refs: [], subs: [], calls: [], opaque: false };
}

function lowerEx(e: unknown): Ex {
  const ex = emptyEx();
  walk(e, ex);
  return ex;
}

const SKIP_KEYS = new Set(['loc', 'tableList', 'columnList', 'target', 'dataType', 'suffix']);

function walk(node: unknown, ex: Ex): void {
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const n of node) walk(n, ex);
    return;
  }
  const n = node as Node;
  if (n.ast && typeof n.ast === 'object') {
    ex.subs.push(lowerNspStatement(n.ast as Node));
    return;
  }
  switch (n.type) {
    case 'column_ref': {
      const column = ident(n.column);
      if (column === null) {
        ex.opaque = true;
        return;
      }
      const table = tblIdent(n.table);
      const nsp = tblIdent(n.schema) ?? tblIdent(n.db);
      ex.refs.push({ q: table === null ? null : tableRef(nsp, table), name: column === '*' ? '*' : column.toLowerCase() });
      // An UPDATE's SET item is a column_ref carrying its new value: the value may read tables too.
      walk(n.value, ex);
      return;
    }
    case 'select':
    case 'insert':
    case 'update':
    case 'delete':
    case 'replace':
      ex.subs.push(lowerNspStatement(n));
      return;
    case 'function':
      ex.calls.push(funcName(n));
      walk(n.args, ex);
      walk(n.over, ex);
      return;
    case 'aggr_func':
      ex.calls.push(String(n.name).toLowerCase());
      walk(n.args, ex);
      walk(n.over, ex);
      walk(n.filter, ex);
      return;
    case 'double_quote_string':
      // MySQL under ANSI_QUOTES and SQLite read "x" as a column: count it as one, to be safe.
      ex.refs.push({ q: null, name: String(n.value).toLowerCase() });
      return;
    case 'star':
      ex.refs.push({ q: null, name: '*' });
      return;
  }
  for (const key in n) {
    if (SKIP_KEYS.has(key)) continue;
    walk(n[key], ex);
  }
}

/** A USING column as node-sql-parser gives it: a name, or a node holding one. */
function usingName(n: unknown): string {
  if (typeof n === 'string') return n.toLowerCase();
  const node = n as { value?: unknown; column?: unknown } | null;
  return String(node?.value ?? node?.column ?? '').toLowerCase();
}
