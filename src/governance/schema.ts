// In charge of the SQL that reads a connection's base tables and their columns (what `*` expands to
// for masking; and, for browsing, tables and views with their keys), per dialect, and of turning its
// rows into a Schema. Must not import HTTP/uWS or
// sources: the caller runs the query through its source.
//
// Views are left out on purpose: a view's columns can't be traced to the tables they come from, so a
// column read through a view is untraceable and a key with mask rules is refused (fail closed).
import type { SqlDialect } from './analysis.js';
import type { Schema } from './masking.js';

const POSTGRES = `SELECT c.table_name::text, c.column_name::text, c.data_type::text, c.table_schema::text
FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE t.table_type IN ('BASE TABLE', 'FOREIGN', 'FOREIGN TABLE')
  AND c.table_schema = ANY (current_schemas(false))
  AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
ORDER BY array_position(current_schemas(false), c.table_schema::name), c.table_name, c.ordinal_position`;

const SQLITE = `SELECT m.name, p.name, p.type
FROM sqlite_master m JOIN pragma_table_info(m.name) p
WHERE m.type = 'table'
ORDER BY m.name, p.cid`;

const MYSQL = `SELECT c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE
FROM information_schema.COLUMNS c
JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
WHERE c.TABLE_SCHEMA = DATABASE() AND t.TABLE_TYPE = 'BASE TABLE'
ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION`;

/**
 * A query returning rows (table_name, column_name, data_type[, table_schema]) in column order, base
 * tables only. data_type is the database's own name (information_schema's, or SQLite's declared type).
 */
export function schemaQuery(dialect: SqlDialect): string {
  return dialect === 'postgres' ? POSTGRES : dialect === 'sqlite' ? SQLITE : MYSQL;
}

/** Per bare lower-case table, its columns' data types by lower-case column name (for the catalog). */
export type ColumnTypes = Map<string, Map<string, string>>;

/**
 * Rows (table_name, column_name, data_type[, table_schema]) to a Schema keyed by bare lower-case table
 * name. When two schemas on the search path hold a table of the same name, the first one seen (earlier
 * on the path) wins. Rows of one table must be contiguous, as the queries above order them.
 */
export function toSchema(rows: unknown[][]): Schema {
  const schema: Schema = new Map();
  eachTable(rows, (key, cols) =>
    schema.set(
      key,
      cols.map((row) => String(row[1])),
    ),
  );
  return schema;
}

/** The same rows to each column's data type, with the same rule for a name on two schemas. */
export function toColumnTypes(rows: unknown[][]): ColumnTypes {
  const types: ColumnTypes = new Map();
  eachTable(rows, (key, cols) => types.set(key, new Map(cols.map((row) => [String(row[1]).toLowerCase(), String(row[2] ?? '')]))));
  return types;
}

/** Calls `use` once per table (its key and rows), the first of several schemas' tables of one name only. */
function eachTable(rows: unknown[][], use: (key: string, rows: unknown[][]) => void): void {
  const seen = new Set<string>();
  let run: string | null = null; // the table (and schema) whose rows are being read
  let key = '';
  let cols: unknown[][] | null = null;
  for (const row of rows) {
    const table = String(row[0]);
    const id = row.length > 3 ? `${String(row[3])}\u0000${table}` : table;
    if (id !== run) {
      if (cols) use(key, cols);
      run = id;
      key = table.toLowerCase();
      cols = seen.has(key) ? null : [];
      seen.add(key);
    }
    if (cols) cols.push(row);
  }
  if (cols) use(key, cols);
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
}

/** browseQuery's rows as tables of columns; `truncated` when there were more columns than answered. */
export function toBrowsed(rows: unknown[][]): { tables: BrowsedTable[]; truncated: boolean } {
  const truncated = rows.length > BROWSE_MAX_COLUMNS;
  const tables: BrowsedTable[] = [];
  let last: BrowsedTable | null = null;
  for (const row of truncated ? rows.slice(0, BROWSE_MAX_COLUMNS) : rows) {
    const [schema, table, kind] = [String(row[0]), String(row[1]), String(row[2]).toLowerCase()];
    if (!last || last.name !== table || last.schema !== schema) {
      last = { name: table, schema, type: kind.includes('view') ? 'view' : 'table', columns: [] };
      tables.push(last);
    }
    last.columns.push({ name: String(row[3]), type: String(row[4] ?? ''), nullable: truthy(row[5]), position: Number(row[6]), primary_key: truthy(row[7]) });
  }
  return { tables, truncated };
}

/** A boolean as each driver answers it (true, 1, 1n, '1'). */
function truthy(v: unknown): boolean {
  return v === true || v === 1 || v === 1n || v === '1' || v === 't';
}
