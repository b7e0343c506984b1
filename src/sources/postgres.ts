// In charge of running statements on PostgreSQL through postgres.js (pools, value parsing, read-only
// sessions, statement timeouts, error mapping); must not import keys, HTTP, governance or the store.

import postgres from 'postgres';
import { GatewayError } from '../contract/errors.js';
import { createBreaker } from './breaker.js';
import { deadlines } from './deadlines.js';
import {
  type BatchHandler,
  COLUMN,
  type ColumnType,
  type ColumnTypes,
  type ConnectionConfig,
  DEFAULT_CONNECT_TIMEOUT_MS,
  type PoolCounts,
  type ResultSet,
  type RunOptions,
  type Source,
  type SourceSettings,
  type RawColumn,
  type StreamOptions,
  batchRowsOf,
} from './types.js';
import { connectionFailed, parameterRejected, queryFailed, readOnlyRefused, redact, timeoutError, toMs, tooManyStreams, valueRejected } from './errors.js';

type Sql = postgres.Sql;
/** Where a client's session statements go: its pool, or the connection a stream reserved. */
type Session = Pick<Sql, 'unsafe'>;

/**
 * One postgres.js client per connection (`max: 1`). Measured (DESIGN, "Measured traps"): a client
 * with more queries in flight than connections gets slower the longer it runs, while `max: 1`
 * clients used in turn stay fast; several calls on one client are pipelined on its connection.
 */
interface Client {
  sql: Sql;
  /** Calls in flight on this client; the least busy client takes the next call. */
  busy: number;
  /**
   * statement_timeout (ms) the session has once everything queued on it so far has run; NaN when
   * unknown. Calls are sent in order on the one connection, so a call only needs a SET when its
   * limit differs from the previous call's. A closed connection resets it (a new session starts
   * from the startup value).
   */
  sessionMs: number;
  /** True while a stream's cursor holds the connection: nothing else is sent to it meanwhile. */
  streaming: boolean;
  /** Set once the client is being ended and has been replaced in its pool. */
  retired: boolean;
  /** True while its connection is open: from the server's first ParameterStatus to the close. */
  open: boolean;
}

/**
 * Streams (`stream()`), decisions:
 * - A stream reserves its read-pool client's connection (postgres.js `reserve`: nothing else is sent
 *   on it meanwhile; calls given to the client wait in its queue) and runs as an SQL cursor in a
 *   read-only transaction: BEGIN, DECLARE, then a FETCH of `batchRows` rows (read again for each) sent
 *   only when onBatch's promise resolved (STYLE §9), so at most one batch is in the app per stream.
 *   A statement the server will not DECLARE (EXPLAIN, SHOW, a write, an error) runs as postgres.js's
 *   own cursor, an unnamed portal whose first size holds to its end, and fails as a call would.
 *   The client is marked `streaming` and pick() passes over it while any other client is not
 *   streaming. At most max(1, poolSize - 1) streams run at once per source, so ordinary calls keep
 *   a client (with a pool of 1 they wait for the stream); a stream beyond that is refused with
 *   `unavailable`. A statement that needs its session reset is followed by the reset on the
 *   reserved connection, before the client takes calls again.
 * - Time limit: PostgreSQL's statement_timeout runs from the first message to the Sync, i.e. over
 *   a whole portal including the time the client spends in onBatch (measured on 15: a 700 ms
 *   limit killed a stream whose reader paused 300 ms per batch). So the session runs the stream
 *   with statement_timeout 0 and a JS timer limits each wait for the database instead (until the
 *   first batch, then from each FETCH or Execute to its batch); past it the statement gets a cancel request
 *   and the stream is `query_timeout`. A cancel request can land late, on whatever the backend runs
 *   next, so a client a cancel was sent for is retired (ended and replaced), never reused; if the
 *   cancelled statement has not answered CANCEL_GRACE_MS later, its connection is destroyed.
 * - onBatch throwing: the transaction is rolled back (or the portal closed: Close + Sync); the
 *   backend was idle between batches, so there is nothing to cancel, and the client takes calls
 *   again at once.
 */
const CANCEL_GRACE_MS = 2000;
/** A stream's SQL cursor: its transaction (never ended by the server for an idle reader), its name, its DECLARE. */
const BEGIN_CURSOR = 'begin read only; set local idle_in_transaction_session_timeout = 0';
const CURSOR = 'qag_stream';
const DECLARE_CURSOR = `declare ${CURSOR} no scroll cursor for `;
/**
 * The gateway's own time limit does not rest on the session's statement_timeout alone (a statement
 * could have changed it for later calls): a call still running this long past its limit is cancelled
 * from here and its client retired, whatever the session's settings say.
 */
const BACKSTOP_MS = 1000;
/**
 * Puts a session back as it started (the startup parameters are RESET ALL's defaults: the read
 * pool's default_transaction_read_only, the server's statement_timeout), role and authorization
 * included; drops what a statement may have left on it. Sent after a statement governance could not
 * rule out (RunOptions.resetSession), pipelined. A session it fails on is retired.
 */
const RESET_SESSION = 'SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; CLOSE ALL; DISCARD TEMP; SELECT pg_advisory_unlock_all()';
/** SQLSTATE syntax_error: the server could not parse the statement. */
const SYNTAX_ERROR = '42601';
/**
 * The timers postgres.js runs on (its `timers` option, which its typings leave out), with its write of a
 * connection's queued messages moved from process.nextTick to setImmediate. uWS hands each request to a
 * callback of its own and Node runs the tick queue after each, so calls joined on one client (pick) still
 * went out as one socket write each, a system call that also delivers to the backend; after the loop's
 * poll phase, a turn's calls go out in one write per connection.
 */
const FLUSH_TIMERS = {
  setTimeout,
  clearTimeout,
  setImmediate,
  clearImmediate,
  now: () => performance.now(),
  nextTick: setImmediate,
};
/** pick()'s weight for a streaming client: busier than any number of ordinary calls. */
const STREAM_LOAD = 1 << 20;
/** pick()'s weight for a client whose connection is not open: an idle open one goes first, a busy one after. */
const UNOPENED_LOAD = 0.5;

// Value types, decided once for every pool. Parsers get the text form of a column; serializers turn
// a bound value into the text PostgreSQL parses (for `prepare: true` the server tells us each
// parameter's type, so these run by the parameter's declared type).
const PG_TYPES: Record<string, postgres.PostgresType> = {
  // int8: a number while it is exact, else the decimal string (never a rounded number).
  int8: { to: 20, from: [20], serialize: (x: unknown) => String(x), parse: parseInt8 },
  // numeric: a float, as the contract's Decimal → float.
  numeric: { to: 1700, from: [1700], serialize: (x: unknown) => String(x), parse: (x: string) => +x },
  // timestamp without time zone: the wall-clock value read as UTC, so it does not move with the
  // process's TZ. Values a JS Date can't hold (infinity, BC, year > 9999, LMT offsets) stay strings.
  timestamp: { to: 1114, from: [1114], serialize: serializeTime, parse: parseTimestamp },
  timestamptz: { to: 1184, from: [1184], serialize: serializeTime, parse: parseTimestamptz },
  // date: 'YYYY-MM-DD' as PostgreSQL prints it (postgres.js would make it a local-midnight Date).
  date: { to: 1082, from: [1082], serialize: serializeTime, parse: (x: string) => x },
  // A string bound to a json parameter is the JSON text itself (as psycopg2 sends it), not a JSON string.
  json: {
    to: 114,
    from: [114, 3802],
    serialize: (x: unknown) => (typeof x === 'string' ? x : JSON.stringify(x)),
    parse: (x: string) => JSON.parse(x),
  },
  // bytea as its text form ('\\x' and hex), as every other type: postgres.js 4 would ask for its own in binary,
  // which a raw stream (StreamOptions.raw) would then write as it came.
  bytea: { to: 17, from: [17], serialize: (x: unknown) => `\\x${Buffer.from(x as Uint8Array).toString('hex')}`, parse: (x: string) => toBuffer(x) },
  // postgres.js sends 'f' for anything but `true`; let the server parse 'true', 'yes', '1', ...
  boolean: {
    to: 16,
    from: [16],
    serialize: (x: unknown) => (x === true ? 't' : x === false ? 'f' : String(x)),
    parse: (x: string) => x === 't',
  },
};

// Arrays of the built-in types, registered by their fixed OIDs. postgres.js can learn array types
// with `fetch_types`, but that runs a catalogue query as each new connection's first statement, and
// when that query fails (a startup statement_timeout, a backend killed while starting) its promise
// is dropped and the process dies of an unhandled rejection (porsager/postgres#1192, #1205, #1223).
// So `fetch_types` is off and these are static; arrays of other types (enums, domains, composites)
// come back as their text literal, e.g. '{a,b}'.
const toNumber = (x: string): number => +x;
const toBuffer = (x: string): Buffer => Buffer.from(x.slice(2), 'hex');
const ARRAYS: [name: string, oid: number, element: ((x: string) => unknown) | null][] = [
  ['bool[]', 1000, (x) => x === 't'],
  ['bytea[]', 1001, toBuffer],
  ['int2[]', 1005, toNumber],
  ['int4[]', 1007, toNumber],
  ['oid[]', 1028, toNumber],
  ['float4[]', 1021, toNumber],
  ['float8[]', 1022, toNumber],
  ['int8[]', 1016, parseInt8],
  ['numeric[]', 1231, toNumber],
  ['date[]', 1182, null],
  ['timestamp[]', 1115, parseTimestamp],
  ['timestamptz[]', 1185, parseTimestamptz],
  ['json[]', 199, (x) => JSON.parse(x)],
  ['jsonb[]', 3807, (x) => JSON.parse(x)],
  ['char[]', 1002, null],
  ['name[]', 1003, null],
  ['text[]', 1009, null],
  ['bpchar[]', 1014, null],
  ['varchar[]', 1015, null],
  ['time[]', 1183, null],
  ['timetz[]', 1270, null],
  ['interval[]', 1187, null],
  ['uuid[]', 2951, null],
  ['inet[]', 1041, null],
  ['cidr[]', 651, null],
];
for (const [name, oid, element] of ARRAYS) {
  PG_TYPES[name] = { to: oid, from: [oid], serialize: serializeArray, parse: (x: string) => parseArray(x, element) };
}

const noop = (): void => {};
const columnNames = new WeakMap<object, string[]>();
/**
 * Parameter types a call may bind its values with (Source.prepare): those postgres.js has a serializer for without
 * reading the catalogue (`fetch_types` is off; its own and PG_TYPES), so a typed call never waits for the catalogue.
 * varchar, char, uuid, time and the rest stay untyped.
 */
const KNOWN_PARAMETER_TYPES = new Set([16, 17, 20, 21, 23, 25, 26, 114, 700, 701, 1082, 1114, 1184, 1700, 3802]);
/** Statements whose parameter types are held (Source.prepare), per source: about the plan cache's size. */
const DESCRIBED_MAX = 2000;

export function openPostgres(conn: ConnectionConfig, settings: SourceSettings): Source {
  const size = Math.max(1, Math.floor(settings.poolSize) || 0);
  // The session's startup statement_timeout: the server's limit when known, else left alone.
  const startupMs = settings.queryTimeoutMs === undefined ? NaN : toMs(settings.queryTimeoutMs);
  const password = conn.password ?? '';
  const connectS = (settings.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS) / 1000;
  // While the database is known down, calls fail at once (one call per interval tries again).
  const breaker = createBreaker(conn.name);
  /** Parameter types by statement text, from prepare; oldest dropped first past DESCRIBED_MAX. */
  const described = new Map<string, number[]>();
  const readPool = makePool(true);
  let writePool: Client[] | null = null;
  let next = 0;
  /**
   * Calls that arrive in the same turn of the event loop go to the same client, up to this many in
   * flight on it (QUERYAPIGATE_POOL_PIPELINE): postgres.js writes a turn's statements to a connection
   * in one write, and the server runs them one after another on one wake-up, where spreading them
   * costs a write, a read and a wake-up each. The price: a slow statement delays the calls of its turn.
   */
  const joinAtMost = Math.max(1, Math.floor(settings.pipeline ?? 1));
  /** The clients this turn's calls join (see joinAtMost); cleared once the turn's I/O is done. */
  let joinRead: Client | null = null;
  let joinWrite: Client | null = null;
  let closed = false;
  /** Streams allowed at once: all clients but one stay for ordinary calls. */
  const maxStreams = Math.max(1, size - 1);
  /** Retired clients still ending; close() waits for them. */
  const ending = new Set<Promise<void>>();

  return {
    dialect: 'postgres',
    run,
    stream,
    syntaxError,
    connections,
    warm,
    prepare,
    close,
  };

  /** Opens the read pool's first connection when none is open (see Source.warm); one opening already is waited for. */
  function warm(): Promise<boolean> {
    if (closed) return Promise.resolve(false);
    if (readPool.some((c) => c.open)) return Promise.resolve(true);
    const client = readPool[0]!;
    client.busy++;
    return client.sql
      .unsafe('select 1')
      .simple()
      .then(
        () => true,
        () => false,
      )
      .finally(() => client.busy--);
  }

  /**
   * See Source.prepare. postgres.js 4 describes a statement ahead only as the unnamed one, which calls do not find,
   * and a call whose values are untyped waits for its statement's description before it runs: a round trip of its
   * own on each connection's first call. So the types the server gives the parameters are asked once here, and
   * calls of the text bind their values with them (`typedValues`): a connection's first call then parses,
   * describes and runs in one round trip, with the types the server itself would have chosen. A text the server
   * refuses, or whose types postgres.js would have to look up, keeps untyped calls.
   */
  function prepare(text: string): void {
    if (closed || described.has(text)) return;
    const client = readPool.find((c) => c.open);
    if (!client) return;
    client.busy++;
    client.sql
      .unsafe(text, [])
      .describe()
      .then((d) => {
        const oids = (d as unknown as { types: number[] }).types;
        if (!oids.length || !oids.every((oid) => KNOWN_PARAMETER_TYPES.has(oid))) return;
        if (described.size >= DESCRIBED_MAX) described.delete(described.keys().next().value!);
        described.set(text, oids);
      })
      .catch(noop) // a statement the database refuses is its first call's to report
      .finally(() => client.busy--);
  }

  /** A call's values bound with their statement's described types (prepare), or as they are. */
  function typedValues(client: Client, text: string, values: unknown[]): unknown[] {
    const oids = described.get(text);
    if (oids === undefined || oids.length !== values.length) return values;
    const typed = new Array<unknown>(values.length);
    for (let i = 0; i < values.length; i++) typed[i] = client.sql.typed(values[i] as never, oids[i]!);
    return typed;
  }

  function connections(): PoolCounts {
    const counts = { idle: 0, active: 0 };
    for (const c of writePool ? [...readPool, ...writePool] : readPool) {
      if (c.busy > 0) counts.active++;
      else if (c.open) counts.idle++;
    }
    return counts;
  }

  /** The write pool, made by the first call that may write. */
  function writer(): Client[] {
    writePool ??= makePool(false);
    return writePool;
  }

  /** `again`: the client a call runs on the second time (see the catch). */
  async function run(text: string, values: unknown[], opts: RunOptions, again?: Client): Promise<ResultSet> {
    if (closed) throw connectionFailed('source closed');
    breaker.admit();
    const client = again ?? pick(opts.readOnly ? readPool : writer());
    const ms = toMs(opts.timeoutMs);
    let backstop = -1;
    client.busy++;
    try {
      prime(client, ms);
      const query = client.sql.unsafe(text, typedValues(client, text, values) as never[], { prepare: true }).values();
      if (opts.resetSession) reset(client);
      let res: Awaited<typeof query>;
      if (ms > 0) {
        // One promise settled by the statement or, past the backstop, by the timer (once it has, the
        // cancelled statement's failure is nobody's): not a race of two promises, one fewer a call.
        res = await new Promise<Awaited<typeof query>>((resolve, reject) => {
          backstop = deadlines.set(ms + BACKSTOP_MS, () => {
            query.cancel();
            retire(client, CANCEL_GRACE_MS / 1000);
            reject(timeoutError(ms));
          });
          query.then(resolve, reject);
        });
      } else res = await query;
      const columns = namesOf(res.columns);
      const rowCount = res.length > 0 || columns.length > 0 ? res.length : (res.count ?? 0);
      breaker.reached();
      // A plain Array (postgres.js's Result is a subclass carrying the statement): plainArray, since slice()
      // makes its copy through the subclass (two thirds of run()'s own time, bench/results/profile-2026-12-04-before-flush).
      return { columns, rows: plainArray(res) as unknown as unknown[][], rowCount, types: typesOf(res.columns) };
    } catch (err) {
      // A table changed under the connection's prepared statement: postgres.js 4 keeps failing with it
      // when the columns' types are the same (the names moved), so the connection is replaced and the
      // call runs once on the new one. The server refused at Bind: nothing ran.
      if (!again && isStalePlan(err)) return run(text, values, opts, retire(client, 5) ?? pick(opts.readOnly ? readPool : writer()));
      // The types asked ahead may be what the server refused (class 42: a table or a column changed): untyped from now on.
      if (String((err as { code?: unknown }).code).startsWith('42')) described.delete(text);
      throw noted(err, toCallError(err, ms, password, values.length > 0));
    } finally {
      deadlines.clear(backstop);
      client.busy--;
    }
  }

  /** Queues RESET_SESSION right behind what was sent to the client (see there). */
  function reset(client: Client, sql: Session = client.sql): Promise<unknown> {
    client.sessionMs = startupMs;
    return sql
      .unsafe(RESET_SESSION)
      .simple()
      .catch(() => retire(client, 5));
  }

  async function syntaxError(text: string): Promise<string | null> {
    if (closed) throw connectionFailed('source closed');
    const client = pick(readPool);
    client.busy++;
    try {
      await client.sql.unsafe(text, []).describe(); // Parse and Describe of the unnamed statement: nothing runs
      return null;
    } catch (err) {
      // Any refusal but an unreachable server means the statement was read.
      const refused = toCallError(err, 0, password);
      if (refused.code === 'connection_failed') throw refused;
      return (err as { code?: unknown }).code === SYNTAX_ERROR ? (refused.extras?.detail ?? null) : null;
    } finally {
      client.busy--;
    }
  }

  async function stream(text: string, values: unknown[], opts: StreamOptions, onBatch: BatchHandler): Promise<number> {
    if (closed) throw connectionFailed('source closed');
    breaker.admit();
    const client = pickForStream();
    const ms = toMs(opts.timeoutMs);
    const st: StreamState = { columns: null, types: null, raw: null, handed: 0, batches: 0, failure: null, timedOut: false };
    let timer: NodeJS.Timeout | undefined;
    let backstop: NodeJS.Timeout | undefined;
    /** What the stream waits on from the database: cancelled when a wait outlasts the limit. */
    let waitingOn: { cancel(): unknown } | null = null;
    const arm = (): void => {
      if (ms > 0 && !st.timedOut) timer = setTimeout(onTimeout, ms);
    };
    const onTimeout = (): void => {
      st.timedOut = true;
      waitingOn?.cancel();
      backstop = setTimeout(() => retire(client, 0), CANCEL_GRACE_MS);
    };
    // Never rejects: a rejection from a portal's last batch would go unhandled inside postgres.js.
    const deliver = async (rows: unknown[][], names: ColumnsLike): Promise<void> => {
      st.columns ??= namesOf(names ?? undefined);
      st.types ??= typesOf(names ?? undefined);
      if (opts.raw) st.raw ??= rawColumnsOf(names);
      st.batches++;
      st.handed += rows.length;
      try {
        await onBatch(st.columns, rows, st.types, st.raw ?? undefined);
      } catch (error) {
        st.failure = { error };
      }
    };

    /**
     * An SQL cursor in a read-only transaction: each FETCH asks for batchRows as it is then, so the caller sizes
     * the batches by their bytes (postgres.js 4's own cursor keeps its first size to the end: 0.68x the rows a
     * second on a 3-column export, bench/results/streams-2026-12-04-postgres4). False when the server would not
     * DECLARE the statement (not a query a cursor can hold, or an error): nothing ran, and the portal runs it.
     */
    const viaCursor = async (sql: postgres.ReservedSql): Promise<boolean> => {
      const rollback = () => sql.unsafe('rollback').simple().catch(noop);
      const begun = sql.unsafe(BEGIN_CURSOR).simple();
      const declared = sql.unsafe(DECLARE_CURSOR + text, values as never[], { prepare: false });
      waitingOn = declared;
      try {
        await Promise.all([begun, declared]);
      } catch (err) {
        await rollback();
        if (st.timedOut || isConnectFailure(err)) throw err;
        return false;
      }
      try {
        for (;;) {
          const n = batchRowsOf(opts);
          const fetch = sql.unsafe(`fetch forward ${n} from ${CURSOR}`, [], { prepare: false });
          const batch = opts.raw ? fetch.raw() : fetch.values();
          waitingOn = batch;
          if (st.batches > 0) arm(); // the first wait runs from the start
          const rows = (await batch) as unknown as unknown[][] & { columns?: ColumnsLike };
          clearTimeout(timer);
          // A batch that came after the limit ran out is not handed over: before the first, the caller then gets a
          // clean 504 instead of rows and a cut connection (the cancel may land after the batch did).
          if (st.timedOut) break;
          // The first batch even when empty: an export still writes its header.
          if (rows.length > 0 || st.batches === 0) await deliver(plainArray(rows), rows.columns);
          if (st.failure || rows.length < n) break;
        }
        if (st.failure || st.timedOut) await rollback();
        else await sql.unsafe('commit').simple();
      } catch (err) {
        await rollback();
        throw err;
      }
      return true;
    };

    /**
     * postgres.js's cursor: an unnamed portal, batchRows read once. The next Execute is sent only when the last
     * batch's onBatch resolved.
     */
    const viaPortal = async (sql: postgres.ReservedSql): Promise<void> => {
      // Unnamed, parsed afresh: postgres.js 4 gives a cursor's first batch its columns only from the
      // statement's own RowDescription, which a statement prepared before does not send again.
      const statement = sql.unsafe(text, values as never[], { prepare: false });
      const query = opts.raw ? statement.raw() : statement.values();
      waitingOn = query;
      /** The batch being handed over; postgres.js does not wait for the last one (CommandComplete). */
      let pending: Promise<void> | undefined;
      const cursor = query.cursor(batchRowsOf(opts), (batch) => {
        clearTimeout(timer);
        if (st.failure || st.timedOut) return client.sql.CLOSE;
        // A plain Array; postgres.js's Result subclass carries the columns on the first batch only.
        const rows = batch as unknown as unknown[][] & { columns?: ColumnsLike };
        pending = deliver(plainArray(rows), rows.columns);
        return pending.then(() => {
          if (st.failure || st.timedOut) return client.sql.CLOSE;
          arm();
          return undefined;
        });
      }) as unknown as Promise<{ columns?: ColumnsLike }>;
      let res: { columns?: ColumnsLike };
      try {
        res = await cursor;
      } catch (err) {
        if (!st.failure && !st.timedOut) throw err;
        res = {};
      }
      await pending;
      clearTimeout(timer);
      if (!st.failure && !st.timedOut && st.batches === 0) await deliver([], res.columns); // no rows: the columns
    };

    client.busy++;
    client.streaming = true;
    let sql: postgres.ReservedSql | undefined;
    try {
      arm(); // see "Time limit" above: until the first batch
      try {
        sql = await client.sql.reserve();
        if (!st.timedOut) {
          prime(client, 0, sql);
          if (!(await viaCursor(sql))) await viaPortal(sql);
        }
      } catch (err) {
        if (!st.failure && !st.timedOut) throw noted(err, toCallError(err, ms, password, values.length > 0));
      }
      breaker.reached();
      // Behind the stream on its own connection, before any call waiting for the client.
      if (opts.resetSession && !st.timedOut) await reset(client, sql);
    } finally {
      clearTimeout(timer);
      clearTimeout(backstop);
      sql?.release();
      client.busy--;
      client.streaming = false;
      if (st.timedOut) retire(client, 5);
    }
    if (st.failure) throw st.failure.error;
    if (st.timedOut) throw timeoutError(ms);
    return st.handed;
  }

  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    const all = writePool ? readPool.concat(writePool) : readPool;
    await Promise.all(all.map((c) => c.sql.end({ timeout: 5 })).concat([...ending]));
  }

  /** Tells the breaker what a failure says of the database: unreachable, lost mid-call (nothing), or answering. */
  function noted(err: unknown, e: GatewayError): GatewayError {
    if (isConnectFailure(err)) breaker.unreachable(e.extras?.detail ?? e.message);
    else if (e.code !== 'connection_failed') breaker.reached();
    return e;
  }

  /** Brings the session up to date for a call with limit `ms`; sent ahead of the call, pipelined. */
  function prime(client: Client, ms: number, sql: Session = client.sql): void {
    if (ms !== client.sessionMs) {
      // Queued right before the statement, in the same tick, so nothing slips between them; it is
      // pipelined (no extra round trip). Measured: a SET (and a RESET) on every call cost about 3x
      // the CPU of the bare call, so it is sent only when the limit changes.
      client.sessionMs = ms;
      sql.unsafe(`set statement_timeout = ${ms}`).catch(noop);
    }
  }

  /** The client this turn's calls join while it has room (joinAtMost), else the least busy. */
  function pick(pool: Client[]): Client {
    if (joinAtMost === 1) return leastBusy(pool);
    const joined = pool === readPool ? joinRead : joinWrite;
    if (joined !== null && joined.busy < joinAtMost && !joined.streaming && !joined.retired) return joined;
    const best = leastBusy(pool);
    if (joinRead === null && joinWrite === null) setImmediate(endTurn);
    if (pool === readPool) joinRead = best;
    else joinWrite = best;
    return best;
  }

  function endTurn(): void {
    joinRead = joinWrite = null;
  }

  /**
   * The least busy client, ties broken round-robin so idle connections share the load. A streaming
   * client counts as busier than any other, so calls go to it only when every client streams.
   */
  function leastBusy(pool: Client[]): Client {
    const n = pool.length;
    const start = next;
    next = (next + 1) % n;
    let best = pool[start]!;
    let bestLoad = load(best);
    for (let i = 1; i < n && bestLoad > 0; i++) {
      const c = pool[(start + i) % n]!;
      const l = load(c);
      if (l < bestLoad) {
        best = c;
        bestLoad = l;
      }
    }
    return best;
  }

  /** The least busy read client that is not streaming, or `unavailable` when streams are at their limit. */
  function pickForStream(): Client {
    let open = 0;
    let best: Client | null = null;
    for (const c of readPool) {
      if (c.streaming) open++;
      else if (!best || c.busy < best.busy) best = c;
    }
    if (!best || open >= maxStreams) {
      throw tooManyStreams(maxStreams);
    }
    return best;
  }

  /**
   * Takes a read client out of service: a fresh one takes its place in the pool, and it is ended
   * (after `timeoutS`; 0 destroys the connection now, failing what still runs on it). Returns the
   * fresh one (none once the source is closed, or when the client was retired before).
   */
  function retire(client: Client, timeoutS: number): Client | undefined {
    if (client.retired) {
      if (timeoutS === 0) void client.sql.end({ timeout: 0 }).catch(noop);
      return undefined;
    }
    client.retired = true;
    let replacement: Client | undefined;
    const at = readPool.indexOf(client);
    if (at >= 0 && !closed) replacement = readPool[at] = makeClient(true);
    const w = writePool ? writePool.indexOf(client) : -1;
    if (w >= 0 && writePool && !closed) replacement = writePool[w] = makeClient(false);
    const done: Promise<void> = client.sql
      .end({ timeout: timeoutS })
      .catch(noop)
      .finally(() => ending.delete(done));
    ending.add(done);
    return replacement;
  }

  function makePool(readOnly: boolean): Client[] {
    const pool: Client[] = [];
    for (let i = 0; i < size; i++) pool.push(makeClient(readOnly));
    return pool;
  }

  function makeClient(readOnly: boolean): Client {
    const connection: Record<string, string | number | boolean> = { application_name: 'queryapigate' };
    // Startup parameters cost nothing per call. A read pool's sessions refuse writes themselves
    // (SQLSTATE 25006); the write pool is a separate set of sessions, created on first use.
    if (!Number.isNaN(startupMs)) connection.statement_timeout = String(startupMs); // '0' must not be dropped
    if (readOnly) connection.default_transaction_read_only = 'on';
    const client: Client = {
      sql: undefined as unknown as Sql,
      busy: 0,
      sessionMs: startupMs,
      streaming: false,
      retired: false,
      open: false,
    };
    client.sql = postgres({
      host: conn.host || 'localhost',
      port: conn.port || 5432,
      database: conn.database || undefined,
      username: conn.user || undefined,
      password: conn.password || undefined,
      ssl: sslOption(conn.options?.sslmode),
      max: 1, // max_pipeline stays at postgres.js's 100 (not in its typings)
      prepare: true,
      fetch_types: false, // see ARRAYS above
      idle_timeout: 300, // seconds an idle pooled connection is kept
      // Jittered, as postgres.js does by default, so a pool's connections do not all recycle at once.
      max_lifetime: 60 * (30 + Math.random() * 30),
      connect_timeout: connectS,
      // Reconnect at once when asked: postgres.js otherwise waits up to 20 s (3^failures / 100 s, jittered)
      // before a closed connection tries again, even after the database is back. The breaker paces retries.
      backoff: () => 0,
      onnotice: noop,
      onclose: () => {
        client.open = false;
        client.sessionMs = startupMs;
      },
      // PostgreSQL ≥ 14 reports default_transaction_read_only. A read session that switched it off
      // (e.g. `select set_config('default_transaction_read_only', 'off', false)`) is switched back
      // before any later call reaches it. Best effort: the SQL guard is the first line.
      // The server sends its parameters as a session starts: the connection is open from then on.
      onparameter: (key: string, value: unknown) => {
        client.open = true;
        if (readOnly && key === 'default_transaction_read_only' && value === 'off') {
          client.sql.unsafe('set default_transaction_read_only = on').catch(noop);
        }
      },
      transform: { undefined: null },
      connection: connection as Partial<postgres.ConnectionParameters>,
      types: PG_TYPES,
      timers: FLUSH_TIMERS,
    } as postgres.Options<Record<string, postgres.PostgresType>>) as unknown as Sql;
    return client;
  }
}

type ColumnsLike = readonly { name: string; type?: number; parser?: ((x: string) => unknown) | null }[] | null | undefined;

interface StreamState {
  columns: string[] | null;
  types: ColumnTypes | null;
  /** How to take each column's values, for a raw stream. */
  raw: RawColumn[] | null;
  /** Rows and batches handed to onBatch so far. */
  handed: number;
  batches: number;
  /** onBatch's error, once it threw. */
  failure: { error: unknown } | null;
  /** Set when a wait for the database outlasted the limit and a cancel was sent. */
  timedOut: boolean;
}

/**
 * The batch's rows in a plain Array. Not slice(): on postgres.js's Result, an Array subclass, it
 * builds the copy through the subclass element by element (measured: a quarter of a millisecond for
 * 3,000 rows).
 */
function plainArray<T>(rows: readonly T[]): T[] {
  const out = new Array<T>(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = rows[i]!;
  return out;
}

/** A client's calls in flight; an idle connection that is open goes before one that would have to open. */
function load(c: Client): number {
  return (c.streaming ? c.busy + STREAM_LOAD : c.busy) + (c.open ? 0 : UNOPENED_LOAD);
}

function namesOf(columns: readonly { name: string }[] | undefined): string[] {
  if (!columns) return [];
  let names = columnNames.get(columns);
  if (!names) {
    names = columns.map((c) => c.name);
    columnNames.set(columns, names);
  }
  return names;
}

/** Column types by OID, for the typed formats; other types (arrays, enums, ...) are left to their values. */
const PG_KINDS = new Map<number, ColumnType>([
  [16, COLUMN.boolean],
  [20, COLUMN.integer],
  [21, COLUMN.integer],
  [23, COLUMN.integer],
  [26, COLUMN.integer],
  [700, COLUMN.float],
  [701, COLUMN.float],
  [1700, COLUMN.decimal], // postgres.js does not pass the typmod on, so the scale is unknown
  [1082, COLUMN.date],
  [1114, COLUMN.timestamp],
  [1184, COLUMN.timestamp],
  [1083, COLUMN.time],
  [1266, COLUMN.time],
  [17, COLUMN.bytes],
  [114, COLUMN.json],
  [3802, COLUMN.json],
  [25, COLUMN.text],
  [1043, COLUMN.text],
  [1042, COLUMN.text],
  [19, COLUMN.text],
  [2950, COLUMN.text],
]);
const columnTypes = new WeakMap<object, ColumnTypes>();

function typesOf(columns: readonly { type?: number }[] | undefined): ColumnTypes {
  if (!columns) return [];
  let types = columnTypes.get(columns);
  if (!types) {
    types = columns.map((c) => PG_KINDS.get(c.type ?? 0) ?? null);
    columnTypes.set(columns, types);
  }
  return types;
}

/**
 * A raw stream's columns (StreamOptions.raw): postgres.js hands each value as the bytes of its text
 * form, and `read` parses them as postgres.js would have (the column's parser from the statement's
 * description: PG_TYPES or postgres.js's own; none means the text itself). The kinds follow PostgreSQL's
 * text output for the types whose parsers are known here: integers print their plain digits,
 * booleans 't'/'f', a timestamp without a zone 'YYYY-MM-DD HH:MM:SS[.ffffff]' (DateStyle ISO, which
 * postgres.js sets) or another shape parseTimestamp takes care of; numeric and float columns are
 * read with +x, postgres.js's and PG_TYPES's parser.
 */
function rawColumnsOf(columns: ColumnsLike): RawColumn[] {
  return (columns ?? []).map((c) => {
    const parser = c.parser ?? undefined; // postgres.js 4 says null for a column it leaves as text
    const read: (bytes: Uint8Array) => unknown = parser === undefined ? textOf : (b) => parser(textOf(b));
    // int2, int4, oid, float4, float8: postgres.js's own parser, +x.
    const number = c.type === 21 || c.type === 23 || c.type === 26 ? 'integer' : c.type === 700 || c.type === 701 ? 'decimal' : 'other';
    let kind: RawColumn['kind'] = number;
    if (parser === undefined || parser === PG_TYPES.date!.parse) kind = 'text';
    else if (parser === PG_TYPES.boolean!.parse) kind = 'boolean';
    else if (parser === PG_TYPES.int8!.parse) kind = 'integer';
    else if (parser === PG_TYPES.timestamp!.parse) kind = 'timestamp';
    else if (parser === PG_TYPES.numeric!.parse) kind = 'decimal';
    return { kind, read };
  });
}

/** PostgreSQL's "cached plan must not change result type": a prepared statement's table changed under it. */
function isStalePlan(err: unknown): boolean {
  const e = err as { code?: unknown; routine?: unknown };
  return e.code === '0A000' && e.routine === 'RevalidateCachedQuery';
}

function textOf(bytes: Uint8Array): string {
  // postgres.js hands Buffers: read in place.
  return (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).toString('utf8');
}

function parseInt8(x: string): number | string {
  const n = +x;
  return Number.isSafeInteger(n) ? n : x;
}

/** A digit's value at position i. */
const digit = (x: string, i: number) => x.charCodeAt(i) - 48;

/**
 * A timestamp without a zone as the Date holding its wall-clock value in UTC. PostgreSQL's ISO output
 * ("YYYY-MM-DD HH:MM:SS" with up to six fraction digits) is read field by field, twice as fast as
 * Date's string parser (a stream of timestamps spent most of its parse time there); any other shape
 * (BC, years past 9999, infinity) or a field out of range goes to the parser, which decides.
 */
export function parseTimestamp(x: string): Date | string {
  const n = x.length;
  if (n >= 19 && n <= 26 && x.charCodeAt(4) === 45 && x.charCodeAt(7) === 45 && x.charCodeAt(10) === 32 && (n === 19 || x.charCodeAt(19) === 46)) {
    const year = digit(x, 0) * 1000 + digit(x, 1) * 100 + digit(x, 2) * 10 + digit(x, 3);
    const month = digit(x, 5) * 10 + digit(x, 6);
    const day = digit(x, 8) * 10 + digit(x, 9);
    const hour = digit(x, 11) * 10 + digit(x, 12);
    const minute = digit(x, 14) * 10 + digit(x, 15);
    const second = digit(x, 17) * 10 + digit(x, 18);
    let ms = 0;
    for (let i = 20, unit = 100; i < n && unit >= 1; i++, unit /= 10) ms += digit(x, i) * unit; // cut to ms, as Date's parser does
    if (year >= 1000 && month >= 1 && month <= 12 && day >= 1 && day <= 28 && hour <= 23 && minute <= 59 && second <= 59) {
      return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms));
    }
  }
  const d = new Date(`${x.replace(' ', 'T')}Z`);
  return Number.isNaN(d.getTime()) ? x : d;
}

function parseTimestamptz(x: string): Date | string {
  const d = new Date(x);
  return Number.isNaN(d.getTime()) ? x : d;
}

/**
 * Parses PostgreSQL's array text output: `{1,2}`, `{{1,2},{3,4}}`, `{"a \"b\"",NULL}`, and
 * `[0:1]={1,2}` (bounds dropped). `element` parses each non-null element; null keeps the string.
 */
function parseArray(text: string, element: ((x: string) => unknown) | null): unknown[] {
  let i = text.charCodeAt(0) === 91 /* [ */ ? text.indexOf('=') + 1 : 0;
  return level();

  function level(): unknown[] {
    const out: unknown[] = [];
    i++; // {
    if (text[i] === '}') {
      i++;
      return out;
    }
    for (;;) {
      const ch = text[i];
      if (ch === '{') {
        out.push(level());
      } else if (ch === '"') {
        let s = '';
        let start = ++i;
        while (text[i] !== '"') {
          if (text[i] === '\\') {
            s += text.slice(start, i);
            start = ++i; // keep the escaped character, whatever it is
          }
          i++;
        }
        s += text.slice(start, i++);
        out.push(element ? element(s) : s);
      } else {
        const start = i;
        while (text[i] !== ',' && text[i] !== '}') i++;
        const s = text.slice(start, i);
        out.push(s === 'NULL' ? null : element ? element(s) : s);
      }
      if (text[i++] === '}') return out; // else ','
    }
  }
}

/** A JS array as an array literal (every element quoted, which every element type accepts). */
function serializeArray(x: unknown): string {
  if (!Array.isArray(x)) return String(x);
  let out = '{';
  for (let i = 0; i < x.length; i++) {
    if (i) out += ',';
    out += arrayElement(x[i]);
  }
  return `${out}}`;
}

function arrayElement(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (Array.isArray(v)) return serializeArray(v);
  const text = v instanceof Date ? v.toISOString() : Buffer.isBuffer(v) ? `\\x${v.toString('hex')}` : typeof v === 'object' ? JSON.stringify(v) : String(v);
  return `"${text.replace(/[\\"]/g, '\\$&')}"`;
}

function serializeTime(x: unknown): string {
  return x instanceof Date ? x.toISOString() : String(x);
}

function sslOption(mode: unknown): postgres.Options<Record<string, postgres.PostgresType>>['ssl'] {
  switch (mode) {
    case undefined:
    case null:
    case 'disable':
      return false;
    case 'allow':
    case 'prefer':
    case 'require':
    case 'verify-full':
      return mode;
    case 'verify-ca':
      return { rejectUnauthorized: true, checkServerIdentity: () => undefined };
    default:
      throw new GatewayError('connection_misconfigured', `Unsupported sslmode '${String(mode)}'`);
  }
}

// SQLSTATEs that mean the session could not be had or was lost: connection exceptions (08),
// authorization (28), unknown database, too many connections, shutdown or termination.
const PG_CONNECT_STATES = new Set(['3D000', '53300', '57P01', '57P02', '57P03', '57P04', '57P05']);
// postgres.js's own (non-server) codes for a connection that failed or went away.
const DRIVER_CONNECT_CODES = new Set([
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_DESTROYED',
  'CONNECTION_ENDED',
  'SASL_SIGNATURE_MISMATCH',
  'AUTH_TYPE_NOT_IMPLEMENTED',
]);

// SQLSTATEs a server answers a session that it will not start with: starting up or shutting down,
// too many connections, no such database, authentication failures (28), connection refused (08001, 08004).
const PG_NO_SESSION_STATES = new Set(['57P03', '53300', '3D000', '08001', '08004']);

/** True when no session could be had at all (as opposed to one lost mid-call, or a statement's own failure). */
function isConnectFailure(err: unknown): boolean {
  const e = (err ?? {}) as { name?: unknown; code?: unknown; syscall?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (e.name === 'PostgresError') return code.startsWith('28') || PG_NO_SESSION_STATES.has(code);
  return code === 'CONNECT_TIMEOUT' || e.syscall === 'connect' || e.syscall === 'getaddrinfo' || /CERT|TLS|SSL/.test(code);
}

/** PostgreSQL's CONTEXT for a value that failed its parameter's input conversion: "unnamed portal parameter $1 = '...'". */
const PORTAL_PARAMETER = /portal parameter \$(\d+)\b/;
/** The type in "invalid input syntax for type integer: ..." and "... out of range for type integer". */
const TYPE_NAMED = /for type ([a-z][a-z0-9 ]*?)(?::|$)/;

/**
 * Data exceptions of a pattern or a row count (valueRejected): invalid escape character, escape character conflict,
 * invalid escape sequence (a LIKE pattern ending in `\`), invalid regular expression, a negative LIMIT or OFFSET.
 */
const OPERAND_STATES = new Set(['22019', '2200B', '22025', '2201B', '2201W', '2201X']);

/** `withValues`: the statement ran with values bound, so a pattern's or a row count's error is one of them. */
function toCallError(err: unknown, ms: number, password: string, withValues = false): GatewayError {
  if (err instanceof GatewayError) return err;
  const e = (err ?? {}) as { name?: unknown; code?: unknown; syscall?: unknown; message?: unknown; where?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  const detail = redact(typeof e.message === 'string' ? e.message : String(err), password);
  if (e.name === 'PostgresError') {
    if (code === '57014' && detail.includes('statement timeout')) return timeoutError(ms);
    // A data exception (class 22) while binding a value: its CONTEXT names the parameter.
    const bound = code.startsWith('22') && typeof e.where === 'string' ? PORTAL_PARAMETER.exec(e.where) : null;
    if (bound) return parameterRejected(Number(bound[1]), TYPE_NAMED.exec(detail)?.[1] ?? 'value', detail);
    if (withValues && OPERAND_STATES.has(code)) return valueRejected(detail);
    if (code === '25006') {
      return readOnlyRefused(detail);
    }
    if (code.startsWith('08') || code.startsWith('28') || PG_CONNECT_STATES.has(code)) return connectionFailed(detail);
  } else if (DRIVER_CONNECT_CODES.has(code) || typeof e.syscall === 'string' || /CERT|TLS|SSL/.test(code)) {
    return connectionFailed(detail);
  }
  return queryFailed(detail);
}
