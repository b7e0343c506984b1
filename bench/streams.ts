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
//
// --quick is 200,000 rows and a 5 s slow reader. Each export runs on a fresh gateway process
// (SQLite store in a temp home, default executor threads), warmed by one paged call so its pools
// exist, so every baseline is the same idle process. RSS is VmRSS from /proc/<pid>/status sampled
// every 100 ms, plus VmHWM after the high-water mark was reset (clear_refs 5) just before the
// export. Results accumulate per row count in bench/results/streams-<date>/ (a quick run and a full
// run on the same day share the folder, one table per row count).
import { request, type IncomingMessage } from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import mysql, { type RowDataPacket } from 'mysql2/promise';
import postgres from 'postgres';
import { fmt, RESULTS, startGateway, today, writeResults, type Gateway } from './gateway.js';
import { processCpuSeconds } from './load.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string' },
    quick: { type: 'boolean', default: false },
    'slow-seconds': { type: 'string' },
  },
});
const quick = values.quick!;
const N = Number(values.rows ?? (quick ? 200_000 : 5_000_000));
const slowSeconds = Number(values['slow-seconds'] ?? (quick ? 5 : 20));
if (!(Number.isInteger(N) && N >= 1)) throw new Error('--rows: a whole number >= 1 expected');
if (!(slowSeconds > 0)) throw new Error('--slow-seconds: a positive number expected');

const DB = 'qag_stream_bench';
const PG = 'postgres://postgres@127.0.0.1:5432';
const MY = { host: '127.0.0.1', port: 3306, user: 'root' };
const SQL = 'SELECT id, name, amount, at FROM export ORDER BY id';
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
    const [{ t }] = await sql`SELECT to_regclass('public.export') IS NOT NULL AS t`;
    if (t) {
      const [{ n }] = await sql`SELECT count(*)::int8 AS n FROM export`;
      if (Number(n) === N) return { created: false, seconds: 0 };
      await sql`DROP TABLE export`;
    }
    const t0 = performance.now();
    await sql.unsafe(`CREATE TABLE export AS SELECT i AS id, md5(i::text) AS name, i * 0.01 AS amount,
      timestamp '2026-01-01' + i * interval '1 second' AS at FROM generate_series(1, ${N}) i`);
    await sql`ALTER TABLE export ADD PRIMARY KEY (id)`;
    await sql`VACUUM ANALYZE export`;
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
    const [t] = await c.query<RowDataPacket[]>(`SELECT COUNT(*) AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'export'`, [DB]);
    if (Number(t[0].t) > 0) {
      const [r] = await c.query<RowDataPacket[]>('SELECT COUNT(*) AS n FROM export');
      if (Number(r[0].n) === N) return { created: false, seconds: 0 };
      await c.query('DROP TABLE export');
    }
    const t0 = performance.now();
    await c.query(`CREATE TABLE export (id INT NOT NULL PRIMARY KEY, name CHAR(32) NOT NULL, amount DECIMAL(14,2) NOT NULL,
      at DATETIME NOT NULL) ENGINE=InnoDB`);
    // In slices of a million so no single transaction's undo log gets large.
    const SLICE = 1_000_000;
    for (let lo = 1; lo <= N; lo += SLICE) {
      const hi = Math.min(N, lo + SLICE - 1);
      await c.query(`INSERT INTO export SELECT seq, MD5(seq), seq * 0.01, TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq SECOND
        FROM seq_${lo}_to_${hi}`);
    }
    await c.query('ANALYZE TABLE export');
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

async function freshGateway(source: SourceName): Promise<{ g: Gateway; home: string; startupRss: number }> {
  const home = mkdtempSync(join(tmpdir(), 'qag-streams-'));
  const g = await startGateway({ QUERYAPIGATE_HOME: home }, ADMIN);
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
        for (let i = b.indexOf(10); i !== -1; i = b.indexOf(10, i + 1)) r.lines++;
        if (head.length < 200) head += b.subarray(0, 200).toString('utf8');
        tail = tail.length + b.length > 4096 ? Buffer.concat([tail, b]).subarray(-4096) : Buffer.concat([tail, b]);
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
        WHERE datname = ${DB} AND pid <> pg_backend_pid() AND query LIKE ${'%FROM export ORDER BY id%'}`;
      return rows.map((r) => ({ pid: r.pid, state: r.state }));
    } finally {
      await sql.end();
    }
  }
  const c = await mysql.createConnection(MY);
  try {
    const [rows] = await c.query<RowDataPacket[]>(
      `SELECT ID AS pid, COMMAND AS command, STATE AS state FROM information_schema.PROCESSLIST
      WHERE DB = ? AND ID <> CONNECTION_ID() AND INFO LIKE '%FROM export ORDER BY id%'`,
      [DB],
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
  samples: number;
  error: string | null;
  gateway_errors: string[];
};
type SlowRow = {
  kind: 'slow';
  rows_target: number;
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

async function runExport(source: SourceName, format: string): Promise<ExportRow> {
  const { g, home, startupRss } = await freshGateway(source);
  try {
    const baseline = await baselineRss(g.pid);
    const hwm = resetPeak(g.pid);
    const cpu0 = processCpuSeconds(g.pid);
    const sampler = new RssSampler(g.pid);
    const r = await readExport(`${g.url}/q/${SOURCES[source].query}?stream=true&format=${format}`);
    const samples = sampler.stop();
    const cpu = processCpuSeconds(g.pid) - cpu0;
    const st = procStatus(g.pid);
    // An xlsx file has no lines to count: its rows are the run's, as the gateway recorded them.
    const xlsx = format === 'xlsx';
    const rows = xlsx ? await exportRun(g, SOURCES[source].query) : format === 'csv' ? Math.max(0, r.lines - 1) : r.lines;
    const row: ExportRow = {
      kind: 'export',
      rows_target: N,
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

console.log(`tables: ${N} rows`);
const prep = { postgres: await preparePostgres(), mariadb: await prepareMariaDB() };
console.log(JSON.stringify(prep));

const CASES: [SourceName, string][] = [
  ['postgres', 'csv'],
  ['postgres', 'ndjson'],
  ['mariadb', 'csv'],
  ...(N <= 1_000_000 ? [['postgres', 'xlsx'] as [SourceName, string]] : []),
];
const SLOW: [SourceName, string][] = [['postgres', 'csv'], ['mariadb', 'csv'], ...(N <= 1_000_000 ? [['postgres', 'xlsx'] as [SourceName, string]] : [])];
const fresh: (ExportRow | SlowRow)[] = [];
for (const [source, format] of CASES) {
  const row = await runExport(source, format);
  fresh.push(row);
  console.log(JSON.stringify(row));
}
for (const [source, format] of SLOW) {
  const row = await runSlow(source, format);
  fresh.push(row);
  console.log(JSON.stringify(row));
}
const loadAfter = loadavg();

// Results of other row counts run today stay in the folder (a quick and a full run side by side).
const resultsFile = join(RESULTS, `streams-${today()}`, 'results.jsonl');
type MetaRow = {
  kind: 'meta';
  rows_target: number;
  slow_seconds: number;
  at: string;
  loadavg_before: number[];
  loadavg_after: number[];
  tables: typeof prep;
  node: string;
};
type ResultRow = ExportRow | SlowRow | MetaRow;
const kept: ResultRow[] = existsSync(resultsFile)
  ? readFileSync(resultsFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ResultRow)
      .filter((r) => r.rows_target !== N)
  : [];
const meta: MetaRow = {
  kind: 'meta',
  rows_target: N,
  slow_seconds: slowSeconds,
  at: new Date().toISOString(),
  loadavg_before: loadBefore.map((x) => round(x, 2)),
  loadavg_after: loadAfter.map((x) => round(x, 2)),
  tables: prep,
  node: process.version,
};
const all: ResultRow[] = [...kept, meta, ...fresh].sort((a, b) => a.rows_target - b.rows_target);

const yes = (b: boolean) => (b ? 'yes' : '**no**');
function section(n: number): string {
  const m = all.find((r): r is MetaRow => r.kind === 'meta' && r.rows_target === n);
  const ex = all.filter((r): r is ExportRow => r.kind === 'export' && r.rows_target === n);
  const sl = all.filter((r): r is SlowRow => r.kind === 'slow' && r.rows_target === n);
  let s = `## ${fmt(n)} rows (${
    m
      ? `${m.at.slice(0, 16).replace('T', ' ')} UTC, load average ${m.loadavg_before.join(' / ')} before, ` + `${m.loadavg_after.join(' / ')} after`
      : 'no metadata'
  })\n\n`;
  s +=
    '| Source | Format | Rows | Complete | TTFB ms | Seconds | rows/s | MB/s | Baseline RSS MB | Peak RSS MB (sampled / VmHWM) | Peak - baseline MB | Gateway CPU s |\n';
  s += '|---|---|---|---|---|---|---|---|---|---|---|---|\n';
  for (const r of ex) {
    s +=
      `| ${r.source} | ${r.format} | ${fmt(r.rows)} | ${yes(r.complete && r.rows === n && (r.format === 'xlsx' || r.last_id === n))} | ${fmt(r.ttfb_ms)} | ${fmt(r.seconds, 1)} | ` +
      `${fmt(r.rows_per_s)} | ${fmt(r.mb_per_s, 1)} | ${fmt(r.baseline_rss_mb, 1)} | ${fmt(r.peak_rss_mb, 1)} / ${r.peak_hwm_mb === null ? '-' : fmt(r.peak_hwm_mb, 1)} | ` +
      `${fmt(Math.max(r.peak_rss_mb, r.peak_hwm_mb ?? 0) - r.baseline_rss_mb, 1)} | ${fmt(r.gateway_cpu_s, 1)} |\n`;
  }
  const st = [...ex, ...sl].map((r) => r.startup_rss_mb);
  if (st.length)
    s += `\nThe same processes just started (1.5 s after "listening", nothing called yet): ${fmt(Math.min(...st), 1)}-${fmt(Math.max(...st), 1)} MB RSS.\n`;
  const errs = ex.filter((r) => r.error || r.gateway_errors.length);
  for (const r of errs) s += `\n${r.source} ${r.format}: ${r.error ?? ''} ${r.gateway_errors.join(' | ')}\n`;
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
const counts = [...new Set(all.filter((r) => r.kind === 'meta').map((r) => r.rows_target))];
const md = `# Streaming exports: PostgreSQL and MariaDB through ?stream=true (${today()})

Made with \`npx tsc -p . && node dist/bench/streams.js [--rows N] [--quick]\` on this project's machine: 2 cores shared by
the gateway, the reader (this script, node:http), PostgreSQL 15, MariaDB 10.11 and other agents' work, so the load
average (os.loadavg(), 1/5/15 min) is given with each run and the throughput figures are this machine's, not a ceiling.

The table (\`qag_stream_bench.export\`, same in both databases): \`id\` (int, primary key), \`name\` (md5 of id, 32
characters), \`amount\` (id * 0.01, numeric / DECIMAL(14,2)), \`at\` (2026-01-01 + id seconds, timestamp / DATETIME);
PostgreSQL from \`generate_series\`, MariaDB from its SEQUENCE engine (\`seq_1_to_N\`). The saved query is
\`${SQL}\`, called as \`/q/<name>?stream=true&format=csv|ndjson|xlsx\` with the admin key.

Each export runs on its own fresh gateway process (\`startGateway\`: SQLite store in a temp home, default executor
threads, i.e. 1 on 2 cores), warmed by one paged call. TTFB is to the first body byte. Rows are the lines received
(minus the CSV header); "complete" means the body ended with its newline, the row count matches and the last line's id
is N. An xlsx export (run up to 1,000,000 rows, fast and slow) has no lines: its rows are the run's in the gateway's
history (for the slow reader, the rows sent before it left), and "complete" means the body ended with the zip's
end-of-central-directory record and the row count matches. The first xlsx call of a process loads exceljs (part of its
TTFB and about 27 MB of its RSS). MB is 10^6 bytes; RSS MB is MiB of the gateway process (all its threads): "baseline" is the idle warmed process
just before the export, "peak" the max of VmRSS sampled every 100 ms during the export and VmHWM (reset with clear_refs
just before). Target: peak under ${TARGET_RSS_MB} MB. The slow reader pauses the response and lets ~64 KB through every
50 ms, samples RSS the same way (the first second is the climb from the baseline as buffers fill; min, max and
drift, (last - first) / time, are from 1 s on), asks the database about the statement halfway, then destroys the request and polls
(every 100 ms, up to 10 s) until the statement is no longer running (PostgreSQL: no non-idle backend in pg_stat_activity
with the export's text; MariaDB: no PROCESSLIST row with it).

${counts.map(section).join('\n')}`;
console.log(`\n${md}\nwritten to ${writeResults('streams', all, md)}`);
