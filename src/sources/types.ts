// In charge of the shapes every data source shares (connection settings, run options, result sets);
// must not import anything from the rest of the project.

export type Dialect = 'postgres' | 'sqlite' | 'mysql';

/** A connection as stored: `db` picks the driver; `${VAR}` may appear in any string field. */
export interface ConnectionConfig {
  name: string;
  db: string;
  host?: string | null;
  port?: number | null;
  database?: string | null;
  user?: string | null;
  password?: string | null;
  options?: Record<string, unknown> | null;
}

/** Process-wide settings a source is opened with (filled from config once). */
export interface SourceSettings {
  /** Clients (connections) per pool; `QUERYAPIGATE_POOL_SIZE`. Values below 1 count as 1. */
  poolSize: number;
  /** PostgreSQL, and MySQL reads: calls of one turn that may share one connection (`QUERYAPIGATE_POOL_PIPELINE`); 1 when absent. */
  pipeline?: number;
  /** `QUERYAPIGATE_HOME`: a SQLite connection's file is inside it (a relative path is relative to it). */
  home: string;
  /** Files no SQLite connection may open: the gateway's own SQLite store (with its -wal, -shm, -journal). */
  reserved?: string[];
  /**
   * The server's query timeout in ms (`QUERYAPIGATE_QUERY_TIMEOUT` × 1000; 0 = none). Optional: when
   * given, PostgreSQL sessions start with it, so calls that run at this limit cost no extra message.
   */
  queryTimeoutMs?: number;
  /** How long a new connection may take to be ready (`QUERYAPIGATE_CONNECT_TIMEOUT` × 1000); default DEFAULT_CONNECT_TIMEOUT_MS. */
  connectTimeoutMs?: number;
}

/** QUERYAPIGATE_CONNECT_TIMEOUT's default: a database that does not let us in within a second is taken as down. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 1000;

export interface RunOptions {
  /** Statement time limit in ms; 0 = none. */
  timeoutMs: number;
  /** True: the database itself must refuse writes for this run. */
  readOnly: boolean;
  /**
   * True: the statement may leave state on its session that governance could not rule out (a write's
   * triggers, a function it can't vouch for): the session is put back as the gateway set it afterwards
   * (PostgreSQL: settings, role, listens, cursors, temporary tables, advisory locks; MySQL: the
   * connection is not reused).
   */
  resetSession?: boolean;
}

export interface StreamOptions extends RunOptions {
  /**
   * Rows per batch handed to onBatch (the last batch may be shorter). Values below 1 count as 1.
   * Read again for every batch, so the caller may change it between batches (a stream sizes its
   * batches by the bytes its rows take); the batch being fetched keeps the size it was asked with.
   * PostgreSQL reads it once for a statement it cannot hold in a cursor (EXPLAIN, SHOW).
   */
  batchRows: number;
  /**
   * Asks for the values as the database's own text where the source has it (PostgreSQL): onBatch
   * then gets `raw`, and each value in `rows` is the bytes of its text form (a Uint8Array; null for
   * NULL), to copy as they are or read with its column's RawColumn. A source without it hands the
   * values as always (no `raw`).
   */
  raw?: boolean;
}

/**
 * How to take a column's values when they come raw (StreamOptions.raw). `kind` says what the bytes
 * are, for a writer that copies them instead of building the value; `read` gives the value run()
 * would have given, for everything else.
 * - 'text': the value is the bytes, as UTF-8 text;
 * - 'integer': an integer's decimal digits, '-' before a negative one (no '+', no leading zeros); the
 *   value is that integer, a number when it is a safe integer;
 * - 'decimal': a number as the database prints it (digits with a point, an exponent, 'NaN', ...); the
 *   value is the number JavaScript reads from that text (`+text`);
 * - 'boolean': 't' or 'f', the value true or false;
 * - 'timestamp': a timestamp without a time zone; when the bytes are 'YYYY-MM-DD HH:MM:SS' with up to 6
 *   fraction digits (years 1000 to 9999), the value is the Date of that wall-clock time in UTC, to the
 *   millisecond (the fraction cut, not rounded);
 * - 'other': nothing more is said: read it.
 */
export interface RawColumn {
  kind: 'text' | 'integer' | 'decimal' | 'boolean' | 'timestamp' | 'other';
  read(bytes: Uint8Array): unknown;
}

/** StreamOptions.batchRows as a count of rows. */
export function batchRowsOf(opts: StreamOptions): number {
  return Math.max(1, Math.floor(opts.batchRows) || 0);
}

/**
 * Receives one batch of a stream. The next batch is not fetched until the returned promise has
 * resolved; throwing (or rejecting) ends the stream. `rows` belongs to the callee. `raw` is given when
 * the values are raw (StreamOptions.raw), one per column.
 */
export type BatchHandler = (columns: string[], rows: unknown[][], types?: ColumnTypes, raw?: readonly RawColumn[]) => void | Promise<void>;

/**
 * What the database says a result column holds, for the formats that type their columns (xlsx,
 * parquet). The values are still the ones `run()` hands over (a big integer is its digit string, a
 * PostgreSQL date its 'YYYY-MM-DD' text); this only says how to read them.
 */
export type ColumnKind = 'integer' | 'float' | 'decimal' | 'boolean' | 'date' | 'timestamp' | 'time' | 'text' | 'bytes' | 'json';

export interface ColumnType {
  kind: ColumnKind;
  /** Digits after the point, for a decimal whose column declares them. */
  scale?: number;
}

/** Per result column, its type; null where the database does not say (or says something else). */
export type ColumnTypes = readonly (ColumnType | null)[];

export interface ResultSet {
  columns: string[];
  rows: unknown[][];
  /** The columns' types, where the source knows them. */
  types?: ColumnTypes;
  /** Rows returned, or rows affected for a write that returns no rows. */
  rowCount: number;
}

/**
 * A data source executes the statement it is given. `text` uses `$1..$n` placeholders for
 * postgres and `?` for sqlite/mysql; `values` are bound in order.
 */
export interface Source {
  readonly dialect: Dialect;
  run(text: string, values: unknown[], opts: RunOptions): Promise<ResultSet>;
  /**
   * Runs a read-only statement and hands its rows over in batches as they come from a server-side
   * cursor (the database side of `?stream=true`). Values are of the same types as run()'s.
   * - Always read-only, whatever `opts.readOnly` says: a write is refused (`read_only`).
   * - onBatch is called at least once: a statement with no rows gets one call with its columns and
   *   an empty `rows` (so an export can still write its header).
   * - Backpressure: the next batch is not fetched until the promise onBatch returned has resolved.
   * - If onBatch throws (e.g. the client went away), the statement is cancelled on the server, its
   *   connection is freed at once, and stream() rejects with that very error (not a GatewayError).
   * - `opts.timeoutMs` (0 = none) limits each wait for the database: until the first batch, and
   *   from asking for the next batch until it is complete. Time spent in onBatch never counts, so a
   *   slow reader does not time an export out. Past it: `query_timeout`, the statement cancelled.
   * - A stream holds one connection to itself for its whole length; a source lets only a bounded
   *   number run at once and refuses more with `unavailable` (503), so ordinary calls keep a
   *   connection.
   * Resolves with the number of rows handed over.
   */
  stream(text: string, values: unknown[], opts: StreamOptions, onBatch: BatchHandler): Promise<number>;
  /**
   * Asks the database to parse `text` (same placeholders as run()) without running it: PostgreSQL
   * Parse and Describe, a MySQL prepared statement, SQLite's prepare. Resolves with the database's
   * own syntax error, or null when it reads the statement; other refusals (a missing table, a type
   * it cannot infer) mean it was read, so they are null too. An unreachable database rejects
   * (`connection_failed`, ...).
   */
  syntaxError(text: string): Promise<string | null>;
  /**
   * The source's connections as they stand, for the pool gauges of /metrics: `idle` open and
   * waiting for a call, `active` running one (or holding a stream).
   */
  connections(): PoolCounts;
  /**
   * Opens one connection ahead of the first call, if none is open yet (the executor's plan warmer
   * asks, for each connection a published query uses): a fresh process's first call otherwise waits
   * for the connection's start-up, about 45 ms against PostgreSQL on this project's machine. Resolves
   * true once a connection is open, false when none could be. Never rejects, never counts as a call
   * (no breaker). Optional: a source without it opens on first use.
   */
  warm?(): Promise<boolean>;
  /**
   * Readies a statement ahead of its first call (the plan warmer asks, for each version it plans),
   * which otherwise waits a round trip of its own before it runs: MySQL prepares it on the idle
   * connections; PostgreSQL asks its parameters' types once, which its calls then bind with.
   * Never throws. Optional: a source without it prepares on first use.
   */
  prepare?(text: string): void;
  close(): Promise<void>;
}

export interface PoolCounts {
  idle: number;
  active: number;
}

/** One shared ColumnType per kind (a decimal with a scale gets its own). */
export const COLUMN: Readonly<Record<ColumnKind, ColumnType>> = Object.freeze({
  integer: { kind: 'integer' },
  float: { kind: 'float' },
  decimal: { kind: 'decimal' },
  boolean: { kind: 'boolean' },
  date: { kind: 'date' },
  timestamp: { kind: 'timestamp' },
  time: { kind: 'time' },
  text: { kind: 'text' },
  bytes: { kind: 'bytes' },
  json: { kind: 'json' },
});
