// In charge of the SQL that reads a connection's base tables and their columns (what `*` expands to
// for masking), per dialect, and of turning its rows into a Schema. Must not import HTTP/uWS or
// sources: the caller runs the query through its source.
//
// Views are left out on purpose: a view's columns can't be traced to the tables they come from, so a
// column read through a view is untraceable and a key with mask rules is refused (fail closed).
import type { SqlDialect } from './analysis.js';
import type { Schema } from './masking.js';

const POSTGRES = `SELECT c.table_name::text, c.column_name::text, c.table_schema::text
FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE t.table_type IN ('BASE TABLE', 'FOREIGN', 'FOREIGN TABLE')
  AND c.table_schema = ANY (current_schemas(false))
  AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
ORDER BY array_position(current_schemas(false), c.table_schema::name), c.table_name, c.ordinal_position`;

const SQLITE = `SELECT m.name, p.name
FROM sqlite_master m JOIN pragma_table_info(m.name) p
WHERE m.type = 'table'
ORDER BY m.name, p.cid`;

const MYSQL = `SELECT c.TABLE_NAME, c.COLUMN_NAME
FROM information_schema.COLUMNS c
JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
WHERE c.TABLE_SCHEMA = DATABASE() AND t.TABLE_TYPE = 'BASE TABLE'
ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION`;

/** A query returning rows (table_name, column_name[, table_schema]) in column order, base tables only. */
export function schemaQuery(dialect: SqlDialect): string {
  return dialect === 'postgres' ? POSTGRES : dialect === 'sqlite' ? SQLITE : MYSQL;
}

/**
 * Rows (table_name, column_name[, table_schema]) to a Schema keyed by bare lower-case table name. When
 * two schemas on the search path hold a table of the same name, the first one seen (earlier on the
 * path) wins. Rows of one table must be contiguous, as the queries above order them.
 */
export function toSchema(rows: unknown[][]): Schema {
  const schema: Schema = new Map();
  let run: string | null = null;
  let cols: string[] | null = null;
  for (const row of rows) {
    const table = String(row[0]);
    const id = row.length > 2 ? `${String(row[2])}\u0000${table}` : table;
    if (id !== run) {
      run = id;
      const key = table.toLowerCase();
      if (schema.has(key)) cols = null;
      else {
        cols = [];
        schema.set(key, cols);
      }
    }
    if (cols) cols.push(String(row[1]));
  }
  return schema;
}
