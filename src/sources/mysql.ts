// In charge of running statements on MySQL and MariaDB through mysql2 (pools, prepared statements,
// value parsing, read-only sessions, statement timeouts, error mapping); must not import keys, HTTP,
// governance or the store.

import { createRequire } from 'node:module';
import type mysqlModule from 'mysql2';
import type { FieldPacket, Pool, PoolConnection, PoolOptions, ResultSetHeader } from 'mysql2';
import { GatewayError } from '../contract/errors.js';
import { createBreaker } from './breaker.js';
import { deadlines } from './deadlines.js';
import {
  type PoolCounts,
  type BatchHandler,
  COLUMN,
  type ColumnType,
  type ColumnTypes,
  type ConnectionConfig,
  DEFAULT_CONNECT_TIMEOUT_MS,
  type ResultSet,
  type RunOptions,
  type Source,
  type SourceSettings,
  type StreamOptions,
  batchRowsOf,
} from './types.js';
import { connectionFailed, queryFailed, readOnlyRefused, redact, timeoutError, toMs, tooManyStreams, valueRejected } from './errors.js';

/** mysql2, required when the first MySQL pool is made: about 6 MB of RSS a thread that serves no MySQL need not hold. */
let mysql: typeof mysqlModule | null = null;

/**
 * Decisions:
 * - Pools: a read pool whose sessions run `SET SESSION TRANSACTION READ ONLY` before their first
 *   statement, so the database itself refuses writes (1792 ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION,
 *   also for temporary tables), and a write pool of ordinary sessions, created on first use. Each
 *   holds up to `poolSize` connections (mysql2 Pool: a call has its connection to itself; calls
 *   beyond that wait in the pool's queue). Statements run as prepared statements (`execute`), cached
 *   per connection up to STATEMENT_CACHE_SIZE (mysql2 closes the evicted ones on the server).
 * - Server flavour: `SELECT VERSION()` on the source's first connection says MariaDB or MySQL.
 * - Time limit: MariaDB `max_statement_time` (seconds, every statement, lock waits included; error
 *   1969) or MySQL `max_execution_time` (ms, SELECT only; error 3024), set on the session only when
 *   a call's limit differs from the one the session already has. A statement the server cannot
 *   limit (a non-SELECT on MySQL) gets a JS timer that sends `KILL QUERY <thread id>` from a separate
 *   one-connection pool; server-limited statements get the same timer as a backstop, KILL_BACKSTOP_MS
 *   after their limit. A connection a KILL was sent for is destroyed, never reused (the KILL could
 *   otherwise land on the next call's statement).
 * - Values (the reference's types, as the formats code expects them):
 *   integers and YEAR → number; BIGINT (signed or unsigned) → number while exact, else its decimal
 *   string; DECIMAL → number (float, as the contract's Decimal → float); DOUBLE → number; FLOAT →
 *   the shortest number that reads back as the same 4-byte float (0.1, not 0.10000000149011612);
 *   DATETIME/TIMESTAMP → Date holding the wall-clock value as UTC (what the session prints: TIMESTAMP
 *   in the server's time zone, which is left alone, as the reference does), ms precision; values a
 *   Date can't hold (zero dates, '2024-00-10') stay strings; DATE → 'YYYY-MM-DD'; TIME → '[-]HH:MM:SS'
 *   plus the column's fraction digits, hours may exceed 24; BIT(n) → number, BIT(1) included (0/1,
 *   as MySQL has no boolean and the reference's driver gives int), beyond 2^53 its decimal string;
 *   JSON → parsed value (MySQL's JSON type; on MariaDB, where JSON is LONGTEXT, through the extended
 *   column metadata mysql2 asks for); BLOB/BINARY/VARBINARY → Buffer; TINYINT(1) → number; text,
 *   ENUM, SET, UUID → string.
 * - Idle connections stay pooled (until the server's wait_timeout ends them; mysql2 then drops them
 *   from the pool): mysql2 sweeps idle connections only when `maxIdle < connectionLimit`, and then
 *   closes every free connection above `maxIdle` each second whatever its idle time, so no idle
 *   timeout is set here (PostgreSQL pools close theirs after 300 s).
 * - Writes that may leave state on the session (anything but plain DML/DDL: SET, USE, LOCK, START
 *   TRANSACTION, CALL, ...) run in the write pool and their connection is then closed, not pooled.
 * - Streams (`stream()`): the same prepared statement (`execute`, binary protocol, so the values are
 *   run()'s) without a callback, so mysql2 hands rows over one by one as they are read (unbuffered;
 *   the server does not materialise the result). Every `batchRows` rows (read again after each batch) the connection is paused
 *   (mysql2 stops reading its socket; TCP then stops the server), and resumed once onBatch's
 *   promise resolved, so about one batch plus the socket buffers is in the app per stream. A stream
 *   holds a read-pool connection to itself; at most max(1, poolSize - 1) run at once per source
 *   (more is `unavailable`), so ordinary calls keep a connection (with a pool of 1 they wait).
 *   Its session runs with the server limit off (max_statement_time / max_execution_time 0: both
 *   count wall time, including time the server waits on a client paused in onBatch) and
 *   net_write_timeout raised to STREAM_NET_WRITE_TIMEOUT_S (the server drops a connection whose
 *   reader does not read for that long; the default 60 s would end exports to slow clients). A JS
 *   timer limits each wait for the database instead (first batch, then from each resume to the
 *   next full batch). On that timer, or when onBatch throws before the statement ended, the
 *   statement is stopped with `KILL QUERY <thread id>` (from the killer pool) and the connection is
 *   destroyed at once (socket closed, never returned to the pool mid-result).
 */
const STATEMENT_CACHE_SIZE = 256;
const STREAM_NET_WRITE_TIMEOUT_S = 3600;
const KILL_BACKSTOP_MS = 1000;
/** How long a killed statement may take to answer before its connection is dropped anyway. */
const KILL_GRACE_MS = 2000;

// mysql2's column type codes (mysql2/lib/constants/types.js).
const T_FLOAT = 4;
const T_TIMESTAMP = 7;
const T_TIME = 11;
const T_DATETIME = 12;
const T_BIT = 16;

// Errors.
const ER_PARSE_ERROR = 1064;
const ER_SYNTAX_ERROR = 1149;
const ER_REGEXP_ERROR = 1139; // MariaDB: a regular expression that does not compile
const ER_QUERY_INTERRUPTED = 1317;
const ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION = 1792;
const ER_STATEMENT_TIMEOUT = 1969; // MariaDB max_statement_time
const ER_QUERY_TIMEOUT = 3024; // MySQL max_execution_time

/** Statements after which a write session is as it was; anything else closes the connection. */
const CLEAN_VERBS = new Set([
  'select',
  'with',
  'values',
  'table',
  'insert',
  'update',
  'delete',
  'replace',
  'create',
  'alter',
  'drop',
  'truncate',
  'rename',
  'show',
  'describe',
  'desc',
  'explain',
  'analyze',
  'optimize',
  'check',
  'repair',
  'checksum',
  'grant',
  'revoke',
  'flush',
]);
const LEADING_WORD = /^(?:\s+|\/\*[\s\S]*?\*\/|(?:--\s|#)[^\n]*(?:\n|$)|\()*([A-Za-z]+)/;

interface Session {
  /** The limit (ms, 0 = none) the session's variable holds; NaN when unknown. */
  sessionMs: number;
  /** True once net_write_timeout has been raised for streams. */
  streamReady?: boolean;
}

/**
 * The read connection this turn's calls share (QUERYAPIGATE_POOL_PIPELINE): the first read of the turn leads, taking
 * a connection from the pool; reads that come while it does wait for it, and they and later ones send their statements
 * on it at once, behind the ones before; the socket is written once, when the turn's I/O is done. MySQL and MariaDB read a connection's commands one after another and answer
 * them in that order, so a connection carries several; mysql2 itself sends a command only once the one before has
 * answered, a write (and on loopback the server's receive and wake-up) a call (sendNow). Only reads the server limits
 * itself share, with the limit the session holds: a KILL is then only a backstop past that limit, and one sent for a
 * call may stop the statement of another on the connection, which is dropped once the last of them is done. As on
 * PostgreSQL, a slow statement delays the calls sent behind it.
 */
interface Turn {
  /** The leader's connection, once its statement is sent; null until then, and for good if it could not lead. */
  c: PoolConnection | null;
  /** Calls on the connection not yet done: the last to let go gives it back (letGo). */
  holders: number;
  /** True once one of them found the session unfit to reuse: the connection is then dropped, not given back. */
  spoiled: boolean;
  /** The limit every call of the turn runs with: the leader's, which the session then holds. */
  ms: number;
  /** Calls that joined it, the leader's included. */
  joined: number;
  /** Settled once the leader has sent its statement, or could not: what the reads that came meanwhile wait for. */
  opened: Promise<void>;
  open: () => void;
  /** True once its socket is written, or it could not open: no read joins it any more. */
  ended: boolean;
}

/** What of a mysql2 connection commands are sent ahead on (read and written here only; stable across its 3.x releases). */
interface Wire {
  _command: unknown;
  _commands: { length: number };
  _fatalError: unknown;
  _statements: { get(key: string): Prepared | undefined };
  sequenceId: number;
  stream: { cork(): void; uncork(): void };
  config: { compress?: boolean };
}
/** A statement in a connection's cache (mysql2's PreparedStatementInfo). */
interface Prepared {
  /** Queues an Execute command behind the connection's current one; undefined when the connection is closed. */
  execute(values: unknown[], cb: ExecuteCallback): Command | undefined;
}
type ExecuteCallback = (err: unknown, result: unknown, fields: FieldPacket[] | undefined) => void;
/** A mysql2 command: `next` is the state that reads its next packet (mysql2/lib/commands/command.js). */
interface Command {
  start(packet: null, conn: Wire): State | null;
  next: State | null;
  /** The state its first answer packet goes to, when sent ahead. */
  qagFirst?: State;
  /** The sequence id its answer starts at, when sent ahead: the packets it was written as (one unless 16 MB or more). */
  qagSequence?: number;
}
type State = (this: Command, packet: unknown, conn: Wire) => State | null;

/** mysql2's key for a statement in a connection's cache: this and the text (Connection.statementKey, default options). */
const STATEMENT_KEY_PREFIX = 'undefined/undefined/undefined';

/**
 * The state of a command sent ahead until its turn comes: mysql2 calls it once with no packet when the command
 * becomes current (where it would start it), and then the answer's packets follow, numbered on from its own.
 */
function awaiting(this: Command, packet: unknown, conn: Wire): State | null {
  if (!packet) {
    conn.sequenceId = this.qagSequence!;
    return awaiting;
  }
  return this.qagFirst!.call(this, packet, conn);
}
const answered: State = () => null;

/**
 * Sends a command mysql2 has queued behind the connection's current one now, not once that one has answered.
 * Only when every command ahead of it was sent already (Turn): the server answers in the order it reads.
 */
function sendNow(conn: Wire, cmd: Command): void {
  const seq = conn.sequenceId; // the current command's, which its next packet is checked against
  conn.sequenceId = 0;
  let first: State | null;
  try {
    first = cmd.start(null, conn);
    cmd.qagSequence = conn.sequenceId;
  } catch (err) {
    cmd.next = answered; // a value that would not bind: nothing was written, and its caller hears of it here
    throw err;
  } finally {
    conn.sequenceId = seq;
  }
  if (first === null) {
    cmd.next = answered; // it could not be written and has told its caller; nothing will come for it
    return;
  }
  cmd.qagFirst = first;
  cmd.next = awaiting;
}

/** How a stream's statement ended. */
interface Pumped {
  handed: number;
  /** onBatch's error, when it threw. */
  failure?: { error: unknown };
  /** The driver's or server's error. */
  error?: unknown;
  timedOut?: boolean;
  /** False: the statement was killed or the session may be off; the connection must not be reused. */
  clean: boolean;
}

type Converter = (v: unknown, field: FieldPacket) => unknown;

const noop = (): void => {};

export function openMysql(conn: ConnectionConfig, settings: SourceSettings): Source {
  const size = Math.max(1, Math.floor(settings.poolSize) || 0);
  const password = conn.password ?? '';
  const base: PoolOptions = {
    host: conn.host || 'localhost',
    port: conn.port || 3306,
    database: conn.database || undefined,
    user: conn.user || undefined,
    password: conn.password || undefined,
    ssl: sslOption(conn.options?.ssl),
    connectTimeout: settings.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    enableKeepAlive: true,
    waitForConnections: true,
    queueLimit: 0,
    rowsAsArray: true,
    maxPreparedStatements: STATEMENT_CACHE_SIZE,
    supportBigNumbers: true,
    bigNumberStrings: false,
    decimalNumbers: true,
    dateStrings: true, // parsed below, so years < 100 and zero dates come out right
    timezone: 'Z', // Date parameters are sent as their UTC fields, the way they are read
    multipleStatements: false,
    // LOAD DATA LOCAL INFILE has the server ask the client for a file by name: this host's, not the database's. mysql2
    // offers the capability by default (and then refuses without a stream factory); not offered, the server refuses it.
    flags: ['-LOCAL_FILES'],
  };
  // While the database is known down, calls fail at once (one call per interval tries again).
  const breaker = createBreaker(conn.name);
  const sessions = new WeakMap<PoolConnection, Session>();
  const readPool = makePool(size);
  let writePool: Pool | null = null;
  let killer: Pool | null = null;
  /** True on MariaDB; undefined until the first connection has asked. */
  let mariadb: boolean | undefined;
  let closed = false;
  /** Streams running; at most maxStreams, so ordinary calls keep a connection. */
  let streams = 0;
  const maxStreams = Math.max(1, size - 1);
  /** Calls of one turn that may share a read connection (Turn); 1: none share. */
  const joinAtMost = Math.max(1, Math.floor(settings.pipeline ?? 1));
  /** The turn reads join now; a full one gives way to a new one, which the next read leads. */
  let turn: Turn | null = null;
  const endTurn = (t: Turn): void => {
    t.ended = true;
    (t.c as unknown as Wire).stream.uncork();
    if (turn === t) turn = null;
  };
  /** A turn whose leader could not send its statement on terms others can share: its readers take their own. */
  const abandon = (t: Turn): void => {
    if (t.c !== null) return;
    t.ended = true;
    if (turn === t) turn = null;
    t.open();
  };

  return {
    dialect: 'mysql',
    run,
    stream,
    syntaxError,
    connections,
    warm,
    prepare,
    close,
  };

  /** Opens one pooled connection ahead of the first call (see Source.warm); the breaker hears nothing of it. */
  function warm(): Promise<boolean> {
    if (closed) return Promise.resolve(false);
    return acquire(readPool).then(
      (c) => {
        c.release();
        return true;
      },
      () => false,
    );
  }

  /**
   * See Source.prepare. Prepares the statement on every idle read connection whose session has started
   * (so the server reads it in the mode calls run in): mysql2 keeps it in that connection's statement
   * cache, keyed by its text, where a call's `execute` finds it instead of preparing in a round trip of
   * its own. The connection is not taken from the pool: its commands run in turn, so a call that takes
   * it meanwhile runs after the prepare and finds the statement. Busy connections prepare on first use.
   */
  function prepare(text: string): void {
    if (closed) return;
    for (const c of poolLists(readPool).free) if (sessions.has(c)) c.prepare(text, noop); // a statement refused is its first call's to report
  }

  function connections(): PoolCounts {
    const counts = { idle: 0, active: 0 };
    for (const pool of writePool ? [readPool, writePool] : [readPool]) {
      const { all, free } = poolLists(pool);
      counts.idle += free.length;
      counts.active += all - free.length;
    }
    return counts;
  }

  /** The write pool, made by the first call that may write. */
  function writer(): Pool {
    writePool ??= makePool(size);
    return writePool;
  }

  async function run(text: string, values: unknown[], opts: RunOptions): Promise<ResultSet> {
    if (closed) throw connectionFailed('source closed');
    breaker.admit();
    const ms = toMs(opts.timeoutMs);
    // A read may share a turn's connection (Turn): the first of a turn leads, the others ride on it.
    let lead: Turn | null = null;
    /** The turn whose connection this read rides on, and its statement there. */
    let rides: Turn | null = null;
    let ahead: Prepared | undefined;
    /** Whether the server limits this statement itself; known once a session has asked which server it is. */
    let serverLimited: boolean | undefined;
    if (opts.readOnly && !opts.resetSession && joinAtMost > 1 && ms > 0) {
      if (turn === null || turn.joined >= joinAtMost) lead = turn = newTurn(ms);
      else if (turn.ms === ms) {
        const joined = turn; // not necessarily the turn any more once it has opened: a full one gives way
        joined.joined++;
        if (joined.c === null) await joined.opened;
        // Only a statement the server limits itself rides, so no call on the connection needs a KILL in time.
        if (joined.c !== null) serverLimited = limitedByServer(text);
        if (serverLimited) ahead = joinable(joined, text);
        if (ahead) {
          joined.holders++;
          rides = joined;
        }
      }
    }
    let c: PoolConnection;
    if (rides) c = rides.c!;
    else {
      try {
        c = await connect(opts.readOnly ? readPool : writer());
      } catch (err) {
        if (lead) abandon(lead);
        throw err;
      }
    }
    // Put back in the pool afterwards unless something may have left the session unlike the others.
    let keep = (opts.readOnly || isCleanWrite(text)) && !opts.resetSession;
    try {
      let session = sessions.get(c);
      if (!session) {
        try {
          session = await startSession(c, opts.readOnly);
        } catch (err) {
          keep = false;
          throw connectionFailed(detailOf(err, password));
        }
        sessions.set(c, session);
      }
      if (ms !== session.sessionMs) {
        // Kept in step whatever the statement: on MySQL a WITH ... SELECT is limited by the session
        // variable too, so a shorter limit left by an earlier call must not stay behind.
        session.sessionMs = NaN;
        await query(c, mariadb ? `SET SESSION max_statement_time = ${ms / 1000}` : `SET SESSION max_execution_time = ${ms}`);
        session.sessionMs = ms;
      }
      serverLimited ??= limitedByServer(text);
      const killAfter = ms === 0 ? 0 : serverLimited ? ms + KILL_BACKSTOP_MS : ms;
      // A turn's leader opens it (Turn) if the server limits its statement, so no call on it needs a KILL in time.
      if (lead && !serverLimited) abandon(lead);
      const out = await execute(
        c,
        text,
        bindable(values),
        killAfter,
        () => {
          keep = false;
        },
        ahead ?? (lead && serverLimited ? lead : undefined),
      );
      breaker.reached();
      return toResultSet(out.result, out.fields);
    } catch (err) {
      if (lead) abandon(lead);
      if ((err as { fatal?: unknown } | null)?.fatal) keep = false;
      const e = toCallError(err, ms, password, values.length > 0);
      if (e.code !== 'connection_failed') breaker.reached(); // the database answered, with an error of its own
      throw e;
    } finally {
      letGo(c, keep, rides ?? (lead?.c ? lead : null));
    }
  }

  /** A turn led by a read with limit `ms`, not yet open. */
  function newTurn(ms: number): Turn {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    return { c: null, holders: 0, spoiled: false, ms, joined: 1, opened, open, ended: false };
  }

  /** MariaDB limits every statement; MySQL's limit covers SELECT only, the rest rely on the timer. */
  function limitedByServer(text: string): boolean {
    return mariadb === true || leadingWord(text) === 'select';
  }

  /**
   * The statement a read can send on the open turn's connection, already prepared there; undefined when it must take
   * a connection of its own: the turn did not open, the connection failed, or the statement is not in its cache
   * (preparing is a round trip of its own).
   */
  function joinable(t: Turn, text: string): Prepared | undefined {
    if (t.c === null || t.ended) return undefined;
    const wire = t.c as unknown as Wire;
    if (wire._fatalError) return undefined;
    return wire._statements.get(STATEMENT_KEY_PREFIX + text);
  }

  /**
   * Ends a call's hold on its connection: back to the pool, or dropped when unfit; on a turn's connection (`shared`),
   * once the last call on it is done, and dropped if any of them found it unfit.
   */
  function letGo(c: PoolConnection, keep: boolean, shared: Turn | null): void {
    if (shared !== null) {
      if (!keep) shared.spoiled = true;
      if (--shared.holders > 0) return;
      keep = !shared.spoiled;
    }
    if (keep) c.release();
    else c.destroy();
  }

  async function syntaxError(text: string): Promise<string | null> {
    if (closed) throw connectionFailed('source closed');
    let c: PoolConnection;
    try {
      c = await acquire(readPool);
    } catch (err) {
      throw connectionFailed(detailOf(err, password));
    }
    let keep = true;
    try {
      // Parsed in the session's mode as calls will be (readAsAnalysed), not the server's default.
      if (!sessions.has(c)) {
        try {
          sessions.set(c, await startSession(c, true));
        } catch (err) {
          keep = false;
          throw connectionFailed(detailOf(err, password));
        }
      }
      // A prepared statement is parsed by the server and not run; closed again at once.
      await new Promise<void>((resolve, reject) =>
        c.prepare(text, (err, statement) => {
          if (err) reject(err);
          else {
            statement.close();
            resolve();
          }
        }),
      );
      return null;
    } catch (err) {
      keep = !(err as { fatal?: unknown } | null)?.fatal;
      // Any refusal but an unreachable server means the statement was read (a read-only
      // session refuses to prepare a write: 1792, after parsing it).
      const refused = toCallError(err, 0, password);
      if (refused.code === 'connection_failed') throw refused;
      const errno = (err as { errno?: unknown }).errno;
      return errno === ER_PARSE_ERROR || errno === ER_SYNTAX_ERROR ? detailOf(err, password) : null;
    } finally {
      if (keep) c.release();
      else c.destroy();
    }
  }

  async function stream(text: string, values: unknown[], opts: StreamOptions, onBatch: BatchHandler): Promise<number> {
    if (closed) throw connectionFailed('source closed');
    if (streams >= maxStreams) {
      throw tooManyStreams(maxStreams);
    }
    breaker.admit();
    const ms = toMs(opts.timeoutMs);
    streams++;
    try {
      const c = await connect(readPool);
      let keep = true;
      let out: Pumped;
      try {
        let session = sessions.get(c);
        try {
          if (!session) {
            session = await startSession(c, true);
            sessions.set(c, session);
          }
          const set: string[] = [];
          if (session.sessionMs !== 0) set.push(mariadb ? 'max_statement_time = 0' : 'max_execution_time = 0');
          if (!session.streamReady) set.push(`net_write_timeout = ${STREAM_NET_WRITE_TIMEOUT_S}`);
          if (set.length) {
            session.sessionMs = NaN;
            await query(c, `SET SESSION ${set.join(', ')}`);
            session.sessionMs = 0;
            session.streamReady = true;
          }
        } catch (err) {
          keep = false;
          throw connectionFailed(detailOf(err, password));
        }
        out = await pump(c, text, bindable(values), ms, opts, onBatch);
        keep = out.clean && !opts.resetSession;
      } finally {
        if (keep) c.release();
        else {
          c.destroy();
          // mysql2's destroy() only ends the socket's writing side; close it, so a server still
          // writing rows gets an error now instead of waiting on a paused reader.
          (c as unknown as { stream?: { destroy?: () => void } }).stream?.destroy?.();
        }
      }
      const failed = out.error === undefined ? null : toCallError(out.error, ms, password, values.length > 0);
      if (failed?.code !== 'connection_failed') breaker.reached();
      if (out.failure) throw out.failure.error;
      if (out.timedOut) throw timeoutError(ms);
      if (failed) throw failed;
      return out.handed;
    } finally {
      streams--;
    }
  }

  /**
   * Runs the prepared statement unbuffered and hands its rows to onBatch in batches (see Decisions).
   * Never rejects: the outcome says how it ended and whether the connection may be reused.
   */
  function pump(c: PoolConnection, text: string, values: unknown[], ms: number, opts: StreamOptions, onBatch: BatchHandler): Promise<Pumped> {
    return new Promise((resolve) => {
      let shape: Shape | null = null;
      let resultIndex = -1;
      let batch: unknown[][] = [];
      let batchRows = batchRowsOf(opts);
      let handed = 0;
      let batches = 0;
      let handing = false;
      let paused = false;
      let ended = false;
      let settled = false;
      let timer: NodeJS.Timeout | undefined;

      const finish = (outcome: Omit<Pumped, 'handed'>): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        c.removeListener('error', onConnectionError);
        if (paused && outcome.clean) c.resume();
        resolve({ handed, ...outcome });
      };
      // Stops the statement on the server; the caller then destroys the connection.
      const abort = (outcome: Omit<Pumped, 'handed' | 'clean'>): void => {
        if (settled) return;
        killQuery(c.threadId);
        finish({ ...outcome, clean: false });
      };
      const arm = (): void => {
        if (ms > 0) timer = setTimeout(() => abort({ timedOut: true }), ms);
      };
      const hand = async (rows: unknown[][]): Promise<void> => {
        handing = true;
        clearTimeout(timer);
        batches++;
        handed += rows.length;
        try {
          await onBatch(shape ? shape.columns : [], rows, shape?.types);
        } catch (error) {
          handing = false;
          // After the statement's end there is nothing to stop and the session is as it was.
          if (ended) finish({ failure: { error }, clean: true });
          else abort({ failure: { error } });
          return;
        }
        handing = false;
        if (settled) return;
        if (ended) return finish({ clean: true });
        batchRows = batchRowsOf(opts);
        arm();
        paused = false;
        c.resume(); // may hand the next batch over at once, from rows mysql2 had already read
      };
      // A connection that fails mid-result reports to the connection, not to a command without a callback.
      const onConnectionError = (err: unknown): void => finish({ error: err, clean: false });

      let cmd: ReturnType<PoolConnection['execute']>;
      try {
        cmd = c.execute(text, values as never);
      } catch (err) {
        return finish({ error: err, clean: true }); // a value mysql2 refuses to bind; nothing was sent
      }
      cmd.on('fields', (fields: FieldPacket[], index?: number) => {
        if (resultIndex === -1) {
          resultIndex = index ?? 0;
          shape = shapeOf(fields);
        }
      });
      cmd.on('result', (row: unknown, index?: number) => {
        if (settled || (index ?? 0) !== resultIndex) return; // a CALL's later result sets are not the answer
        const r = row as unknown[];
        if (shape!.convert) convertRow(r, shape!);
        batch.push(r);
        if (batch.length >= batchRows) {
          paused = true;
          c.pause();
          const rows = batch;
          batch = [];
          void hand(rows);
        }
      });
      cmd.on('error', (err: unknown) => {
        const fatal = (err as { fatal?: unknown } | null)?.fatal === true;
        finish({ error: err, clean: !fatal });
      });
      cmd.on('end', () => {
        ended = true;
        if (settled || handing) return;
        if (batch.length > 0 || batches === 0) {
          // The last, short batch; or, with no rows, one call with the columns.
          const rows = batch;
          batch = [];
          void hand(rows);
        } else {
          finish({ clean: true });
        }
      });
      c.on('error', onConnectionError);
      arm();
    });
  }

  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    const pools = [readPool, writePool, killer].filter((p): p is Pool => p !== null);
    await Promise.all(pools.map((p) => new Promise<void>((resolve) => p.end(() => resolve()))));
  }

  /** A pooled connection; failing to get one means the database could not be connected to (the breaker hears of it). */
  async function connect(pool: Pool): Promise<PoolConnection> {
    try {
      return await acquire(pool);
    } catch (err) {
      // Closed meanwhile (a connection changed, the server stopping): mysql2's "Pool is closed." is ours, not the
      // database's, and must not mark it down (nor log that it is).
      if (closed) throw connectionFailed('source closed');
      const detail = detailOf(err, password);
      breaker.unreachable(detail);
      throw connectionFailed(detail);
    }
  }

  function makePool(limit: number): Pool {
    mysql ??= createRequire(import.meta.url)('mysql2') as typeof mysqlModule;
    return mysql.createPool({ ...base, connectionLimit: limit, maxIdle: limit });
  }

  /** A new session: learn the server flavour (once per source), then make a read session read-only. */
  async function startSession(c: PoolConnection, readOnly: boolean): Promise<Session> {
    if (mariadb === undefined) {
      const rows = (await query(c, 'SELECT VERSION()')) as unknown[][];
      mariadb = /mariadb/i.test(String(rows[0]?.[0]));
    }
    if (readOnly) await query(c, 'SET SESSION TRANSACTION READ ONLY');
    await readAsAnalysed(c);
    return { sessionMs: NaN };
  }

  /**
   * Runs the prepared statement. Past `killAfterMs` (0 = never) the statement is killed from another
   * connection and `onKill` is told (the connection must then not be reused); if it still has not
   * answered KILL_GRACE_MS later, the call ends as a timeout and the connection is dropped. `turnOf` (Turn): the
   * turn's statement to send ahead on its connection, or the turn this read leads, opened on `c`.
   */
  function execute(
    c: PoolConnection,
    text: string,
    values: unknown[],
    killAfterMs: number,
    onKill: () => void,
    turnOf?: Prepared | Turn,
  ): Promise<{ result: unknown; fields: FieldPacket[] | undefined }> {
    return new Promise((resolve, reject) => {
      let kill = -1;
      let grace: NodeJS.Timeout | undefined;
      let killed = false;
      let settled = false;
      const answer: ExecuteCallback = (err, result, fields) => {
        deadlines.clear(kill);
        clearTimeout(grace);
        if (settled) return;
        settled = true;
        if (err) reject(killed ? Object.assign(err as object, { qagKilled: true }) : err);
        else resolve({ result, fields });
      };
      const wire = c as unknown as Wire;
      if (turnOf === undefined) c.execute(text, values as never, answer);
      else if ('execute' in turnOf) {
        // Riding on the turn's connection: queued by mysql2, then sent at once.
        const cmd = turnOf.execute(values, answer);
        if (cmd !== undefined && wire._command !== cmd) sendNow(wire, cmd);
      } else {
        // Opening a turn: the socket is written once the turn's I/O is done, with what the calls that join it send.
        wire.stream.cork();
        try {
          c.execute(text, values as never, answer);
        } catch (err) {
          wire.stream.uncork();
          throw err;
        }
        if (wire._commands.length === 0 && !wire._fatalError && !wire.config.compress) {
          // Its command is the one in flight (its statement was cached, so nothing waits unsent before a rider's).
          turnOf.holders = 1;
          turnOf.c = c;
          setImmediate(endTurn, turnOf);
          turnOf.open();
        } else {
          wire.stream.uncork();
          abandon(turnOf);
        }
      }
      if (killAfterMs > 0) {
        kill = deadlines.set(killAfterMs, () => {
          killed = true;
          onKill();
          killQuery(c.threadId);
          grace = setTimeout(() => {
            if (settled) return;
            settled = true;
            c.destroy();
            reject({ qagKilled: true, errno: ER_QUERY_INTERRUPTED, message: 'killed statement did not answer' });
          }, KILL_GRACE_MS);
        });
      }
    });
  }

  function killQuery(threadId: number | null): void {
    if (threadId === null || closed) return;
    killer ??= makePool(1);
    killer.query(`KILL QUERY ${Number(threadId)}`, noop); // an unknown thread (already gone) is fine
  }
}

/**
 * A pool's connections (how many) and its idle ones: mysql2 keeps no public count, so its pool's lists
 * are read (stable across its 3.x releases), here only.
 */
function poolLists(pool: Pool): { all: number; free: PoolConnection[] } {
  const lists = pool as unknown as { _allConnections?: { length: number }; _freeConnections?: { toArray(): PoolConnection[] } };
  return { all: lists._allConnections?.length ?? 0, free: lists._freeConnections?.toArray() ?? [] };
}

function acquire(pool: Pool): Promise<PoolConnection> {
  return new Promise((resolve, reject) => pool.getConnection((err, c) => (err ? reject(err) : resolve(c))));
}

/**
 * sql_mode flags that change how a statement is read: "..." as a name (ANSI_QUOTES, and the modes
 * that include it), a backslash as a plain character (NO_BACKSLASH_ESCAPES), another dialect's
 * grammar (ORACLE, MSSQL, ...). The gateway analyses MySQL as the server reads it by default.
 */
const READING_MODES = new Set(['ANSI_QUOTES', 'NO_BACKSLASH_ESCAPES', 'ANSI', 'DB2', 'MAXDB', 'MSSQL', 'ORACLE', 'POSTGRESQL']);

/**
 * Takes the reading flags out of a new session's sql_mode (the server's or the user's default may
 * hold them), so the server reads each statement as the governance analysed it; the rest of the mode
 * (STRICT_TRANS_TABLES, ...) stays as the server has it. A statement cannot set it back: SET is refused.
 */
async function readAsAnalysed(c: PoolConnection): Promise<void> {
  const rows = (await query(c, 'SELECT @@SESSION.sql_mode')) as unknown[][];
  const modes = String(rows[0]?.[0] ?? '')
    .split(',')
    .filter(Boolean);
  const kept = modes.filter((m) => !READING_MODES.has(m.toUpperCase()));
  if (kept.length === modes.length) return;
  if (!kept.every((m) => /^[A-Z0-9_]+$/i.test(m))) throw new Error(`unexpected sql_mode ${modes.join(',')}`);
  await query(c, `SET SESSION sql_mode = '${kept.join(',')}'`);
}

function query(c: PoolConnection, sql: string): Promise<unknown> {
  return new Promise((resolve, reject) => c.query(sql, (err: unknown, result: unknown) => (err ? reject(err) : resolve(result))));
}

function toResultSet(result: unknown, fields: FieldPacket[] | undefined): ResultSet {
  if (!Array.isArray(result)) {
    // A statement without a result set: rows affected.
    const header = result as ResultSetHeader | undefined;
    return { columns: [], rows: [], rowCount: header?.affectedRows ?? 0 };
  }
  let rows = result as unknown[][];
  let cols = fields ?? [];
  if (Array.isArray(cols[0])) {
    // CALL: several results; the first result set is the answer.
    const at = (cols as unknown as (FieldPacket[] | undefined)[]).findIndex((f) => Array.isArray(f));
    rows = (at >= 0 ? result[at] : []) as unknown[][];
    cols = (cols as unknown as FieldPacket[][])[at] ?? [];
  }
  const shape = shapeOf(cols);
  if (shape.convert) for (const row of rows) convertRow(row, shape);
  return { columns: shape.columns, rows, rowCount: rows.length, types: shape.types };
}

/** A result set's column names and the value conversions its columns need, decided once per statement. */
interface Shape {
  columns: string[];
  fields: FieldPacket[];
  /** [column index, converter] for the columns that need one; null when none does. */
  convert: [number, Converter][] | null;
  types: ColumnTypes;
}

function shapeOf(fields: FieldPacket[]): Shape {
  const columns = new Array<string>(fields.length);
  const types = new Array<ColumnType | null>(fields.length);
  let convert: [number, Converter][] | null = null;
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    columns[i] = f.name;
    types[i] = typeFor(f);
    const fn = converterFor(f);
    if (fn) {
      convert ??= [];
      convert.push([i, fn]);
    }
  }
  return { columns, fields, convert, types };
}

/** The column's type for the typed formats, from mysql2's type code (and charset 63, binary). */
function typeFor(f: FieldPacket): ColumnType | null {
  const binary = (f as { characterSet?: number }).characterSet === 63;
  switch (f.columnType) {
    case 1: // TINY
    case 2: // SHORT
    case 3: // LONG
    case 8: // LONGLONG
    case 9: // INT24
    case 13: // YEAR
    case T_BIT:
      return COLUMN.integer;
    case T_FLOAT:
    case 5: // DOUBLE
      return COLUMN.float;
    case 0: // DECIMAL
    case 246: // NEWDECIMAL
      return { kind: 'decimal', scale: f.decimals };
    case 10: // DATE
    case 14: // NEWDATE
      return COLUMN.date;
    case T_DATETIME:
    case T_TIMESTAMP:
      return COLUMN.timestamp;
    case T_TIME:
      return COLUMN.time;
    case 245: // JSON
      return COLUMN.json;
    case 249: // TINY_BLOB .. BLOB, VAR_STRING, STRING: bytes with the binary charset, else text
    case 250:
    case 251:
    case 252:
    case 253:
    case 254:
      return (f as { extendedFormat?: string }).extendedFormat === 'json' ? COLUMN.json : binary ? COLUMN.bytes : COLUMN.text;
    case 247: // ENUM
    case 248: // SET
      return COLUMN.text;
    default:
      return null;
  }
}

function convertRow(row: unknown[], shape: Shape): void {
  for (const [i, fn] of shape.convert!) {
    const v = row[i];
    if (v !== null && v !== undefined) row[i] = fn(v, shape.fields[i]!);
  }
}

function converterFor(f: FieldPacket): Converter | null {
  switch (f.columnType) {
    case T_DATETIME:
    case T_TIMESTAMP:
      return parseDateTime;
    case T_TIME:
      return f.decimals > 0 && f.decimals <= 6 ? padTime : null;
    case T_BIT:
      return bitValue;
    case T_FLOAT:
      return shortFloat;
    default:
      return null;
  }
}

/** 'YYYY-MM-DD HH:MM:SS[.ffffff]' as a Date of that wall-clock time in UTC; otherwise the string. */
function parseDateTime(v: unknown): unknown {
  const s = v as string;
  if (s.length < 19 || s.charCodeAt(4) !== 45 /* - */) return s;
  const y = digits(s, 0, 4);
  const mo = digits(s, 5, 7);
  const d = digits(s, 8, 10);
  const h = digits(s, 11, 13);
  const mi = digits(s, 14, 16);
  const sec = digits(s, 17, 19);
  const ms = s.length > 20 ? digits(`${s.slice(20)}00`.slice(0, 3), 0, 3) : 0;
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || mi < 0 || sec < 0 || ms < 0) return s;
  const date = new Date(Date.UTC(2000, mo - 1, d, h, mi, sec, ms));
  date.setUTCFullYear(y); // Date.UTC maps years 0..99 to 1900..1999
  return date.getUTCDate() === d && date.getUTCMonth() === mo - 1 ? date : s;
}

function digits(s: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
}

/** mysql2 drops a TIME's trailing fraction zeros ('13:14:15.25'); print as many digits as the column has. */
function padTime(v: unknown, f: FieldPacket): unknown {
  const s = v as string;
  const dot = s.indexOf('.');
  const have = dot === -1 ? 0 : s.length - dot - 1;
  if (have >= f.decimals) return s;
  return (dot === -1 ? `${s}.` : s) + '0'.repeat(f.decimals - have);
}

/** BIT(n) arrives as big-endian bytes. */
function bitValue(v: unknown): unknown {
  if (!Buffer.isBuffer(v)) return v;
  if (v.length === 0) return 0;
  if (v.length <= 6) return v.readUIntBE(0, v.length);
  let n = 0n;
  for (const b of v) n = (n << 8n) | BigInt(b);
  return n <= 9007199254740991n ? Number(n) : n.toString();
}

/** A 4-byte float as the shortest decimal that reads back as the same float. */
function shortFloat(v: unknown): unknown {
  if (typeof v !== 'number' || !Number.isFinite(v)) return v;
  for (let p = 1; p < 9; p++) {
    const x = +v.toPrecision(p);
    if (Math.fround(x) === v) return x;
  }
  return v;
}

/** mysql2 refuses `undefined`; everything else the gateway binds (scalars, bigint) it sends as is. */
function bindable(values: unknown[]): unknown[] {
  let out = values;
  for (let i = 0; i < values.length; i++) {
    if (values[i] === undefined) {
      if (out === values) out = values.slice();
      out[i] = null;
    }
  }
  return out;
}

function leadingWord(text: string): string {
  const m = LEADING_WORD.exec(text);
  return m ? m[1]!.toLowerCase() : '';
}

function isCleanWrite(text: string): boolean {
  return CLEAN_VERBS.has(leadingWord(text));
}

function sslOption(ssl: unknown): PoolOptions['ssl'] {
  if (ssl === undefined || ssl === null || ssl === false) return undefined;
  if (ssl === true) return {};
  if (typeof ssl === 'object') return ssl as PoolOptions['ssl'];
  throw new GatewayError('connection_misconfigured', 'options.ssl must be true, false or an object of TLS settings');
}

// Server errors that mean the session could not be had or was lost (at connect or mid-call).
const CONNECT_ERRNOS = new Set([
  1040, // ER_CON_COUNT_ERROR
  1045, // ER_ACCESS_DENIED_ERROR
  1053, // ER_SERVER_SHUTDOWN
  1129, // ER_HOST_IS_BLOCKED
  1130, // ER_HOST_NOT_PRIVILEGED
  1203, // ER_TOO_MANY_USER_CONNECTIONS
  1226, // ER_USER_LIMIT_REACHED
  1251, // ER_NOT_SUPPORTED_AUTH_MODE
  1698, // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
  1927, // ER_CONNECTION_KILLED (MariaDB)
  4031, // ER_CLIENT_INTERACTION_TIMEOUT (MySQL)
]);

/** `withValues`: the statement ran with values bound, so a regular expression that does not compile is one of them. */
function toCallError(err: unknown, ms: number, password: string, withValues = false): GatewayError {
  if (err instanceof GatewayError) return err;
  const e = (err ?? {}) as { errno?: unknown; code?: unknown; fatal?: unknown; syscall?: unknown; qagKilled?: unknown };
  const errno = typeof e.errno === 'number' ? e.errno : 0;
  const detail = detailOf(err, password);
  if (errno === ER_STATEMENT_TIMEOUT || errno === ER_QUERY_TIMEOUT || (e.qagKilled && errno === ER_QUERY_INTERRUPTED)) {
    return timeoutError(ms);
  }
  if (errno === ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION) {
    return readOnlyRefused(detail);
  }
  if (e.fatal === true || CONNECT_ERRNOS.has(errno) || typeof e.syscall === 'string') return connectionFailed(detail);
  if (withValues && errno === ER_REGEXP_ERROR) return valueRejected(detail);
  return queryFailed(detail);
}

function detailOf(err: unknown, password: string): string {
  const e = err as { message?: unknown; code?: unknown } | null;
  return redact(e && typeof e.message === 'string' && e.message ? e.message : String(e?.code ?? err), password);
}
