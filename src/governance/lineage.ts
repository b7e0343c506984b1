// In charge of the one dialect-neutral description of a statement (the IR both parsers are lowered to)
// and of reading it: tables read and written, write verbs, table functions and output-column lineage.
// Policy code reads only what this computes. Must not import HTTP/uWS or sources.
import { tableRef } from './names.js';
import { readsOutsideTables } from './scan.js';

/**
 * A column reference: `q.name`, `name`, `q.*` (name '*'); `*` alone is count(*)'s. Names are as the
 * lowering folded them for the dialect (governance/lowerPg.ts, lowerNsp.ts) and compared exactly; `q`
 * is a table reference (names.ts: an alias, a table, or schema and table).
 */
export interface Ref {
  q: string | null;
  name: string;
}

/** What an expression reads: column refs, subqueries, functions called; opaque when not understood. */
export interface Ex {
  refs: Ref[];
  subs: Query[];
  calls: string[];
  opaque: boolean;
}

export interface SelCol {
  ex: Ex;
  alias: string | null;
  /** `*` (q null) or `q.*`. */
  star?: { q: string | null };
  /** The name the column gets without an alias (a plain ref's column, a function's name). */
  implicitName: string | null;
  /** A bare column reference (no cast, call or operator): its values are the referenced column's. */
  bare?: boolean;
  /**
   * Its values are its column references' own or constants, picked by conditions (a bare reference, a CASE's
   * results, COALESCE, NULLIF's first argument, IF/IIF, GREATEST/LEAST), never computed from them.
   */
  picks?: boolean;
}

export interface Cte {
  name: string;
  cols: string[] | null;
  q: Query;
  recursive: boolean;
}

export type FromItem =
  | { k: 'table'; name: string; schema: string | null; alias: string | null; cols: string[] | null }
  | { k: 'sub'; q: Query; alias: string | null; cols: string[] | null }
  | { k: 'func'; name: string; args: Ex; argc: number; alias: string | null; cols: string[] | null; ordinality: boolean };

export type Query =
  /** `distinct`: SELECT DISTINCT, which matches rows by every column it shows. */
  | { k: 'select'; ctes: Cte[]; from: FromItem[]; cols: SelCol[]; extra: Ex[]; into: boolean; distinct?: true; keys?: OutputKeys }
  /** `compares`: some operator matches rows across branches (UNION, INTERSECT, EXCEPT; not UNION ALL). */
  | { k: 'setop'; ctes: Cte[]; parts: Query[]; extra: Ex[]; compares: boolean }
  | { k: 'values'; rows: Ex[][] }
  | {
      k: 'write';
      ctes: Cte[];
      verb: string;
      targets: Array<{ name: string; schema: string | null; alias: string | null }>;
      from: FromItem[];
      extra: Ex[];
      /** The values it stores besides its source's rows: SET, VALUES lists, ON CONFLICT / ON DUPLICATE KEY updates. */
      values: Ex[];
      source: Query | null;
      returning: SelCol[] | null;
    }
  /** A statement with no rows to describe (SHOW, DESCRIBE, EXPLAIN, DDL): its tables and verb only. */
  | { k: 'other'; verb: string | null; tables: string[]; targets: string[]; inner: Query | null; cascades?: true };

/**
 * What a SELECT's GROUP BY, DISTINCT ON and ORDER BY name of its own output rather than of its tables (`ORDER BY 2`;
 * the names are read as expressions too, where an output's alias resolves: lineage.ts `resolve`). Both parsers hang a
 * set operation's ORDER BY on its last part, and cannot tell it from one in that part's parentheses.
 */
export interface OutputKeys {
  /** GROUP BY and DISTINCT ON items written as a position (1-based). */
  grouped: number[];
  /** ORDER BY items written as a position. */
  sorted: number[];
  /** Every unqualified name ORDER BY reads: over a set operation, the database may read it as the result's column. */
  sortNames: string[];
}

/** A base-table column an output is computed from; column '*' = every column of the table. */
export interface ColumnSource {
  /** The table as the statement names it (names.ts tableRef); the schema resolves it. */
  table: string;
  column: string;
  /**
   * False for a candidate of an unqualified name (or a name looked up behind `*`): the database takes
   * the innermost scope whose table has the column. The mask planner decides with the schema: among the
   * candidates of one reference (`ref`), it keeps those of the innermost `tier` (0 = the reference's
   * own FROM) whose table has the column.
   */
  exact: boolean;
  ref?: number;
  tier?: number;
  /** The name is also an output column's, so it may resolve to no table column (ORDER BY total). */
  optional?: boolean;
}

/**
 * One entry of a statement's output list. `direct` marks a column whose values are one source column's,
 * passed through unchanged (bare references all the way down), so it has that column's type; `picked` (which
 * `direct` implies) one whose values are its sources' unchanged or constants, chosen by conditions (SelCol.picks). `star` stands for every column of a base table (expanded by
 * the mask planner from the schema); `setop` for a UNION/INTERSECT/EXCEPT whose branches hold stars, so
 * columns line up only after expansion. `traced: false` means part of the column's lineage is unknown.
 */
export type OutputColumn =
  | { kind: 'column'; name: string; sources: ColumnSource[]; traced: boolean; direct?: boolean; picked?: boolean }
  | { kind: 'star'; table: string }
  | { kind: 'setop'; parts: OutputColumn[][] };

export interface Lineage {
  tables: string[];
  writeTargets: string[];
  writeVerbs: string[];
  tableFunctions: string[];
  calls: string[];
  selectInto: boolean;
  /** A CASCADE (TRUNCATE, DROP, ALTER ... DROP) reaches the tables that refer to those named, which it does not name. */
  cascades: boolean;
  outputs: OutputColumn[] | null;
  /**
   * The columns read to decide which rows come back or in what order (WHERE, JOIN ON/USING, GROUP BY, HAVING, ORDER BY,
   * a row generator's arguments, ...).
   */
  predicates: { sources: ColumnSource[]; traced: boolean };
  /**
   * The columns any value the statement computes is read from, at any depth, shown or not (every column of every select
   * list but one handed on unchanged, VALUES rows): the database evaluates it, so it can fail on a property of them.
   */
  computed: { sources: ColumnSource[]; traced: boolean };
  /** What the statement's writes store, as columns: each write's source rows' columns and each value it sets. */
  written: OutputColumn[];
}

/**
 * Built-in calls whose answer is one of their arguments unchanged, by dialect. PostgreSQL's are keywords, so no user
 * function takes their place; IFNULL, IF and IIF are not built in there, and a user's function of that name computes.
 */
const PICKING_CALLS: Record<'postgres' | 'sqlite' | 'mysql', ReadonlySet<string>> = {
  postgres: new Set(['coalesce', 'greatest', 'least', 'nullif']),
  sqlite: new Set(['coalesce', 'nullif', 'ifnull', 'iif']),
  mysql: new Set(['coalesce', 'greatest', 'least', 'nullif', 'ifnull', 'if']),
};

/**
 * For SelCol.picks: the arguments whose value a call answers unchanged (COALESCE, IFNULL, GREATEST, LEAST: any; NULLIF:
 * its first, or null; IF, IIF: the two after the condition), or null for a call that computes its answer.
 */
export function pickedArgs<T>(dialect: keyof typeof PICKING_CALLS, name: string, args: T[]): T[] | null {
  if (!PICKING_CALLS[dialect].has(name)) return null;
  return name === 'nullif' ? args.slice(0, 1) : name === 'if' || name === 'iif' ? args.slice(1) : args;
}

/** Row-source functions whose rows come only from their arguments. */
export const PURE_GENERATORS = new Set([
  'generate_series',
  'generate_subscripts',
  'unnest',
  'json_each',
  'json_each_text',
  'jsonb_each',
  'jsonb_each_text',
  'json_array_elements',
  'json_array_elements_text',
  'jsonb_array_elements',
  'jsonb_array_elements_text',
  'json_object_keys',
  'jsonb_object_keys',
  'json_to_record',
  'json_to_recordset',
  'jsonb_to_record',
  'jsonb_to_recordset',
  'json_populate_record',
  'json_populate_recordset',
  'jsonb_populate_record',
  'jsonb_populate_recordset',
  'jsonb_path_query',
  'regexp_matches',
  'regexp_split_to_table',
  'string_to_table',
  'json_tree',
  'range',
  'numbers',
]);

/** Column names of generators whose width is fixed (for `*` over them without a column list). */
const GENERATOR_COLUMNS: Record<string, string[]> = {
  generate_series: ['generate_series'],
  generate_subscripts: ['generate_subscripts'],
  json_each: ['key', 'value'],
  json_each_text: ['key', 'value'],
  jsonb_each: ['key', 'value'],
  jsonb_each_text: ['key', 'value'],
  json_array_elements: ['value'],
  json_array_elements_text: ['value'],
  jsonb_array_elements: ['value'],
  jsonb_array_elements_text: ['value'],
  json_object_keys: ['json_object_keys'],
  jsonb_object_keys: ['jsonb_object_keys'],
  regexp_split_to_table: ['regexp_split_to_table'],
  string_to_table: ['string_to_table'],
  regexp_matches: ['regexp_matches'],
  jsonb_path_query: ['jsonb_path_query'],
};

type Col = { kind: 'column'; name: string; sources: ColumnSource[]; traced: boolean; direct?: boolean; picked?: boolean };

interface Item {
  names: string[];
  kind: 'table' | 'shape' | 'func';
  table?: string;
  /** Column aliases on a base table (`t AS x(a, b)`): positions, which need the schema. */
  renamed?: boolean;
  shape?: OutputColumn[];
  funcSources?: ColumnSource[];
  funcTraced?: boolean;
  funcCols?: string[] | null;
}

interface Scope {
  /** While a SELECT's clauses after its list are read: its output columns, which a name there may mean (an alias). */
  outputs?: OutputColumn[];
  items: Item[];
  ctes: Map<string, OutputColumn[] | null>;
  parent: Scope | null;
}

interface Acc {
  refs: number;
  tables: Set<string>;
  targets: Set<string>;
  verbs: Set<string>;
  funcs: Set<string>;
  calls: Set<string>;
  selectInto: boolean;
  cascades: boolean;
  predicates: { sources: ColumnSource[]; traced: boolean };
  computed: { sources: ColumnSource[]; traced: boolean };
  written: OutputColumn[];
}

/** Reads a lowered statement: what it touches and where each output column comes from. */
export function describe(q: Query): Lineage {
  const acc: Acc = {
    refs: 0,
    tables: new Set(),
    targets: new Set(),
    verbs: new Set(),
    funcs: new Set(),
    calls: new Set(),
    selectInto: false,
    cascades: false,
    predicates: { sources: [], traced: true },
    computed: { sources: [], traced: true },
    written: [],
  };
  const outputs = query(q, null, acc);
  return {
    tables: [...acc.tables].sort(),
    writeTargets: [...acc.targets].sort(),
    writeVerbs: [...acc.verbs].sort(),
    tableFunctions: [...acc.funcs].sort(),
    calls: [...acc.calls].sort(),
    selectInto: acc.selectInto,
    cascades: acc.cascades,
    outputs,
    predicates: acc.predicates,
    computed: acc.computed,
    written: acc.written,
  };
}

function query(q: Query, outer: Scope | null, acc: Acc): OutputColumn[] | null {
  switch (q.k) {
    case 'select': {
      const scope = withCtes(q.ctes, outer, acc);
      for (const f of q.from) addFrom(f, scope, acc);
      const out = selectList(q.cols, scope, acc);
      // ORDER BY, GROUP BY and HAVING (and SQLite's WHERE) may name an output column: such a name need not be a table's.
      scope.outputs = out ?? undefined;
      for (const e of q.extra) mergeInto(acc.predicates, evalEx(e, scope, acc));
      scope.outputs = undefined;
      for (const n of q.keys ? [...q.keys.grouped, ...q.keys.sorted] : []) mergeInto(acc.predicates, atPosition(out, n));
      // DISTINCT keeps one of the rows whose values match, as GROUP BY and UNION do: how many come back tells which match.
      if (q.distinct) mergeInto(acc.predicates, out ? flattenSources(out) : { sources: [], traced: false });
      if (q.into) {
        // SELECT ... INTO a new table (PostgreSQL) stores its rows: what it writes is its output.
        acc.selectInto = true;
        acc.written.push(...(out ?? [UNTRACED_WRITE]));
      }
      return out;
    }
    case 'setop': {
      const scope = withCtes(q.ctes, outer, acc);
      const shapes = q.parts.map((p) => query(p, scope, acc));
      for (const e of q.extra) mergeInto(acc.predicates, evalEx(e, scope, acc));
      // Matching rows across branches compares their values: `SELECT email ... INTERSECT SELECT name ...` is empty
      // unless some email is a name, as a WHERE would tell.
      if (q.compares) for (const s of shapes) mergeInto(acc.predicates, s ? flattenSources(s) : { sources: [], traced: false });
      const out = shapes.some((s) => s === null) ? null : combine(shapes as OutputColumn[][]);
      // Its ORDER BY, hung on the last part, sorts the whole result by its columns (every part's), by position or name.
      const last = q.parts[q.parts.length - 1];
      if (last.k === 'select' && last.keys) {
        for (const n of last.keys.sorted) mergeInto(acc.predicates, atPosition(out, n));
        for (const name of last.keys.sortNames) mergeInto(acc.predicates, resultNamed(shapes, out, name));
      }
      return out;
    }
    case 'values': {
      const scope: Scope = { items: [], ctes: new Map(), parent: outer };
      const width = q.rows.length ? q.rows[0].length : 0;
      const out: OutputColumn[] = [];
      for (let i = 0; i < width; i++) {
        const col: Col = { kind: 'column', name: `column${i + 1}`, sources: [], traced: true };
        for (const row of q.rows) if (row[i]) mergeInto(col, evalEx(row[i], scope, acc));
        mergeInto(acc.computed, col);
        out.push(col);
      }
      return out;
    }
    case 'write': {
      const scope = withCtes(q.ctes, outer, acc);
      acc.verbs.add(q.verb);
      for (const t of q.targets) {
        // a target named like a CTE in scope is still a table write (CTEs can't be written)
        const ref = tableRef(t.schema, t.name);
        acc.tables.add(ref);
        acc.targets.add(ref);
        scope.items.push({ names: itemNames(t.alias, t.name), kind: 'table', table: ref });
      }
      if (q.source) acc.written.push(...(query(q.source, scope, acc) ?? [UNTRACED_WRITE]));
      for (const f of q.from) addFrom(f, scope, acc);
      for (const e of q.extra) mergeInto(acc.predicates, evalEx(e, scope, acc));
      for (const e of q.values) {
        const value: Col = { kind: 'column', name: '(a value it writes)', sources: [], traced: true };
        mergeInto(value, evalEx(e, scope, acc));
        acc.written.push(value);
      }
      return q.returning ? selectList(q.returning, scope, acc) : [];
    }
    case 'other': {
      if (q.verb) acc.verbs.add(q.verb);
      if (q.cascades) acc.cascades = true;
      for (const t of q.tables) acc.tables.add(t);
      for (const t of q.targets) {
        acc.tables.add(t);
        acc.targets.add(t);
      }
      if (q.inner) query(q.inner, outer, acc);
      return null;
    }
  }
}

/** A write's source whose rows can't be described (SHOW, a DDL statement): what it stores is unknown. */
const UNTRACED_WRITE: OutputColumn = { kind: 'column', name: '(its source rows)', sources: [], traced: false };

function withCtes(ctes: Cte[], outer: Scope | null, acc: Acc): Scope {
  const scope: Scope = { items: [], ctes: new Map(), parent: outer };
  for (const c of ctes) {
    const name = c.name;
    if (c.recursive && c.q.k === 'setop' && c.q.parts.length > 1) {
      // The anchor gives the provisional shape the recursive branch reads itself through.
      const anchor = query(c.q.parts[0], scope, acc);
      scope.ctes.set(name, anchor ? rename(anchor, c.cols) : null);
    } else if (c.recursive) scope.ctes.set(name, null);
    const shape = query(c.q, scope, acc);
    scope.ctes.set(name, shape ? rename(shape, c.cols) : null);
  }
  return scope;
}

/**
 * The CTE a table name names. A CTE whose name differs from it only in case (MySQL names keep their
 * case, and which the server matches is not certain) might be it or not: `ambiguous`, read as both.
 */
function findCte(name: string, scope: Scope | null): { shape: OutputColumn[] | null; ambiguous?: boolean } | null {
  for (let s = scope; s; s = s.parent) if (s.ctes.has(name)) return { shape: s.ctes.get(name) ?? null };
  const folded = name.toLowerCase();
  for (let s = scope; s; s = s.parent) for (const cte of s.ctes.keys()) if (cte.toLowerCase() === folded) return { shape: null, ambiguous: true };
  return null;
}

function itemNames(alias: string | null, name: string): string[] {
  return alias ? [alias] : [name];
}

function addFrom(f: FromItem, scope: Scope, acc: Acc): void {
  if (f.k === 'table') {
    const cte = f.schema === null ? findCte(f.name, scope) : null;
    if (cte) {
      if (cte.ambiguous) acc.tables.add(f.name);
      const shape = cte.shape ? rename(cte.shape, f.cols) : [opaqueColumn(f.alias ?? f.name)];
      scope.items.push({ names: itemNames(f.alias, f.name), kind: 'shape', shape });
      return;
    }
    const ref = tableRef(f.schema, f.name);
    acc.tables.add(ref);
    scope.items.push({ names: itemNames(f.alias, f.name), kind: 'table', table: ref, renamed: f.cols !== null });
    return;
  }
  if (f.k === 'sub') {
    const shape = query(f.q, scope, acc);
    scope.items.push({
      names: f.alias ? [f.alias] : [],
      kind: 'shape',
      shape: shape ? rename(shape, f.cols) : [opaqueColumn(f.alias ?? 'subquery')],
    });
    return;
  }
  acc.funcs.add(f.name);
  const args = evalEx(f.args, scope, acc);
  // How many rows it makes is a property of its arguments (`generate_series(1, length(email))`), as a WHERE's answer is.
  mergeInto(acc.predicates, args);
  const pure = PURE_GENERATORS.has(f.name);
  let cols: string[] | null = f.cols;
  if (!cols) {
    const fixed = f.name === 'unnest' ? Array.from({ length: Math.max(1, f.argc) }, () => f.alias ?? 'unnest') : GENERATOR_COLUMNS[f.name];
    cols = fixed ? fixed.map((c) => (fixed.length === 1 && f.alias ? f.alias : c)) : null;
    if (cols && f.ordinality) cols = [...cols, 'ordinality'];
  }
  scope.items.push({
    names: [f.alias ?? f.name],
    kind: 'func',
    funcSources: args.sources,
    funcTraced: pure && args.traced,
    funcCols: cols,
  });
}

function selectList(cols: SelCol[], scope: Scope, acc: Acc): OutputColumn[] {
  const out: OutputColumn[] = [];
  for (const c of cols) {
    if (c.star) {
      if (c.star.q === null) {
        for (const item of scope.items) out.push(...expandItem(item));
        if (scope.items.length === 0) out.push(opaqueColumn('*'));
      } else {
        const item = findItem(c.star.q, scope);
        if (item) out.push(...expandItem(item));
        else out.push(opaqueColumn(`${c.star.q}.*`));
      }
      continue;
    }
    const r = evalEx(c.ex, scope, acc);
    const col: Col = { kind: 'column', name: c.alias ?? c.implicitName ?? '?column?', sources: r.sources, traced: r.traced };
    if (c.bare && c.ex.refs.length === 1 && passesThrough(c.ex.refs[0], scope, 'direct')) col.direct = col.picked = true;
    else if (c.picks && c.ex.subs.length === 0 && c.ex.refs.every((ref) => passesThrough(ref, scope, 'picked'))) col.picked = true;
    if (!col.direct) mergeInto(acc.computed, col);
    out.push(col);
  }
  return out;
}

/**
 * Whether a bare reference hands on one column unchanged: every FROM item it may name (the innermost
 * scope that settles it, as `resolve` reads it) is a base table or a derived table whose column does.
 */
function passesThrough(ref: Ref, scope: Scope, how: 'direct' | 'picked'): boolean {
  if (ref.name === '*') return false;
  if (ref.q !== null) {
    const item = findItem(ref.q, scope);
    return item !== null && itemPassesThrough(item, ref.name, how);
  }
  for (let s: Scope | null = scope; s; s = s.parent) {
    let definite = false;
    for (const item of s.items) {
      if (item.names.includes(ref.name)) return false; // a whole row, not a column
      const l = lookup(item, ref.name, { ref: -2, tier: 0 });
      if (!l.found) continue;
      if (!itemPassesThrough(item, ref.name, how)) return false;
      if (l.definite) definite = true;
    }
    if (definite) break;
  }
  return true;
}

function itemPassesThrough(item: Item, name: string, how: 'direct' | 'picked'): boolean {
  if (item.kind === 'table') return !item.renamed;
  if (item.kind === 'func') return false;
  for (const c of item.shape!) {
    if (c.kind === 'setop') return false;
    if (c.kind === 'column' && c.name === name && !c[how]) return false;
  }
  return true;
}

function expandItem(item: Item): OutputColumn[] {
  if (item.kind === 'table') return item.renamed ? [opaqueColumn(`${item.names[0]}.*`)] : [{ kind: 'star', table: item.table! }];
  if (item.kind === 'shape') return item.shape!;
  if (!item.funcCols) return [opaqueColumn(`${item.names[0]}.*`)];
  return item.funcCols.map((name) => ({ kind: 'column', name, sources: item.funcSources!, traced: item.funcTraced! }));
}

/** The output at 1-based position `n`; all of them when a star or set operation comes first (its width needs the schema). */
function atPosition(out: OutputColumn[] | null, n: number): { sources: ColumnSource[]; traced: boolean } {
  if (out === null) return { sources: [], traced: false };
  for (let i = 0; i < out.length && i < n; i++) {
    const c = out[i];
    if (c.kind !== 'column') return flattenSources(out);
    if (i === n - 1) return c;
  }
  return { sources: [], traced: true }; // past the last: the database refuses it
}

/**
 * The outputs a name may mean, its case ignored (MySQL's aliases ignore it): a star's columns are its table's, which
 * the name resolves to already; a set operation's whose parts hold stars could be any.
 */
function outputsNamed(out: OutputColumn[] | null, name: string): { sources: ColumnSource[]; traced: boolean } {
  const r = { sources: [] as ColumnSource[], traced: out !== null };
  const folded = name.toLowerCase();
  for (const c of out ?? []) {
    if (c.kind === 'column' && c.name.toLowerCase() === folded) mergeInto(r, c);
    else if (c.kind === 'setop') mergeInto(r, flattenSources([c]));
  }
  return r;
}

/**
 * A set operation's result columns a name may mean: SQLite matches it against every part's names, not the first part's
 * only (`... UNION ALL SELECT name ... ORDER BY name` sorts the first part's column there too).
 */
function resultNamed(shapes: Array<OutputColumn[] | null>, out: OutputColumn[] | null, name: string): { sources: ColumnSource[]; traced: boolean } {
  if (out === null) return { sources: [], traced: false };
  if (out.some((c) => c.kind !== 'column')) return flattenSources(out); // parts with stars: the names need the schema
  const r = { sources: [] as ColumnSource[], traced: true };
  const folded = name.toLowerCase();
  out.forEach((c, i) => {
    if (shapes.some((s) => s?.[i]?.kind === 'column' && (s[i] as Col).name.toLowerCase() === folded)) mergeInto(r, c as Col);
  });
  return r;
}

function opaqueColumn(name: string): Col {
  return { kind: 'column', name, sources: [], traced: false };
}

function rename(shape: OutputColumn[], cols: string[] | null): OutputColumn[] {
  if (!cols || cols.length === 0) return shape;
  // Renaming lines up by position, which a star or set operation only fixes after expansion.
  if (shape.some((c) => c.kind !== 'column')) {
    const all = flattenSources(shape);
    return cols.map((name) => ({ kind: 'column', name, sources: all.sources, traced: all.traced }));
  }
  return shape.map((c, i) => (i < cols.length ? { ...(c as Col), name: cols[i] } : c));
}

/** Columns of each branch, lined up by position when every branch is plain columns of one width. */
function combine(shapes: OutputColumn[][]): OutputColumn[] {
  const flat = shapes.every((s) => s.every((c) => c.kind === 'column'));
  const width = shapes[0].length;
  if (!flat || shapes.some((s) => s.length !== width)) return [{ kind: 'setop', parts: shapes }];
  return shapes[0].map((c0, i) => {
    const col: Col = { kind: 'column', name: (c0 as Col).name, sources: [], traced: true };
    for (const s of shapes) mergeInto(col, s[i] as Col);
    if (shapes.every((s) => (s[i] as Col).direct)) col.direct = true;
    if (shapes.every((s) => (s[i] as Col).picked)) col.picked = true;
    return col;
  });
}

function mergeInto(col: { sources: ColumnSource[]; traced: boolean }, r: { sources: ColumnSource[]; traced: boolean }): void {
  if (!r.traced) col.traced = false;
  for (const s of r.sources) addSource(col.sources, s);
}

function addSource(list: ColumnSource[], s: ColumnSource): void {
  for (const have of list) {
    if (
      have.table === s.table &&
      have.column === s.column &&
      have.exact === s.exact &&
      have.ref === s.ref &&
      have.tier === s.tier &&
      have.optional === s.optional
    )
      return;
  }
  list.push({ ...s });
}

/** Every source a shape holds, stars as whole-table sources: for lookups that can't line up by name. */
function flattenSources(shape: OutputColumn[]): { sources: ColumnSource[]; traced: boolean } {
  const r = { sources: [] as ColumnSource[], traced: true };
  for (const c of shape) {
    if (c.kind === 'column') mergeInto(r, c);
    else if (c.kind === 'star') addSource(r.sources, { table: c.table, column: '*', exact: true });
    else for (const p of c.parts) mergeInto(r, flattenSources(p));
  }
  return r;
}

/**
 * The FROM item a qualifier names: an alias or unaliased table name, or a table as written (`s.t`).
 * Names compare exactly (the lowering folded them as the dialect does); a qualifier that matches an
 * item only when case is ignored is not resolved (MySQL keeps alias and table case per server setting).
 */
function findItem(q: string, scope: Scope | null): Item | null {
  for (let s = scope; s; s = s.parent) {
    for (const item of s.items) if (item.names.includes(q)) return item;
    for (const item of s.items) if (item.kind === 'table' && item.table === q) return item;
    const folded = q.toLowerCase();
    for (const item of s.items)
      if (item.names.some((n) => n.toLowerCase() === folded) || (item.kind === 'table' && item.table!.toLowerCase() === folded)) return null;
  }
  return null;
}

function evalEx(ex: Ex, scope: Scope, acc: Acc): { sources: ColumnSource[]; traced: boolean } {
  const r = { sources: [] as ColumnSource[], traced: !ex.opaque };
  for (const call of ex.calls) {
    acc.calls.add(call);
    // its rows come from somewhere the statement does not name (a file, a server, SQL text)
    if (readsOutsideTables(call)) r.traced = false;
  }
  for (const ref of ex.refs) mergeInto(r, resolve(ref, scope, acc));
  for (const sub of ex.subs) {
    const shape = query(sub, scope, acc);
    if (shape === null) r.traced = false;
    else mergeInto(r, flattenSources(shape));
  }
  return r;
}

function wholeItem(item: Item): { sources: ColumnSource[]; traced: boolean } {
  if (item.kind === 'table') return { sources: [{ table: item.table!, column: '*', exact: true }], traced: true };
  if (item.kind === 'shape') return flattenSources(item.shape!);
  return { sources: item.funcSources!, traced: item.funcTraced! };
}

type Found = { sources: ColumnSource[]; traced: boolean; found: boolean; definite: boolean };

/** Column `name` of one FROM item; candidates that need the schema carry `ref`/`tier`. */
function lookup(item: Item, name: string, cand: { ref: number; tier: number } | null): Found {
  if (item.kind === 'table') {
    if (item.renamed) return { sources: [{ table: item.table!, column: '*', exact: true }], traced: true, found: true, definite: true };
    const s: ColumnSource = cand ? { table: item.table!, column: name, exact: false, ...cand } : { table: item.table!, column: name, exact: true };
    return { sources: [s], traced: true, found: true, definite: cand === null };
  }
  if (item.kind === 'func') {
    const known = item.funcCols !== null && item.funcCols !== undefined;
    const found = known ? item.funcCols!.includes(name) || item.names.includes(name) : true;
    return { sources: found ? item.funcSources! : [], traced: known ? item.funcTraced! : false, found, definite: found && known };
  }
  const r: Found = { sources: [], traced: true, found: false, definite: false };
  for (const c of item.shape!) {
    if (c.kind === 'column') {
      if (c.name === name) {
        r.found = true;
        r.definite = true;
        mergeInto(r, c);
      }
    } else if (c.kind === 'star') {
      r.found = true;
      addSource(r.sources, cand ? { table: c.table, column: name, exact: false, ...cand } : { table: c.table, column: name, exact: false, ref: -1, tier: 0 });
    } else {
      r.found = true;
      mergeInto(r, flattenSources([c]));
    }
  }
  return r;
}

function resolve(ref: Ref, scope: Scope, acc: Acc): { sources: ColumnSource[]; traced: boolean } {
  if (ref.q !== null) {
    const item = findItem(ref.q, scope);
    if (!item) return { sources: [], traced: false };
    if (ref.name === '*') return wholeItem(item);
    const r = lookup(item, ref.name, null);
    if (item.kind === 'shape' && r.sources.some((s) => s.ref === -1)) {
      // a name behind `q.*`: the star's table is the only candidate
      const id = acc.refs++;
      r.sources = r.sources.map((s) => (s.ref === -1 ? { ...s, ref: id, tier: 0 } : s));
    }
    return r.found ? r : { sources: r.sources, traced: false };
  }
  if (ref.name === '*') return { sources: [], traced: true }; // count(*)
  // An unqualified name belongs to the innermost scope that has it: a definite match (a derived
  // table's named column) settles it; table candidates are left to the planner, by tier.
  const id = acc.refs++;
  const r = { sources: [] as ColumnSource[], traced: true };
  let found = false;
  let wholeRow = false; // then a column of that name need not exist: the name is the row
  let tier = 0;
  for (let s: Scope | null = scope; s; s = s.parent, tier++) {
    let definite = false;
    for (const item of s.items) {
      const l = lookup(item, ref.name, { ref: id, tier });
      if (l.found) {
        found = true;
        if (l.definite) definite = true;
        for (const src of l.sources) if (src.ref === -1) Object.assign(src, { ref: id, tier });
        mergeInto(r, l);
      }
      // PostgreSQL reads a bare table alias as the whole row (row_to_json(c))
      if (item.names.includes(ref.name)) {
        found = true;
        definite = true;
        wholeRow = true;
        mergeInto(r, wholeItem(item));
      }
    }
    if (definite) break;
  }
  // An output's alias: the database may read the name as that output (ORDER BY prefers it) or as a table's column.
  const folded = ref.name.toLowerCase();
  const aliased = scope.outputs?.some((c) => c.kind === 'column' && c.name.toLowerCase() === folded) ?? false;
  if (!found && !aliased) r.traced = false;
  if (wholeRow || aliased) for (const src of r.sources) if (src.ref === id) src.optional = true;
  if (aliased) mergeInto(r, outputsNamed(scope.outputs!, ref.name));
  return r;
}
