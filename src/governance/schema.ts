// In charge of the SQL that reads what a connection's names resolve to (every relation it can name,
// the columns of its base tables, the search path and the case rules), per dialect, and of turning
// its rows into a Schema (governance/names.ts). Must not import HTTP/uWS or sources: the caller runs
// the queries through its source. For browsing (the schema route), tables and views with their keys.
//
// Views are known by name but carry no columns on purpose: a view's columns can't be traced to the
// tables they come from, so a column read through a view is untraceable and a key with mask rules is
// refused (fail closed); so is any other relation that reads rows another holds (TRACEABLE). Knowing
// the view still matters: an unqualified name that a view (or a catalog table) answers on the search
// path must not be taken for a table of that name further on.
// A table also says which of its columns the database computes from others (generated columns) and,
// on PostgreSQL, which tables share its rows (inheritance, partitions): masking carries rules along both.
import type { SqlDialect } from './analysis.js';
import { VOUCHED_NATIVE } from './functions.js';
import { type Relation, type Schema, SEP } from './names.js';
import { lex, type Token } from './scan.js';

// Rows: (schema, table, column, data_type, table_type). information_schema lists only what the user
// has some privilege on, which is what it can read.
const POSTGRES_COLUMNS = `SELECT c.table_schema::text, c.table_name::text, c.column_name::text, c.data_type::text, t.table_type::text
FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema')
ORDER BY c.table_schema, c.table_name, c.ordinal_position`;

// Rows: (schema, relation, oid) for every relation a FROM can name in a schema the user may use, the
// catalogs included (pg_catalog is searched first); then one row: the effective search path.
const POSTGRES_RELATIONS = `SELECT n.nspname::text, c.relname::text, c.oid::int8
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
  AND (n.oid = pg_my_temp_schema() OR has_schema_privilege(n.oid, 'USAGE'))`;
const POSTGRES_PATH = `SELECT s::text FROM unnest(current_schemas(true)) WITH ORDINALITY AS p(s, n) ORDER BY n`;
// What a write can run of the database's own code that the gateway does not read, as two queries whose rows
// triggeredOids follows (in JS: PostgreSQL plans a recursive query over the catalogs at millions of rows, and its JIT
// then spent 0.5 s compiling one for a schema of 2,000 tables). Seeds, as (kind, oid): 'rel' for a table with a
// trigger that is not a constraint's (a foreign key's actions are internal ones), a rewrite rule (not a view's ON
// SELECT), or a column default or generated column, CHECK or row-level security policy that calls a function not
// vouched for (a superuser's native function that changes nothing: VOUCHED_NATIVE; built-in functions leave no
// pg_depend row, so only the others are found); 'type' for a domain whose CHECK or default calls one.
const POSTGRES_TRIGGERED = `WITH unvouched AS (SELECT p.oid FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
  JOIN pg_language l ON l.oid = p.prolang WHERE NOT (${VOUCHED_NATIVE})),
uses AS (SELECT classid, objid FROM pg_depend WHERE refclassid = 'pg_proc'::regclass AND refobjid IN (SELECT oid FROM unvouched))
SELECT 'rel', tgrelid::int8 FROM pg_trigger WHERE NOT tgisinternal
UNION SELECT 'rel', ev_class::int8 FROM pg_rewrite WHERE rulename <> '_RETURN'
UNION SELECT 'rel', a.adrelid::int8 FROM uses u JOIN pg_attrdef a ON u.classid = 'pg_attrdef'::regclass AND a.oid = u.objid
UNION SELECT CASE WHEN k.conrelid <> 0 THEN 'rel' ELSE 'type' END, CASE WHEN k.conrelid <> 0 THEN k.conrelid ELSE k.contypid END::int8
  FROM uses u JOIN pg_constraint k ON u.classid = 'pg_constraint'::regclass AND k.oid = u.objid
UNION SELECT 'rel', p.polrelid::int8 FROM uses u JOIN pg_policy p ON u.classid = 'pg_policy'::regclass AND p.oid = u.objid
UNION SELECT 'type', objid::int8 FROM uses WHERE classid = 'pg_type'::regclass`;
// Edges, as (kind, from, to), along which that code reaches further: 'type' from a user type to a domain over it or an
// array of it; 'col' from a user type to a relation with a column of it; 'row' from such a relation to its row type;
// 'rel' from a table to the one a write to which reaches it (an inheritance or partition parent, the table a
// cascading foreign key, ON UPDATE/DELETE CASCADE, SET NULL or SET DEFAULT, refers to).
const POSTGRES_REACH = `SELECT 'type', y.typbasetype::int8, y.oid::int8 FROM pg_type y WHERE y.oid >= 16384 AND y.typbasetype <> 0
UNION ALL SELECT 'type', y.typelem::int8, y.oid::int8 FROM pg_type y WHERE y.oid >= 16384 AND y.typelem <> 0
UNION ALL SELECT 'col', a.atttypid::int8, a.attrelid::int8 FROM pg_attribute a WHERE a.atttypid >= 16384 AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL SELECT 'row', c.oid::int8, c.reltype::int8 FROM pg_class c
  WHERE c.reltype <> 0 AND c.oid IN (SELECT attrelid FROM pg_attribute WHERE atttypid >= 16384 AND attnum > 0)
UNION ALL SELECT 'rel', inhrelid::int8, inhparent::int8 FROM pg_inherits
UNION ALL SELECT 'rel', conrelid::int8, confrelid::int8 FROM pg_constraint
  WHERE contype = 'f' AND (confupdtype NOT IN ('a', 'r') OR confdeltype NOT IN ('a', 'r'))`;

// Generated columns, as (schema, table, column, source): a row for each column of its own table its expression reads
// (the pg_depend rows of its pg_attrdef), and one with source null for anything else it depends on that is not vouched
// for (a user's function, which could read another table whatever volatility it claims; a user's operator or type).
const POSTGRES_GENERATED = `SELECT n.nspname::text, c.relname::text, a.attname::text,
  CASE WHEN dep.refclassid = 'pg_class'::regclass AND dep.refobjid = a.attrelid THEN s.attname::text END
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
JOIN pg_depend dep ON dep.classid = 'pg_attrdef'::regclass AND dep.objid = d.oid
LEFT JOIN pg_attribute s ON s.attrelid = a.attrelid AND s.attnum = dep.refobjsubid AND dep.refobjsubid > 0
WHERE a.attgenerated <> '' AND NOT a.attisdropped AND (n.oid = pg_my_temp_schema() OR has_schema_privilege(n.oid, 'USAGE'))
  AND NOT (dep.refclassid = 'pg_class'::regclass AND dep.refobjid = a.attrelid AND dep.refobjsubid = a.attnum)
  AND NOT (dep.refclassid = 'pg_proc'::regclass AND dep.refobjid IN (SELECT p.oid FROM pg_proc p
    JOIN pg_roles r ON r.oid = p.proowner JOIN pg_language l ON l.oid = p.prolang WHERE ${VOUCHED_NATIVE}))`;
// Operators and casts a user defined whose function is not vouched for, each as its name (`+(text,integer)`,
// `text::bigint`) and its function's. pg_operator and pg_cast rows of initdb are below 16384 (an extension's operators
// run its C functions, which VOUCHED_NATIVE vouches for when they change nothing).
const POSTGRES_OPERATORS = `WITH unvouched AS (SELECT p.oid, p.proname::text AS fn FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
  JOIN pg_language l ON l.oid = p.prolang WHERE NOT (${VOUCHED_NATIVE}))
SELECT o.oprname || '(' || concat_ws(',', format_type(o.oprleft, NULL), format_type(o.oprright, NULL)) || ')', u.fn
  FROM pg_operator o JOIN unvouched u ON u.oid = o.oprcode::oid WHERE o.oid >= 16384
UNION ALL SELECT format_type(c.castsource, NULL) || '::' || format_type(c.casttarget, NULL), u.fn
  FROM pg_cast c JOIN unvouched u ON u.oid = c.castfunc WHERE c.oid >= 16384`;
// Inheritance and partitions, as (child, parent) oids.
const POSTGRES_INHERITS = `SELECT inhrelid::int8, inhparent::int8 FROM pg_inherits`;

/** For each table in an inheritance tree (POSTGRES_INHERITS), its ancestors and descendants, by oid. */
function families(inherits: unknown[][]): Map<string, string[]> {
  const up = new Map<string, string[]>();
  const down = new Map<string, string[]>();
  const add = (m: Map<string, string[]>, from: string, to: string) => {
    const list = m.get(from);
    if (list) list.push(to);
    else m.set(from, [to]);
  };
  for (const [child, parent] of inherits) {
    add(up, String(child), String(parent));
    add(down, String(parent), String(child));
  }
  const reach = (from: string, m: Map<string, string[]>, seen: Set<string>) => {
    for (const next of m.get(from) ?? []) {
      if (!seen.has(next)) {
        seen.add(next);
        reach(next, m, seen);
      }
    }
  };
  const out = new Map<string, string[]>();
  for (const oid of new Set([...up.keys(), ...down.keys()])) {
    const seen = new Set<string>();
    reach(oid, up, seen);
    reach(oid, down, seen);
    seen.delete(oid);
    out.set(oid, [...seen]);
  }
  return out;
}

/** The relations (their oids) the seeds and everything the edges lead to from them: POSTGRES_TRIGGERED, POSTGRES_REACH. */
function triggeredOids(seeds: unknown[][], edges: unknown[][]): Set<string> {
  // Nodes are `rel:<oid>` and `type:<oid>`, as the seeds name their kinds; an edge's kind says what it joins.
  const ends: Record<string, [string, string]> = { type: ['type', 'type'], col: ['type', 'rel'], row: ['rel', 'type'], rel: ['rel', 'rel'] };
  const next = new Map<string, string[]>();
  for (const [kind, from, to] of edges) {
    const [a, b] = ends[String(kind)];
    const key = `${a}:${String(from)}`;
    const list = next.get(key) ?? [];
    if (list.length === 0) next.set(key, list);
    list.push(`${b}:${String(to)}`);
  }
  const seen = new Set(seeds.map(([kind, id]) => `${String(kind)}:${String(id)}`));
  const stack = [...seen];
  for (let at = stack.pop(); at !== undefined; at = stack.pop()) {
    for (const n of next.get(at) ?? []) {
      if (!seen.has(n)) {
        seen.add(n);
        stack.push(n);
      }
    }
  }
  return seen;
}

// The join compares names exactly: information_schema's collation would pair Customers with customers.
// The sixth: a generated column's expression (NULL or '' for others; neither lets one call a stored function); the
// seventh, the table's storage engine (OWN_STORAGE); the eighth, EXTRA, which says INVISIBLE of a column `*` leaves out.
const MYSQL_COLUMNS = `SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, t.TABLE_TYPE, c.GENERATION_EXPRESSION, t.ENGINE, c.EXTRA
FROM information_schema.COLUMNS c
JOIN information_schema.TABLES t ON BINARY t.TABLE_SCHEMA = BINARY c.TABLE_SCHEMA AND BINARY t.TABLE_NAME = BINARY c.TABLE_NAME
WHERE c.TABLE_SCHEMA NOT IN ('information_schema', 'performance_schema', 'mysql', 'sys')
ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION`;
const MYSQL_PATH = `SELECT DATABASE(), @@lower_case_table_names`;
// MariaDB's information_schema.TRIGGERS lists the triggers of every table the user holds some privilege on (their
// text only with the TRIGGER privilege); MySQL's manual says it lists only those of tables the user holds TRIGGER on.
// Neither lets a default, generated column or CHECK call a stored function.
const MYSQL_TRIGGERED = `SELECT DISTINCT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS`;

// The sixth: `hidden`, 2 or 3 for a generated column (table_xinfo lists them, table_info does not).
const SQLITE_COLUMNS = `SELECT l.schema, l.name, p.name, p.type, l.type, p.hidden
FROM pragma_database_list d
JOIN pragma_table_list l ON l.schema = d.name
LEFT JOIN pragma_table_xinfo(l.name, l.schema) p
ORDER BY d.seq, l.name, p.cid`;
const SQLITE_PATH = `SELECT name FROM pragma_database_list ORDER BY CASE name WHEN 'temp' THEN 0 ELSE 1 END, seq`;
// The CREATE text of the tables with a generated column (hidden 2 or 3), where SQLite keeps its expression; an attached
// schema's are not read (its sqlite_master is named by the schema), so its generated columns read every other column.
const SQLITE_CREATES = `SELECT 'main', m.name, m.sql FROM main.sqlite_master m
  WHERE m.type = 'table' AND EXISTS (SELECT 1 FROM pragma_table_xinfo(m.name, 'main') x WHERE x.hidden IN (2, 3))
UNION ALL SELECT 'temp', m.name, m.sql FROM temp.sqlite_master m
  WHERE m.type = 'table' AND EXISTS (SELECT 1 FROM pragma_table_xinfo(m.name, 'temp') x WHERE x.hidden IN (2, 3))`;

/** The queries to run, in this order, and hand to toSchema. */
export function schemaQueries(dialect: SqlDialect): string[] {
  if (dialect === 'postgres') {
    return [POSTGRES_COLUMNS, POSTGRES_RELATIONS, POSTGRES_PATH, POSTGRES_TRIGGERED, POSTGRES_REACH, POSTGRES_GENERATED, POSTGRES_INHERITS, POSTGRES_OPERATORS];
  }
  if (dialect === 'mysql') return [MYSQL_COLUMNS, MYSQL_PATH, MYSQL_TRIGGERED];
  return [SQLITE_COLUMNS, SQLITE_PATH, SQLITE_CREATES];
}

/** Records that generated column `column` of `r` reads column `source` of it; null: it reads what is not traced. */
function readsColumn(r: Relation, column: string, source: string | null): void {
  if (!r.generated) r.generated = new Map();
  const sources = r.generated.get(column);
  if (sources === null) return;
  if (source === null) r.generated.set(column, null);
  else if (sources) sources.push(source);
  else r.generated.set(column, [source]);
}

/**
 * The names a MySQL/MariaDB generation expression may refer to, lower case: every word and backquoted name in it (a
 * string or function name that happens to be a column's only adds that column to what the generated one carries).
 */
function wordsOf(expression: string): string[] {
  return (expression.match(/`(?:[^`]|``)*`|[\p{L}\p{N}_$]+/gu) ?? []).map((w) => (w.startsWith('`') ? w.slice(1, -1).replaceAll('``', '`') : w).toLowerCase());
}

/**
 * The names SQLite's generated column `column` reads, lower case, from its table's CREATE text: every bare or quoted
 * name in the parenthesized expression after its definition's AS (SQLite allows no subquery there, nor a function the
 * gateway's connection did not define). Null when the text does not read as expected: then it reads every column.
 */
function sqliteExpressionNames(create: string | undefined, column: string): Set<string> | null {
  if (create === undefined) return null;
  const tokens = lex(create, 'sqlite').tokens;
  const open = tokens.findIndex((t) => t.kind === 'punct' && t.text === '(');
  if (open < 0) return null;
  // the column definitions and table constraints: the body's items at depth 1, split at its commas
  let depth = 0;
  let item: Token[] = [];
  for (let k = open; k < tokens.length; k++) {
    const t = tokens[k];
    const punct = t.kind === 'punct' ? t.text : '';
    if (punct === '(') depth++;
    if (punct === ')') depth--;
    if (depth === 0 || (depth === 1 && punct === ',')) {
      const first = item[0];
      if (first && first.kind !== 'punct' && first.kind !== 'num' && first.text.toLowerCase() === column.toLowerCase()) return expressionNames(item);
      if (depth === 0) return null;
      item = [];
    } else if (k > open) item.push(t);
  }
  return null;
}

/** The names in the parenthesized expression that follows a column definition's AS at its own depth; null without one. */
function expressionNames(definition: Token[]): Set<string> | null {
  let depth = 0;
  for (let k = 0; k + 1 < definition.length; k++) {
    const t = definition[k];
    if (t.kind === 'punct' && t.text === '(') depth++;
    else if (t.kind === 'punct' && t.text === ')') depth--;
    else if (depth === 0 && t.kind === 'word' && t.text === 'as' && definition[k + 1].kind === 'punct' && definition[k + 1].text === '(') {
      const names = new Set<string>();
      let inner = 0;
      for (let j = k + 1; j < definition.length; j++) {
        const u = definition[j];
        if (u.kind === 'punct' && u.text === '(') inner++;
        else if (u.kind === 'punct' && u.text === ')' && --inner === 0) return names;
        else if (u.kind === 'word' || u.kind === 'name') names.add(u.text.toLowerCase());
      }
      return null;
    }
  }
  return null;
}

/**
 * Only base tables are traced. Like a view, the other relations read rows another holds: PostgreSQL's foreign tables
 * (postgres_fdw can name a local table), SQLite's virtual tables (an FTS5 table with `content=` reads its content table;
 * fts5vocab lists the words of another's) and their shadow tables (an FTS5 table's copy of its text, its index);
 * MySQL/MariaDB tables of an engine not in OWN_STORAGE (MERGE unions MyISAM tables; FEDERATED, CONNECT and SPIDER read
 * other servers' or tables').
 */
const TRACEABLE = new Set(['BASE TABLE', 'table']);
const OWN_STORAGE = new Set([
  'innodb',
  'myisam',
  'aria',
  'memory',
  'heap',
  'archive',
  'csv',
  'rocksdb',
  'tokudb',
  'columnstore',
  's3',
  'blackhole',
  'ndbcluster',
]);

/**
 * SQLite's own tables (sqlite_schema, sqlite_sequence, sqlite_stat1..4) are untraced, as PostgreSQL's and MySQL's
 * catalogs are (their queries leave them out): sqlite_stat4 keeps sample rows of indexed columns, masked ones too.
 */
function isSqliteOwn(dialect: SqlDialect, name: string): boolean {
  return dialect === 'sqlite' && name.toLowerCase().startsWith('sqlite_');
}

/** The rows of schemaQueries(dialect), each query's rows in turn, to a Schema. */
export function toSchema(dialect: SqlDialect, results: unknown[][][]): Schema {
  const [columns, second, third, fourth, fifth, sixth, seventh, eighth] = results;
  let path: string[];
  let foldTables = dialect === 'sqlite';
  if (dialect === 'postgres') path = (third ?? []).map((r) => String(r[0]));
  else if (dialect === 'mysql') {
    const row = second?.[0] ?? [];
    path = row[0] === null || row[0] === undefined ? [] : [String(row[0])];
    foldTables = Number(row[1] ?? 0) !== 0;
  } else path = (second ?? []).map((r) => String(r[0]));
  const fold = (s: string) => (foldTables ? s.toLowerCase() : s);
  const relations = new Map<string, Relation>();
  for (const row of columns ?? []) {
    const schema = String(row[0]);
    const name = String(row[1]);
    const key = `${fold(schema)}${SEP}${fold(name)}`;
    let r = relations.get(key);
    if (!r) {
      const own = TRACEABLE.has(String(row[4])) && !isSqliteOwn(dialect, name) && (dialect !== 'mysql' || OWN_STORAGE.has(String(row[6]).toLowerCase()));
      r = { key, schema, name, columns: own ? [] : null, types: [] };
      relations.set(key, r);
    }
    if (r.columns && row[2] !== null && row[2] !== undefined) {
      r.columns.push(String(row[2]));
      r.types.push(String(row[3] ?? ''));
      if (dialect === 'mysql' && /\bINVISIBLE\b/i.test(String(row[7] ?? ''))) {
        if (!r.invisible) r.invisible = new Set();
        r.invisible.add(String(row[2]));
      }
    }
  }
  if (dialect === 'postgres') {
    const fired = triggeredOids(fourth ?? [], fifth ?? []);
    const byOid = new Map<string, Relation>();
    for (const row of second ?? []) {
      const key = `${String(row[0])}${SEP}${String(row[1])}`;
      let r = relations.get(key);
      if (!r) {
        r = { key, schema: String(row[0]), name: String(row[1]), columns: null, types: [] };
        relations.set(key, r);
      }
      byOid.set(String(row[2]), r);
      if (fired.has(`rel:${String(row[2])}`)) r.triggered = true;
    }
    for (const row of sixth ?? []) {
      const r = relations.get(`${String(row[0])}${SEP}${String(row[1])}`);
      if (r) readsColumn(r, String(row[2]), row[3] === null || row[3] === undefined ? null : String(row[3]));
    }
    for (const [oid, kin] of families(seventh ?? [])) {
      const r = byOid.get(oid);
      if (r) r.family = kin.flatMap((k) => byOid.get(k)?.key ?? []);
    }
  }
  // Generated columns: MySQL/MariaDB give the expression, read as the names in it; SQLite keeps it only in its table's
  // CREATE text, read for the names in it too (where that text is not read, it reads every other column of its table).
  const creates = new Map((dialect === 'sqlite' ? (third ?? []) : []).map((row) => [`${fold(String(row[0]))}${SEP}${fold(String(row[1]))}`, String(row[2])]));
  for (const row of dialect === 'postgres' ? [] : (columns ?? [])) {
    const generated = dialect === 'mysql' ? Boolean(row[5]) : Number(row[5]) === 2 || Number(row[5]) === 3;
    const r = generated ? relations.get(`${fold(String(row[0]))}${SEP}${fold(String(row[1]))}`) : undefined;
    if (!r?.columns) continue;
    const words = dialect === 'mysql' ? new Set(wordsOf(String(row[5]))) : sqliteExpressionNames(creates.get(r.key), String(row[2]));
    if (!r.generated) r.generated = new Map();
    r.generated.set(
      String(row[2]),
      r.columns.filter((c) => c !== row[2] && (words === null || words.has(c.toLowerCase()))),
    );
  }
  for (const row of dialect === 'mysql' ? (third ?? []) : []) {
    const r = relations.get(`${fold(String(row[0]))}${SEP}${fold(String(row[1]))}`);
    if (r) r.triggered = true;
  }
  const schema: Schema = { dialect, relations, path, foldTables, memo: new Map() };
  if (eighth?.length) schema.opaqueOperators = eighth.map((r) => ({ name: String(r[0]), fn: String(r[1]) }));
  return schema;
}

// ---- Browsing (GET /api/v1/connections/{name}/schema): tables and views, every column with its type,
// whether it may be null, its position and whether it is in the primary key. Rows are
// (schema, table, table type, column, data type, nullable, position, primary key), in table order.

/** Columns answered at most; one more is read to know the list was cut. */
export const BROWSE_MAX_COLUMNS = 5000;

const BROWSE_POSTGRES = `SELECT c.table_schema::text, c.table_name::text, t.table_type::text, c.column_name::text, c.data_type::text,
  c.is_nullable = 'YES', c.ordinal_position::int,
  EXISTS (SELECT 1 FROM information_schema.table_constraints k
          JOIN information_schema.key_column_usage u ON u.constraint_schema = k.constraint_schema AND u.constraint_name = k.constraint_name
          WHERE k.constraint_type = 'PRIMARY KEY' AND k.table_schema = c.table_schema AND k.table_name = c.table_name
            AND u.column_name = c.column_name)
FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = ANY (current_schemas(false)) AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
ORDER BY c.table_schema, c.table_name, c.ordinal_position
LIMIT ${BROWSE_MAX_COLUMNS + 1}`;

const BROWSE_MYSQL = `SELECT c.TABLE_SCHEMA, c.TABLE_NAME, t.TABLE_TYPE, c.COLUMN_NAME, c.COLUMN_TYPE,
  c.IS_NULLABLE = 'YES', c.ORDINAL_POSITION, c.COLUMN_KEY = 'PRI'
FROM information_schema.COLUMNS c
JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
WHERE c.TABLE_SCHEMA = DATABASE()
ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION
LIMIT ${BROWSE_MAX_COLUMNS + 1}`;

const BROWSE_SQLITE = `SELECT 'main', m.name, m.type, p.name, p.type, p."notnull" = 0, p.cid + 1, p.pk > 0
FROM sqlite_master m JOIN pragma_table_info(m.name) p
WHERE m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
ORDER BY m.name, p.cid
LIMIT ${BROWSE_MAX_COLUMNS + 1}`;

export function browseQuery(dialect: SqlDialect): string {
  return dialect === 'postgres' ? BROWSE_POSTGRES : dialect === 'sqlite' ? BROWSE_SQLITE : BROWSE_MYSQL;
}

export interface BrowsedColumn {
  name: string;
  type: string;
  nullable: boolean;
  position: number;
  primary_key: boolean;
}

export interface BrowsedTable {
  name: string;
  schema: string;
  type: 'table' | 'view';
  columns: BrowsedColumn[];
  foreign_keys: BrowsedForeignKey[];
}

/** A foreign key: its columns, in order, and the columns they reference (SQLite's have no name). */
export interface BrowsedForeignKey {
  name: string | null;
  columns: string[];
  references: { schema: string; table: string; columns: string[] };
}

// Foreign keys, one row per column pair: (schema, table, constraint name, column, referenced schema,
// referenced table, referenced column, what groups a constraint's rows), in constraint and column order.
const FOREIGN_POSTGRES = `SELECT n.nspname::text, c.relname::text, k.conname::text, a.attname::text, rn.nspname::text, rc.relname::text,
  ra.attname::text, k.oid::text
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_class rc ON rc.oid = k.confrelid JOIN pg_namespace rn ON rn.oid = rc.relnamespace
CROSS JOIN LATERAL unnest(k.conkey, k.confkey) WITH ORDINALITY AS u(col, refcol, i)
JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.col
JOIN pg_attribute ra ON ra.attrelid = k.confrelid AND ra.attnum = u.refcol
WHERE k.contype = 'f' AND n.nspname = ANY (current_schemas(false)) AND n.nspname NOT IN ('pg_catalog', 'information_schema')
ORDER BY 1, 2, 3, u.i
LIMIT ${BROWSE_MAX_COLUMNS}`;

const FOREIGN_MYSQL = `SELECT TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, REFERENCED_TABLE_SCHEMA, REFERENCED_TABLE_NAME,
  REFERENCED_COLUMN_NAME, CONSTRAINT_NAME
FROM information_schema.KEY_COLUMN_USAGE
WHERE TABLE_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME IS NOT NULL
ORDER BY TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION
LIMIT ${BROWSE_MAX_COLUMNS}`;

const FOREIGN_SQLITE = `SELECT 'main', m.name, NULL, f."from", 'main', f."table", f."to", f.id
FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) f
WHERE m.type = 'table'
ORDER BY m.name, f.id, f.seq
LIMIT ${BROWSE_MAX_COLUMNS}`;

export function foreignKeysQuery(dialect: SqlDialect): string {
  return dialect === 'postgres' ? FOREIGN_POSTGRES : dialect === 'sqlite' ? FOREIGN_SQLITE : FOREIGN_MYSQL;
}

/** browseQuery's rows as tables of columns; `truncated` when there were more columns than answered. */
export function toBrowsed(rows: unknown[][]): { tables: BrowsedTable[]; truncated: boolean } {
  const truncated = rows.length > BROWSE_MAX_COLUMNS;
  const tables: BrowsedTable[] = [];
  let last: BrowsedTable | null = null;
  for (const row of truncated ? rows.slice(0, BROWSE_MAX_COLUMNS) : rows) {
    const [schema, table, kind] = [String(row[0]), String(row[1]), String(row[2]).toLowerCase()];
    if (!last || last.name !== table || last.schema !== schema) {
      last = { name: table, schema, type: kind.includes('view') ? 'view' : 'table', columns: [], foreign_keys: [] };
      tables.push(last);
    }
    last.columns.push({ name: String(row[3]), type: String(row[4] ?? ''), nullable: truthy(row[5]), position: Number(row[6]), primary_key: truthy(row[7]) });
  }
  return { tables, truncated };
}

/**
 * foreignKeysQuery's rows added to the tables they belong to. A SQLite key that names no referenced
 * column references the other table's primary key, in order.
 */
export function addForeignKeys(tables: BrowsedTable[], rows: unknown[][]): void {
  const byName = new Map(tables.map((t) => [`${t.schema}${SEP}${t.name}`, t]));
  let last: { group: string; table: string; fk: BrowsedForeignKey } | null = null;
  for (const row of rows) {
    const table = `${String(row[0])}${SEP}${String(row[1])}`;
    const group = String(row[7]);
    if (!last || last.group !== group || last.table !== table) {
      const fk: BrowsedForeignKey = {
        name: row[2] === null || row[2] === undefined ? null : String(row[2]),
        columns: [],
        references: { schema: String(row[4]), table: String(row[5]), columns: [] },
      };
      last = { group, table, fk };
      byName.get(table)?.foreign_keys.push(fk);
    }
    last.fk.columns.push(String(row[3]));
    if (row[6] !== null && row[6] !== undefined) last.fk.references.columns.push(String(row[6]));
  }
  for (const t of tables) {
    for (const fk of t.foreign_keys) {
      if (fk.references.columns.length) continue;
      const target = byName.get(`${fk.references.schema}${SEP}${fk.references.table}`);
      fk.references.columns = target ? target.columns.filter((c) => c.primary_key).map((c) => c.name) : [];
    }
  }
}

/** A boolean as each driver answers it (true, 1, 1n, '1'). */
function truthy(v: unknown): boolean {
  return v === true || v === 1 || v === 1n || v === '1' || v === 't';
}
