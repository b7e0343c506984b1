// In charge of resolving table names as the database does: a statement's reference (`t`, `s.t`,
// `"T"`, as the parser folded it) or an `allowed_tables` entry to the one relation the connection
// would read: PostgreSQL by its search path (current_schemas(true), pg_catalog and pg_temp included),
// MySQL/MariaDB in the current database or the named one (case per lower_case_table_names), SQLite in
// temp, main, then attached schemas (case-insensitive). Must not import HTTP/uWS or sources.
/** The dialects (analysis.ts's SqlDialect, spelled here so this ground module imports nothing). */
type SqlDialect = 'postgres' | 'sqlite' | 'mysql';

/** One relation the connection can name. `columns` null: a view or other relation whose columns can't be traced. */
export interface Relation {
  /** `schema` + SEP + `name`, as the database stores them (folded where it compares case-insensitively). */
  key: string;
  schema: string;
  name: string;
  columns: string[] | null;
  /** Each column's data type, as the schema query reads it (for the catalog). */
  types: string[];
  /**
   * A write to it can run code the gateway does not read: a trigger; PostgreSQL: also a rewrite rule, or a default,
   * CHECK, policy or domain that calls an unvouched function, here or in a table the write reaches (schema.ts).
   */
  triggered?: true;
  /**
   * Its generated columns, each with the columns of this table its expression reads (a rule on one covers it: a stored
   * `lower(email)` is the email), or null where it depends on what the gateway does not read (a user's function).
   */
  generated?: Map<string, string[] | null>;
  /**
   * PostgreSQL: the tables it inherits from and those that inherit from it (partitions too), at any depth, by key. A
   * parent's scan reads its children's rows and a child's rows are its parents', so a rule on one's column covers the
   * same column of the others.
   */
  family?: string[];
  /** MySQL/MariaDB: its INVISIBLE columns, which `*` leaves out and a statement may still name. */
  invisible?: Set<string>;
}

/** What a connection's names resolve to; read by the schema query (governance/schema.ts). */
export interface Schema {
  dialect: SqlDialect;
  relations: Map<string, Relation>;
  /** Schemas searched, in order, for an unqualified name. */
  path: string[];
  /** True where table and schema names compare case-insensitively (SQLite; MySQL lower_case_table_names 1, 2). */
  foldTables: boolean;
  /** Resolutions already made: the schema is read-only once built. */
  memo: Map<string, Relation | null>;
  /**
   * PostgreSQL: the operators and casts the database defines with a function not vouched for (functions.ts
   * VOUCHED_NATIVE): a statement runs one wherever its types pick it, unseen by the analysis, which judges calls by name.
   */
  opaqueOperators?: OpaqueOperator[];
}

/** A user's operator or cast (`+(text,integer)`, `text::bigint`) and the name of the function it runs. */
export interface OpaqueOperator {
  name: string;
  fn: string;
}

/** Separates schema and name in a table reference and a relation key: no identifier can hold it. */
export const SEP = '\u0000';

/** A statement's table reference as the IR keeps it: the name, or schema + SEP + name. */
export function tableRef(schema: string | null, name: string): string {
  return schema === null ? name : `${schema}${SEP}${name}`;
}

export function splitRef(ref: string): { schema: string | null; name: string } {
  const at = ref.indexOf(SEP);
  return at === -1 ? { schema: null, name: ref } : { schema: ref.slice(0, at), name: ref.slice(at + 1) };
}

/** A reference or key as people write it (`s.t`), for messages. */
export function showRef(ref: string): string {
  return ref.replace(SEP, '.');
}

export function emptySchema(dialect: SqlDialect): Schema {
  return { dialect, relations: new Map(), path: [], foldTables: dialect === 'sqlite', memo: new Map() };
}

const MEMO_MAX = 10_000;

/**
 * The relation a reference names on this connection, or null when it names none the schema knows
 * (a qualified name outside the schemas read, an unqualified one on no schema of the path).
 */
export function resolveTable(schema: Schema, ref: string): Relation | null {
  const hit = schema.memo.get(ref);
  if (hit !== undefined) return hit;
  const { schema: nsp, name } = splitRef(ref);
  const fold = (s: string) => (schema.foldTables ? s.toLowerCase() : s);
  let found: Relation | null = null;
  if (nsp !== null) found = schema.relations.get(`${fold(nsp)}${SEP}${fold(name)}`) ?? null;
  else {
    for (const s of schema.path) {
      found = schema.relations.get(`${fold(s)}${SEP}${fold(name)}`) ?? null;
      if (found) break;
    }
  }
  if (schema.memo.size < MEMO_MAX) schema.memo.set(ref, found);
  return found;
}

/**
 * The key a reference is compared by in `allowed_tables`: its relation's, or for a qualified name the
 * schema does not know, the name itself (folded as the database folds it); null for an unqualified
 * name no schema on the path holds.
 */
export function tableKey(schema: Schema, ref: string): string | null {
  const r = resolveTable(schema, ref);
  if (r) return r.key;
  const { schema: nsp, name } = splitRef(ref);
  if (nsp === null) return null;
  return schema.foldTables ? `${nsp.toLowerCase()}${SEP}${name.toLowerCase()}` : `${nsp}${SEP}${name}`;
}

/**
 * An `allowed_tables` entry read as SQL names are: parts split on dots outside quotes, a quoted part
 * exact, an unquoted one folded as the dialect folds it (PostgreSQL and SQLite lower case; MySQL as
 * written, compared per lower_case_table_names). A third part (a database) is dropped when it is
 * there: entries name tables of the connection's database.
 */
export function parseTableName(entry: string, dialect: SqlDialect): string {
  const parts: string[] = [];
  let cur = '';
  let quoted = false;
  let i = 0;
  const text = entry.trim();
  const quotes = dialect === 'postgres' ? '"' : dialect === 'mysql' ? '`"' : '"`[';
  while (i < text.length) {
    const c = text[i];
    if (quotes.includes(c)) {
      const close = c === '[' ? ']' : c;
      let j = i + 1;
      let name = '';
      while (j < text.length) {
        if (text[j] === close) {
          if (close !== ']' && text[j + 1] === close) {
            name += close;
            j += 2;
            continue;
          }
          break;
        }
        name += text[j++];
      }
      cur += name;
      quoted = true;
      i = j + 1;
      continue;
    }
    if (c === '.') {
      parts.push(quoted ? cur : foldUnquoted(cur.trim(), dialect));
      cur = '';
      quoted = false;
      i++;
      continue;
    }
    cur += c;
    i++;
  }
  parts.push(quoted ? cur : foldUnquoted(cur.trim(), dialect));
  const name = parts[parts.length - 1];
  const nsp = parts.length >= 2 ? parts[parts.length - 2] : null;
  return tableRef(nsp, name);
}

/** An unquoted name as the database folds it: PostgreSQL and SQLite fold ASCII letters to lower case. */
export function foldUnquoted(name: string, dialect: SqlDialect): string {
  return dialect === 'mysql' ? name : name.replace(/[A-Z]+/g, (m) => m.toLowerCase());
}

/** The relation's own name for column `name` as a statement wrote it (PostgreSQL exact, elsewhere case aside), or null. */
export function findColumn(schema: Schema, columns: string[], name: string): string | null {
  if (schema.dialect === 'postgres') return columns.includes(name) ? name : null;
  const folded = name.toLowerCase();
  for (const c of columns) if (c.toLowerCase() === folded) return c;
  return null;
}

/**
 * A Schema of base tables in the dialect's default schema (public, main, the database `app`), for
 * tests and benches that describe a connection by its tables alone.
 */
export function schemaOf(dialect: SqlDialect, tables: Map<string, string[]> | Record<string, string[]>, schema?: string): Schema {
  const nsp = schema ?? (dialect === 'postgres' ? 'public' : dialect === 'sqlite' ? 'main' : 'app');
  const s = emptySchema(dialect);
  s.path = dialect === 'sqlite' ? ['temp', nsp] : [nsp];
  for (const [name, columns] of tables instanceof Map ? tables : Object.entries(tables)) {
    const key = `${nsp}${SEP}${s.foldTables ? name.toLowerCase() : name}`;
    s.relations.set(key, { key, schema: nsp, name, columns: [...columns], types: columns.map(() => '') });
  }
  return s;
}
