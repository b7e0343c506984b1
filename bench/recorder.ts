// Measures the recorder's writes as it drives them: runs kept per second on SQLite and PostgreSQL for batches of
// 500 and 5,000, for the event log alone (src/store/events.ts) and with the per-version history rings written after
// each append (Store.writeRuns, as src/recorder/recorder.ts does), the CPU each run costs (this process, and on PostgreSQL the server's
// backends when the server is local), and the store's size for an hour of events at 20,000 runs/s, written at a
// reduced scale with a simulated clock and extrapolated.
//
//   node dist/bench/recorder.js [--seconds 10] [--rounds 3] [--scale 40] [--pg postgres://postgres@127.0.0.1:5432/postgres] [--no-pg]
//
// --path measures the whole way instead, per run and per thread: an executor thread (bench/recorderExecutor.ts) makes
// runs at --rate a second through record() and a RunBatcher, the batches cross a BroadcastChannel to a real recorder
// thread (src/recorder/client.ts) writing the store with the history rings at limit 50, and each thread's CPU is read
// from /proc (schedstat). --dist a,b measures several builds (each a copy of dist/ inside this worktree, so its
// imports resolve), in interleaved rounds:
//
//   node dist/bench/recorder.js --path --dist dist-before,dist [--rate 20000] [--seconds 10] [--rounds 3] [--no-pg]
//     [--place here] [--runs lookup]
//
// --place here puts the recorder on this thread, as a PostgreSQL store does; --place executor on the executor thread that
// makes the runs, as the gateway inline (the acceptor's thread) and pooled (one executor's) do with a PostgreSQL store, its
// work then counted in the executor's column; --runs lookup makes every run as the seeds'
// account lookup does (one query, one version, one key), so history keeps 50 of each batch, not nearly every run;
// --runs governed the same with the seeds' governed key (each run holding its trace's mask list).
//
// Results go to bench/results/recorder-<date>/ (results.jsonl + README.md), or recorder-<date>-<suffix>/ (--suffix), in
// either mode.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, existsSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type MessagePort, Worker } from 'node:worker_threads';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { syntheticRun } from './syntheticRun.js';
import { EventLog } from '../src/store/events.js';
import { openPostgres, openSqlite, type SqlDb } from '../src/store/sql.js';
import { migrate } from '../src/store/migrations.js';
import { Store as GatewayStore } from '../src/store/store.js';
import { channel, type RunRecord } from '../src/contract/messages.js';
import { fmt, median, writeResults } from './gateway.js';
import { BackendCpu } from './dbCpu.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    scale: { type: 'string', default: '40' },
    rounds: { type: 'string', default: '3' },
    pg: { type: 'string', default: process.env.QUERYAPIGATE_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
    'no-pg': { type: 'boolean', default: false },
    'no-sqlite': { type: 'boolean', default: false },
    /** Only the settings that write the history rings, and no hour of events (a quicker look at writeRuns). */
    'history-only': { type: 'boolean', default: false },
    path: { type: 'boolean', default: false },
    dist: { type: 'string', default: 'dist' },
    rate: { type: 'string', default: '20000' },
    /**
     * --path: where the recorder runs, as serve.ts places it: 'thread' (a SQLite store), 'here' (this thread: a PostgreSQL
     * store) or 'executor' (the thread that makes the runs, hosted as an executor's 'record' task: a PostgreSQL store).
     */
    place: { type: 'string', default: 'thread' },
    /** --path: 'lookup' makes every run as the seeds' account lookup does (one query, one version, one key) instead of the synthetic mix. */
    runs: { type: 'string', default: 'synthetic' },
    suffix: { type: 'string' },
  },
});
const SECONDS = Number(args.seconds);
const SCALE = Number(args.scale);
const ROUNDS = Number(args.rounds);
const RATE = 20_000;
const RETENTION_S = 3600;

// ── synthetic runs ──────────────────────────────────────────────────────────────────────────
let counter = 0;
/** A pool of distinct runs, reused batch after batch (building them is the executors' cost, not the recorder's). */
const POOL = Array.from({ length: 20_000 }, () => syntheticRun(++counter, '2026-11-30 12:00:00'));
let poolAt = 0;
function batchOf(n: number): RunRecord[] {
  if (poolAt + n > POOL.length) poolAt = 0;
  const b = POOL.slice(poolAt, poolAt + n);
  poolAt += n;
  return b;
}

// ── stores ──────────────────────────────────────────────────────────────────────────────────
interface Store {
  engine: 'sqlite' | 'postgres';
  db: SqlDb;
  /** Where a recorder thread finds this store (its home folder, or its URL). */
  home: string;
  databaseUrl: string | null;
  another(): SqlDb;
  /** Bytes the event tables take (tables + indexes), and the whole store's size. */
  size(): Promise<{ events: number; store: number }>;
  /** PostgreSQL: the CPU of the server's backends for this store over a measured run (bench/dbCpu.ts). */
  backends: BackendCpu | null;
  close(): Promise<void>;
}

function sqliteStore(): Store {
  const dir = mkdtempSync(join(tmpdir(), 'qag-bench-events-'));
  const file = join(dir, 'queryapigate.db');
  const db = openSqlite(file);
  const extra: SqlDb[] = [];
  return {
    engine: 'sqlite',
    db,
    home: dir,
    databaseUrl: null,
    another() {
      const d = openSqlite(file);
      extra.push(d);
      return d;
    },
    async size() {
      const [r] = await db.all<{ used: number }>(
        'SELECT (SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM pragma_freelist_count()) AS used',
      );
      const [p] = await db.all<{ page_size: number }>('SELECT page_size FROM pragma_page_size()');
      const wal = existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0;
      // Only event tables live in this file, so pages in use are the event log's size.
      return { events: Number(r.used) * Number(p.page_size), store: statSync(file).size + wal };
    },
    backends: null,
    async close() {
      for (const d of extra) await d.close();
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** CPU seconds the store's backends spent over the last measured run; null for SQLite or a server not on this machine. */
function serverSeconds(store: Store): number | null {
  return store.backends?.seconds?.get(store.backends.databases[0]) ?? null;
}

async function postgresStore(adminUrl: string): Promise<Store> {
  const name = `qag_bench_events_${process.pid}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = adminUrl.replace(/\/[^/]*$/, `/${name}`);
  const db = openPostgres(url, { max: 2 });
  const extra: SqlDb[] = [];
  return {
    engine: 'postgres',
    db,
    home: mkdtempSync(join(tmpdir(), 'qag-bench-events-')),
    databaseUrl: url,
    another() {
      const d = openPostgres(url, { max: 2 });
      extra.push(d);
      return d;
    },
    async size() {
      const [r] = await db.all<{ events: number; store: number }>(
        `SELECT COALESCE((SELECT sum(pg_total_relation_size(table_name::regclass)) FROM event_segments), 0)
              + pg_total_relation_size('event_segments') AS events, pg_database_size(current_database()) AS store`,
      );
      return { events: Number(r.events), store: Number(r.store) };
    },
    backends: new BackendCpu(admin, [name]),
    async close() {
      for (const d of extra) await d.close();
      await db.close();
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end({ timeout: 5 });
    },
  };
}

// ── measurements ────────────────────────────────────────────────────────────────────────────
interface ThroughputRow {
  bench: 'throughput';
  round: number;
  engine: string;
  batch: number;
  writers: number;
  /** QUERYAPIGATE_HISTORY_LIMIT when the history rings were written too; null for the event log alone. */
  history_limit: number | null;
  /** History rows and bytes (table + index) at the end: bounded by versions × limit, whatever the run count. */
  history_rows: number | null;
  history_bytes: number | null;
  /** PostgreSQL: the share of ring updates that were HOT (pruned inside the page, no index entry, no dead row left
   *  for vacuum), and the dead rows the statistics count at the end. */
  history_hot_pct: number | null;
  history_dead_rows: number | null;
  seconds: number;
  runs: number;
  runs_per_s: number;
  client_cpu_us_per_run: number;
  server_cpu_us_per_run: number | null;
  mean_append_ms: number;
  max_append_ms: number;
  /** 1-minute load average before and after: other work on the machine skews these numbers. */
  load_before: number;
  load_after: number;
}

/** The synthetic runs' 200 versions (50 queries × 4), so every run has a ring to go to. */
async function withVersions(store: Store, keep: number): Promise<GatewayStore> {
  await migrate(store.db);
  const gateway = new GatewayStore(store.db);
  const now = '2026-11-30 12:00:00';
  const fields = (uuid: string) => ({
    sql: 'SELECT 1',
    connection_name: 'warehouse',
    parameters: {},
    description: '',
    author: null,
    tags: [],
    cache_ttl: null,
    uuid,
  });
  for (let q = 0; q < 50; q++) {
    const name = `monthly_revenue_${q}`;
    await gateway.createQuery({ name, collection: null, example: false }, fields(`${name}-1`), true, now);
    for (let v = 2; v <= 4; v++) await gateway.addVersion(name, fields(`${name}-${v}`), true, now);
  }
  await gateway.resizeRings(keep);
  return gateway;
}

async function historySize(store: Store): Promise<{ rows: number; bytes: number; hotPct: number | null; dead: number | null }> {
  const [r] = await store.db.all<{ n: number }>('SELECT count(*) AS n FROM run_history');
  const [b] = await store.db.all<{ n: number }>(
    store.engine === 'postgres'
      ? "SELECT pg_total_relation_size('run_history') AS n"
      : "SELECT sum(pgsize) AS n FROM dbstat WHERE name IN ('run_history', 'sqlite_autoindex_run_history_1')",
  );
  let hotPct: number | null = null;
  let dead: number | null = null;
  if (store.engine === 'postgres') {
    await new Promise((res) => setTimeout(res, 1500)); // backends report their table counters at most once a second
    const [st] = await store.db.all<{ upd: number; hot: number; dead: number }>(
      "SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot, n_dead_tup AS dead FROM pg_stat_user_tables WHERE relname = 'run_history'",
    );
    hotPct = Number(st.upd) ? round((100 * Number(st.hot)) / Number(st.upd), 1) : null;
    dead = Number(st.dead);
  }
  return { rows: Number(r.n), bytes: Number(b.n), hotPct, dead };
}

async function throughput(store: Store, batch: number, writers: number, keep: number | null, roundNo: number): Promise<ThroughputRow> {
  const logs = [await EventLog.open(store.db, { retentionS: RETENTION_S })];
  for (let i = 1; i < writers; i++) logs.push(await EventLog.open(store.another(), { retentionS: RETENTION_S }));
  const history = keep === null ? null : await withVersions(store, keep);
  // What the recorder does with a batch: append to the event log, then write the kept runs into their rings.
  const record = async (log: EventLog, runs: RunRecord[]) => {
    const events = await log.append(runs);
    if (history) await history.writeRuns(events, keep!);
  };
  // Warm-up: connections open, statements prepared, the segment table made.
  for (const log of logs) for (let i = 0; i < 3; i++) await record(log, batchOf(batch));
  await store.backends?.measured.start();
  const load = loadavg()[0];
  const c0 = process.cpuUsage();
  const start = performance.now();
  let runs = 0;
  let appends = 0;
  let maxMs = 0;
  await Promise.all(
    logs.map(async (log) => {
      while (performance.now() - start < SECONDS * 1000) {
        const t = performance.now();
        await record(log, batchOf(batch));
        maxMs = Math.max(maxMs, performance.now() - t);
        runs += batch;
        appends++;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const c = process.cpuUsage(c0);
  await store.backends?.measured.end();
  const server = serverSeconds(store);
  const size = history ? await historySize(store) : null;
  return {
    bench: 'throughput',
    round: roundNo,
    engine: store.engine,
    batch,
    writers,
    history_limit: keep,
    history_rows: size?.rows ?? null,
    history_bytes: size?.bytes ?? null,
    history_hot_pct: size?.hotPct ?? null,
    history_dead_rows: size?.dead ?? null,
    seconds: round(seconds, 2),
    runs,
    runs_per_s: Math.round(runs / seconds),
    client_cpu_us_per_run: round((c.user + c.system) / runs, 2),
    server_cpu_us_per_run: server === null ? null : round((server * 1e6) / runs, 2),
    mean_append_ms: round((seconds * 1000 * writers) / appends, 1),
    max_append_ms: round(maxMs, 1),
    load_before: round(load, 2),
    load_after: round(loadavg()[0], 2),
  };
}

interface SizeRow {
  bench: 'hour';
  engine: string;
  scale: number;
  events_written: number;
  simulated_s: number;
  bytes_per_event: number;
  /** Size of the event tables after one simulated hour (nothing expired yet), at the reduced scale. */
  hour_events_bytes: number;
  hour_tables: number;
  /** The most the event tables took once expiry ran (steady state: retention + one segment). */
  steady_max_events_bytes: number;
  steady_tables: number;
  dropped_segments: number;
  mean_drop_ms: number;
  max_drop_ms: number;
  /** Extrapolated to the full 20,000 runs/s (× scale). */
  hour_events_bytes_full: number;
  steady_max_events_bytes_full: number;
  store_file_bytes: number;
  write_s: number;
  read_page_ms: number;
  read_rare_key_ms: number;
  read_absent_key_ms: number;
  scanned_rows_absent_key: number;
}

async function hour(store: Store): Promise<SizeRow> {
  const perSimSecond = RATE / SCALE;
  const clock = { ms: Date.UTC(2026, 10, 30, 0, 0, 0) };
  const log = await EventLog.open(store.db, { retentionS: RETENTION_S, now: () => clock.ms });
  const batch = 5000;
  const stepMs = (batch / perSimSecond) * 1000;
  const tables = async () => Number((await store.db.all<{ n: number }>('SELECT count(*) AS n FROM event_segments'))[0].n);
  const start = clock.ms;
  let written = 0;
  let hourBytes = 0;
  let hourTables = 0;
  let steadyMax = 0;
  let steadyTables = 0;
  let dropped = 0;
  const drops: number[] = [];
  let nextExpire = start + 60_000;
  const t0 = performance.now();
  // 80 simulated minutes: one hour of events, then 20 minutes of expiry in the steady state.
  while (clock.ms - start < 80 * 60_000) {
    await log.append(batchOf(batch));
    written += batch;
    clock.ms += stepMs;
    if (!hourBytes && clock.ms - start >= 3600_000) {
      hourBytes = (await store.size()).events;
      hourTables = await tables();
    }
    if (clock.ms >= nextExpire) {
      nextExpire += 60_000;
      const t = performance.now();
      const n = await log.expire();
      if (n) {
        drops.push((performance.now() - t) / n);
        dropped += n;
      }
      if (hourBytes) {
        const size = (await store.size()).events;
        if (size > steadyMax) {
          steadyMax = size;
          steadyTables = await tables();
        }
      }
    }
  }
  const writeS = (performance.now() - t0) / 1000;
  const size = await store.size();
  const kept = (await store.db.all<{ n: number }>('SELECT COALESCE(sum(last_id - first_id + 1), 0) AS n FROM event_segments'))[0].n;
  // Reads over what is kept: a page from the oldest, a key with 1/200 of the events, and a key with none (a full scan).
  const timed = async (f: () => Promise<unknown>) => {
    const t = performance.now();
    await f();
    return performance.now() - t;
  };
  const readPage = await timed(() => log.read({ limit: 1000 }));
  const readRare = await timed(() => log.read({ limit: 100, key: 'mobile-key-7' }));
  const readAbsent = await timed(() => log.read({ limit: 100, key: 'nobody' }));
  return {
    bench: 'hour',
    engine: store.engine,
    scale: SCALE,
    events_written: written,
    simulated_s: Math.round((clock.ms - start) / 1000),
    bytes_per_event: round(size.events / Number(kept), 1),
    hour_events_bytes: hourBytes,
    hour_tables: hourTables,
    steady_max_events_bytes: steadyMax,
    steady_tables: steadyTables,
    dropped_segments: dropped,
    mean_drop_ms: round(drops.reduce((a, b) => a + b, 0) / Math.max(1, drops.length), 1),
    max_drop_ms: round(Math.max(0, ...drops), 1),
    hour_events_bytes_full: hourBytes * SCALE,
    steady_max_events_bytes_full: steadyMax * SCALE,
    store_file_bytes: size.store,
    write_s: round(writeS, 1),
    read_page_ms: round(readPage, 1),
    read_rare_key_ms: round(readRare, 1),
    read_absent_key_ms: round(readAbsent, 1),
    scanned_rows_absent_key: Number(kept),
  };
}

/** Throughput rows grouped by setting, in first-seen order. */
function groups(rows: ThroughputRow[]): ThroughputRow[][] {
  const by = new Map<string, ThroughputRow[]>();
  for (const r of rows) {
    const k = `${r.engine}/${r.batch}/${r.writers}/${r.history_limit}`;
    if (!by.has(k)) by.set(k, []);
    by.get(k)!.push(r);
  }
  return [...by.values()];
}

/**
 * [batch, writers, history limit]: the event log alone (2,000 is the recorder's batch; PostgreSQL's COPY pays a slot
 * a row for its first 1,000), then with history at the default limit of 50 and at 1,000.
 */
const SETTINGS = [
  [500, 1, null],
  [2000, 1, null],
  [5000, 1, null],
  [5000, 2, null],
  [500, 1, 50],
  [5000, 1, 50],
  [5000, 1, 1000],
] as const;

const round = (n: number, d: number) => Math.round(n * 10 ** d) / 10 ** d;
const gb = (b: number) => `${fmt(b / 1e9, 1)} GB`;
const mb = (b: number) => `${fmt(b / 1e6, 0)} MB`;

// ── the whole way: executor thread → BroadcastChannel → recorder thread → store ──────────────
interface PathRow {
  bench: 'path';
  round: number;
  build: string;
  engine: string;
  history_limit: number;
  rate: number;
  seconds: number;
  /** Runs made by the executor while measured; made in all (warm-up included), and in the event log at the end. */
  runs: number;
  made: number;
  logged: number;
  dropped: number;
  /** CPU per run made: the executor thread (record() + batcher + posting), the recorder thread (receipt, coalescing,
   *  store writes, the events reply), the acceptor (this thread: the events replies it receives), the process's other
   *  threads (V8 helpers, libuv), and the PostgreSQL backends. */
  executor_us_per_run: number;
  /** The executor thread running the same loop without record(), before the measured span: its own cost. */
  executor_baseline_us_per_run: number;
  recorder_us_per_run: number;
  acceptor_us_per_run: number;
  other_us_per_run: number;
  server_us_per_run: number | null;
  load_before: number;
  load_after: number;
}

const PATH_KEEP = 50;

function taskCpuNs(tid: number | string): number {
  return Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
}
const tasks = () => new Set(readdirSync('/proc/self/task'));
/** The threads started since `before`: the recorder's (and, under --cpu-prof, the profiler's, then counted with it). */
const newTasks = (before: Set<string>) => [...tasks()].filter((t) => !before.has(t));
const tasksCpuNs = (tids: string[]) => tids.reduce((sum, t) => sum + taskCpuNs(t), 0);

async function pathRound(store: Store, build: string, roundNo: number): Promise<PathRow> {
  await withVersions(store, PATH_KEEP);
  const dist = resolve(build);
  const { startRecorder } = await import(`${dist}/src/recorder/client.js`);
  const settings = {
    home: store.home,
    databaseUrl: store.databaseUrl,
    logLevel: 'warning',
    jsonLogs: false,
    historyLimit: PATH_KEEP,
    eventRetention: RETENTION_S,
    historyFlushInterval: 1,
    historyMaxPending: 1_000_000, // nothing dropped when the machine is busy: the CPU per run then compares like with like
  };
  let dropped = 0;
  const before = tasks();
  const onDropped = (n: number) => {
    dropped += n;
  };
  const place = args.place === 'here' || args.place === 'executor' ? args.place : 'thread';
  let executor!: Worker;
  const reports: Array<(m: unknown) => void> = [];
  const next = () => new Promise<unknown>((r) => reports.push(r));
  let hostEnded: () => void = () => undefined;
  const startExecutor = () => {
    executor = new Worker(new URL('./recorderExecutor.js', import.meta.url), {
      workerData: {
        dist,
        home: store.home,
        rate: Number(args.rate),
        warmupS: 2,
        seconds: SECONDS,
        max: 10_000,
        runs: args.runs === 'lookup' || args.runs === 'governed' ? args.runs : 'synthetic',
        hostsRecorder: place === 'executor',
      },
    });
    executor.on('message', (m: { kind?: string }) => (m.kind === 'recorder stopped' ? hostEnded() : reports.shift()?.(m)));
    executor.on('error', (e) => console.error(e));
  };
  // The executor place: the recorder's end of the port goes to the executor thread, as the dispatcher's 'record' task moves it.
  const host = (port: MessagePort, data: unknown) =>
    new Promise<void>((ended) => {
      hostEnded = ended;
      executor.postMessage({ kind: 'record', port, data }, [port]);
    });
  if (place === 'executor') startExecutor();
  // Nobody follows /events. Builds before stop 44 took whether anyone does as a fourth argument, before the place.
  const recorder = /\blistening\b/.test(String(startRecorder))
    ? await startRecorder(
        settings,
        () => undefined,
        onDropped,
        () => false,
        place,
      )
    : await startRecorder(settings, () => undefined, onDropped, place, host);
  // The recorder thread's (with --place thread); in the executor's place it is counted with the executor's.
  const recorderTids = place === 'thread' ? newTasks(before) : [];
  if (place !== 'executor') startExecutor();
  const measuring = next();
  await measuring;
  const load = loadavg()[0];
  await store.backends?.measured.start();
  const r0 = tasksCpuNs(recorderTids);
  const a0 = taskCpuNs(process.pid);
  const p0 = process.cpuUsage();
  const done = (await next()) as { runs: number; made: number; cpuNs: number; baselineRuns: number; baselineNs: number };
  await recorder.flush(1); // every run made is in the store before the clocks stop
  const recorderNs = tasksCpuNs(recorderTids) - r0;
  const acceptorNs = taskCpuNs(process.pid) - a0;
  const p = process.cpuUsage(p0);
  await store.backends?.measured.end();
  const server = serverSeconds(store);
  const drain = channel('drain', store.home); // as every build's executors name it (homes hold no NUL or %)
  drain.postMessage({ kind: 'drain' });
  await recorder.stop(1);
  drain.close();
  await executor.terminate();
  const [l] = await store.db.all<{ n: number | null }>('SELECT sum(last_id - first_id + 1) AS n FROM event_segments');
  const per = (ns: number) => round(ns / 1000 / done.runs, 2);
  const processNs = (p.user + p.system) * 1000;
  return {
    bench: 'path',
    round: roundNo,
    build,
    engine: store.engine,
    history_limit: PATH_KEEP,
    rate: Number(args.rate),
    seconds: SECONDS,
    runs: done.runs,
    made: done.made,
    logged: Number(l.n ?? 0),
    dropped,
    executor_us_per_run: per(done.cpuNs),
    executor_baseline_us_per_run: round(done.baselineNs / 1000 / done.baselineRuns, 2),
    recorder_us_per_run: per(recorderNs),
    acceptor_us_per_run: per(acceptorNs),
    // The executor's measured span is a little shorter than the rest (it stops first), so this is an upper bound.
    other_us_per_run: per(Math.max(0, processNs - done.cpuNs - recorderNs - acceptorNs)),
    server_us_per_run: server === null ? null : round((server * 1e6) / done.runs, 2),
    load_before: round(load, 2),
    load_after: round(loadavg()[0], 2),
  };
}

async function pathMain() {
  const builds = args.dist!.split(',');
  const engines: Array<() => Promise<Store>> = args['no-sqlite'] ? [] : [async () => sqliteStore()];
  if (!args['no-pg']) engines.push(() => postgresStore(args.pg!));
  const rows: PathRow[] = [];
  // Rounds interleaved (builds alternate within a round, their order flipped each round), each on a fresh store.
  for (let r = 1; r <= ROUNDS; r++) {
    for (const make of engines) {
      for (const build of r % 2 ? builds : [...builds].reverse()) {
        const store = await make();
        try {
          const row = await pathRound(store, build, r);
          console.log(JSON.stringify(row));
          rows.push(row);
        } finally {
          await store.close();
        }
      }
    }
  }
  console.log(`results in ${writeResults('recorder', rows, pathReport(rows), args.suffix)}`);
}

function pathReport(rows: PathRow[]): string {
  const keys = [...new Set(rows.map((r) => `${r.engine}\u0000${r.build}`))];
  const m = (g: PathRow[], f: (r: PathRow) => number | null) => {
    const xs = g.map(f).filter((x): x is number => x !== null);
    return xs.length ? `${round(median(xs), 2)} (${round(Math.min(...xs), 2)}-${round(Math.max(...xs), 2)})` : 'n/a';
  };
  return [
    '# Recording, the whole way: CPU per run on each thread (bench/recorder.ts --path)',
    '',
    `Run on ${new Date().toISOString()} with \`node dist/bench/recorder.js --path --dist ${args.dist} --rate ${args.rate} --seconds ${SECONDS} --rounds ${ROUNDS}${args['no-pg'] ? ' --no-pg' : ''}${args['no-sqlite'] ? ' --no-sqlite' : ''}${args.place !== 'thread' ? ` --place ${args.place}` : ''}${args.runs !== 'synthetic' ? ` --runs ${args.runs}` : ''}\`: ` +
      `${cpus().length} × ${cpus()[0]?.model ?? '?'}, Node ${process.version}; the machine is shared (load average below).`,
    '',
    `An executor thread makes ${fmt(Number(args.rate))} runs a second (2 s warm-up, then ${SECONDS} s measured) through record() and a RunBatcher, ` +
      `after ${SECONDS} s of the same loop without record() (its CPU per run in brackets: the pacing, timers and arguments, to subtract), ` +
      (args.runs === 'lookup' || args.runs === 'governed'
        ? `as the seeds' account lookup's calls end (one query, one version, one key, a request id each, none failing${args.runs === 'governed' ? "; the governed key's, each run holding its trace's mask list" : ''}); its batches`
        : 'as calls ending in an executor do (50 queries × 4 versions, 200 keys, one run in 50 failing); its batches') +
      ' cross the runs BroadcastChannel to ' +
      (args.place === 'here'
        ? 'a recorder on this thread (the acceptor), as the server places it with a PostgreSQL store (src/recorder/client.ts), '
        : args.place === 'executor'
          ? "a recorder on the executor thread itself, hosted as an executor's 'record' task (src/recorder/host.ts), as the server places it with a PostgreSQL store inline or pooled; its work is in the executor's column, "
          : 'a recorder thread started as the server starts it (src/recorder/client.ts), ') +
      `which writes the event log and the history rings (limit ${PATH_KEEP}); nobody follows /events. CPU per run made, from ` +
      '/proc/self/task/<tid>/schedstat: the executor thread, the recorder thread (none with --place here), the acceptor (this thread: ' +
      "the events replies a thread sends, or with --place here the recorder's whole work), the process's other threads, and the " +
      'PostgreSQL backends. Median (range) over rounds; builds interleaved on a fresh store each.',
    '',
    '| store | build | rounds | runs logged / made (warm-up included) | dropped | executor µs/run (loop alone) | recorder thread µs/run | acceptor µs/run | other threads µs/run | PostgreSQL µs/run | load avg |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...keys.map((k) => {
      const g = rows.filter((r) => `${r.engine}\u0000${r.build}` === k);
      return (
        `| ${g[0].engine} | ${g[0].build} | ${g.length} | ${fmt(median(g.map((r) => r.logged)))} / ${fmt(median(g.map((r) => r.made)))} | ${fmt(Math.max(...g.map((r) => r.dropped)))} | ` +
        `${m(g, (r) => r.executor_us_per_run)} (${m(g, (r) => r.executor_baseline_us_per_run)}) | ${m(g, (r) => r.recorder_us_per_run)} | ${m(g, (r) => r.acceptor_us_per_run)} | ${m(g, (r) => r.other_us_per_run)} | ` +
        `${m(g, (r) => r.server_us_per_run)} | ${fmt(Math.min(...g.map((r) => r.load_before)), 1)}-${fmt(Math.max(...g.map((r) => r.load_after)), 1)} |`
      );
    }),
    '',
  ].join('\n');
}

async function main() {
  if (args.path) return pathMain();
  const engines: Array<() => Promise<Store>> = args['no-sqlite'] ? [] : [async () => sqliteStore()];
  if (!args['no-pg']) engines.push(() => postgresStore(args.pg!));
  const rows: Array<ThroughputRow | SizeRow> = [];
  for (const make of engines) {
    // Rounds interleaved (each on a fresh store), so a busy spell on the machine does not land on one setting only.
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [batch, writers, keep] of SETTINGS) {
        if (args['history-only'] && keep === null) continue;
        const store = await make();
        try {
          if (writers > 1 && store.engine === 'sqlite') continue; // one writer on SQLite: the recorder thread
          const r = await throughput(store, batch, writers, keep, round);
          console.log(JSON.stringify(r));
          rows.push(r);
        } finally {
          await store.close();
        }
      }
    }
    if (args['history-only']) continue;
    const store = await make();
    try {
      const r = await hour(store);
      console.log(JSON.stringify(r));
      rows.push(r);
    } finally {
      await store.close();
    }
  }
  console.log(`results in ${writeResults('recorder', rows, report(rows), args.suffix)}`);
}

function report(rows: Array<ThroughputRow | SizeRow>): string {
  const t = rows.filter((r): r is ThroughputRow => r.bench === 'throughput');
  const h = rows.filter((r): r is SizeRow => r.bench === 'hour');
  const lines = [
    '# Recorder write rate (event log and history) and event log size (bench/recorder.ts)',
    '',
    `Run on ${new Date().toISOString()} with \`node dist/bench/recorder.js --seconds ${SECONDS} --scale ${SCALE}\`: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, Node ${process.version}; the PostgreSQL server shares the machine (its CPU is counted separately when local).`,
    '',
    '## Runs kept per second',
    '',
    `EventLog.append() called back to back for ${SECONDS} s on a fresh store, each call awaited before the next (as the recorder does); ` +
      'two writers = two EventLog instances on two connection pools appending at once. With a history limit, each append is followed by ' +
      'Store.writeRuns() into the per-version rings, as the recorder does: the runs spread over 200 versions (50 queries × 4), so a batch of 500 ' +
      'brings 2-3 runs per version and one of 5,000 brings 25 (all written at limit 50 and 1,000). CPU per run: this process (`process.cpuUsage`), ' +
      'and the PostgreSQL backends serving the store (from /proc). History rows/bytes: the run_history table and its key at the end of the round; ' +
      'HOT %: of the ring updates on PostgreSQL, those done in the page (no new index entry, the old version pruned in place rather than left ' +
      'to vacuum), with the dead rows the statistics counted at the end (pg_stat_user_tables).',
    '',
    `Median of ${ROUNDS} rounds, with the range; every round is in results.jsonl. The 1-minute load average shows how busy the machine was otherwise.`,
    '',
    '| store | batch | writers | history limit | runs/s median (range) | client CPU µs/run | server CPU µs/run | mean batch ms | max batch ms | history rows | history size | HOT % / dead rows | load avg |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...groups(t).map((g) => {
      const m = (f: (r: ThroughputRow) => number | null) => {
        const xs = g.map(f).filter((x): x is number => x !== null);
        return xs.length ? round(median(xs), 2) : 'n/a';
      };
      const rps = g.map((r) => r.runs_per_s);
      const h = g[0].history_limit === null ? 'none | ' : `${g[0].history_limit} | `;
      return (
        `| ${g[0].engine} | ${fmt(g[0].batch)} | ${g[0].writers} | ${h}${fmt(median(rps))} (${fmt(Math.min(...rps))}-${fmt(Math.max(...rps))}) | ` +
        `${m((r) => r.client_cpu_us_per_run)} | ${m((r) => r.server_cpu_us_per_run)} | ${m((r) => r.mean_append_ms)} | ${fmt(Math.max(...g.map((r) => r.max_append_ms)))} | ` +
        (g[0].history_rows === null
          ? 'n/a | n/a | n/a | '
          : `${fmt(Math.max(...g.map((r) => r.history_rows!)))} | ${fmt(Math.max(...g.map((r) => r.history_bytes!)) / 1e6, 2)} MB | ` +
            (g[0].history_hot_pct === null ? 'n/a | ' : `${m((r) => r.history_hot_pct)} / ${fmt(Math.max(...g.map((r) => r.history_dead_rows!)))} | `)) +
        `${fmt(Math.min(...g.map((r) => r.load_before)), 1)}-${fmt(Math.max(...g.map((r) => r.load_after)), 1)} |`
      );
    }),
    '',
    '## An hour of events at 20,000 runs/s',
    '',
    `Written at 1/${SCALE} of the rate (${fmt(RATE / SCALE)} runs per simulated second, batches of 5,000) with a simulated clock over 80 simulated minutes, ` +
      'retention 3,600 s, segments of 600 s (the defaults), expire() every simulated minute. Sizes are the event tables with their primary-key index ' +
      '(PostgreSQL: pg_total_relation_size; SQLite: pages in use). The full-rate figures multiply by the scale: the size is linear in the number of ' +
      "events (one row and one index entry each), and a dropped segment's space is reused (SQLite free pages) or returned (PostgreSQL files).",
    '',
    '| store | bytes/event | after 1 h (scaled) | tables | steady max (scaled) | tables | **after 1 h at 20k/s** | **steady max at 20k/s** | drop ms/segment (scaled) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...h.map(
      (r) =>
        `| ${r.engine} | ${r.bytes_per_event} | ${mb(r.hour_events_bytes)} | ${r.hour_tables} | ${mb(r.steady_max_events_bytes)} | ${r.steady_tables} | **${gb(r.hour_events_bytes_full)}** | **${gb(r.steady_max_events_bytes_full)}** | ${r.mean_drop_ms} (max ${r.max_drop_ms}) |`,
    ),
    '',
    'Reads over the kept events at the reduced scale (no secondary index: filters scan by id):',
    '',
    '| store | kept events | first page of 1,000 ms | key with 1/200 of events, 100 rows ms | absent key (scans all) ms |',
    '|---|---:|---:|---:|---:|',
    ...h.map((r) => `| ${r.engine} | ${fmt(r.scanned_rows_absent_key)} | ${r.read_page_ms} | ${r.read_rare_key_ms} | ${r.read_absent_key_ms} |`),
    '',
    'A DROP of a segment on SQLite walks its pages (time grows with the segment: multiply by the scale for the full rate) and holds the ' +
      'write lock meanwhile; on PostgreSQL it unlinks files and does not block appends to the current segment.',
    '',
    '## How the write path was chosen',
    '',
    'Exploratory runs while building src/store/events.ts (same machine, also busy with other work, 4-8 s each, batches of 5,000, not repeated by this script):',
    '',
    '- PostgreSQL, one statement per batch (ids from `nextval` in input order, `INSERT ... SELECT FROM unnest(...)`, catalog update, ids back) ' +
      'against two round trips (`SELECT nextval() FROM generate_series(1, n)`, then the insert): ~16 µs client CPU per run for two trips against ~13 for one.',
    '- Sending the ids back as one `string_agg` text instead of 5,000 rows: client CPU 13 → 9-11 µs/run. Sending the payloads as one newline-joined text ' +
      '(`string_to_array`, JSON never holds a raw newline) instead of a `text[]` that postgres.js escapes element by element: 9-11 → 5-6 µs/run client, ' +
      'server 5.3 → 4.1-4.6 µs/run; 45,000-71,000 runs/s against 31,000-51,000. A single JSON array parameter (`json_array_elements`) cost the least ' +
      'client CPU (3.8-5.4 µs) but twice the server CPU (9-10 µs) and was slower.',
    '- `synchronous_commit` off for the batch (set inside the statement with `set_config(..., true)`, as the contract says history writes do): ' +
      '19,000 → 25,000-57,000 runs/s.',
    '- A secondary index: `(key_name, id)` took PostgreSQL from 57,000 to 31,000 runs/s in one pair of runs (+2 µs server CPU and +45 bytes per event); ' +
      'with `(query, id)` as well, 17,000-20,000 runs/s and +89 bytes. SQLite: +3 µs CPU per run for one. Not created: filters scan by id instead ' +
      '(see the read table above for what that costs).',
    '- SQLite: multi-row `INSERT ... VALUES` of 100-500 rows (83,000-156,000 runs/s, 3.9-4.6 µs/run) beat a prepared single-row insert per run ' +
      '(66,000-96,000, 5.4-5.9 µs) and `json_each` (31,000-41,000, 12 µs). The log uses 150 rows (900 markers, under the classic 999).',
    '- Returning the rows: `{ ...run, id }` cost 2.6-8.5 µs per run on V8; `Object.assign({ id }, run)` 0.3-0.7 µs.',
    '- Dropping one full-size SQLite segment (600 s at 20,000 runs/s: 12,000,000 events, a 2.9 GB file) took 2.9 s in a one-off run, ' +
      'with the write lock held: at 20,000 runs/s that stalls the recorder long enough to pass its 10,000-run pending cap. ' +
      'Shorter segments on SQLite (e.g. segmentS 60: ~0.3 s per drop) keep each stall under the cap.',
    '',
  ];
  return lines.join('\n');
}

await main();
