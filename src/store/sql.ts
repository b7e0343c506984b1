// In charge of one tiny SQL interface over the two store engines (better-sqlite3 and postgres.js),
// so the store's queries are written once with `?` markers. Knows nothing of the store's tables.
import Database from 'better-sqlite3';
import { LRUCache } from 'lru-cache';
import postgres from 'postgres';

export interface SqlDb {
  readonly dialect: 'sqlite' | 'postgres';
  all<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  run(text: string, params?: unknown[]): Promise<number>;
  /** Runs fn in one transaction (serialized on SQLite, where the connection is shared). */
  tx<T>(fn: (db: SqlDb) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export function openSqlite(file: string, opts: { readonly?: boolean } = {}): SqlDb {
  const db = new Database(file, { readonly: opts.readonly ?? false, fileMustExist: opts.readonly ?? false });
  db.pragma('busy_timeout = 5000');
  if (!opts.readonly) {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
  }
  // Bounded: the event log's segment tables keep adding statement texts.
  const statements = new LRUCache<string, Database.Statement>({ max: 500 });
  const prepare = (text: string) => {
    let s = statements.get(text);
    if (!s) {
      s = db.prepare(text);
      statements.set(text, s);
    }
    return s;
  };
  const bind = (params: unknown[]) => params.map((p) => (typeof p === 'boolean' ? (p ? 1 : 0) : p));
  let chain: Promise<unknown> = Promise.resolve();
  const self: SqlDb = {
    dialect: 'sqlite',
    async all<T>(text: string, params: unknown[] = []) {
      return prepare(text).all(...bind(params)) as T[];
    },
    async run(text, params = []) {
      return prepare(text).run(...bind(params)).changes;
    },
    tx<T>(fn: (db: SqlDb) => Promise<T>) {
      const next = chain.then(async () => {
        db.exec('BEGIN IMMEDIATE');
        try {
          const out = await fn(self);
          db.exec('COMMIT');
          return out;
        } catch (e) {
          if (db.inTransaction) db.exec('ROLLBACK');
          throw e;
        }
      });
      chain = next.catch(() => undefined);
      return next;
    },
    async close() {
      db.close();
    },
  };
  return self;
}

export function openPostgres(url: string, opts: { max?: number } = {}): SqlDb {
  // Several one-connection clients, each call on the least busy one: a single postgres.js client
  // with more queries in flight than connections slows down the longer it runs (DESIGN, measured traps).
  const clients = Array.from({ length: Math.max(1, opts.max ?? 4) }, () => ({
    sql: postgres(url, { max: 1, idle_timeout: 60, connect_timeout: 10, onnotice: () => undefined, types: { bigint: postgres.BigInt } }),
    busy: 0,
  }));
  const pick = () => {
    let best = clients[0];
    for (const c of clients) if (c.busy < best.busy) best = c;
    return best;
  };
  // Bounded, as on SQLite: the event log's segment tables keep adding statement texts.
  const positional = new LRUCache<string, string>({ max: 500 });
  const toPg = (text: string) => {
    let out = positional.get(text);
    if (out === undefined) {
      let n = 0;
      out = text.replace(/\?/g, () => `$${++n}`);
      positional.set(text, out);
    }
    return out;
  };
  const on = async <T>(run: (q: postgres.Sql) => Promise<T>): Promise<T> => {
    const c = pick();
    c.busy++;
    try {
      return await run(c.sql);
    } finally {
      c.busy--;
    }
  };
  /** In the transaction `q`, or on the least busy client. */
  const exec = (q: postgres.Sql | postgres.TransactionSql | null, text: string, params: unknown[]) => {
    const send = (s: postgres.Sql | postgres.TransactionSql) => s.unsafe(toPg(text), params as postgres.ParameterOrJSON<never>[], { prepare: true });
    return q ? send(q) : on(send);
  };
  const wrap = (q: postgres.Sql | postgres.TransactionSql | null): SqlDb => ({
    dialect: 'postgres',
    async all<T>(text: string, params: unknown[] = []) {
      return (await exec(q, text, params)).map(fromPg) as T[];
    },
    async run(text, params = []) {
      return (await exec(q, text, params)).count;
    },
    tx<T>(fn: (db: SqlDb) => Promise<T>) {
      return on((s) => s.begin((t) => fn(wrap(t))) as Promise<T>);
    },
    async close() {
      await Promise.all(clients.map((c) => c.sql.end({ timeout: 5 })));
    },
  });
  return wrap(null);
}

/** Store ids are BIGSERIAL on PostgreSQL; they stay far below 2^53, so plain numbers. */
function fromPg(row: Record<string, unknown>): Record<string, unknown> {
  for (const k in row) if (typeof row[k] === 'bigint') row[k] = Number(row[k]);
  return row;
}

/**
 * Rows for the next piece of a multi-row INSERT: `max` at a time, the rest in powers of two, so a
 * table sees a handful of statement texts (each prepared and cached) whatever the batch sizes.
 */
export function nextPiece(left: number, max: number): number {
  return left >= max ? max : 2 ** Math.floor(Math.log2(left));
}

const VALUES_LISTS = new Map<string, string>();
/** `(?, ?), (?, ?)...` for `rows` rows of `columns` markers; bounded by the pieces nextPiece makes. */
export function valuesList(rows: number, columns: number): string {
  const k = `${rows}x${columns}`;
  let v = VALUES_LISTS.get(k);
  if (v === undefined) {
    v = new Array(rows).fill(`(${new Array(columns).fill('?').join(', ')})`).join(', ');
    VALUES_LISTS.set(k, v);
  }
  return v;
}
