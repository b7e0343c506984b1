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
  /** `QUERYAPIGATE_HOME`: SQLite paths that are not absolute are relative to it. */
  home: string;
  /**
   * The server's query timeout in ms (`QUERYAPIGATE_QUERY_TIMEOUT` × 1000; 0 = none). Optional: when
   * given, PostgreSQL sessions start with it, so calls that run at this limit cost no extra message.
   */
  queryTimeoutMs?: number;
  /** Seconds an idle pooled connection is kept (`QUERYAPIGATE_POOL_IDLE_TIMEOUT`, default 300). */
  idleTimeoutS?: number;
}

export interface RunOptions {
  /** Statement time limit in ms; 0 = none. */
  timeoutMs: number;
  /** True: the database itself must refuse writes for this run. */
  readOnly: boolean;
}

export interface ResultSet {
  columns: string[];
  rows: unknown[][];
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
  close(): Promise<void>;
}
