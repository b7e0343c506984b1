// In charge of the SQL that reads a connection's base tables and their columns (what `*` expands to
// for masking), per dialect, and of turning its rows into a Schema. Must not import HTTP/uWS or
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
