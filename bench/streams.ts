// Streaming exports (?stream=true), measured on this machine: an N-row generated table (5,000,000 by
// default) exported from PostgreSQL (CSV and NDJSON; xlsx too up to 1,000,000 rows, as it costs tens
// of microseconds a row) and from MariaDB (CSV) through the gateway, as
// fast as one node:http reader takes it: time to first byte, seconds, rows/s, MB/s, and the gateway
// process's RSS (baseline before the export, peak while it runs; target under 150 MB). Then a slow
// reader (64 KB every 50 ms) for --slow-seconds, with the RSS over time, aborted at the end; the
// database is then asked whether the export's statement still runs (pg_stat_activity,
// information_schema.PROCESSLIST).
//
//   npx tsc -p . && node dist/bench/streams.js [--rows 5000000] [--quick] [--slow-seconds 20]
//     [--columns 4|3] [--repeat 1] [--only postgres:csv,...] [--out <name>] [--cpu-prof <dir>]
//
// --quick is 200,000 rows and a 5 s slow reader (--slow-seconds 0: no slow reader). --columns 3
// exports a table of an int, a text and a timestamp (issue 14's shape) instead of the 4-column one.
// --repeat runs each export that many times (each on its own process); --only picks the exports
// (source:format). Each export runs on a fresh gateway process (SQLite store in a temp home, default
// executor threads), warmed by one paged call so its pools exist, so every baseline is the same idle
// process. RSS is VmRSS from /proc/<pid>/status sampled every 100 ms, plus VmHWM after the
// high-water mark was reset (clear_refs 5) just before the export. CPU is split by side: the
// gateway's main thread (the acceptor), its busiest other thread (the executor running the export),
// its other threads (GC helpers, the recorder); the database's (PostgreSQL: the backends connected to
// the bench database; MariaDB: the whole server); and this process, the reader. Results accumulate
// per row count and column count in bench/results/streams-<date>[-<out>]/ (a quick run and a full
// run on the same day share the folder, one table per row count). --cpu-prof writes the gateway's
// CPU profiles (one per thread) to <dir>, one folder per export.
import { execFileSync } from 'node:child_process';
import { request, type IncomingMessage } from 'node:http';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import mysql, { type RowDataPacket } from 'mysql2/promise';
import postgres from 'postgres';
import { fmt, median, RESULTS, startGateway, today, type Gateway } from './gateway.js';
import { processCpuSeconds } from './load.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string' },
    quick: { type: 'boolean', default: false },
    'slow-seconds': { type: 'string' },
    columns: { type: 'string', default: '4' },
    repeat: { type: 'string', default: '1' },
    only: { type: 'string' },
    out: { type: 'string' },
    'cpu-prof': { type: 'string' },
  },
});
const quick = values.quick!;
const N = Number(values.rows ?? (quick ? 200_000 : 5_000_000));
const slowSeconds = Number(values['slow-seconds'] ?? (quick ? 5 : 20));
if (!(Number.isInteger(N) && N >= 1)) throw new Error('--rows: a whole number >= 1 expected');
if (!(slowSeconds >= 0)) throw new Error('--slow-seconds: a number >= 0 expected');
const COLUMNS = Number(values.columns);
if (COLUMNS !== 3 && COLUMNS !== 4) throw new Error('--columns: 3 or 4 expected');
const REPEAT = Number(values.repeat);
if (!(Number.isInteger(REPEAT) && REPEAT >= 1)) throw new Error('--repeat: a whole number >= 1 expected');
const ONLY = values.only ? new Set(values.only.split(',')) : null;
const OUT = values.out ? `streams-${today()}-${values.out.replace(/[^\w.-]/g, '-')}` : `streams-${today()}`;
const CPU_PROF = values['cpu-prof'];

const DB = 'qag_stream_bench';
const PG = 'postgres://postgres@127.0.0.1:5432';
const MY = { host: '127.0.0.1', port: 3306, user: 'root' };
/** The 4-column table is `export`, the 3-column one (int, text, timestamp) `export3`. */
const TABLE = COLUMNS === 4 ? 'export' : 'export3';
const SQL = COLUMNS === 4 ? 'SELECT id, name, amount, at FROM export ORDER BY id' : 'SELECT id, name, at FROM export3 ORDER BY id';
const ADMIN = 'bench-admin';
const TARGET_RSS_MB = 150;
const SLOW_CHUNK = 64 * 1024;
const SLOW_EVERY_MS = 50;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loadBefore = loadavg();

// ---------------------------------------------------------------- the generated tables

async function preparePostgres(): Promise<{ created: boolean; seconds: number }> {
  const admin = postgres(`${PG}/postgres`, { max: 1, onnotice: () => {} });
  const [{ exists }] = await admin`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = ${DB}) AS exists`;
  if (!exists) await admin.unsafe(`CREATE DATABASE ${DB}`);
  await admin.end();
  const sql = postgres(`${PG}/${DB}`, { max: 1, onnotice: () => {} });
  try {
    const [{ t }] = await sql`SELECT to_regclass(${`public.${TABLE}`}) IS NOT NULL AS t`;
    if (t) {
      const [{ n }] = await sql.unsafe(`SELECT count(*)::int8 AS n FROM ${TABLE}`);
      if (Number(n) === N) return { created: false, seconds: 0 };
      await sql.unsafe(`DROP TABLE ${TABLE}`);
    }
    const t0 = performance.now();
    const amount = COLUMNS === 4 ? 'i * 0.01 AS amount,' : '';
    await sql.unsafe(`CREATE TABLE ${TABLE} AS SELECT i AS id, md5(i::text) AS name, ${amount}
      timestamp '2026-01-01' + i * interval '1 second' AS at FROM generate_series(1, ${N}) i`);
    await sql.unsafe(`ALTER TABLE ${TABLE} ADD PRIMARY KEY (id)`);
    await sql.unsafe(`VACUUM ANALYZE ${TABLE}`);
    return { created: true, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await sql.end();
  }
}

/** MariaDB's built-in SEQUENCE engine (seq_1_to_N) stands in for generate_series. */
async function prepareMariaDB(): Promise<{ created: boolean; seconds: number }> {
  const c = await mysql.createConnection(MY);
  try {
    await c.query(`CREATE DATABASE IF NOT EXISTS ${DB}`);
    await c.query(`USE ${DB}`);
    const [t] = await c.query<RowDataPacket[]>(`SELECT COUNT(*) AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, [DB, TABLE]);
    if (Number(t[0].t) > 0) {
      const [r] = await c.query<RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${TABLE}`);
      if (Number(r[0].n) === N) return { created: false, seconds: 0 };
      await c.query(`DROP TABLE ${TABLE}`);
    }
    const t0 = performance.now();
    const amount = COLUMNS === 4 ? 'amount DECIMAL(14,2) NOT NULL,' : '';
    await c.query(`CREATE TABLE ${TABLE} (id INT NOT NULL PRIMARY KEY, name CHAR(32) NOT NULL, ${amount}
      at DATETIME NOT NULL) ENGINE=InnoDB`);
    // In slices of a million so no single transaction's undo log gets large.
    const SLICE = 1_000_000;
    for (let lo = 1; lo <= N; lo += SLICE) {
      const hi = Math.min(N, lo + SLICE - 1);
      await c.query(`INSERT INTO ${TABLE} SELECT seq, MD5(seq), ${COLUMNS === 4 ? 'seq * 0.01,' : ''}
        TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq SECOND FROM seq_${lo}_to_${hi}`);
    }
    await c.query(`ANALYZE TABLE ${TABLE}`);
    return { created: true, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await c.end();
  }
}

// ---------------------------------------------------------------- the gateway process

const SOURCES = {
  postgres: { connection: { name: 'pg_stream', db: 'postgres', host: '127.0.0.1', port: 5432, database: DB, user: 'postgres' }, query: 'pg_export' },
  mariadb: { connection: { name: 'maria_stream', db: 'mysql', host: '127.0.0.1', port: 3306, database: DB, user: 'root' }, query: 'maria_export' },
} as const;
type SourceName = keyof typeof SOURCES;

async function freshGateway(source: SourceName, profileDir?: string): Promise<{ g: Gateway; home: string; startupRss: number }> {
  const home = mkdtempSync(join(tmpdir(), 'qag-streams-'));
  const g = await startGateway({ QUERYAPIGATE_HOME: home }, ADMIN, profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []);
  await sleep(1500);
  const startupRss = await baselineRss(g.pid); // started, nothing called yet
  const s = SOURCES[source];
  await g.api('POST', '/api/v1/connections', { ...s.connection, active: true });
  await g.api('POST', '/api/v1/queries', {
    name: s.query,
    connection_name: s.connection.name,
    sql: SQL,
    description: `The ${N}-row export table`,
    publish: true,
  });
  // One paged call opens the executor's pool for the source, so the baseline is a warmed process.
  const warm = await g.api('GET', `/q/${s.query}?page_size=2`);
  if (!Array.isArray(warm) || warm.length !== 2) throw new Error(`warm-up call: ${JSON.stringify(warm)}`);
  await sleep(1500);
  return { g, home, startupRss };
}

// ---------------------------------------------------------------- /proc sampling

function procStatus(pid: number): { rssKb: number; hwmKb: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(s.match(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm'))?.[1] ?? NaN);
  return { rssKb: kb('VmRSS'), hwmKb: kb('VmHWM') };
}

/** Resets VmHWM to the current RSS (Linux clear_refs 5); false when the kernel refuses. */
function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

class RssSampler {
  readonly samples: { t: number; mb: number }[] = [];
  private timer: NodeJS.Timeout;
  private readonly t0 = performance.now();
  constructor(
    private pid: number,
    everyMs = 100,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }
  private sample() {
    try {
      this.samples.push({ t: (performance.now() - this.t0) / 1000, mb: procStatus(this.pid).rssKb / 1024 });
    } catch {
      /* the process is gone */
    }
  }
  stop() {
    clearInterval(this.timer);
    this.sample();
    return this.samples;
  }
}

const mb = (kb: number) => kb / 1024;
const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;

/** The idle process's RSS: the median of a few samples 100 ms apart. */
async function baselineRss(pid: number): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < 5; i++) {
    xs.push(procStatus(pid).rssKb);
    await sleep(100);
  }
  xs.sort((a, b) => a - b);
  return mb(xs[2]);
}

// ---------------------------------------------------------------- CPU by side

/** CPU seconds of each of the process's threads (by thread id). */
function threadCpu(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      out.set(Number(tid), statCpu(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')));
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

const TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();
const ticksPerSecond = () => TICKS;

/** utime + stime of a /proc stat line, in seconds. */
function statCpu(stat: string): number {
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / ticksPerSecond();
}

/**
 * CPU seconds the database spent so far: PostgreSQL's backends connected to the bench database (their
 * process title names it); MariaDB's whole server (one process, so other clients count too).
 */
function databaseCpu(source: SourceName): number {
  let total = 0;
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      if (source === 'postgres') {
        if (!stat.includes('(postgres)') || !readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(DB)) continue;
      } else if (!stat.includes('(mariadbd)') && !stat.includes('(mysqld)')) continue;
      total += statCpu(stat);
    } catch {
      /* the process ended */
    }
  }
  return total;
}

interface CpuSplit {
  acceptor: number;
  executor: number;
  other: number;
  database: number;
  reader: number;
}

/** Starts counting; the function it answers gives the CPU seconds spent since, by side. */
function cpuSince(pid: number, source: SourceName): () => CpuSplit {
  const threads = threadCpu(pid);
  const db = databaseCpu(source);
  const reader = process.cpuUsage();
  return () => {
    const now = threadCpu(pid);
    const spent = [...now].map(([tid, s]) => ({ tid, s: s - (threads.get(tid) ?? 0) }));
    const acceptor = spent.find((t) => t.tid === pid)?.s ?? 0;
    const others = spent.filter((t) => t.tid !== pid).sort((a, b) => b.s - a.s);
    const executor = others[0]?.s ?? 0;
    const other = others.slice(1).reduce((a, t) => a + t.s, 0);
    const r = process.cpuUsage(reader);
    return { acceptor, executor, other, database: databaseCpu(source) - db, reader: (r.user + r.system) / 1e6 };
  };
}

// ---------------------------------------------------------------- the HTTP reader

interface Read {
  status: number;
  headersMs: number;
  ttfbMs: number;
  seconds: number;
  bytes: number;
  lines: number;
  complete: boolean; // the body ended with its final newline and the response ended normally
  zipEnd: boolean; // the body ends with a zip's end-of-central-directory record (an xlsx file's last bytes)
  firstLine: string;
  lastLine: string;
  aborted: boolean;
  error: string | null;
}

/**
 * GETs url with the admin key; counts bytes and '\n'. `slow` throttles to SLOW_CHUNK every
 * SLOW_EVERY_MS (the response is paused in between) and aborts after slow.seconds, calling
 * slow.during() halfway.
 */
function readExport(url: string, slow?: { seconds: number; during: () => Promise<void> }): Promise<Read> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const r: Read = {
      status: 0,
      headersMs: NaN,
      ttfbMs: NaN,
      seconds: NaN,
      bytes: 0,
      lines: 0,
      complete: false,
      zipEnd: false,
      firstLine: '',
      lastLine: '',
      aborted: false,
      error: null,
    };
    let head = '';
    let tail = Buffer.alloc(0);
    let done = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (error: string | null) => {
      if (done) return;
      done = true;
      for (const t of timers) clearInterval(t);
      r.seconds = (performance.now() - t0) / 1000;
      r.error = error;
      const text = tail.toString('utf8');
      const ls = text.split('\n');
      r.lastLine = (ls.length > 1 ? ls[ls.length - 2] : '').replace(/\r$/, '');
      r.zipEnd = tail.length >= 22 && tail.readUInt32LE(tail.length - 22) === 0x06054b50; // no zip comment
      resolve(r);
    };
    const req = request(url, { headers: { 'X-API-Key': ADMIN } }, (res: IncomingMessage) => {
      r.status = res.statusCode ?? 0;
      r.headersMs = performance.now() - t0;
      let budget = Infinity;
      res.on('data', (b: Buffer) => {
        if (r.bytes === 0) r.ttfbMs = performance.now() - t0;
        r.bytes += b.length;
        let lines = 0;
        for (let i = 0; i < b.length; i++) if (b[i] === 10) lines++; // a byte loop: no native call per line
        r.lines += lines;
        if (head.length < 200) head += b.subarray(0, 200).toString('utf8');
        // The last 4 KB only: copying each chunk whole would make the reader cost more than it measures.
        tail = Buffer.concat([tail, b.length > 4096 ? b.subarray(-4096) : b]).subarray(-4096);
        if (slow) {
          budget -= b.length;
          if (budget <= 0) res.pause();
        }
      });
      res.on('end', () => {
        r.firstLine = head.split('\n')[0].replace(/\r$/, '');
        r.complete = tail.length > 0 && tail[tail.length - 1] === 10 && res.complete;
        finish(res.complete ? null : 'response ended incomplete');
      });
      res.on('error', (e) => finish(r.aborted ? null : String(e)));
      res.on('close', () => {
        r.firstLine ||= head.split('\n')[0].replace(/\r$/, '');
        finish(r.aborted ? null : res.complete ? null : 'connection closed before the end');
      });
      if (slow) {
        budget = 0;
        res.pause();
        timers.push(
          setInterval(() => {
            budget = SLOW_CHUNK;
            res.resume();
          }, SLOW_EVERY_MS),
        );
        timers.push(setTimeout(() => void slow.during(), (slow.seconds * 1000) / 2));
        timers.push(
          setTimeout(() => {
            r.aborted = true;
            r.firstLine = head.split('\n')[0].replace(/\r$/, '');
            req.destroy();
            finish(null);
          }, slow.seconds * 1000),
        );
      }
    });
    req.on('error', (e) => finish(r.aborted ? null : String(e)));
    req.end();
  });
}

/** The id in an export's last line (CSV: first field; NDJSON: the id key). */
function lastId(format: string, line: string): number | null {
  try {
    return format === 'ndjson' ? Number(JSON.parse(line).id) : Number(line.split(',')[0]);
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------- the statement, seen from the database

interface Activity {
  pid: number;
  state: string;
}

async function statementActivity(source: SourceName): Promise<Activity[]> {
  if (source === 'postgres') {
    const sql = postgres(`${PG}/postgres`, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql<{ pid: number; state: string }[]>`SELECT pid, coalesce(state, '') AS state FROM pg_stat_activity
        WHERE datname = ${DB} AND pid <> pg_backend_pid()
          AND (query LIKE ${`%FROM ${TABLE} ORDER BY id%`} OR query LIKE 'fetch forward % from qag_stream')`;
      return rows.map((r) => ({ pid: r.pid, state: r.state }));
    } finally {
      await sql.end();
    }
  }
  const c = await mysql.createConnection(MY);
  try {
    const [rows] = await c.query<RowDataPacket[]>(
      `SELECT ID AS pid, COMMAND AS command, STATE AS state FROM information_schema.PROCESSLIST
      WHERE DB = ? AND ID <> CONNECTION_ID() AND INFO LIKE ?`,
      [DB, `%FROM ${TABLE} ORDER BY id%`],
    );
    return rows.map((r) => ({ pid: Number(r.pid), state: `${r.command}${r.state ? ` / ${r.state}` : ''}` }));
  } finally {
    await c.end();
  }
}
/** Still running: PostgreSQL shows the last statement of an idle session too, so only non-idle counts. */
const running = (a: Activity[]) => a.filter((x) => x.state !== 'idle');

// ---------------------------------------------------------------- the runs

type ExportRow = {
  kind: 'export';
  rows_target: number;
  /** Absent in results from before --columns: 4. */
  columns?: number;
  /** Which of --repeat's runs (1, 2, ...). */
  run?: number;
  source: SourceName;
  format: string;
  status: number;
  rows: number;
  bytes: number;
  complete: boolean;
  last_id: number | null;
  ttfb_ms: number;
  seconds: number;
  rows_per_s: number;
  mb_per_s: number;
  startup_rss_mb: number;
  baseline_rss_mb: number;
  peak_rss_mb: number;
  peak_hwm_mb: number | null;
  end_rss_mb: number;
  gateway_cpu_s: number;
  /** CPU seconds by side during the export (see cpuSince); absent in older results. */
  cpu?: CpuSplit;
  samples: number;
  error: string | null;
  gateway_errors: string[];
};
type SlowRow = {
  kind: 'slow';
  rows_target: number;
  columns?: number;
  source: SourceName;
  format: string;
  seconds: number;
  bytes: number;
  rows: number;
  kb_per_s: number;
  startup_rss_mb: number;
  baseline_rss_mb: number;
  mb_per_min: number | null;
  first_rss_mb: number;
  last_rss_mb: number;
  min_rss_mb: number;
  max_rss_mb: number;
  peak_hwm_mb: number | null;
  rss_by_second: number[];
  during: Activity[];
  after_abort: Activity[];
  cleared_after_ms: number | null;
  gateway_errors: string[];
};

const gatewayErrors = (g: Gateway) =>
  g
    .output()
    .split('\n')
    .filter((l) => /error|fail|warn/i.test(l))
    .slice(0, 10);

async function runExport(source: SourceName, format: string, run: number): Promise<ExportRow> {
  const profileDir = CPU_PROF ? join(CPU_PROF, `${source}-${format}-${N}x${COLUMNS}-${run}`) : undefined;
  const { g, home, startupRss } = await freshGateway(source, profileDir);
  try {
    const baseline = await baselineRss(g.pid);
    const hwm = resetPeak(g.pid);
    const cpu0 = processCpuSeconds(g.pid);
    const split = cpuSince(g.pid, source);
    const sampler = new RssSampler(g.pid);
    const r = await readExport(`${g.url}/q/${SOURCES[source].query}?stream=true&format=${format}`);
    const samples = sampler.stop();
    const cpu = processCpuSeconds(g.pid) - cpu0;
    const bySide = split();
    const st = procStatus(g.pid);
    // An xlsx file has no lines to count: its rows are the run's, as the gateway recorded them.
    const xlsx = format === 'xlsx';
    const rows = xlsx ? await exportRun(g, SOURCES[source].query) : format === 'csv' ? Math.max(0, r.lines - 1) : r.lines;
    const row: ExportRow = {
      kind: 'export',
      rows_target: N,
      columns: COLUMNS,
      run,
      source,
      format,
      status: r.status,
      rows,
      bytes: r.bytes,
      complete: xlsx ? r.zipEnd && r.error === null : r.complete,
      last_id: xlsx ? null : lastId(format, r.lastLine),
      ttfb_ms: round(r.ttfbMs),
      seconds: round(r.seconds, 2),
      rows_per_s: Math.round(rows / r.seconds),
      mb_per_s: round(r.bytes / 1e6 / r.seconds, 2),
      startup_rss_mb: round(startupRss),
      baseline_rss_mb: round(baseline),
      peak_rss_mb: round(Math.max(...samples.map((s) => s.mb))),
      peak_hwm_mb: hwm ? round(mb(st.hwmKb)) : null,
      end_rss_mb: round(mb(st.rssKb)),
      gateway_cpu_s: round(cpu, 2),
      cpu: {
        acceptor: round(bySide.acceptor, 2),
        executor: round(bySide.executor, 2),
        other: round(bySide.other, 2),
        database: round(bySide.database, 2),
        reader: round(bySide.reader, 2),
      },
      samples: samples.length,
      error: r.error,
      gateway_errors: gatewayErrors(g),
    };
    if (r.status !== 200) row.error = `HTTP ${r.status}: ${r.firstLine.slice(0, 300)}`;
    return row;
  } finally {
    await g.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

/** The rows of the export's run, once the recorder has written it (the warm-up call is the other run). */
async function exportRun(g: Gateway, query: string): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const h = (await g.api('GET', `/api/v1/queries/${query}/history?limit=2`)) as { items?: { rows: number }[] };
    if (h.items && h.items.length === 2) return h.items[0].rows;
    await sleep(100);
  }
  return Number.NaN;
}

async function runSlow(source: SourceName, format: string): Promise<SlowRow> {
  const { g, home, startupRss } = await freshGateway(source);
  try {
    const baseline = await baselineRss(g.pid);
    const hwm = resetPeak(g.pid);
    const sampler = new RssSampler(g.pid);
    let during: Activity[] = [];
    const r = await readExport(`${g.url}/q/${SOURCES[source].query}?stream=true&format=${format}`, {
      seconds: slowSeconds,
      during: async () => {
        during = await statementActivity(source);
      },
    });
    const samples = sampler.stop();
    const st = procStatus(g.pid);
    // The client is gone: how long until the database no longer runs the export's statement?
    const t0 = performance.now();
    let after = await statementActivity(source);
    let clearedAfter: number | null = running(after).length === 0 ? 0 : null;
    while (clearedAfter === null && performance.now() - t0 < 10_000) {
      await sleep(100);
      after = await statementActivity(source);
      if (running(after).length === 0) clearedAfter = Math.round(performance.now() - t0);
    }
    const bySecond: number[] = [];
    for (const s of samples) bySecond[Math.floor(s.t)] = Math.max(bySecond[Math.floor(s.t)] ?? 0, round(s.mb));
    // From 1 s on: the stream is running and its buffers are filled; before that is the climb from the baseline.
    const steady = samples.filter((s) => s.t >= 1);
    const mbs = (steady.length ? steady : samples).map((s) => s.mb);
    const span = steady.length > 1 ? steady[steady.length - 1].t - steady[0].t : 0;
    // xlsx: the rows the gateway sent before the client left (its history), not rows the reader decoded.
    const lines = format === 'xlsx' ? await exportRun(g, SOURCES[source].query) : format === 'csv' ? Math.max(0, r.lines - 1) : r.lines;
    return {
      kind: 'slow',
      rows_target: N,
      columns: COLUMNS,
      source,
      format,
      seconds: round(r.seconds, 2),
      bytes: r.bytes,
      rows: lines,
      kb_per_s: Math.round(r.bytes / 1024 / r.seconds),
      startup_rss_mb: round(startupRss),
      baseline_rss_mb: round(baseline),
      first_rss_mb: round(mbs[0]),
      last_rss_mb: round(mbs[mbs.length - 1]),
      min_rss_mb: round(Math.min(...mbs)),
      max_rss_mb: round(Math.max(...mbs)),
      mb_per_min: span > 0 ? round(((mbs[mbs.length - 1] - mbs[0]) / span) * 60, 2) : null,
      peak_hwm_mb: hwm ? round(mb(st.hwmKb)) : null,
      rss_by_second: Array.from(bySecond, (x) => x ?? NaN),
      during,
      after_abort: after,
      cleared_after_ms: clearedAfter,
      gateway_errors: gatewayErrors(g),
    };
  } finally {
    await g.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- main

console.log(`tables: ${N} rows, ${COLUMNS} columns`);
const prep = { postgres: await preparePostgres(), mariadb: await prepareMariaDB() };
console.log(JSON.stringify(prep));

const picked = ([source, format]: [SourceName, string]) => ONLY === null || ONLY.has(`${source}:${format}`);
const CASES = (
  [['postgres', 'csv'], ['postgres', 'ndjson'], ['mariadb', 'csv'], ...(N <= 1_000_000 ? [['postgres', 'xlsx']] : [])] as [SourceName, string][]
).filter(picked);
const SLOW = (slowSeconds > 0 ? [['postgres', 'csv'], ['mariadb', 'csv'], ...(N <= 1_000_000 ? [['postgres', 'xlsx']] : [])] : ([] as string[][])).filter((c) =>
  picked(c as [SourceName, string]),
) as [SourceName, string][];
const fresh: (ExportRow | SlowRow)[] = [];
for (const [source, format] of CASES) {
  for (let run = 1; run <= REPEAT; run++) {
    const row = await runExport(source, format, run);
    fresh.push(row);
    console.log(JSON.stringify(row));
  }
}
for (const [source, format] of SLOW) {
  const row = await runSlow(source, format);
  fresh.push(row);
  console.log(JSON.stringify(row));
}
const loadAfter = loadavg();

// Results of other row and column counts run today stay in the folder (a quick and a full run side by side).
const resultsDir = join(RESULTS, OUT);
const resultsFile = join(resultsDir, 'results.jsonl');
type MetaRow = {
  kind: 'meta';
  rows_target: number;
  columns?: number;
  slow_seconds: number;
  repeat?: number;
  at: string;
  loadavg_before: number[];
  loadavg_after: number[];
  tables: typeof prep;
  node: string;
};
type ResultRow = ExportRow | SlowRow | MetaRow;
const shapeOf = (r: ResultRow) => `${r.rows_target}x${r.columns ?? 4}`;
const shape = `${N}x${COLUMNS}`;
const kept: ResultRow[] = existsSync(resultsFile)
  ? readFileSync(resultsFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ResultRow)
      .filter((r) => shapeOf(r) !== shape)
  : [];
const meta: MetaRow = {
  kind: 'meta',
  rows_target: N,
  columns: COLUMNS,
  slow_seconds: slowSeconds,
  repeat: REPEAT,
  at: new Date().toISOString(),
  loadavg_before: loadBefore.map((x) => round(x, 2)),
  loadavg_after: loadAfter.map((x) => round(x, 2)),
  tables: prep,
  node: process.version,
};
const all: ResultRow[] = [...kept, meta, ...fresh].sort((a, b) => a.rows_target - b.rows_target || (a.columns ?? 4) - (b.columns ?? 4));

const yes = (b: boolean) => (b ? 'yes' : '**no**');
/** Microseconds of CPU per row. */
const perRow = (s: number, rows: number) => fmt((s * 1e6) / rows, 2);
function section(key: string): string {
  const [n, columns] = key.split('x').map(Number);
  const m = all.find((r): r is MetaRow => r.kind === 'meta' && shapeOf(r) === key);
  const ex = all.filter((r): r is ExportRow => r.kind === 'export' && shapeOf(r) === key);
  const sl = all.filter((r): r is SlowRow => r.kind === 'slow' && shapeOf(r) === key);
  let s = `## ${fmt(n)} rows, ${columns} columns (${
    m
      ? `${m.at.slice(0, 16).replace('T', ' ')} UTC, load average ${m.loadavg_before.join(' / ')} before, ` + `${m.loadavg_after.join(' / ')} after`
      : 'no metadata'
  })\n\n`;
  s +=
    '| Source | Format | Run | Rows | Complete | TTFB ms | Seconds | rows/s | MB/s | Baseline RSS MB | Peak RSS MB (sampled / VmHWM) | Peak - baseline MB | Gateway CPU s | Gateway CPU s per 1M rows |\n';
  s += '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n';
  for (const r of ex) {
    s +=
      `| ${r.source} | ${r.format} | ${r.run ?? 1} | ${fmt(r.rows)} | ${yes(r.complete && r.rows === n && (r.format === 'xlsx' || r.last_id === n))} | ${fmt(r.ttfb_ms)} | ${fmt(r.seconds, 1)} | ` +
      `${fmt(r.rows_per_s)} | ${fmt(r.mb_per_s, 1)} | ${fmt(r.baseline_rss_mb, 1)} | ${fmt(r.peak_rss_mb, 1)} / ${r.peak_hwm_mb === null ? '-' : fmt(r.peak_hwm_mb, 1)} | ` +
      `${fmt(Math.max(r.peak_rss_mb, r.peak_hwm_mb ?? 0) - r.baseline_rss_mb, 1)} | ${fmt(r.gateway_cpu_s, 2)} | ${fmt((r.gateway_cpu_s * 1e6) / n, 2)} |\n`;
  }
  const split = ex.filter((r) => r.cpu);
  if (split.length) {
    s +=
      '\nCPU by side, microseconds per row (medians over the runs; the database: PostgreSQL backends of the bench database, or the whole MariaDB server):\n\n';
    s += '| Source | Format | Runs | rows/s | Acceptor | Executor | Gateway other threads | Gateway total | Database | Reader (this script) | All |\n';
    s += '|---|---|---|---|---|---|---|---|---|---|---|\n';
    for (const [source, format] of [...new Set(split.map((r) => `${r.source}:${r.format}`))].map((k) => k.split(':'))) {
      const rs = split.filter((r) => r.source === source && r.format === format);
      const med = (f: (c: CpuSplit) => number) => perRow(median(rs.map((r) => f(r.cpu!))), n);
      const cells = [
        med((c) => c.acceptor),
        med((c) => c.executor),
        med((c) => c.other),
        med((c) => c.acceptor + c.executor + c.other),
        med((c) => c.database),
        med((c) => c.reader),
        med((c) => c.acceptor + c.executor + c.other + c.database + c.reader),
      ];
      s += `| ${source} | ${format} | ${rs.length} | ${fmt(median(rs.map((r) => r.rows_per_s)))} | ${cells.join(' | ')} |\n`;
    }
  }
  const st = [...ex, ...sl].map((r) => r.startup_rss_mb);
  if (st.length)
    s += `\nThe same processes just started (1.5 s after "listening", nothing called yet): ${fmt(Math.min(...st), 1)}-${fmt(Math.max(...st), 1)} MB RSS.\n`;
  const errs = ex.filter((r) => r.error || r.gateway_errors.length);
  for (const r of errs) s += `\n${r.source} ${r.format}: ${r.error ?? ''} ${r.gateway_errors.join(' | ')}\n`;
  if (!sl.length) return s;
  s += `\nSlow reader (${SLOW_CHUNK / 1024} KB every ${SLOW_EVERY_MS} ms, aborted after ${m?.slow_seconds ?? '?'} s):\n\n`;
  s +=
    '| Source | Format | Seconds | Read MB | Rows read | KB/s | Baseline RSS MB | RSS at 1 s / last MB | RSS min / max from 1 s MB | Drift MB/min | VmHWM MB | Statement halfway | After abort | Gone after ms |\n';
  s += '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n';
  for (const r of sl) {
    const act = (a: Activity[]) => (a.length ? a.map((x) => x.state || '?').join(', ') : 'none');
    s +=
      `| ${r.source} | ${r.format} | ${fmt(r.seconds, 1)} | ${fmt(r.bytes / 1e6, 1)} | ${fmt(r.rows)} | ${fmt(r.kb_per_s)} | ${fmt(r.baseline_rss_mb, 1)} | ` +
      `${fmt(r.first_rss_mb, 1)} / ${fmt(r.last_rss_mb, 1)} | ${fmt(r.min_rss_mb, 1)} / ${fmt(r.max_rss_mb, 1)} | ${r.mb_per_min === null ? '-' : fmt(r.mb_per_min, 2)} | ${r.peak_hwm_mb === null ? '-' : fmt(r.peak_hwm_mb, 1)} | ` +
      `${act(r.during)} | ${act(r.after_abort)} | ${r.cleared_after_ms === null ? '**still running after 10 s**' : fmt(r.cleared_after_ms)} |\n`;
  }
  for (const r of sl) s += `\n${r.source} ${r.format} RSS MB by second (max of the 100 ms samples): ${r.rss_by_second.join(', ')}\n`;
  return s;
}
const shapes = [...new Set(all.filter((r) => r.kind === 'meta').map(shapeOf))];
const md = `# Streaming exports: PostgreSQL and MariaDB through ?stream=true (${today()})

Made with \`npx tsc -p . && node dist/bench/streams.js [--rows N] [--quick] [--columns 3|4] [--repeat R] [--out NAME]\` on this project's machine: 2 cores shared by
the gateway, the reader (this script, node:http), PostgreSQL 15, MariaDB 10.11 and other agents' work, so the load
average (os.loadavg(), 1/5/15 min) is given with each run and the throughput figures are this machine's, not a ceiling.

The tables (in \`qag_stream_bench\`, same in both databases): \`export\`, 4 columns: \`id\` (int, primary key), \`name\` (md5 of id, 32
characters), \`amount\` (id * 0.01, numeric / DECIMAL(14,2)), \`at\` (2026-01-01 + id seconds, timestamp / DATETIME);
\`export3\`, 3 columns (issue 14's shape): the same without \`amount\`. PostgreSQL from \`generate_series\`, MariaDB from its SEQUENCE
engine (\`seq_1_to_N\`). The saved query is \`SELECT <columns> FROM <table> ORDER BY id\`, called as \`/q/<name>?stream=true&format=csv|ndjson|xlsx\` with the admin key.

Each export runs on its own fresh gateway process (\`startGateway\`: SQLite store in a temp home, default executor
threads, i.e. 1 on 2 cores), warmed by one paged call. TTFB is to the first body byte. Rows are the lines received
(minus the CSV header); "complete" means the body ended with its newline, the row count matches and the last line's id
is N. An xlsx export (run up to 1,000,000 rows, fast and slow) has no lines: its rows are the run's in the gateway's
history (for the slow reader, the rows sent before it left), and "complete" means the body ended with the zip's
end-of-central-directory record and the row count matches. The first xlsx call of a process loads exceljs (part of its
TTFB and about 27 MB of its RSS). MB is 10^6 bytes; RSS MB is MiB of the gateway process (all its threads): "baseline" is the idle warmed process
just before the export, "peak" the max of VmRSS sampled every 100 ms during the export and VmHWM (reset with clear_refs
just before). Target: peak under ${TARGET_RSS_MB} MB. CPU by side is from /proc: the gateway's main thread (the acceptor), its
busiest other thread (the executor running the export), its other threads (V8's GC helpers, the recorder); the database;
this script's own process (the HTTP reader). The slow reader pauses the response and lets ~64 KB through every
50 ms, samples RSS the same way (the first second is the climb from the baseline as buffers fill; min, max and
drift, (last - first) / time, are from 1 s on), asks the database about the statement halfway, then destroys the request and polls
(every 100 ms, up to 10 s) until the statement is no longer running (PostgreSQL: no non-idle backend in pg_stat_activity
with the export's text or a FETCH from the export's cursor, whose backend is "idle in transaction" between batches;
MariaDB: no PROCESSLIST row with it).

${shapes.map(section).join('\n')}`;
mkdirSync(resultsDir, { recursive: true });
writeFileSync(resultsFile, `${all.map((r) => JSON.stringify(r)).join('\n')}\n`);
writeFileSync(join(resultsDir, 'README.md'), md);
console.log(`\n${md}\nwritten to ${resultsDir}`);
