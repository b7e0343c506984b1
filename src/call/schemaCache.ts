// In charge of each connection's schema as governance needs it (tables and their columns, for SELECT *
// under masks; on PostgreSQL, which functions a read-only call may run) and the catalog (column types):
// at most 60 s old, re-read in the background after 45 s while calls go on with the cached copy,
// re-read at once when the connection's row changes. Bounded by the number of connections kept.
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import {
  type FunctionCatalog,
  MYSQL_FUNCTIONS,
  POSTGRES_FUNCTIONS,
  toFunctionCatalog,
  toPostgresFunctionCatalog,
  untracedOperators,
} from '../governance/functions.js';
import type { Schema } from '../governance/names.js';
import { schemaQueries, toSchema } from '../governance/schema.js';
import type { Source } from '../sources/types.js';
import type { ConnectionRow } from '../store/types.js';

export interface KnownSchema {
  /** Every relation the connection can name, base tables' columns and types, the search path, the case rules. */
  schema: Schema;
  /** Changes only when the relations, columns, path or case rules do, so traces built on it can be kept. */
  fingerprint: string;
  /** Which functions cannot change anything (governance/functions.ts): PostgreSQL's pg_proc, MySQL's stored functions; null on SQLite. */
  functions: FunctionCatalog | null;
  /** PostgreSQL: the user's operators and casts whose function may read what no rule follows (functions.ts), or null. */
  untracedOperators: string[] | null;
}

const MAX_AGE_MS = 60_000;
const REFRESH_AFTER_MS = 45_000;

interface Entry {
  /** The connection row it was read for: its type and its last change. */
  db: string;
  updatedAt: string;
  readAt: number;
  value: Promise<KnownSchema>;
  /** The value once read: calls take it without a promise. */
  known: KnownSchema | null;
  refreshing: boolean;
}

export class SchemaCache {
  #entries = new LRUCache<string, Entry>({ max: 1000 });

  /** The schema itself once read (every call but the first few), else a promise of it. */
  get(conn: ConnectionRow, source: Source, now = Date.now()): KnownSchema | Promise<KnownSchema> {
    const e = this.#entries.get(conn.name);
    if (e && e.db === conn.db && e.updatedAt === conn.updated_at && now - e.readAt < MAX_AGE_MS) {
      if (now - e.readAt >= REFRESH_AFTER_MS && !e.refreshing) {
        e.refreshing = true;
        const next = this.#read(conn, source, Date.now());
        next.value.then(
          () => this.#entries.set(conn.name, next),
          () => (e.refreshing = false), // keep the cached copy until it is too old
        );
      }
      return e.known ?? e.value;
    }
    const entry = this.#read(conn, source, now);
    this.#entries.set(conn.name, entry);
    entry.value.catch(() => this.#entries.get(conn.name) === entry && this.#entries.delete(conn.name));
    return entry.value;
  }

  /** An entry for the schema read now, which holds the schema itself once read. */
  #read(conn: ConnectionRow, source: Source, now: number): Entry {
    const entry: Entry = { db: conn.db, updatedAt: conn.updated_at, readAt: now, value: read(source), known: null, refreshing: false };
    entry.value.then((known) => (entry.known = known), noop);
    return entry;
  }

  /** Connections whose schema is held or being read (queryapigate_cache_entries{cache="schema"}). */
  get size(): number {
    return this.#entries.size;
  }

  clear(name?: string): void {
    if (name === undefined) this.#entries.clear();
    else this.#entries.delete(name);
  }
}

const noop = () => undefined;

async function read(source: Source): Promise<KnownSchema> {
  const opts = { timeoutMs: 30_000, readOnly: true };
  const [results, functions] = await Promise.all([
    Promise.all(schemaQueries(source.dialect).map((q) => source.run(q, [], opts).then((r) => r.rows))),
    source.dialect === 'postgres'
      ? source.run(POSTGRES_FUNCTIONS, [], opts).then((r) => toPostgresFunctionCatalog(r.rows))
      : source.dialect === 'mysql'
        ? source.run(MYSQL_FUNCTIONS, [], opts).then((r) => toFunctionCatalog(r.rows))
        : null,
  ]);
  const schema = toSchema(source.dialect, results);
  // Types are in the fingerprint too: a column whose type changed is a new table to the catalog; and what masking's
  // checks read of it (what a generated column is computed from: a Map, written out as its entries), so a trace made
  // before they changed is not reused. The user's operators are judged on every call (governCall), not in a trace.
  const relations = [...schema.relations.values()];
  const fingerprint = createHash('sha256')
    .update(JSON.stringify([schema.path, schema.foldTables, relations], (_k, v) => (v instanceof Map ? [...v] : v)))
    .digest('hex')
    .slice(0, 16);
  return { schema, fingerprint, functions, untracedOperators: untracedOperators(schema.opaqueOperators, functions) };
}
