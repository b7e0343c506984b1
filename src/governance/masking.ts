// In charge of column masking: matching a key's rules to each output column's traced sources (with
// `*` expanded from the connection's schema) into a per-position plan, and applying a plan to rows.
// Fails closed: a column that can't be traced while rules exist is refused (mask_unresolvable).
// Must not import HTTP/uWS or sources.
import type { ColumnSource, OutputColumn, StatementAnalysis } from './analysis.js';
import { hmacSha256Hex } from './hmac.js';
import { findColumn, type Relation, resolveTable, type Schema, SEP, showRef } from './names.js';
import { governanceError } from './policy.js';

export type { Schema } from './names.js';

export type MaskAction = 'hash' | 'mask' | 'null' | 'drop';

export interface MaskRule {
  column: string;
  action: string;
}

export interface MaskPlan {
  /** Per output column position; null = shown as is. Empty when no rule applies to anything. */
  actions: Array<MaskAction | null>;
  /** The masked output columns by name, for history and the catalog. */
  masked: Array<{ column: string; action: MaskAction }>;
  /**
   * Per output position, the column name the schema gave it when `*` was expanded (null for named
   * outputs): the result must carry these names in these places, or the schema changed since the trace.
   */
  expected?: Array<string | null>;
}

const STRICTNESS: Record<MaskAction, number> = { hash: 1, mask: 2, null: 3, drop: 4 };

interface CompiledRule {
  /** Matched against the relation's schema; null when the rule names none (any schema). */
  schema: RegExp | null;
  table: RegExp;
  column: RegExp;
  action: MaskAction;
}

/** One output column traced to the base-table columns it is computed from, `*` expanded from the schema. */
export interface TracedColumn {
  name: string;
  /** `table` is the relation's key (names.ts), `column` the relation's own name for it. */
  sources: Array<{ table: string; column: string }>;
  /** Why the column can't be traced, or null. */
  untraced: string | null;
  /** The schema's name for a column that `*` expanded to. */
  expected?: string;
  /** Its values are one of its sources', unchanged (a bare reference or a `*` column), so it has that column's type. */
  direct?: boolean;
  /** Its values are its sources' unchanged or constants, chosen by conditions (lineage.ts SelCol.picks); `direct` implies it. */
  picked?: boolean;
  /**
   * Columns whose values it shows though the statement does not name them (Relation.family, Relation.generated): the
   * same column of an inheritance parent or child, the columns a generated one is computed from. Rules on them cover it.
   */
  carried?: Array<{ table: string; column: string }>;
  /** A source is a generated column: its values are computed, whatever the statement does with them. */
  computed?: true;
}

type Planned = TracedColumn;

/**
 * The mask plan for a statement's outputs under these rules. `resultColumns`, when given, are the
 * names the driver reported: the plan must line up with them, and errors name them.
 */
export function planMasks(a: StatementAnalysis | null, schema: Schema, rules: MaskRule[], resultColumns?: string[]): MaskPlan {
  if (rules.length === 0) return { actions: [], masked: [] };
  const compiled = rules.map(compileRule);
  if (a === null || a.outputs === null) {
    const name = resultColumns?.[0] ?? '*';
    throw unresolvable(name, a === null ? 'the statement could not be analysed' : 'the statement returns no traceable columns');
  }
  const planned = traceOutputs(a.outputs, schema);
  if (resultColumns && resultColumns.length !== planned.length) {
    throw unresolvable(
      resultColumns[planned.length] ?? resultColumns[0] ?? '*',
      `the result has ${resultColumns.length} columns where the statement describes ${planned.length}`,
    );
  }
  const actions: Array<MaskAction | null> = [];
  const masked: MaskPlan['masked'] = [];
  let any = false;
  for (let i = 0; i < planned.length; i++) {
    const p = planned[i];
    const name = resultColumns?.[i] ?? p.name;
    if (p.untraced) throw unresolvable(name, p.untraced);
    let best = strictest(compiled, ruled(p));
    // `mask` keeps a value's first character and an email's domain: of a computed value those are other characters
    // (`reverse(email)` would keep the local part, `substr(email, k)` its k-th character), so it keeps nothing.
    if (best === 'mask' && (!p.picked || p.computed)) best = 'null';
    actions.push(best);
    if (best) {
      any = true;
      masked.push({ column: name, action: best });
    }
  }
  const expected = planned.map((p) => p.expected ?? null);
  return any ? { actions, masked, expected } : { actions: [], masked: [], expected };
}

/**
 * For a key that refuses inference through predicates: a column a rule masks must not decide which
 * rows come back or their order (WHERE, JOIN ON/USING, GROUP BY, HAVING, ORDER BY, a row generator's
 * arguments, in any subquery), or a caller recovers its value a character at a time (`WHERE email LIKE
 * :p`); nor may the statement compute anything from it, shown or not, whatever the rule's action: the
 * database evaluates it, and whether it fails answers a predicate too (`CASE WHEN email LIKE 'a%' THEN
 * 1/(id - id) END` fails exactly where the LIKE holds, though the column is nulled or dropped). A column
 * that cannot be traced there is refused too: it could be a masked one.
 */
export function checkPredicates(a: StatementAnalysis | null, schema: Schema, rules: MaskRule[]): void {
  if (rules.length === 0) return;
  if (a === null) throw predicateError('the statement could not be analysed');
  const compiled = rules.map(compileRule);
  const p = planColumn('(predicate)', a.predicates.sources, a.predicates.traced, schema);
  if (p.untraced) throw predicateError(`a column it filters or sorts by can't be traced: ${p.untraced}`);
  const filtering = masked(compiled, p);
  if (filtering) throw predicateError(`it filters, joins, groups or sorts by the masked column ${filtering}`);
  const c = planColumn('(computed)', a.computed.sources, a.computed.traced, schema);
  if (c.untraced) throw predicateError(`a value it computes can't be traced: ${c.untraced}`);
  const computing = masked(compiled, c);
  if (computing) {
    throw predicateError(`it computes a value from the masked column ${computing}, and the value, or whether computing it fails, shows a property of it`);
  }
  // A generated column computed from a masked one, shown hashed or masked, shows which rows share the property its
  // expression computes (`email_domain ... AS (split_part(email, '@', 2))`), though the statement only names it.
  for (const c of a.outputs === null ? [] : traceOutputs(a.outputs, schema)) {
    const action = c.computed && !c.untraced ? strictest(compiled, ruled(c)) : null;
    if (action === 'hash' || action === 'mask') {
      throw predicateError(`its column '${c.name}' is a value computed from a masked column, which shows which rows share a property of it`);
    }
  }
}

/** The first of a traced column's ruled sources a rule masks, as the error names it, or null. */
function masked(compiled: CompiledRule[], p: TracedColumn): string | null {
  for (const s of ruled(p)) for (const r of compiled) if (matches(r, s)) return `${showRef(s.table)}.${s.column}`;
  return null;
}

/** The columns whose rules cover a traced column: its sources and what they carry. */
function ruled(p: TracedColumn): TracedColumn['sources'] {
  return p.carried ? [...p.sources, ...p.carried] : p.sources;
}

/** The strictest action `rules` give a table's column (`table` a relation key, names.ts), or null: the rules compiled once. */
export function columnActions(rules: MaskRule[]): (table: string, column: string) => MaskAction | null {
  const compiled = rules.map(compileRule);
  return (table, column) => strictest(compiled, [{ table, column }]);
}

/** The strictest action the rules give any of `sources` (a traced column's: ruled()), or null when none matches. */
function strictest(compiled: CompiledRule[], sources: ReadonlyArray<{ table: string; column: string }>): MaskAction | null {
  let best: MaskAction | null = null;
  for (const s of sources) {
    for (const r of compiled) {
      if (matches(r, s) && (best === null || STRICTNESS[r.action] > STRICTNESS[best])) best = r.action;
    }
  }
  return best;
}

/**
 * A key that masks columns may not write a value computed from a masked one: where it lands (another table, another
 * column) no rule masks it, and the key reads it back in clear (`INSERT INTO notes SELECT email FROM customers`,
 * `UPDATE customers SET name = email`). What a write stores that cannot be traced is refused too, and so is any write to
 * a table with a trigger or a rule: the database's own code, which the gateway does not read, could copy one.
 */
export function checkWrites(a: StatementAnalysis | null, schema: Schema, rules: MaskRule[]): void {
  if (rules.length === 0 || a === null) return;
  for (const t of a.writeTargets) {
    const r = resolveTable(schema, t);
    // A view passes the write to tables it does not name here (with their triggers); a name the schema does not
    // hold may be a table made since it was read. Neither can be checked, so neither is written to.
    const why = !r
      ? 'which the gateway does not know as a table'
      : r.columns === null
        ? 'which is not a table (a view writes to tables the gateway does not follow)'
        : r.triggered
          ? 'where a write runs code the gateway cannot check (a trigger or rule, or a default, constraint or policy calling a function)'
          : null;
    if (why) throw governanceError('mask_write', `This API key masks columns, so it may not write to ${showRef(t)}, ${why}`);
  }
  const compiled = rules.map(compileRule);
  for (const p of traceOutputs(a.written, schema)) {
    if (p.untraced) throw writeError(`what it writes can't be traced (${p.untraced})`);
    for (const s of ruled(p)) {
      for (const r of compiled) if (matches(r, s)) throw writeError(`it writes a value computed from the masked column ${showRef(s.table)}.${s.column}`);
    }
  }
}

function writeError(why: string): Error {
  return governanceError('mask_write', `This API key may not write values of masked columns: ${why}`);
}

function predicateError(why: string): Error {
  return governanceError('mask_predicate', `This API key may not filter, sort or compute by masked columns: ${why}`);
}

function unresolvable(column: string, why: string): Error {
  return governanceError('mask_unresolvable', `The column '${column}' can't be traced to its source columns (${why}), so masking rules can't be enforced`);
}

function compileRule(rule: MaskRule): CompiledRule {
  const action = rule.action.toLowerCase();
  if (!(action in STRICTNESS)) throw new TypeError(`unknown mask action '${rule.action}'`);
  const parts = rule.column.trim().toLowerCase().split('.');
  // schema.table.column, table.column, or a bare column (any table, any schema)
  const column = parts[parts.length - 1];
  const table = parts.length >= 2 ? parts[parts.length - 2] : '*';
  const schema = parts.length >= 3 ? glob(parts[parts.length - 3]) : null;
  return { schema, table: glob(table), column: glob(column), action: action as MaskAction };
}

/** A rule against a traced source: case-insensitive, as the contract says, so it covers every spelling. */
function matches(r: CompiledRule, s: { table: string; column: string }): boolean {
  const at = s.table.indexOf(SEP);
  const table = s.table.slice(at + 1).toLowerCase();
  if (!r.table.test(table) || !r.column.test(s.column.toLowerCase())) return false;
  return r.schema === null || r.schema.test(s.table.slice(0, at).toLowerCase());
}

function glob(pattern: string): RegExp {
  const body = pattern
    .split('*')
    .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${body}$`);
}

/** Output entries to one traced column per position, stars expanded from the schema (what masking plans on; the catalog types them). */
export function traceOutputs(outputs: OutputColumn[], schema: Schema): TracedColumn[] {
  const out: Planned[] = [];
  for (const c of outputs) {
    if (c.kind === 'column') {
      const p = planColumn(c.name, c.sources, c.traced, schema);
      if (c.direct) p.direct = true;
      if (c.picked) p.picked = true;
      out.push(p);
    } else if (c.kind === 'star') {
      const rel = resolveTable(schema, c.table);
      if (!rel?.columns) {
        out.push({ name: `${showRef(c.table)}.*`, sources: [], untraced: `${notTable(c.table, rel !== null)}, so * can't be expanded` });
        continue;
      }
      for (const col of rel.columns) {
        if (rel.invisible?.has(col)) continue;
        const p: Planned = { name: col, sources: [], untraced: null, expected: col, direct: true, picked: true };
        addSource(p, schema, rel, col);
        out.push(p);
      }
    } else {
      const parts = c.parts.map((p) => traceOutputs(p, schema));
      const width = parts[0].length;
      if (parts.some((p) => p.length !== width)) {
        out.push({ name: parts[0][0]?.name ?? '*', sources: [], untraced: 'the branches of a set operation have different widths' });
        continue;
      }
      for (let i = 0; i < width; i++) {
        const merged: Planned = { name: parts[0][i].name, sources: [], untraced: null, expected: parts[0][i].expected };
        for (const p of parts) {
          merged.sources.push(...p[i].sources);
          for (const k of p[i].carried ?? []) carriedOf(merged).push(k);
          if (p[i].computed) merged.computed = true;
          if (p[i].untraced && !merged.untraced) merged.untraced = p[i].untraced;
        }
        if (parts.every((p) => p[i].direct)) merged.direct = true;
        if (parts.every((p) => p[i].picked)) merged.picked = true;
        out.push(merged);
      }
    }
  }
  return out;
}

function planColumn(name: string, sources: ColumnSource[], traced: boolean, schema: Schema): Planned {
  if (!traced) return { name, sources: [], untraced: 'part of its lineage is unknown' };
  const p: Planned = { name, sources: [], untraced: null };
  const groups = new Map<number, ColumnSource[]>();
  for (const s of sources) {
    if (!s.exact && s.ref !== undefined) {
      const g = groups.get(s.ref);
      if (g) g.push(s);
      else groups.set(s.ref, [s]);
      continue;
    }
    const rel = resolveTable(schema, s.table);
    if (!rel?.columns) return { name, sources: [], untraced: notTable(s.table, rel !== null) };
    if (s.column === '*') {
      for (const col of rel.columns) addSource(p, schema, rel, col);
      continue;
    }
    const col = findColumn(schema, rel.columns, s.column);
    if (col === null) return { name, sources: [], untraced: `'${showRef(s.table)}' has no column '${s.column}'` };
    addSource(p, schema, rel, col);
  }
  // An unqualified name comes from the innermost tier whose table has it; a relation the schema can't
  // trace (a view, a table it does not know) at or inside that tier might be the one, so the column is
  // untraced; a name no candidate has is refused too, unless it may be an output column's.
  for (const g of groups.values()) {
    let best = Infinity;
    let unknown: string | null = null;
    const found: Array<{ tier: number; rel: Relation; column: string }> = [];
    for (const s of g) {
      const rel = resolveTable(schema, s.table);
      const tier = s.tier ?? 0;
      if (!rel?.columns) {
        if (tier <= best) unknown = s.table;
        best = Math.min(best, tier);
        continue;
      }
      const col = findColumn(schema, rel.columns, s.column);
      if (col !== null) {
        best = Math.min(best, tier);
        found.push({ tier, rel, column: col });
      }
    }
    if (unknown !== null && g.some((s) => !resolveTable(schema, s.table)?.columns && (s.tier ?? 0) <= best)) {
      return { name, sources: [], untraced: notTable(unknown, resolveTable(schema, unknown) !== null) };
    }
    if (best === Infinity && !g.every((s) => s.optional)) {
      return { name, sources: [], untraced: `no table it reads has a column '${g[0].column}'` };
    }
    for (const f of found) if (f.tier === best) addSource(p, schema, f.rel, f.column);
  }
  return p.untraced ? { name, sources: [], untraced: p.untraced } : p;
}

/**
 * Adds column `column` of `rel` to `p`'s sources, and to what it carries: the same column of the tables in its family,
 * and for a generated column the columns it is computed from (with theirs), marking it computed; untraced where a
 * generated column reads what the gateway does not.
 */
function addSource(p: Planned, schema: Schema, rel: Relation, column: string): void {
  p.sources.push({ table: rel.key, column });
  carry(p, schema, rel, column);
}

function carriedOf(p: Planned): NonNullable<Planned['carried']> {
  if (!p.carried) p.carried = [];
  return p.carried;
}

/** What column `column` of `rel` carries, into `p.carried` (addSource). */
function carry(p: Planned, schema: Schema, rel: Relation, column: string): void {
  for (const key of rel.family ?? []) {
    const kin = schema.relations.get(key);
    const col = kin?.columns ? findColumn(schema, kin.columns, column) : null;
    if (col !== null) carriedOf(p).push({ table: key, column: col });
  }
  const from = rel.generated?.get(column);
  if (from === undefined) return;
  p.computed = true;
  if (from === null) {
    p.untraced ??= `'${showRef(rel.key)}.${column}' is generated by an expression that calls a function the gateway does not read`;
    return;
  }
  for (const c of from) {
    // MySQL's may read another generated column; a name met again is not followed twice.
    if (p.carried?.some((k) => k.table === rel.key && k.column === c)) continue;
    carriedOf(p).push({ table: rel.key, column: c });
    carry(p, schema, rel, c);
  }
}

function notTable(ref: string, known: boolean): string {
  return known
    ? `'${showRef(ref)}' is a view or another relation whose columns can't be traced`
    : `'${showRef(ref)}' is not a table in the connection's schema`;
}

// --- applying a plan --------------------------------------------------------------------------

export type Masker = (columns: string[], rows: unknown[][]) => { columns: string[]; rows: unknown[][] };

/**
 * The row transformer for a plan; rows are changed in place. The plan was traced before the statement
 * ran, on a schema that may have changed since (a column dropped and added again moves): a result of
 * another width, or whose `*` columns are not the ones traced, is refused, never masked by position.
 */
export function compileMasker(plan: MaskPlan, secret: Buffer): Masker {
  const expected = plan.expected ?? plan.actions.map(() => null);
  const width = expected.length;
  const check = (columns: string[]) => {
    if (columns.length !== width) {
      throw unresolvable(columns[width] ?? columns[0] ?? '*', `the result has ${columns.length} columns where the statement describes ${width}`);
    }
    for (let i = 0; i < width; i++) {
      const want = expected[i];
      if (want !== null && !sameColumn(columns[i], want)) {
        throw unresolvable(columns[i], `the table changed since its schema was read: '${want}' was expected here`);
      }
    }
  };
  const actions = plan.actions;
  if (actions.every((x) => x === null)) {
    return (columns, rows) => {
      check(columns);
      return { columns, rows };
    };
  }
  const drops: number[] = [];
  const edits: Array<[number, (v: unknown) => unknown]> = [];
  for (let i = 0; i < actions.length; i++) {
    const act = actions[i];
    if (act === 'drop') drops.push(i);
    else if (act === 'hash') edits.push([i, valueHasher(secret)]);
    else if (act === 'mask') edits.push([i, maskValue]);
    else if (act === 'null') edits.push([i, () => null]);
  }
  const keep = drops.length ? actions.map((_, i) => i).filter((i) => !drops.includes(i)) : null;
  return (columns, rows) => {
    check(columns);
    for (const row of rows) {
      for (let e = 0; e < edits.length; e++) {
        const [i, f] = edits[e];
        row[i] = f(row[i]);
      }
      if (keep) {
        for (let j = 0; j < keep.length; j++) row[j] = row[keep[j]];
        row.length = keep.length;
      }
    }
    return { columns: keep ? keep.map((i) => columns[i]) : columns, rows };
  };
}

/** A driver's column name against the schema's (case aside; SQLite renames a repeated one `name:N`). */
function sameColumn(got: string, want: string): boolean {
  const g = got.toLowerCase();
  const w = want.toLowerCase();
  return g === w || (g.startsWith(`${w}:`) && /^\d+$/.test(g.slice(w.length + 1)));
}

/** The hash mask under `secret`: HMAC-SHA256 of a value's text form (bytes as they are), as 16 hex characters; null stays null. */
function valueHasher(secret: Buffer): (v: unknown) => string | null {
  const mac = hmacSha256Hex(secret, 16);
  return (v) => (v === null || v === undefined ? null : mac(v instanceof Uint8Array ? v : textForm(v)));
}

/** One value's hash mask (valueHasher makes a masker's, its key's pads hashed once). */
export function hashValue(v: unknown, secret: Buffer): string | null {
  return valueHasher(secret)(v);
}

function textForm(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** Text keeps its first character (an email also its domain: j***@example.com); anything else is null. */
export function maskValue(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const at = v.lastIndexOf('@');
  if (at > 0 && at < v.length - 1 && !/\s/.test(v)) return starred(v.slice(0, at)) + v.slice(at);
  return starred(v);
}

function starred(s: string): string {
  const chars = Array.from(s);
  if (chars.length === 0) return '';
  return chars[0] + '*'.repeat(chars.length - 1);
}
