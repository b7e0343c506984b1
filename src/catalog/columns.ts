// In charge of a saved statement's output columns as the catalog shows them: their names (with `*`
// expanded from the connection's schema) and, where the schema tells it, the JSON type of the values
// the gateway answers with. Only a column that hands one table column on unchanged (a bare reference,
// a `*` column) has a type; anything computed is left untyped rather than guessed.
import { uniqueColumnNames } from '../call/formats.js';
import type { StatementAnalysis } from '../governance/analysis.js';
import { type Schema, traceOutputs } from '../governance/masking.js';
import type { ColumnTypes } from '../governance/schema.js';
import { lex } from '../governance/scan.js';
import type { Dialect } from '../sources/types.js';

/** A JSON Schema for one value, as the gateway renders it (see call/formats.ts). */
export type JsonSchema = Record<string, unknown>;

export interface CatalogColumn {
  name: string;
  /** The database's data type, when the schema tells it. */
  dataType: string | null;
  /** The rendered value's JSON Schema; {} when unknown. */
  schema: JsonSchema;
}

/**
 * The columns of a statement's rows, or null when they can't be listed (no rows to describe, a `*`
 * over a table the schema does not know). A statement that returns nothing (a write without
 * RETURNING) has [].
 */
export function outputColumns(analysis: StatementAnalysis | null, schema: Schema, types: ColumnTypes, dialect: Dialect, sql?: string): CatalogColumn[] | null {
  if (analysis === null || analysis.outputs === null) return null;
  const traced = traceOutputs(analysis.outputs, schema);
  // A `*` the schema could not expand stands for columns nobody can name.
  if (traced.some((c) => c.untraced !== null && c.name.endsWith('*'))) return null;
  // The parsers fold names to lower case; MySQL names a column as the statement spells it, SQLite
  // too when it is an alias, and a bare column reference as its table declares it.
  const spelled = dialect !== 'postgres' && sql !== undefined ? selectListSpellings(sql, dialect) : null;
  const asAnswered = (c: (typeof traced)[number]): string => {
    const s = c.expected === undefined ? spelled?.get(c.name) : undefined;
    if (!s) return c.name;
    if (dialect === 'sqlite' && s.bare && c.sources.length === 1) {
      const { table, column } = c.sources[0];
      return schema.get(table)?.find((declared) => declared.toLowerCase() === column) ?? s.written;
    }
    return s.written;
  };
  const names = uniqueColumnNames(traced.map(asAnswered)); // id, id_2: as the answer names them
  return traced.map((c, i) => {
    const dataType = c.direct && c.untraced === null ? commonType(c.sources, types) : null;
    return { name: names[i], dataType, schema: dataType === null ? {} : valueSchema(dialect, dataType) };
  });
}

/**
 * Each output name of the statement's outermost select list (the first SELECT ... FROM outside
 * parentheses) as written, by its lower-case form, the first spelling winning; `bare` when its item is
 * a plain column reference (`t.col`), not an alias.
 */
function selectListSpellings(sql: string, dialect: Dialect): Map<string, { written: string; bare: boolean }> {
  const out = new Map<string, { written: string; bare: boolean }>();
  let depth = 0;
  let inList = false;
  let last: string | null = null; // the item's last name
  let bare = true; // the item is names and dots only
  const endItem = () => {
    if (last !== null && !out.has(last.toLowerCase())) out.set(last.toLowerCase(), { written: last, bare });
    last = null;
    bare = true;
  };
  let afterDot = false;
  for (const t of lex(sql, dialect).tokens) {
    if (t.kind === 'punct' && (t.text === '(' || t.text === ')')) {
      depth += t.text === '(' ? 1 : -1;
      bare = false;
      continue;
    }
    if (depth !== 0) continue;
    if (!inList) {
      inList = t.kind === 'word' && t.text === 'select';
      continue;
    }
    const word = t.kind === 'word' ? t.text : null;
    if (word === 'from') break;
    if (t.kind === 'punct' && t.text === ',') endItem();
    else if (t.kind === 'punct' && t.text === '.') {
      afterDot = true;
      continue;
    } else if (word === 'as') bare = false;
    else if (t.kind === 'word' || t.kind === 'name') {
      if (last !== null && !afterDot) bare = false; // `expr alias` without AS
      last = t.kind === 'word' ? sql.slice(t.at, t.at + t.text.length) : t.text;
    } else bare = false;
    afterDot = false;
  }
  endItem();
  return out;
}

/** The one data type every source column has, or null. */
function commonType(sources: Array<{ table: string; column: string }>, types: ColumnTypes): string | null {
  let type: string | null = null;
  for (const s of sources) {
    const t = types.get(s.table)?.get(s.column);
    if (t === undefined || t === '' || (type !== null && t !== type)) return null;
    type = t;
  }
  return type;
}

const nullable = (type: string | string[], extra: JsonSchema = {}): JsonSchema => ({ type: [...[type].flat(), 'null'], ...extra });
/** 64-bit integers are numbers while exact, their digits as a string beyond 2^53 (call/formats.ts). */
const BIG_INTEGER = nullable(['integer', 'string']);
const INTEGER = nullable('integer');
const NUMBER = nullable('number');
const BOOLEAN = nullable('boolean');
const TEXT = nullable('string');
const DATE = nullable('string', { format: 'date' });
/** Rendered "YYYY-MM-DD HH:MM:SS", the zone dropped: not RFC 3339, so no `format`. */
const TIMESTAMP = nullable('string', { description: 'YYYY-MM-DD HH:MM:SS' });

/** The JSON Schema of a value of `dataType` (the name the schema query reads) as the gateway renders it. */
export function valueSchema(dialect: Dialect, dataType: string): JsonSchema {
  const t = dataType.toLowerCase();
  if (dialect === 'sqlite') return sqliteSchema(t);
  const exact = dialect === 'postgres' ? POSTGRES_TYPES[t] : MYSQL_TYPES[t];
  if (exact) return exact;
  if (t.startsWith('timestamp') || t === 'datetime') return TIMESTAMP;
  if (t.startsWith('time') || t.startsWith('interval')) return TEXT;
  return {};
}

const POSTGRES_TYPES: Record<string, JsonSchema> = {
  smallint: INTEGER,
  integer: INTEGER,
  bigint: BIG_INTEGER,
  numeric: NUMBER, // Decimal → float (the contract)
  real: NUMBER,
  'double precision': NUMBER,
  boolean: BOOLEAN,
  text: TEXT,
  'character varying': TEXT,
  character: TEXT,
  '"char"': TEXT,
  name: TEXT,
  uuid: TEXT,
  date: DATE,
  json: TEXT, // JSON columns are answered as JSON text
  jsonb: TEXT,
  array: TEXT, // arrays too: nested values become a JSON string
  bytea: TEXT,
  inet: TEXT,
  cidr: TEXT,
};

const MYSQL_TYPES: Record<string, JsonSchema> = {
  tinyint: INTEGER,
  smallint: INTEGER,
  mediumint: INTEGER,
  int: INTEGER,
  integer: INTEGER,
  year: INTEGER,
  bigint: BIG_INTEGER,
  bit: BIG_INTEGER,
  decimal: NUMBER,
  float: NUMBER,
  double: NUMBER,
  char: TEXT,
  varchar: TEXT,
  tinytext: TEXT,
  text: TEXT,
  mediumtext: TEXT,
  longtext: TEXT,
  enum: TEXT,
  set: TEXT,
  uuid: TEXT,
  json: TEXT,
  date: DATE,
  binary: TEXT,
  varbinary: TEXT,
  tinyblob: TEXT,
  blob: TEXT,
  mediumblob: TEXT,
  longblob: TEXT,
};

/**
 * SQLite keeps any value in any column outside STRICT tables; the declared type's affinity (SQLite's
 * own rules, in its order) is what the column normally holds, and only the clear ones are named.
 */
function sqliteSchema(declared: string): JsonSchema {
  if (declared.includes('int')) return BIG_INTEGER;
  if (declared.includes('char') || declared.includes('clob') || declared.includes('text')) return TEXT;
  if (declared.includes('real') || declared.includes('floa') || declared.includes('doub')) return NUMBER;
  return {};
}
