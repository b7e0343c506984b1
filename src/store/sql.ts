// In charge of one tiny SQL interface over the two store engines (better-sqlite3 and postgres.js),
// so the store's queries are written once with `?` markers, and of what a store failure is: a store
// that cannot be reached (or is restarting, locked or too slow) raises `unavailable` (503); a
// statement's own error is passed on as it is. Knows nothing of the store's tables.
import Database from 'better-sqlite3';
import { LRUCache } from 'lru-cache';
import { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { setImmediate as nextTurn } from 'node:timers/promises';
import postgres from 'postgres';
import { GatewayError } from '../contract/errors.js';
import { logger } from '../log.js';

export interface SqlDb {
  readonly dialect: 'sqlite' | 'postgres';
  all<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  run(text: string, params?: unknown[]): Promise<number>;
  /** Runs fn in one transaction (serialized on SQLite, where the connection is shared). */
  tx<T>(fn: (db: SqlDb) => Promise<T>): Promise<T>;
  /**
   * PostgreSQL, inside tx only: `COPY <table> (<columns>) FROM STDIN` with `data` in COPY's text format
   * (copyData's pieces, copyField). The cheapest way in for many rows (the event log's, history's).
   * A piece is sent each turn of the event loop, and `data` asked for the next only then (copyData makes it then).
   */
  copyIn(statement: string, data: Iterable<Uint8Array>): Promise<void>;
  close(): Promise<void>;
}

export function openSqlite(file: string, opts: { readonly?: boolean } = {}): SqlDb {
  const db = new Database(file, { readonly: opts.readonly ?? false, fileMustExist: opts.readonly ?? false });
  db.pragma('busy_timeout = 5000');
  // SQLite's own default page cache (2 MB) instead of better-sqlite3's 16 MB: the recorder's appends filled
  // all 16 as heap the process kept (RSS +16 MB after load); the store's hot pages are few.
  db.pragma('cache_size = -2000');
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
  const outage = outageLog();
  let chain: Promise<unknown> = Promise.resolve();
  const self: SqlDb = {
    dialect: 'sqlite',
    async all<T>(text: string, params: unknown[] = []) {
      try {
        const rows = prepare(text).all(...bind(params)) as T[];
        outage.answered();
        return rows;
      } catch (e) {
        throw outage.failed(e);
      }
    },
    async run(text, params = []) {
      try {
        const n = prepare(text).run(...bind(params)).changes;
        outage.answered();
        return n;
      } catch (e) {
        throw outage.failed(e);
      }
    },
    tx<T>(fn: (db: SqlDb) => Promise<T>) {
      const next = chain.then(async () => {
        try {
          db.exec('BEGIN IMMEDIATE');
        } catch (e) {
          throw outage.failed(e);
        }
        try {
          const out = await fn(self);
          db.exec('COMMIT');
          return out;
        } catch (e) {
          if (db.inTransaction) db.exec('ROLLBACK');
          throw outage.failed(e);
        }
      });
      chain = next.catch(() => undefined);
      return next;
    },
    copyIn: () => Promise.reject(new Error('COPY is PostgreSQL only')),
    async close() {
      db.close();
    },
  };
  return self;
}

/**
 * A COPY query whose stream has an 'error' listener from the moment postgres.js makes it. postgres.js resolves the
 * query with the stream, and destroys it with the error when the server's next message fails the query; when both
 * come in one read (CopyInResponse, then the FATAL of a server shutting down), the 'error' is emitted on a tick that
 * runs before an `await` of the query resumes, so no listener was there and the process ended. The listener is put on
 * in the query's `resolve` (postgres.js 4.1's Query method, called with the stream); `finished` then reports the error.
 */
function heardFromBirth<Q extends object>(query: Q): Q {
  const q = query as Q & { resolve(x: unknown): void };
  const resolve = q.resolve;
  q.resolve = function (this: unknown, x: unknown) {
    if (x instanceof Writable) x.on('error', () => undefined);
    return resolve.call(this, x);
  };
  return query;
}

export interface PostgresStoreOptions {
  /** One-connection clients; each statement goes to the least busy one. */
  max?: number;
  /** Seconds a new connection may take to be ready (QUERYAPIGATE_CONNECT_TIMEOUT). */
  connectTimeoutS?: number;
  /**
   * ms a statement may take (0 = no limit): the executors' reads, so a call waits at most this long
   * for a store that is up but does not answer. Sessions start with this statement_timeout; should
   * the server not even answer that, the client is dropped (and replaced) READ_GRACE_MS later.
   */
  readTimeoutMs?: number;
  /**
   * ms a write or a transaction outside those reads may take (0 = no limit): the recorder's, so a
   * statement that never answers (seen once in the store-outage test: its writes stopped for good
   * after a restart) fails as `unavailable` and is tried again, with a new client, instead of holding
   * every later write. The client it ran on is dropped.
   */
  writeTimeoutMs?: number;
}

/** How long past its statement_timeout a read waits for the server's own cancel before the client is dropped. */
const READ_GRACE_MS = 500;

/** One single-connection postgres.js client; `session` counts the connections it has lost. */
interface PgClient {
  sql: postgres.Sql;
  busy: number;
  session: number;
}

/**
 * Decisions:
 * - Statements go to the least busy of `max` single-connection clients: a single postgres.js client
 *   with more queries in flight than connections slows down the longer it runs (DESIGN, measured traps).
 * - Transactions are not postgres.js's `begin`: in 3.4.9 a transaction whose connection dies sends its
 *   ROLLBACK on the dead, reserved connection, and the write it schedules throws from a setImmediate
 *   (socket null), which ends the thread (porsager/postgres#1154, #1208; seen here in the recorder
 *   when the store stopped). Instead a client of their own runs them one at a time, as BEGIN ...
 *   COMMIT statements; a statement finding that client's connection lost since BEGIN is not sent
 *   (it would autocommit on the new session) and the transaction fails as `unavailable`.
 * - postgres.js's reconnect backoff (up to 20 s once connects have failed, even after the store is
 *   back) is off: callers are answered 503 meanwhile and the recorder paces its retries.
 */
export function openPostgres(url: string, opts: PostgresStoreOptions = {}): SqlDb {
  const readMs = opts.readTimeoutMs ?? 0;
  const writeMs = opts.writeTimeoutMs ?? 0;
  const outage = outageLog();
  /** Rejects once `ms` have passed, after dropping `c`'s client (failing what waits on it) for a new one. */
  const deadline = (c: PgClient, ms: number, what: string, set: (t: NodeJS.Timeout) => void, onExpire = () => {}) =>
    new Promise<never>((_, reject) => {
      set(
        setTimeout(() => {
          onExpire();
          const sql = c.sql;
          connect(c);
          void sql.end({ timeout: 0 }).catch(() => undefined);
          reject(Object.assign(new Error(`the store did not answer ${what} within ${ms} ms`), { code: 'STORE_TIMEOUT' }));
        }, ms),
      );
    });
  /** Gives `c` a new postgres.js client (its one connection opened on first use). */
  const connect = (c: PgClient): PgClient => {
    const sql: postgres.Sql = postgres(url, {
      max: 1,
      idle_timeout: 60,
      connect_timeout: opts.connectTimeoutS ?? 10,
      backoff: () => 0,
      onnotice: () => undefined,
      onclose: () => {
        // Only the client in use counts: one dropped for a new one (a limit passed) closes later.
        if (c.sql === sql) c.session++;
      },
      types: { bigint: postgres.BigInt },
      connection: readMs > 0 ? { statement_timeout: readMs } : undefined,
    });
    c.sql = sql;
    return c;
  };
  const make = () => connect({ sql: undefined as unknown as postgres.Sql, busy: 0, session: 0 });
  const clients = Array.from({ length: Math.max(1, opts.max ?? 4) }, make);
  /** Runs the transactions, one after another; made by the first. */
  let txClient: PgClient | null = null;
  let txChain: Promise<unknown> = Promise.resolve();
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
  const send = (sql: postgres.Sql, text: string, params: unknown[]) => sql.unsafe(toPg(text), params as postgres.ParameterOrJSON<never>[], { prepare: true });

  /** One statement outside a transaction, on the least busy client; limited to readMs when set. */
  /**
   * An executor's read (readMs > 0) that finds its connection lost (closed by the store's restart,
   * reset) is sent once more, on a new session: a read is safe to repeat, and the first calls after
   * a restart would otherwise be 503s while the store answers. Writes are never repeated.
   */
  const statement = async (text: string, params: unknown[]): Promise<postgres.RowList<postgres.Row[]>> => {
    try {
      return await attempt(text, params);
    } catch (e) {
      if (readMs === 0 || !LOST_CONNECTION.has(String((causeOf(e) as { code?: unknown } | null)?.code))) throw e;
      return attempt(text, params);
    }
  };

  const attempt = async (text: string, params: unknown[]): Promise<postgres.RowList<postgres.Row[]>> => {
    const c = pick();
    c.busy++;
    let timer: NodeJS.Timeout | undefined;
    try {
      // A read past its statement_timeout whose cancel did not come back either, or a write past its limit.
      const limit = readMs > 0 ? readMs + READ_GRACE_MS : writeMs;
      let out: postgres.RowList<postgres.Row[]>;
      if (limit === 0) out = await send(c.sql, text, params);
      else out = await Promise.race([send(c.sql, text, params), deadline(c, limit, 'a statement', (t) => (timer = t))]);
      outage.answered();
      return out;
    } catch (e) {
      throw outage.failed(e);
    } finally {
      clearTimeout(timer);
      c.busy--;
    }
  };

  /** BEGIN, fn's statements, COMMIT on the transaction client; ROLLBACK on failure while its session lasts. */
  const transaction = async <T>(fn: (db: SqlDb) => Promise<T>): Promise<T> => {
    txClient ??= make();
    const c = txClient;
    const session = c.session;
    let abandoned = false; // past writeMs: its client was dropped, and nothing more of it may be sent
    const inTx = (text: string, params: unknown[] = []) => {
      if (abandoned || c.session !== session) {
        throw Object.assign(new Error('the store connection was lost during a transaction'), { code: 'CONNECTION_CLOSED' });
      }
      return send(c.sql, text, params);
    };
    const t: SqlDb = {
      dialect: 'postgres',
      async all<R>(text: string, params: unknown[] = []) {
        return (await inTx(text, params)).map(fromPg) as R[];
      },
      async run(text, params = []) {
        return (await inTx(text, params)).count;
      },
      async copyIn(statement, data) {
        const stream = await heardFromBirth(inTx(statement, [])).writable();
        for (const piece of data) {
          if (stream.destroyed) break; // failed: finished() says why
          stream.write(piece); // a CopyData message
          await nextTurn(); // the calls waiting meanwhile go first (copyData)
        }
        stream.end();
        await finished(stream);
      },
      tx: (inner) => inner(t), // already in one
      close: async () => undefined,
    };
    const body = async () => {
      // BEGIN goes out with fn's first statement, in one write: both are on this one connection, in order, and a
      // connection lost after BEGIN fails what was sent behind it (the session check catches anything later).
      // execute(): a postgres.js query is sent when first awaited, and this one is awaited last.
      const begun = inTx('BEGIN').execute();
      let out: T;
      try {
        out = await fn(t);
      } finally {
        await begun;
      }
      await inTx('COMMIT');
      return out;
    };
    let timer: NodeJS.Timeout | undefined;
    try {
      const limited = () =>
        Promise.race([
          body(),
          deadline(
            c,
            writeMs,
            'a transaction',
            (x) => (timer = x),
            () => (abandoned = true),
          ),
        ]);
      const out = writeMs > 0 ? await limited() : await body();
      outage.answered();
      return out;
    } catch (e) {
      if (!abandoned && c.session === session) await c.sql.unsafe('ROLLBACK').catch(() => undefined);
      throw outage.failed(e);
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    dialect: 'postgres',
    async all<T>(text: string, params: unknown[] = []) {
      return (await statement(text, params)).map(fromPg) as T[];
    },
    async run(text, params = []) {
      return (await statement(text, params)).count;
    },
    tx<T>(fn: (db: SqlDb) => Promise<T>) {
      const next = txChain.then(() => transaction(fn));
      txChain = next.catch(() => undefined);
      return next;
    },
    copyIn: () => Promise.reject(new Error('COPY runs inside tx')),
    async close() {
      const all = txClient ? [...clients, txClient] : clients;
      await Promise.all(all.map((c) => c.sql.end({ timeout: 5 })));
    },
  };
}

// A session that was there and went away (not one that could not be had, nor a slow statement).
const LOST_CONNECTION = new Set(['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'ECONNRESET', 'EPIPE', '57P01']);
// postgres.js's own codes for a connection that could not be had or went away, and our read limit's.
const DRIVER_UNREACHABLE = new Set(['CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED', 'STORE_TIMEOUT']);
// SQLSTATEs of a server going away, starting up, full of sessions, or cancelling a statement past its time.
const PG_UNAVAILABLE = new Set(['57P01', '57P02', '57P03', '53300', '57014']);
// SQLite: the file locked by another writer past busy_timeout, unreadable, unopenable, or its disk full.
const SQLITE_UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|FULL)/;

/** True when `e` says the store cannot be used just now, not that a statement was wrong. */
export function isUnavailable(e: unknown): boolean {
  if (e instanceof GatewayError) return e.code === 'unavailable';
  const err = (e ?? {}) as { name?: unknown; code?: unknown; syscall?: unknown };
  const code = typeof err.code === 'string' ? err.code : '';
  if (err.name === 'PostgresError') return code.startsWith('08') || PG_UNAVAILABLE.has(code);
  return DRIVER_UNREACHABLE.has(code) || typeof err.syscall === 'string' || SQLITE_UNAVAILABLE.test(code);
}

/**
 * One store connection's view of outages: `failed` turns a failure into what the caller should see,
 * `unavailable` (its message says nothing of the store's address; the driver's error is its `cause`)
 * or the error itself when the statement was at fault. An outage of a store that had answered is
 * logged once when it starts and once when the store answers again, not once per statement (one
 * that never answered is reported by whoever opened it, as startup does).
 */
function outageLog(): { failed(e: unknown): unknown; answered(): void } {
  let answeredOnce = false;
  let down = false;
  return {
    failed(e) {
      if (e instanceof GatewayError || !isUnavailable(e)) return e;
      if (answeredOnce && !down) {
        down = true;
        logger('store').warn(`unavailable (${(e as Error).message ?? String(e)}); what needs it fails with 503 until it answers`);
      }
      const err = new GatewayError('unavailable', 'The gateway cannot reach its store just now; try again shortly', { retry_after: 1 });
      Object.defineProperty(err, 'cause', { value: e });
      return err;
    },
    answered() {
      answeredOnce = true;
      if (!down) return;
      down = false;
      logger('store').info('answers again');
    },
  };
}

/** The driver's own error behind an `unavailable` (for a message that names the setting at startup). */
export function causeOf(e: unknown): unknown {
  return e instanceof GatewayError && e.cause !== undefined ? e.cause : e;
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

const COPY_SPECIAL = /[\\\t\n\r]/;
const COPY_SPECIALS = /[\\\t\n\r]/g;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };
/** A text as a field of COPY's text format: null as \N; backslash, tab, newline and carriage return escaped. */
export function copyField(v: string | null): string {
  if (v === null) return '\\N';
  return COPY_SPECIAL.test(v) ? v.replace(COPY_SPECIALS, (ch) => COPY_ESCAPES[ch]) : v;
}

/** The characters copyField escapes, by the letter after the backslash. */
const COPY_UNESCAPES: Record<string, string> = Object.fromEntries(Object.entries(COPY_ESCAPES).map(([ch, escaped]) => [escaped[1], ch]));
/** A field as copyField wrote it, read back. */
export function fromCopyField(v: string): string | null {
  if (v === '\\N') return null;
  return v.includes('\\') ? v.replace(/\\(.)/g, (_, c: string) => COPY_UNESCAPES[c] ?? c) : v;
}

/**
 * JSON text as a field of COPY's text format: JSON.stringify writes tabs, newlines and carriage returns escaped, so
 * only its backslashes need doubling; looking for one is a fifth of copyField's test on a run's payload.
 */
export function copyJson(json: string): string {
  return json.includes('\\') ? json.replaceAll('\\', '\\\\') : json;
}

/** The size of copyData's pieces: under glibc's mmap threshold, so each reuses freed memory instead of faulting in fresh pages. */
const COPY_PIECE = 64 * 1024;
/**
 * `rows` lines of COPY text (each `line(i)`, ending in a newline) encoded as they are made into pieces of about
 * COPY_PIECE bytes, each made when asked for: copyIn asks a turn of the event loop at a time, so a batch's text
 * (2,000 events, 5,000 history rows) is made between calls instead of holding the acceptor's thread 1-5 ms at once,
 * which every call in flight waited out (bench/results/threads-2026-12-04-sliced). One string of all the lines cost
 * several times more to flatten and encode (about 0.85 against 0.2 µs a row), and one buffer of all of them was
 * fresh memory every batch, faulted in page by page (postgres.js still copies each piece into a buffer of its own).
 */
export function* copyData(rows: number, line: (i: number) => string): Generator<Buffer> {
  let buf = Buffer.allocUnsafe(COPY_PIECE);
  let at = 0;
  for (let i = 0; i < rows; i++) {
    const text = line(i);
    if (buf.length - at < text.length * 3) {
      if (at > 0) yield buf.subarray(0, at);
      buf = Buffer.allocUnsafe(Math.max(COPY_PIECE, text.length * 3));
      at = 0;
    }
    at += buf.write(text, at);
  }
  if (at > 0) yield buf.subarray(0, at);
}
