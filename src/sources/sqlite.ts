// In charge of running statements on a read-only SQLite file through better-sqlite3 (statement
// cache, integer safety, error mapping); must not import keys, HTTP, governance or the store.

import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { LRUCache } from 'lru-cache';
import { GatewayError } from '../contract/errors.js';
import {
  type BatchHandler,
  COLUMN,
  type ColumnType,
  type ColumnTypes,
  type ConnectionConfig,
  type PoolCounts,
  type ResultSet,
  type RunOptions,
  type Source,
  type SourceSettings,
  type StreamOptions,
  batchRowsOf,
} from './types.js';
import { connectionFailed, queryFailed, timeoutError, tooManyStreams } from './errors.js';

const READ_ONLY_FILE = 'Only statements that read are allowed: SQLite connections are read-only';

type Statement = Database.Statement<unknown[], unknown[]>;

/**
 * Decisions:
 * - Read-only, as the contract says (`mode=ro`): the file is opened `readonly`, and a statement
 *   that returns no data (`stmt.reader === false`: INSERT, CREATE TEMP TABLE, ATTACH, ...) is
 *   refused before it runs, whatever `opts.readOnly` says. One connection per source, not pooled.
 * - Integers are read with `safeIntegers` (as BigInt) and turned into numbers when exact, or into
 *   their decimal string beyond 2^53, so a large INTEGER is never rounded (same rule as int8 on
 *   PostgreSQL). REAL stays a number, BLOB a Buffer, TEXT a string.
 * - Timeout: better-sqlite3 runs on the calling thread and exposes neither a progress handler nor
 *   sqlite3_interrupt, so a running statement cannot be stopped from JS. The limit is checked when
 *   the statement returns: past it, the rows are dropped and the call is `query_timeout`, so the
 *   contract's answer holds, but the thread was busy for the whole run. Waits on a writer's lock
 *   are bounded by the busy timeout (5 s), not by the call's limit.
 * - Streams (`stream()`): `iterate()` on a raw statement, `batchRows` rows pulled per batch, and
 *   nothing pulled while onBatch's promise is pending. An open iterator keeps its connection busy
 *   (better-sqlite3 refuses any other statement on it: "This database connection is busy executing
 *   a query"), so each stream opens its own read-only handle on the file, closed when it ends, and
 *   run() keeps the source's handle. At most MAX_STREAMS at once per source; more is `unavailable`.
 *   Pulling a batch blocks the thread; between batches the stream yields to the event loop
 *   (setImmediate), even when onBatch returns at once, so other work is not starved. The time limit
 *   is checked per batch, on the time spent pulling it (onBatch's time does not count): past it the
 *   iterator is closed and the stream is `query_timeout`; one batch's pull cannot be cut short.
 *   onBatch throwing closes the iterator (`return()`, which resets the statement) and the handle.
 */
const BUSY_TIMEOUT_MS = 5000;
const MAX_STREAMS = 4;
const STATEMENT_CACHE_SIZE = 500;

/**
 * The connection's file, as the operating system will open it (links resolved): inside
 * QUERYAPIGATE_HOME, and never one of the reserved files (the store holds the connections' passwords
 * and the masking secret). Anything else is connection_misconfigured, before the file is opened.
 */
function confinedFile(database: string, settings: SourceSettings): string {
  const home = realpath(settings.home);
  const file = realpath(path.resolve(home, database));
  const inside = path.relative(home, file);
  if (inside === '' || inside.startsWith('..') || path.isAbsolute(inside)) {
    throw new GatewayError('connection_misconfigured', "A SQLite connection's file must be inside QUERYAPIGATE_HOME");
  }
  for (const reserved of settings.reserved ?? []) {
    const own = realpath(reserved);
    if (file === own || (file.startsWith(own) && /^-(wal|shm|journal)$/.test(file.slice(own.length)))) {
      throw new GatewayError('connection_misconfigured', "A SQLite connection can't open the gateway's own store");
    }
  }
  return file;
}

/** The path with every link resolved; for a file that does not exist (yet), its folder's. */
function realpath(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    const parent = path.dirname(p);
    return parent === p ? p : path.join(realpath(parent), path.basename(p));
  }
}

export function openSqlite(conn: ConnectionConfig, settings: SourceSettings): Source {
  if (!conn.database) {
    throw new GatewayError('connection_misconfigured', 'A SQLite connection needs `database`, the path of its file');
  }
  const file = confinedFile(conn.database, settings);
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true, timeout: BUSY_TIMEOUT_MS });
  } catch (err) {
    throw connectionFailed(messageOf(err));
  }
  const statements = new LRUCache<string, Statement>({ max: STATEMENT_CACHE_SIZE });
  let streams = 0;
  let closed = false;

  return {
    dialect: 'sqlite',
    run,
    stream,
    syntaxError,
    connections,
    close,
  };

  /** One handle for calls (each runs to its end at once, so it is idle between them), one per stream. */
  function connections(): PoolCounts {
    return { idle: db.open ? 1 : 0, active: streams };
  }

  async function syntaxError(text: string): Promise<string | null> {
    if (closed) throw connectionFailed('source closed');
    try {
      db.prepare(text); // compiled, never stepped
      return null;
    } catch (err) {
      const message = messageOf(err);
      return SYNTAX_ERROR.test(message) ? message : null; // e.g. 'no such table' means it was read
    }
  }

  async function run(text: string, values: unknown[], opts: RunOptions): Promise<ResultSet> {
    const started = opts.timeoutMs > 0 ? performance.now() : 0;
    let rows: unknown[][];
    let columns: string[];
    let types: ColumnTypes;
    try {
      const stmt = prepare(text);
      // Names per run, not cached: a schema change on the file can change what `*` expands to.
      const described = stmt.columns();
      columns = described.map((c) => c.name);
      types = described.map(declaredType);
      rows = stmt.all(...bindable(values)) as unknown[][];
    } catch (err) {
      throw toCallError(err);
    }
    if (opts.timeoutMs > 0 && performance.now() - started > opts.timeoutMs) throw timeoutError(opts.timeoutMs);
    fixIntegers(rows);
    return { columns, rows, rowCount: rows.length, types };
  }

  async function stream(text: string, values: unknown[], opts: StreamOptions, onBatch: BatchHandler): Promise<number> {
    if (closed) throw connectionFailed('source closed');
    if (streams >= MAX_STREAMS) {
      throw tooManyStreams(MAX_STREAMS);
    }
    streams++;
    let handle: Database.Database | null = null;
    let it: IterableIterator<unknown[]> | null = null;
    let handed = 0;
    try {
      let columns: string[];
      let types: ColumnTypes;
      try {
        handle = new Database(file, { readonly: true, fileMustExist: true, timeout: BUSY_TIMEOUT_MS });
        const stmt = handle.prepare<unknown[], unknown[]>(text);
        if (!stmt.reader) {
          throw new GatewayError('read_only', READ_ONLY_FILE);
        }
        stmt.raw(true).safeIntegers(true);
        const described = stmt.columns();
        columns = described.map((c) => c.name);
        types = described.map(declaredType);
        it = stmt.iterate(...bindable(values));
      } catch (err) {
        throw toCallError(err);
      }
      const iter = it;
      for (let first = true; ; first = false) {
        const started = opts.timeoutMs > 0 ? performance.now() : 0;
        const rows: unknown[][] = [];
        const batchRows = batchRowsOf(opts);
        let done = false;
        try {
          while (rows.length < batchRows) {
            const r = iter.next();
            if (r.done) {
              done = true;
              it = null; // finished: the statement is reset already
              break;
            }
            rows.push(r.value);
          }
        } catch (err) {
          it = null; // a step that failed has reset the statement
          throw toCallError(err);
        }
        if (opts.timeoutMs > 0 && performance.now() - started > opts.timeoutMs) throw timeoutError(opts.timeoutMs);
        if (rows.length > 0 || first) {
          fixIntegers(rows);
          handed += rows.length;
          await onBatch(columns, rows, types); // a throw ends the stream (finally closes the iterator)
        }
        if (done) return handed;
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (closed) throw connectionFailed('source closed');
      }
    } finally {
      streams--;
      try {
        it?.return?.();
      } finally {
        handle?.close();
      }
    }
  }

  async function close(): Promise<void> {
    closed = true;
    statements.clear();
    if (db.open) db.close();
  }

  function prepare(text: string): Statement {
    let stmt = statements.get(text);
    if (!stmt) {
      stmt = db.prepare<unknown[], unknown[]>(text);
      if (!stmt.reader) {
        throw new GatewayError('read_only', READ_ONLY_FILE);
      }
      stmt.raw(true).safeIntegers(true);
      statements.set(text, stmt);
    }
    return stmt;
  }
}

/** How SQLite words a statement it cannot parse (it has no separate error code for it). */
const SYNTAX_ERROR = /syntax error|incomplete input|unrecognized token/;

/**
 * A column's declared type read by SQLite's affinity rules (INT → integer, CHAR/CLOB/TEXT → text,
 * BLOB → bytes, REAL/FLOA/DOUB → float), plus the names SQLite files commonly use for dates,
 * timestamps, JSON and scaled decimals (booleans are 0/1 integers in SQLite, so left to INT). Expressions have no declared type: null, their values decide.
 */
function declaredType(c: { type: string | null }): ColumnType | null {
  if (!c.type) return null;
  let type = declaredTypes.get(c.type);
  if (type === undefined) {
    type = readDeclared(c.type.toUpperCase());
    if (declaredTypes.size < 1000) declaredTypes.set(c.type, type); // a schema's handful of spellings
  }
  return type;
}

/** Declared type spellings read so far (every run describes its columns, so this is on the call's path). */
const declaredTypes = new Map<string, ColumnType | null>();

function readDeclared(t: string): ColumnType | null {
  if (t.includes('INT')) return COLUMN.integer;
  if (/CHAR|CLOB|TEXT/.test(t)) return COLUMN.text;
  if (t.includes('BLOB')) return COLUMN.bytes;
  if (/REAL|FLOA|DOUB/.test(t)) return COLUMN.float;
  if (t === 'DATE') return COLUMN.date;
  if (t === 'DATETIME' || t.startsWith('TIMESTAMP')) return COLUMN.timestamp;
  if (t === 'JSON') return COLUMN.json;
  const scaled = /^(?:DECIMAL|NUMERIC)\s*\(\s*\d+\s*,\s*(\d+)\s*\)$/.exec(t);
  return scaled ? { kind: 'decimal', scale: Number(scaled[1]) } : null;
}

/** Integers come as BigInt (safeIntegers): a number while exact, else the decimal string. */
function fixIntegers(rows: unknown[][]): void {
  for (const row of rows) {
    for (let i = 0; i < row.length; i++) {
      const v = row[i];
      if (typeof v === 'bigint') row[i] = Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
    }
  }
}

/** better-sqlite3 binds numbers, strings, bigints, buffers and null; map the rest like sqlite3 does. */
function bindable(values: unknown[]): unknown[] {
  let out = values;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    let w: unknown = v;
    if (v === undefined) w = null;
    else if (typeof v === 'boolean') w = v ? 1 : 0;
    else if (v instanceof Date) w = v.toISOString();
    else if (v !== null && typeof v === 'object' && !Buffer.isBuffer(v)) w = JSON.stringify(v);
    if (w !== v) {
      if (out === values) out = values.slice();
      out[i] = w;
    }
  }
  return out;
}

function toCallError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const detail = messageOf(err);
  if (typeof code === 'string') {
    if (code.startsWith('SQLITE_READONLY')) {
      return new GatewayError('read_only', READ_ONLY_FILE, {
        detail,
      });
    }
    if (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CANTOPEN')) {
      return connectionFailed(detail);
    }
  }
  return queryFailed(detail);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
