// The seeds' OLTP tables on PostgreSQL (Performance v4/v5), on this machine: pgbench's bank schema,
// the gateway's store in a second database, three saved queries (account, account_page, deposit) and
// three keys (plain, governed, writer). Cells: /health, plain and governed lookups, the 100-row page
// and the write, at 1 and 32 callers, metadata cache off and on, executors inline (WORKERS=0) and
// pooled (WORKERS=1). The database alone (pgbench -S) and a hand-written floor (bench/floor.ts) run
// in the same rounds, so every gateway figure also stands as a ratio to them.
//
//   npm run build && node dist/bench/oltp.js [--scale 10] [--seconds 5] [--rounds 3] [--quick]
//        [--executors 0,1] [--calls health,plain,governed,page,write] [--history-limit 1000000[,50]] [--name oltp]
//
// --executors and --history-limit take lists: every combination (with cache off and on) is a
// configuration. Runs are counted only where the limit is high enough not to trim a cell's runs.
//
// One gateway process at a time: each round starts a configuration's process, measures the floor
// (which runs all along) next to it, runs all its cells, stops it, then the next (rotated from round
// to round, with pgbench as one more slot). Ratios to the floor are taken within each round.
// Four processes at once would hold up to ~31 PostgreSQL connections each (store reader 8, data read
// pool 8, write pool 8, control store 4, recorder 2, LISTEN 1) against max_connections = 100.
import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { ensureWrk, runLoad, type LoadResult } from './load.js';
import { fmt, freshDatabase, median, range, spawnListening, startGateway, today, writeResults, type Gateway } from './gateway.js';

const { values } = parseArgs({
  options: {
    scale: { type: 'string' },
    seconds: { type: 'string' },
    rounds: { type: 'string' },
    quick: { type: 'boolean', default: false },
    executors: { type: 'string', default: '0,1' },
    calls: { type: 'string', default: 'health,plain,governed,page,write' },
    'history-limit': { type: 'string', default: '1000000' },
    name: { type: 'string' },
  },
});
const quick = values.quick!;
const scale = Number(values.scale ?? (quick ? 1 : 10));
const seconds = Number(values.seconds ?? (quick ? 2 : 5));
const rounds = Number(values.rounds ?? (quick ? 1 : 3));
const warmup = quick ? 1 : 2;
const historyLimits = values['history-limit']!.split(',').map((s) => s.trim());
const historyLimit = historyLimits.join(',');
const runName = values.name ?? (quick ? 'oltp-quick' : 'oltp');
for (const [k, v] of Object.entries({ scale, seconds, rounds })) {
  if (!(Number.isInteger(v) && v >= 1)) throw new Error(`--${k}: a whole number >= 1 expected`);
}

const PG = 'postgres://postgres@127.0.0.1:5432';
const BENCH_DB = 'qag_oltp_bench';
const STORE_DB = 'qag_oltp_store';
const BENCH_URL = `${PG}/${BENCH_DB}`;
const STORE_URL = `${PG}/${STORE_DB}`;
const FLOOR = fileURLToPath(new URL('./floor.js', import.meta.url));
const CALLERS = [1, 32];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Runs are counted in the history only when the limit per version can't trim a cell's runs. */
const countsRuns = (limit: string) => Number(limit) >= 100_000;
const countRuns = historyLimits.every(countsRuns);
/** Backends report their pg_stat_database counts at most once a second; wait this long around a window. */
const STATS_SETTLE_MS = 2000;

/** Busy CPU seconds of the whole machine so far (all cores), from /proc/stat. */
function machineBusy(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + f[4];
  return (f.reduce((a, b) => a + b, 0) - idle) / 100; // USER_HZ
}

// ---------------------------------------------------------------- random ids sized to the scale

/** `[1-9][0-9]{0,d-1}`: 1 to 10^d - 1, oha-style (each length equally likely), as the seeds ran it. */
const ids = (digits: number) => (digits <= 1 ? '[1-9]' : `[1-9][0-9]{0,${digits - 1}}`);
const accounts = scale * 100_000;
const aidDigits = Math.floor(Math.log10(accounts)); // 10^d - 1 < accounts: every id exists
const AID = ids(aidDigits);
const START = ids(aidDigits - 1); // the seed's pages start in the first tenth (1-999,999 of 10M)
const aidMax = 10 ** aidDigits - 1;
const startMax = 10 ** (aidDigits - 1) - 1;

// ---------------------------------------------------------------- what is called

type KeyName = 'plain' | 'governed' | 'writer';
interface Call {
  id: string;
  call: string;
  path: string;
  key: KeyName | null;
  write?: boolean;
}
const ALL_CALLS: Call[] = [
  { id: 'health', call: '/health - the floor', path: '/health', key: null },
  { id: 'plain', call: 'Lookup, plain key', path: `/q/account\\?aid=${AID}`, key: 'plain' },
  { id: 'governed', call: 'Lookup, governed key', path: `/q/account\\?aid=${AID}`, key: 'governed' },
  { id: 'page', call: '100-row page', path: `/q/account_page\\?start=${START}&page_size=100`, key: 'plain' },
  { id: 'write', call: 'Write', path: `/q/deposit\\?aid=${AID}&delta=1`, key: 'writer', write: true },
];
const wanted = new Set(values.calls!.split(',').map((s) => s.trim()));
const CALLS = ALL_CALLS.filter((c) => wanted.has(c.id));
if (!CALLS.length) throw new Error(`--calls: none of ${[...wanted].join(', ')} (use ${ALL_CALLS.map((c) => c.id).join(',')})`);

interface Config {
  id: string;
  executors: string;
  cache: 'off' | 'on';
  countRuns: boolean;
  env: Record<string, string>;
}
const CONFIGS: Config[] = [];
for (const w of values.executors!.split(',').map((s) => s.trim())) {
  for (const limit of historyLimits) {
    for (const cache of ['off', 'on'] as const) {
      const several = historyLimits.length > 1;
      CONFIGS.push({
        id: `w${w}${several ? `-h${limit}` : ''}-cache-${cache}`,
        executors: (w === '0' ? 'inline' : `pooled (${w})`) + (several ? `, history limit ${limit}` : ''),
        cache,
        countRuns: countsRuns(limit),
        env: {
          QUERYAPIGATE_WORKERS: w,
          QUERYAPIGATE_METADATA_CACHE_TTL: cache === 'on' ? '5' : '0',
          QUERYAPIGATE_DATABASE_URL: STORE_URL,
          QUERYAPIGATE_ALLOW_WRITES: '1',
          QUERYAPIGATE_HISTORY_LIMIT: limit,
        },
      });
    }
  }
}

// ---------------------------------------------------------------- PostgreSQL helpers

function run(cmd: string, args: string[], opts: { quiet?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (!opts.quiet) process.stderr.write(d);
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')}: exit ${code}\n${out}`))));
  });
}

const admin = postgres(`${PG}/postgres`, { max: 1, onnotice: () => undefined });
let bench!: postgres.Sql;
let store!: postgres.Sql;

/** Two runs at once would drop each other's store and reinitialise each other's tables: one at a time. */
async function lockRun(): Promise<void> {
  const [r] = await admin`SELECT pg_try_advisory_lock(20261130, 5) AS ok`; // held by this session until it ends
  if (!r.ok) {
    const holders = await admin`SELECT a.pid, a.client_addr, a.backend_start FROM pg_locks l JOIN pg_stat_activity a USING (pid)
      WHERE l.locktype = 'advisory' AND l.classid = 20261130 AND l.objid = 5`;
    throw new Error(
      `another oltp bench holds the lock (PostgreSQL backend ${holders.map((h) => `${h.pid}, since ${h.backend_start}`).join('; ')}): ` +
        `it uses ${BENCH_DB} and ${STORE_DB} too; wait for it to end`,
    );
  }
}

async function setup(): Promise<{ initialised: boolean }> {
  await lockRun();
  const [exists] = await admin`SELECT count(*)::int AS n FROM pg_database WHERE datname = ${BENCH_DB}`;
  if (!exists.n) await admin.unsafe(`CREATE DATABASE ${BENCH_DB}`);
  bench = postgres(BENCH_URL, { max: 1, onnotice: () => undefined });
  let branches = -1;
  try {
    branches = (await bench`SELECT count(*)::int AS n FROM pgbench_branches`)[0].n;
  } catch {
    // not initialised yet
  }
  let initialised = false;
  if (branches !== scale) {
    console.log(`pgbench -i -s ${scale} ${BENCH_DB} (pgbench_branches has ${branches < 0 ? 'no table' : `${branches} rows`})`);
    await run('pgbench', ['-h', '127.0.0.1', '-U', 'postgres', '-i', '-q', '-s', String(scale), BENCH_DB], { quiet: true });
    initialised = true;
  } else {
    console.log(`${BENCH_DB} is already at scale ${scale}: VACUUM ANALYZE pgbench_accounts`);
    await bench`VACUUM ANALYZE pgbench_accounts`;
  }
  await freshDatabase(admin, STORE_DB);
  store = postgres(STORE_URL, { max: 1, onnotice: () => undefined });
  return { initialised };
}

async function balanceSum(): Promise<number> {
  return Number((await bench`SELECT sum(abalance)::bigint AS s FROM pgbench_accounts`)[0].s);
}

/** Transactions committed so far in the store and the bench database (pg_stat_database). */
async function xacts(): Promise<{ store: number; data: number }> {
  const rows = await admin`SELECT datname, xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname IN (${STORE_DB}, ${BENCH_DB})`;
  const get = (d: string) => Number(rows.find((r) => r.datname === d)?.n ?? 0);
  return { store: get(STORE_DB), data: get(BENCH_DB) };
}

// ---------------------------------------------------------------- the gateway's objects

const SAVED = [
  {
    name: 'account',
    sql: 'SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = :aid',
    parameters: { aid: { type: 'int', required: true } },
    description: 'One account',
  },
  {
    name: 'account_page',
    sql:
      'SELECT a.aid, a.abalance, b.bid, b.bbalance FROM pgbench_accounts a JOIN pgbench_branches b ON b.bid = a.bid ' +
      'WHERE a.aid BETWEEN :start AND :start + 99 ORDER BY a.aid',
    parameters: { start: { type: 'int', required: true } },
    description: 'A 100-row page with a join',
  },
  {
    name: 'deposit',
    sql: 'UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid',
    parameters: { aid: { type: 'int', required: true }, delta: { type: 'int', required: true } },
    description: 'A deposit',
  },
];
const KEYS = [
  { name: 'plain', queries: ['account', 'account_page'], connections: [] },
  {
    name: 'governed',
    queries: ['account', 'account_page'],
    connections: [],
    allowed_tables: ['pgbench_accounts', 'pgbench_branches'],
    mask: [{ column: '*.abalance', action: 'hash' }],
  },
  { name: 'writer', queries: ['deposit'], connections: [], allow_writes: true, allowed_write_ops: ['update'] },
];

async function createObjects(g: Gateway): Promise<Record<KeyName, string>> {
  await g.api('POST', '/api/v1/connections', {
    name: 'oltp',
    db: 'postgres',
    host: '127.0.0.1',
    port: 5432,
    database: BENCH_DB,
    user: 'postgres',
    active: true,
  });
  for (const q of SAVED) await g.api('POST', '/api/v1/queries', { ...q, connection_name: 'oltp', publish: true });
  const secrets = {} as Record<KeyName, string>;
  for (const k of KEYS) secrets[k.name as KeyName] = (await g.api<{ secret: string }>('POST', '/api/v1/api-keys', k)).secret;
  return secrets;
}

// ---------------------------------------------------------------- units of a round

type Row = LoadResult & {
  round: number;
  kind: 'gateway' | 'floor';
  config: string;
  executors: string;
  cache: string;
  call_id: string;
  call: string;
  calls_per_cpu_s: number | null;
  /** Runs the store's history holds for the measured window (null for /health). */
  runs_recorded: number | null;
  runs_success: number | null;
  runs_kept_pct: number | null;
  store_xacts_per_call: number | null;
  data_xacts_per_call: number | null;
  /** Busy cores of the whole machine over the window (gateway, wrk, PostgreSQL and everything else). */
  machine_busy_cores: number;
  /** Floor rows: the configuration whose cells this floor measurement sits next to. */
  floor_for?: string;
  /** Gateway rows: req/s and calls per CPU-s over the floor's, measured next to them in the same round. */
  rps_vs_floor?: number;
  per_cpu_vs_floor?: number;
  /** Writes only: the change in sum(abalance) (delta=1 per deposit) and the 2xx answers wrk counted. */
  balance_delta?: number;
  ok_2xx?: number;
  writes_landed?: boolean;
};
type PgbenchRow = {
  round: number;
  kind: 'pgbench';
  clients: number;
  threads: number;
  seconds: number;
  tps: number;
  latency_avg_ms: number;
  machine_busy_cores: number;
};

const rows: Row[] = [];
const pgRows: PgbenchRow[] = [];
const notes: string[] = [];
const failures: { round: number; config: string; call: string; callers: number; at: string; retried: boolean; error: string; output_tail: string }[] = [];
let secrets: Record<KeyName, string>;
let floor: Awaited<ReturnType<typeof startFloor>> | null = null;

const headersFor = (c: Call): Record<string, string> => (c.key ? { 'X-API-Key': secrets[c.key] } : {});

/** Waits until every run the gateway answered has been written (asking it to flush), returns the count. */
async function settledRuns(g: Gateway): Promise<{ all: number; success: number }> {
  let last = -1;
  for (let i = 0; i < 20; i++) {
    await g.api('GET', '/api/v1/history?limit=1'); // the history API flushes the recorder first
    const [r] = await store`SELECT count(*)::int AS all, count(*) FILTER (WHERE status = 'success')::int AS success FROM run_history`;
    if (r.all === last) return { all: r.all, success: r.success };
    last = r.all;
    await sleep(300);
  }
  throw new Error('the run history did not settle in 20 tries');
}

async function gatewayCell(round: number, cfg: Config, g: Gateway, c: Call, callers: number): Promise<Row> {
  const base = { randRegexUrl: g.url + c.path, connections: callers, headers: headersFor(c) };
  await runLoad({ ...base, duration: warmup }); // the warm-up: plans, traces, pools, JIT
  const recorded = c.key !== null;
  let sum0 = 0;
  if (recorded) {
    await sleep(STATS_SETTLE_MS);
    if (cfg.countRuns) {
      await settledRuns(g);
      await store`TRUNCATE run_history`;
    }
    if (c.write) sum0 = await balanceSum();
  }
  const x0 = await xacts();
  const m0 = machineBusy();
  const t0 = performance.now();
  const r = await runLoad({ ...base, duration: seconds, pid: g.pid });
  const busy = round2((machineBusy() - m0) / ((performance.now() - t0) / 1000));
  let runs: { all: number; success: number } | null = null;
  let sum1 = 0;
  if (recorded) {
    await sleep(STATS_SETTLE_MS);
    if (cfg.countRuns) runs = await settledRuns(g);
    else await g.api('GET', '/api/v1/history?limit=1');
    if (c.write) sum1 = await balanceSum();
  }
  const x1 = await xacts();
  const row: Row = {
    ...r,
    round,
    kind: 'gateway',
    config: cfg.id,
    executors: cfg.executors,
    cache: cfg.cache,
    call_id: c.id,
    call: c.call,
    calls_per_cpu_s: r.cpu_s ? Math.round(r.requests / r.cpu_s) : null,
    runs_recorded: runs?.all ?? null,
    runs_success: runs?.success ?? null,
    runs_kept_pct: runs ? Math.round((1000 * runs.all) / Math.max(1, r.requests)) / 10 : null,
    store_xacts_per_call: recorded ? round2((x1.store - x0.store) / Math.max(1, r.requests)) : null,
    data_xacts_per_call: recorded ? round2((x1.data - x0.data) / Math.max(1, r.requests)) : null,
    machine_busy_cores: busy,
  };
  if (c.write) {
    row.balance_delta = sum1 - sum0;
    row.ok_2xx = r.requests - r.non2xx;
    // wrk stops counting with calls in flight: those may land without being counted (at most one per caller).
    row.writes_landed =
      row.balance_delta >= row.ok_2xx && row.balance_delta - row.ok_2xx <= callers + r.errors && (runs === null || row.balance_delta === runs.success);
  }
  return row;
}

const round2 = (n: number) => Math.round(n * 100) / 100;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function gatewayUnit(round: number, cfg: Config): Promise<void> {
  const home = mkdtempSync(join(tmpdir(), 'qag-oltp-'));
  const start = () => startGateway({ ...cfg.env, QUERYAPIGATE_HOME: home });
  const finish = async (g: Gateway) => {
    await g.stop();
    const bad = g
      .output()
      .split('\n')
      .filter((l) => /recorder|error|dropped|failed/i.test(l));
    if (bad.length) notes.push(`round ${round}, ${cfg.id}: the gateway logged ${bad.length} line(s), e.g. ${JSON.stringify(bad[0].slice(0, 300))}`);
  };
  let g = await start();
  try {
    for (const c of CALLS) await smoke(g, c);
    await floorCells(round, cfg.id);
    for (const c of CALLS) {
      for (const callers of CALLERS) {
        for (let attempt = 1; ; attempt++) {
          try {
            const row = await gatewayCell(round, cfg, g, c, callers);
            rows.push(row);
            log(row);
            break;
          } catch (e) {
            if (alive(g.pid)) throw e;
            // The gateway exited (on this shared machine, twice by a SIGTERM from outside the bench):
            // keep its output, note it, start a new one and run the cell again (at most twice).
            const at = new Date().toISOString();
            const file = join(tmpdir(), `qag-oltp-exit-r${round}-${cfg.id}-${c.id}-c${callers}-${attempt}.log`);
            writeFileSync(file, g.output());
            const tail = g.output().trim().split('\n').slice(-12).join('\n');
            console.error(`r${round} ${cfg.id} ${c.id} c=${callers}: THE GATEWAY EXITED at ${at} (${(e as Error).message}); output in ${file}:\n${tail}`);
            failures.push({ round, config: cfg.id, call: c.id, callers, at, retried: attempt <= 2, error: (e as Error).message, output_tail: tail });
            await finish(g);
            g = await start();
            if (attempt > 2) break;
          }
        }
      }
    }
  } finally {
    await finish(g);
    rmSync(home, { recursive: true, force: true });
  }
}

/** One call of each kind before the load, so a setup mistake fails loudly instead of as non-2xx counts. */
async function smoke(g: Gateway, c: Call): Promise<void> {
  const path = c.path.replace(/\\/g, '').replace(/\[1-9\](\[0-9\]\{0,\d+\})?/g, '7');
  const res = await fetch(g.url + path, { headers: headersFor(c) });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`smoke ${c.id} ${path}: ${res.status} ${body}`);
}

const startFloor = () => spawnListening([FLOOR, BENCH_URL, '8']);

/** The floor at 1 and 32 callers, measured next to each configuration's cells (the floor process stays up all run). */
async function floorCells(round: number, forConfig: string): Promise<void> {
  if (!alive(floor!.pid)) {
    notes.push(`round ${round}: the floor process had exited; started a new one`);
    floor = await startFloor();
  }
  const f = floor!;
  {
    const c = ALL_CALLS[1];
    for (const callers of CALLERS) {
      const base = { randRegexUrl: f.url + c.path, connections: callers };
      await runLoad({ ...base, duration: warmup });
      const m0 = machineBusy();
      const t0 = performance.now();
      const r = await runLoad({ ...base, duration: seconds, pid: f.pid });
      const busy = round2((machineBusy() - m0) / ((performance.now() - t0) / 1000));
      const row: Row = {
        ...r,
        round,
        kind: 'floor',
        config: 'floor',
        floor_for: forConfig,
        executors: '-',
        cache: '-',
        call_id: 'floor',
        call: 'Lookup, floor (node:http + postgres.js)',
        calls_per_cpu_s: r.cpu_s ? Math.round(r.requests / r.cpu_s) : null,
        runs_recorded: null,
        runs_success: null,
        runs_kept_pct: null,
        store_xacts_per_call: null,
        data_xacts_per_call: null,
        machine_busy_cores: busy,
      };
      rows.push(row);
      log(row);
    }
  }
}

async function pgbenchUnit(round: number): Promise<void> {
  for (const clients of CALLERS) {
    const threads = clients === 1 ? 1 : 2;
    const m0 = machineBusy();
    const t0 = performance.now();
    const out = await run(
      'pgbench',
      ['-h', '127.0.0.1', '-U', 'postgres', '-S', '-c', String(clients), '-j', String(threads), '-T', String(seconds), BENCH_DB],
      { quiet: true },
    );
    const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(out);
    const lat = /latency average = ([\d.]+) ms/.exec(out);
    if (!tps || !lat) throw new Error(`pgbench output not understood:\n${out}`);
    const busy = round2((machineBusy() - m0) / ((performance.now() - t0) / 1000));
    const row: PgbenchRow = {
      round,
      kind: 'pgbench',
      clients,
      threads,
      seconds,
      tps: Number(tps[1]),
      latency_avg_ms: Number(lat[1]),
      machine_busy_cores: busy,
    };
    pgRows.push(row);
    appendFileSync(PARTIAL, `${JSON.stringify(row)}\n`);
    console.log(JSON.stringify(row));
  }
}

/** Every row also goes to a file as it is measured, so a late failure loses nothing. */
const PARTIAL = join(tmpdir(), `qag-${runName}-${process.pid}.partial.jsonl`);
function log(r: Row): void {
  appendFileSync(PARTIAL, `${JSON.stringify(r)}\n`);
  const extra = r.runs_kept_pct === null ? '' : ` runs kept ${r.runs_kept_pct}% store tx/call ${r.store_xacts_per_call} data tx/call ${r.data_xacts_per_call}`;
  const w = r.balance_delta === undefined ? '' : ` balance +${r.balance_delta} vs 2xx ${r.ok_2xx} landed ${r.writes_landed}`;
  console.log(
    `r${r.round} ${r.config.padEnd(14)} ${r.call_id.padEnd(8)} c=${String(r.callers).padEnd(2)} ${fmt(r.rps).padStart(6)} req/s ` +
      `p50 ${r.p50_ms} p99 ${r.p99_ms} non2xx ${r.non2xx + r.errors} cpu ${r.cpu_s}s ${r.calls_per_cpu_s}/cpu-s busy ${r.machine_busy_cores}${extra}${w}`,
  );
}

// ---------------------------------------------------------------- the run

ensureWrk();
const startedAt = new Date();
const { initialised } = await setup();
const sizes = await bench`SELECT pg_size_pretty(pg_database_size(${BENCH_DB})) AS size, (SELECT count(*)::int FROM pgbench_accounts) AS accounts`;
console.log(`bench database: ${sizes[0].accounts} accounts, ${sizes[0].size}; aid pattern ${AID} (1-${aidMax}), start ${START} (1-${startMax})`);
{
  const home = mkdtempSync(join(tmpdir(), 'qag-oltp-'));
  const g = await startGateway({ ...CONFIGS[0].env, QUERYAPIGATE_HOME: home });
  try {
    secrets = await createObjects(g);
  } finally {
    await g.stop();
    rmSync(home, { recursive: true, force: true });
  }
}
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The code measured: the git commit, and whether src/ or workers/ had uncommitted changes (or a snapshot's COMMIT file). */
function codeVersion(): string {
  try {
    const head = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src', 'workers'], { encoding: 'utf8' }).trim();
    return dirty ? `${head} with uncommitted changes in src/ or workers/` : head;
  } catch {
    try {
      return `${readFileSync(join(ROOT, 'COMMIT'), 'utf8').trim().slice(0, 7)} (a git archive of it)`;
    } catch {
      return 'unknown';
    }
  }
}
const code = codeVersion();
const loadBefore = readFileSync('/proc/loadavg', 'utf8').trim();

type Unit = { label: string; go: (round: number) => Promise<void> };
const UNITS: Unit[] = [{ label: 'pgbench', go: pgbenchUnit }, ...CONFIGS.map((cfg) => ({ label: cfg.id, go: (round: number) => gatewayUnit(round, cfg) }))];
floor = await startFloor();
try {
  for (let round = 1; round <= rounds; round++) {
    const k = (round - 1) % UNITS.length;
    const order = UNITS.slice(k).concat(UNITS.slice(0, k));
    console.log(`\nround ${round}/${rounds}: ${order.map((u) => u.label).join(', ')}`);
    for (const u of order) await u.go(round);
  }
} finally {
  await floor.stop();
  await Promise.all([admin.end(), bench.end(), store.end()]);
}
for (const r of rows) {
  if (r.kind !== 'gateway') continue;
  const f = rows.find((x) => x.kind === 'floor' && x.round === r.round && x.floor_for === r.config && x.callers === r.callers);
  if (!f) continue;
  r.rps_vs_floor = round2(r.rps / f.rps);
  if (r.calls_per_cpu_s && f.calls_per_cpu_s) r.per_cpu_vs_floor = round2(r.calls_per_cpu_s / f.calls_per_cpu_s);
}
const finishedAt = new Date();
console.log(`rows so far in ${PARTIAL}`);
const loadAfter = readFileSync('/proc/loadavg', 'utf8').trim();

// ---------------------------------------------------------------- the tables

const cellRows = (config: string, callId: string, callers: number) => rows.filter((r) => r.config === config && r.call_id === callId && r.callers === callers);
/** Median (min-max) of per-round ratios to the floor measured next to the cell. */
const ratios = (xs: (number | undefined)[]) => {
  const v = xs.filter((x): x is number => x !== undefined);
  if (!v.length) return '-';
  return v.length === 1 ? `${v[0].toFixed(2)}x` : `${median(v).toFixed(2)}x (${Math.min(...v).toFixed(2)}-${Math.max(...v).toFixed(2)})`;
};
const pct = (xs: number[]) => {
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return lo === hi ? `${lo}%` : `${lo}-${hi}%`;
};

let table =
  '| Call | Concurrency | Executors | Metadata cache | req/s | p50 ms | p99 ms | non-2xx | gateway CPU-s | calls per gateway CPU-s | ' +
  'runs kept | store tx/call | req/s vs floor | per CPU-s vs floor | machine busy cores |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n';
for (const c of CALLS) {
  for (const callers of CALLERS) {
    for (const cfg of CONFIGS) {
      const rs = cellRows(cfg.id, c.id, callers);
      if (!rs.length) continue;
      const kept = rs[0].runs_kept_pct === null ? '-' : pct(rs.map((r) => r.runs_kept_pct!));
      const stx = rs[0].store_xacts_per_call === null ? '-' : fmt(median(rs.map((r) => r.store_xacts_per_call!)), 2);
      table +=
        `| ${c.call} | ${callers} | ${cfg.executors} | ${cfg.cache} | ${range(rs.map((r) => r.rps))} | ${range(
          rs.map((r) => r.p50_ms),
          2,
        )} | ` +
        `${range(
          rs.map((r) => r.p99_ms),
          2,
        )} | ${rs.reduce((a, r) => a + r.non2xx + r.errors, 0)} | ${fmt(median(rs.map((r) => r.cpu_s ?? 0)), 2)} | ` +
        `${range(rs.map((r) => r.calls_per_cpu_s ?? 0))} | ${kept} | ${stx} | ${ratios(rs.map((r) => r.rps_vs_floor))} | ` +
        `${ratios(rs.map((r) => r.per_cpu_vs_floor))} | ${fmt(median(rs.map((r) => r.machine_busy_cores)), 2)} |\n`;
    }
  }
}

// The seed's "one container" shape: calls down, configurations across, 32 callers, req/s.
let pivot =
  `| Call (32 callers, req/s) | ${CONFIGS.map((c) => `${c.executors}${c.cache === 'on' ? ', with the metadata cache' : ''}`).join(' | ')} |\n` +
  `|---|${CONFIGS.map(() => '---|').join('')}\n`;
for (const c of CALLS) {
  pivot += `| ${c.call} | ${CONFIGS.map((cfg) => {
    const rs = cellRows(cfg.id, c.id, 32);
    return rs.length ? fmt(median(rs.map((r) => r.rps))) : '-';
  }).join(' | ')} |\n`;
}
pivot += `| Lookup, floor (node:http + postgres.js), measured next to each | ${CONFIGS.map((cfg) => {
  const fs = rows.filter((r) => r.kind === 'floor' && r.floor_for === cfg.id && r.callers === 32);
  return fs.length ? fmt(median(fs.map((r) => r.rps))) : '-';
}).join(' | ')} |\n`;

// The seed's one-caller latency table for the plain lookup.
let single = '| One caller, plain lookup | req/s | p50 ms | p99 ms |\n|---|---|---|---|\n';
for (const cfg of CONFIGS) {
  const rs = cellRows(cfg.id, 'plain', 1);
  if (rs.length)
    single += `| ${cfg.executors}, cache ${cfg.cache} | ${range(rs.map((r) => r.rps))} | ${range(
      rs.map((r) => r.p50_ms),
      2,
    )} | ${range(
      rs.map((r) => r.p99_ms),
      2,
    )} |\n`;
}
{
  const rs = cellRows('floor', 'floor', 1);
  single += `| floor (not a product) | ${range(rs.map((r) => r.rps))} | ${range(
    rs.map((r) => r.p50_ms),
    2,
  )} | ${range(
    rs.map((r) => r.p99_ms),
    2,
  )} |\n`;
}

let floorTable =
  '| Call | Concurrency | req/s | p50 ms | p99 ms | non-2xx | floor CPU-s | calls per CPU-s | machine busy cores |\n|---|---|---|---|---|---|---|---|---|\n';
for (const callers of CALLERS) {
  const rs = cellRows('floor', 'floor', callers);
  floorTable +=
    `| Lookup, floor | ${callers} | ${range(rs.map((r) => r.rps))} | ${range(
      rs.map((r) => r.p50_ms),
      2,
    )} | ${range(
      rs.map((r) => r.p99_ms),
      2,
    )} | ` +
    `${rs.reduce((a, r) => a + r.non2xx + r.errors, 0)} | ${fmt(median(rs.map((r) => r.cpu_s ?? 0)), 2)} | ${range(rs.map((r) => r.calls_per_cpu_s ?? 0))} | ` +
    `${fmt(median(rs.map((r) => r.machine_busy_cores)), 2)} |\n`;
}

let dbTable = '| Workload | Clients | Transactions a second | Average latency | machine busy cores |\n|---|---|---|---|---|\n';
for (const clients of CALLERS) {
  const rs = pgRows.filter((r) => r.clients === clients);
  dbTable += `| Primary-key read (pgbench -S${clients > 1 ? ' -j 2' : ''}) | ${clients} | ${range(rs.map((r) => r.tps))} | ${range(
    rs.map((r) => r.latency_avg_ms),
    3,
  )} ms | ${fmt(median(rs.map((r) => r.machine_busy_cores)), 2)} |\n`;
}

const writes = rows.filter((r) => r.call_id === 'write');
let writeTable =
  '| Round | Configuration | Callers | 2xx deposits (wrk) | runs recorded, success | sum(abalance) change | landed |\n|---|---|---|---|---|---|---|\n';
for (const r of writes)
  writeTable += `| ${r.round} | ${r.config} | ${r.callers} | ${fmt(r.ok_2xx!)} | ${r.runs_success === null ? '-' : fmt(r.runs_success)} | ${fmt(r.balance_delta!)} | ${r.writes_landed ? 'yes' : 'NO'} |\n`;
const allLanded = writes.every((r) => r.writes_landed);

const cmd =
  `npm run build && node dist/bench/oltp.js${quick ? ' --quick' : ` --scale ${scale} --seconds ${seconds} --rounds ${rounds}`}` +
  `${values.executors !== '0,1' ? ` --executors ${values.executors}` : ''}${values.calls !== 'health,plain,governed,page,write' ? ` --calls ${values.calls}` : ''}` +
  `${historyLimit !== '1000000' ? ` --history-limit ${historyLimit}` : ''}`;
const md = `# OLTP on PostgreSQL: the seeds' tables on this machine (${today()})

Made with \`${cmd}\` on commit ${code}, ${startedAt.toISOString()} to ${finishedAt.toISOString()}
(load average before ${loadBefore.split(' ').slice(0, 3).join(' ')}, after ${loadAfter.split(' ').slice(0, 3).join(' ')}).

## Setup

- This project's machine: 2 cores, shared during the run with other work (other agents' tests), so
  read ratios within a table, not absolute figures. wrk, the gateway, PostgreSQL 15 and the store
  all share the 2 cores; no pinning.
- \`pgbench -i -s ${scale}\` in \`${BENCH_DB}\`: ${fmt(sizes[0].accounts)} accounts, ${sizes[0].size}${initialised ? ' (initialised by this run)' : ' (kept from an earlier run at the same scale; VACUUM ANALYZE first)'}.
  PostgreSQL at its defaults here (shared_buffers 128MB, max_connections 100).
- The gateway's store: \`${STORE_DB}\` in the same PostgreSQL, created fresh for this run
  (\`QUERYAPIGATE_DATABASE_URL\`). Saved queries, keys and the connection exactly as the seed:
  account (\`SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = :aid\`), account_page (the
  100-row page with the join, \`?start=…&page_size=100\`), deposit (\`UPDATE … SET abalance = abalance
  + :delta WHERE aid = :aid\`); keys plain, governed (allowed_tables pgbench_accounts, pgbench_branches;
  mask \`*.abalance\` hash) and writer (allow_writes, allowed_write_ops ["update"]).
- Random ids per request, oha-style patterns (each length equally likely, as the seed ran it):
  aid \`${AID}\` (1-${fmt(aidMax)}), page start \`${START}\` (1-${fmt(startMax)}), delta fixed at 1.
- Every gateway ran with \`QUERYAPIGATE_ALLOW_WRITES=1\` and \`QUERYAPIGATE_HISTORY_LIMIT=${historyLimit}\`;
  executors inline (\`QUERYAPIGATE_WORKERS=0\`) or pooled (\`QUERYAPIGATE_WORKERS=N\`), metadata cache off
  (\`QUERYAPIGATE_METADATA_CACHE_TTL=0\`) or on (\`=5\`); everything else at its default (pool size 8).
- **One gateway process at a time.** A round starts one configuration's process, measures the floor
  (1 and 32 callers) and then all that configuration's cells, stops it, then the next; pgbench is one
  more slot. The order rotates each round. (Four gateway processes at once would hold up to ~31
  PostgreSQL connections each against max_connections 100.) The floor process runs all along.
- Each cell: a ${warmup} s warm-up, then ${seconds} s measured with wrk (\`bench/load.ts\`). Each figure is the
  median of ${rounds} round${rounds > 1 ? 's' : ''}${rounds > 1 ? ', with the min-max in brackets' : ''}.
- **Gateway CPU-s**: the gateway process's utime+stime over the measured window (all its threads:
  acceptor, executors, recorder). **Calls per gateway CPU-s** = calls / that.
- **Runs kept**${countRuns ? '' : " (not counted where the history limit is low enough to trim a cell's runs)"}: history rows the store holds for the cell / calls wrk counted. The history is
  emptied (TRUNCATE) after the warm-up, the recorder is flushed (through \`GET /api/v1/history\`) until
  the count stops moving. The limit per version is raised to 1,000,000 (the most
  \`QUERYAPIGATE_HISTORY_LIMIT\` accepts) so nothing is trimmed: the default 50 would trim almost
  everything, and the recorder's own counters (recorded, dropped, failed) are not exposed over HTTP.
  wrk does not count the calls still in flight when it stops, so a value a little over 100% means
  every run was kept. Note that with a high limit the recorder writes every run into history (multi-row
  upserts); at the default it writes at most 50 per version per flush, so these cells pay more for
  recording than a default server does.
- **Store tx/call**: transactions committed in the store database (pg_stat_database) per call over the
  window, as the seed counted them; includes the recorder's batches and this bench's own few queries.
  Approximate: backends report their counts at most once a second (the bench waits 2 s either side).
- **Machine busy cores**: the whole machine's busy CPU (/proc/stat, of 2) over the measured window:
  the gateway, wrk, PostgreSQL and whatever else ran then. Near 2.0 means the cell was CPU-bound on the
  machine, and anything else running took from it.
- **vs floor**: the gateway's req/s (and calls per CPU-s) over the floor's at the same concurrency,
  measured minutes apart at most (the floor right before the configuration's cells, same round);
  the median of the rounds' ratios with their min-max.
  The floor is \`bench/floor.ts\`, not a product: node:http + postgres.js, one process, the same lookup,
  8 clients with max: 1 used in turn, no key, no governance, no record.

## Through the gateway

${table}
${pivot}
${single}
## The floor: node:http + postgres.js (not a product)

${floorTable}
## The database on its own

pgbench against the same database, in the same rounds, for scale:

${dbTable}
## The writes landed

Each write cell's change in sum(abalance) against its 2xx deposits (delta=1 each) and its recorded
successful runs. "Landed" means the change equals the recorded runs and is at least the 2xx count
and at most that plus the callers (the calls wrk stopped counting while in flight).
${allLanded ? 'Every write cell landed.' : '**Not every write cell landed: see the rows marked NO.**'}

${writeTable}${
  failures.length
    ? `\n## The gateway process exited during a cell\n\nThe cell was run again on a new process${failures.some((f) => !f.retried) ? ' (twice at most: rows marked "not retried" are missing)' : ''}.\n\n${failures
        .map(
          (f) =>
            `- ${f.at}: round ${f.round}, ${f.config}, ${f.call} at ${f.callers} caller(s)${f.retried ? '' : ', not retried'}: ${f.error}. The end of its output:\n\n\`\`\`\n${f.output_tail}\n\`\`\`\n`,
        )
        .join('\n')}`
    : ''
}${notes.length ? `\n## Notes from the run\n\n${notes.map((n) => `- ${n}`).join('\n')}\n` : ''}`;
rmSync(PARTIAL, { force: true });
console.log(`\n${md}\nwritten to ${writeResults(runName, [...rows, ...pgRows, ...failures.map((f) => ({ kind: 'failure', ...f }))], md)}`);
