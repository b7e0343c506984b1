// The gateway next to its peers on one lookup: pgbench's accounts by aid on PostgreSQL. In the same
// interleaved rounds: the database alone (pgbench -S, prepared), the hand-written floor (bench/floor.ts,
// not a product; floor-batch: the same with its threads under SCHED_BATCH, as the gateway's), this gateway inline (QUERYAPIGATE_WORKERS=0) and pooled (=1), Platformatic DB 2
// (REST) and PostGraphile 4.14 (GraphQL). Then the same lookup on MariaDB: the gateway inline next to
// its own floor (bench/floorMysql.ts). The peers are installed from bench/peers/package-lock.json with
// `npm ci` into a folder cached by the lock's hash, never into the project.
//
//   npm run build && node dist/bench/peers.js [--seconds 10] [--rounds 3] [--callers 1,32]
//        [--only pgbench,floor,floor-batch,inline,pooled,platformatic,postgraphile,floor-my,inline-my] [--drift] [--name peers]
//
// One server at a time: each cell starts its server, runs every caller count (a warm-up, then the
// measured window), reads its RSS, stops it. The order rotates from round to round. Ratios to the
// floor and to Platformatic are taken within each round. --drift adds, after the rounds, a 60 s run of
// each cell at the highest caller count whose last 10 s are compared with its first 10 s.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import postgres from 'postgres';
import { ensureWrk, runLoad, type LoadOptions, type LoadResult } from './load.js';
import { fmt, freshDatabase, median, range, countEvents, spawnListening, startGateway, today, writeResults, type Listening } from './gateway.js';
import { installedVersion, installLocked, runCommand as run } from './locked.js';
import { treeCpuSeconds, treeRssMiB } from './processTree.js';

const ALL_CELLS = ['pgbench', 'floor', 'floor-batch', 'inline', 'pooled', 'platformatic', 'postgraphile', 'floor-my', 'inline-my'] as const;
type CellId = (typeof ALL_CELLS)[number];

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    callers: { type: 'string', default: '1,32' },
    only: { type: 'string', default: ALL_CELLS.join(',') },
    drift: { type: 'boolean', default: false },
    name: { type: 'string', default: 'peers' },
  },
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const CALLERS = values.callers!.split(',').map((s) => Number(s.trim()));
for (const [k, v] of Object.entries({ seconds, rounds })) {
  if (!(Number.isInteger(v) && v >= 1)) throw new Error(`--${k}: a whole number >= 1 expected`);
}
if (!CALLERS.every((c) => Number.isInteger(c) && c >= 1)) throw new Error('--callers: whole numbers >= 1, comma-separated');
const only = values.only!.split(',').map((s) => s.trim());
for (const o of only) if (!(ALL_CELLS as readonly string[]).includes(o)) throw new Error(`--only: no cell ${o} (cells: ${ALL_CELLS.join(',')})`);
const WARMUP = 2;
/** The pause between a cell's warm-up and its window, the same for every cell (a gateway's event count waits in it). */
const SETTLE_MS = 1000;
const DRIFT_WINDOWS = 6; // 6 x 10 s back to back: the 60 s cell
const DRIFT_WINDOW_S = 10;

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PEERS_SRC = join(ROOT, 'bench', 'peers');
const FLOOR = fileURLToPath(new URL('./floor.js', import.meta.url));
const FLOOR_MY = fileURLToPath(new URL('./floorMysql.js', import.meta.url));
const PG = 'postgres://postgres@127.0.0.1:5432';
const BENCH_DB = 'qag_oltp_bench';
const STORE_DB = 'qag_peers_store';
const BENCH_URL = `${PG}/${BENCH_DB}`;
const STORE_URL = `${PG}/${STORE_DB}`;
const MY_DB = 'qag_bench_my';
const MY_URL = `mysql://root@127.0.0.1:3306/${MY_DB}`;
const MY_ROWS = 1_000_000;
const SCALE = 10;

// Random aids as bench/oltp.ts draws them at scale 10: 1 to 999,999, each length equally likely.
const AID = '[1-9][0-9]{0,5}';
const LUA_AID = `local n = math.random(1, 6)
  local aid = math.random(1, 9)
  for _ = 2, n do aid = aid * 10 + math.random(0, 9) end`;

// ---------------------------------------------------------------- the databases

const admin = postgres(`${PG}/postgres`, { max: 1, onnotice: () => undefined });

async function setupPostgres(): Promise<string> {
  const [exists] = await admin`SELECT count(*)::int AS n FROM pg_database WHERE datname = ${BENCH_DB}`;
  if (!exists.n) await admin.unsafe(`CREATE DATABASE ${BENCH_DB}`);
  const bench = postgres(BENCH_URL, { max: 1, onnotice: () => undefined });
  try {
    let branches = -1;
    try {
      branches = (await bench`SELECT count(*)::int AS n FROM pgbench_branches`)[0].n;
    } catch {
      // not initialised yet
    }
    let how = `kept from an earlier run at scale ${SCALE}`;
    if (branches !== SCALE) {
      console.log(`pgbench -i -s ${SCALE} ${BENCH_DB}`);
      await run('pgbench', ['-h', '127.0.0.1', '-U', 'postgres', '-i', '-q', '-s', String(SCALE), BENCH_DB]);
      how = `initialised by this run (pgbench -i -s ${SCALE} -q)`;
    }
    const [s] = await bench`SELECT pg_size_pretty(pg_database_size(${BENCH_DB})) AS size, (SELECT count(*)::int FROM pgbench_accounts) AS n`;
    await freshDatabase(admin, STORE_DB);
    return `${fmt(s.n)} accounts, ${s.size}, ${how}`;
  } finally {
    await bench.end();
  }
}

async function setupMariadb(): Promise<string> {
  const c = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root', multipleStatements: false });
  try {
    await c.query(`CREATE DATABASE IF NOT EXISTS ${MY_DB}`);
    await c.query(`USE ${MY_DB}`);
    await c.query(
      'CREATE TABLE IF NOT EXISTS pgbench_accounts (aid INT NOT NULL PRIMARY KEY, bid INT NOT NULL, abalance INT NOT NULL, filler CHAR(84)) ENGINE=InnoDB',
    );
    const [[r]] = (await c.query('SELECT count(*) AS n, coalesce(max(aid), 0) AS mx FROM pgbench_accounts')) as unknown as [{ n: number; mx: number }[]];
    if (Number(r.n) === MY_ROWS && Number(r.mx) === MY_ROWS) return `${fmt(MY_ROWS)} rows, kept from an earlier run`;
    console.log(`filling ${MY_DB}.pgbench_accounts with ${fmt(MY_ROWS)} rows`);
    await c.query('TRUNCATE pgbench_accounts');
    // MariaDB's SEQUENCE engine: the rows pgbench would make (100,000 accounts per branch, balance 0).
    await c.query(`INSERT INTO pgbench_accounts SELECT seq, (seq - 1) DIV 100000 + 1, 0, '' FROM seq_1_to_${MY_ROWS}`);
    await c.query('ANALYZE TABLE pgbench_accounts');
    return `${fmt(MY_ROWS)} rows, made by this run`;
  } finally {
    await c.end();
  }
}

// ---------------------------------------------------------------- the cells

const ADMIN_KEY = 'bench-admin';
let plainKey = '';
let peersDir = '';

/** A gateway's server can count the runs in its store's event log, once its recorder has written them all. */
type Server = Listening & { events?: () => Promise<number> };

/** One server per cell run: started, loaded at each caller count, measured, stopped. */
interface Cell {
  id: CellId;
  label: string;
  /** The floor its req/s is divided by within a round. */
  floor: 'floor' | 'floor-my';
  db: 'PostgreSQL' | 'MariaDB';
  start(): Promise<Server>;
  load(url: string): Omit<LoadOptions, 'connections' | 'duration'>;
  /** One call before the load: a setup mistake fails loudly, not as non-2xx counts. */
  smoke(url: string): Promise<void>;
}

// Every run is recorded in the store's event log, and the bench counts them there (runs kept), as the
// seeds count them; the run history keeps its default newest 50 a version.
const GATEWAY_ENV = {
  QUERYAPIGATE_DATABASE_URL: STORE_URL,
  QUERYAPIGATE_METADATA_CACHE_TTL: '5',
};

async function expect200(res: Response, what: string, check: (body: string) => boolean): Promise<void> {
  const body = await res.text();
  if (res.status !== 200 || !check(body)) throw new Error(`smoke ${what}: ${res.status} ${body.slice(0, 500)}`);
}
const hasAid7 = (b: string) => /"aid"\s*:\s*7\b/.test(b);

function gatewayCell(id: CellId, label: string, workers: string, query: string, floor: Cell['floor'], db: Cell['db']): Cell {
  return {
    id,
    label,
    floor,
    db,
    async start() {
      const home = mkdtempSync(join(tmpdir(), 'qag-peers-'));
      const g = await startGateway({ ...GATEWAY_ENV, QUERYAPIGATE_WORKERS: workers, QUERYAPIGATE_HOME: home }, ADMIN_KEY);
      return {
        ...g,
        async events() {
          await g.api('GET', '/api/v1/history?limit=1'); // a history read writes every run made before it
          return countEvents(STORE_DB);
        },
        async stop() {
          await g.stop();
          rmSync(home, { recursive: true, force: true });
        },
      };
    },
    load: (url) => ({ randRegexUrl: `${url}/q/${query}\\?aid=${AID}`, headers: { 'X-API-Key': plainKey } }),
    smoke: async (url) => expect200(await fetch(`${url}/q/${query}?aid=7`, { headers: { 'X-API-Key': plainKey } }), id, hasAid7),
  };
}

const GRAPHQL = 'query($aid:Int!){pgbenchAccountByAid(aid:$aid){aid bid abalance}}';
const graphqlBody = (aidLua: string) => `'{"query":"${GRAPHQL.replace(/"/g, '\\"')}","variables":{"aid":' .. ${aidLua} .. '}}'`;

/** The hand-written floor (bench/floor.ts); `extra`: its further arguments. */
function floorCell(id: 'floor' | 'floor-batch', label: string, extra: string[] = []): Cell {
  return {
    id,
    label,
    floor: 'floor',
    db: 'PostgreSQL',
    start: () => spawnListening([FLOOR, BENCH_URL, '8', ...extra]),
    load: (url) => ({ randRegexUrl: `${url}/q/account\\?aid=${AID}` }),
    smoke: async (url) => expect200(await fetch(`${url}/q/account?aid=7`), id, hasAid7),
  };
}

const CELLS: Cell[] = [
  floorCell('floor', 'floor: node:http + postgres.js (not a product)'),
  // The gateway puts its threads under SCHED_BATCH (QUERYAPIGATE_BATCH_SCHEDULING); so does this floor, for comparing like with like.
  floorCell('floor-batch', 'floor under SCHED_BATCH, as the gateway runs (not a product)', ['batch']),
  gatewayCell('inline', 'QueryAPIGate, inline (WORKERS=0)', '0', 'account', 'floor', 'PostgreSQL'),
  gatewayCell('pooled', 'QueryAPIGate, pooled (WORKERS=1)', '1', 'account', 'floor', 'PostgreSQL'),
  {
    id: 'platformatic',
    label: 'Platformatic DB (REST, GET /pgbenchAccounts/:aid)',
    floor: 'floor',
    db: 'PostgreSQL',
    start: () => spawnListening([join(peersDir, 'platformatic.mjs'), BENCH_URL]),
    // fields: the same three columns the others answer (without it, the row's filler too).
    load: (url) => ({ randRegexUrl: `${url}/pgbenchAccounts/${AID}\\?fields=aid,bid,abalance` }),
    smoke: async (url) => expect200(await fetch(`${url}/pgbenchAccounts/7?fields=aid,bid,abalance`), 'platformatic', hasAid7),
  },
  {
    id: 'postgraphile',
    label: 'PostGraphile (GraphQL POST, pgbenchAccountByAid)',
    floor: 'floor',
    db: 'PostgreSQL',
    start: () => spawnListening([join(peersDir, 'postgraphile.mjs'), BENCH_URL, 'public']),
    // wrk.format with a fresh header table per request: it writes Content-Length into the table it is given.
    load: (url) => ({
      url: `${url}/graphql`,
      luaRequest: `function request()
  ${LUA_AID}
  return wrk.format("POST", "/graphql", { ["Content-Type"] = "application/json" }, ${graphqlBody('aid')})
end`,
    }),
    smoke: async (url) =>
      expect200(
        await fetch(`${url}/graphql`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ query: GRAPHQL, variables: { aid: 7 } }),
        }),
        'postgraphile',
        (b) => hasAid7(b) && !b.includes('"errors"'),
      ),
  },
  {
    id: 'floor-my',
    label: 'floor: node:http + mysql2 (not a product)',
    floor: 'floor-my',
    db: 'MariaDB',
    start: () => spawnListening([FLOOR_MY, MY_URL, '10']),
    load: (url) => ({ randRegexUrl: `${url}/q/account\\?aid=${AID}` }),
    smoke: async (url) => expect200(await fetch(`${url}/q/account?aid=7`), 'floor-my', hasAid7),
  },
  gatewayCell('inline-my', 'QueryAPIGate, inline (WORKERS=0)', '0', 'my_account', 'floor-my', 'MariaDB'),
];

async function createObjects(): Promise<string> {
  const home = mkdtempSync(join(tmpdir(), 'qag-peers-'));
  const g = await startGateway({ ...GATEWAY_ENV, QUERYAPIGATE_HOME: home }, ADMIN_KEY);
  try {
    await g.api('POST', '/api/v1/connections', {
      name: 'oltp',
      db: 'postgres',
      host: '127.0.0.1',
      port: 5432,
      database: BENCH_DB,
      user: 'postgres',
      active: true,
    });
    await g.api('POST', '/api/v1/connections', { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: MY_DB, user: 'root', active: true });
    const params = { aid: { type: 'int', required: true } };
    const sql = 'SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = :aid';
    await g.api('POST', '/api/v1/queries', { name: 'account', sql, parameters: params, description: 'One account', connection_name: 'oltp', publish: true });
    await g.api('POST', '/api/v1/queries', { name: 'my_account', sql, parameters: params, description: 'One account', connection_name: 'my', publish: true });
    const k = await g.api<{ secret: string }>('POST', '/api/v1/api-keys', { name: 'plain', queries: ['account', 'my_account'], connections: [] });
    return k.secret;
  } finally {
    await g.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- measuring

type Row = LoadResult & {
  kind: 'cell';
  round: number;
  cell: CellId;
  label: string;
  db: string;
  calls_per_cpu_s: number | null;
  rss_after_mib: number;
  /** Runs in the store's event log from the window / calls wrk counted; null for a server that records none. */
  runs_kept: number | null;
  rps_vs_floor?: number;
  per_cpu_vs_floor?: number;
  rps_vs_platformatic?: number;
};
type PgbenchRow = { kind: 'pgbench'; round: number; callers: number; threads: number; seconds: number; tps: number; latency_avg_ms: number };
type DriftRow = {
  kind: 'drift';
  cell: CellId;
  callers: number;
  window: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  non2xx: number;
  errors: number;
  cpu_s: number | null;
  rss_mib: number;
};

const rows: Row[] = [];
const pgRows: PgbenchRow[] = [];
const driftRows: DriftRow[] = [];
const notes: string[] = [];
const PARTIAL = join(tmpdir(), `qag-${values.name}-${process.pid}.partial.jsonl`);
const keep = (r: object) => writeFileSync(PARTIAL, `${JSON.stringify(r)}\n`, { flag: 'a' });

function noteOutput(cell: CellId, round: number, s: Listening): void {
  const bad = s
    .output()
    .split('\n')
    .filter((l) => /error|warn|fail/i.test(l) && !/EBADENGINE/.test(l));
  if (bad.length) notes.push(`round ${round}, ${cell}: its output had ${bad.length} error/warning line(s), e.g. ${JSON.stringify(bad[0].slice(0, 300))}`);
}

async function cellUnit(round: number, cell: Cell): Promise<void> {
  const s = await cell.start();
  try {
    await cell.smoke(s.url);
    for (const callers of CALLERS) {
      const base = { ...cell.load(s.url), connections: callers };
      await runLoad({ ...base, duration: WARMUP });
      // Every cell pauses as long: a gateway's warm-up runs reach the event log before the count.
      const t0 = performance.now();
      const events0 = s.events ? await s.events() : 0;
      await sleep(Math.max(0, SETTLE_MS - (performance.now() - t0)));
      const r = await runLoad({ ...base, duration: seconds, cpuSeconds: () => treeCpuSeconds(s.pid) });
      const rss = treeRssMiB(s.pid);
      const runsKept = s.events ? ((await s.events()) - events0) / r.requests : null;
      const row: Row = {
        ...r,
        kind: 'cell',
        round,
        cell: cell.id,
        label: cell.label,
        db: cell.db,
        calls_per_cpu_s: r.cpu_s ? Math.round(r.requests / r.cpu_s) : null,
        rss_after_mib: rss,
        runs_kept: runsKept === null ? null : Math.round(runsKept * 10_000) / 10_000,
      };
      rows.push(row);
      keep(row);
      console.log(
        `r${round} ${cell.id.padEnd(13)} c=${String(callers).padEnd(3)} ${fmt(r.rps).padStart(7)} req/s p50 ${r.p50_ms} p99 ${r.p99_ms} ` +
          `non2xx ${r.non2xx + r.errors} cpu ${r.cpu_s}s ${row.calls_per_cpu_s}/cpu-s rss ${row.rss_after_mib} MiB` +
          (row.runs_kept === null ? '' : ` runs kept ${(row.runs_kept * 100).toFixed(2)}%`),
      );
    }
  } finally {
    noteOutput(cell.id, round, s);
    await s.stop();
  }
}

async function pgbenchUnit(round: number): Promise<void> {
  for (const callers of CALLERS) {
    const threads = Math.min(callers, 2);
    const out = await run('pgbench', [
      ...['-h', '127.0.0.1', '-U', 'postgres', '-n', '-S', '-M', 'prepared'],
      ...['-c', String(callers), '-j', String(threads), '-T', String(seconds), BENCH_DB],
    ]);
    const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(out);
    const lat = /latency average = ([\d.]+) ms/.exec(out);
    if (!tps || !lat) throw new Error(`pgbench output not understood:\n${out}`);
    const row: PgbenchRow = { kind: 'pgbench', round, callers, threads, seconds, tps: Number(tps[1]), latency_avg_ms: Number(lat[1]) };
    pgRows.push(row);
    keep(row);
    console.log(`r${round} pgbench       c=${String(callers).padEnd(3)} ${fmt(row.tps).padStart(7)} tps latency avg ${row.latency_avg_ms} ms`);
  }
}

/** The 60 s cell: six 10 s windows back to back on one server, after the warm-up. */
async function driftUnit(cell: Cell, callers: number): Promise<void> {
  const s = await cell.start();
  try {
    await cell.smoke(s.url);
    const base = { ...cell.load(s.url), connections: callers };
    await runLoad({ ...base, duration: WARMUP });
    for (let w = 1; w <= DRIFT_WINDOWS; w++) {
      const r = await runLoad({ ...base, duration: DRIFT_WINDOW_S, cpuSeconds: () => treeCpuSeconds(s.pid) });
      const row: DriftRow = {
        kind: 'drift',
        cell: cell.id,
        callers,
        window: w,
        rps: r.rps,
        p50_ms: r.p50_ms,
        p99_ms: r.p99_ms,
        non2xx: r.non2xx,
        errors: r.errors,
        cpu_s: r.cpu_s,
        rss_mib: treeRssMiB(s.pid),
      };
      driftRows.push(row);
      keep(row);
      console.log(`drift ${cell.id} c=${callers} window ${w}: ${fmt(r.rps)} req/s p99 ${r.p99_ms} rss ${row.rss_mib} MiB`);
    }
  } finally {
    noteOutput(cell.id, 0, s);
    await s.stop();
  }
}

// ---------------------------------------------------------------- the run

function codeVersion(): string {
  try {
    const head = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src', 'workers'], { encoding: 'utf8' }).trim();
    return dirty ? `${head} with uncommitted changes in src/ or workers/` : head;
  } catch {
    return 'unknown';
  }
}

const loadavg = () => readFileSync('/proc/loadavg', 'utf8').trim().split(' ').slice(0, 3).join(' ');
const round2 = (n: number) => Math.round(n * 100) / 100;

ensureWrk();
const startedAt = new Date();
const loadBefore = loadavg();
const cellsRun = CELLS.filter((c) => only.includes(c.id));
const needsPeers = cellsRun.some((c) => c.id === 'platformatic' || c.id === 'postgraphile');
const pgSetup = await setupPostgres();
const mySetup = cellsRun.some((c) => c.db === 'MariaDB') ? await setupMariadb() : 'not run';
if (needsPeers) peersDir = await installLocked(PEERS_SRC, 'queryapigate-peers', ['platformatic.mjs', 'postgraphile.mjs']);
const versions = needsPeers
  ? `@platformatic/db ${installedVersion(peersDir, '@platformatic/db')}, postgraphile ${installedVersion(peersDir, 'postgraphile')}`
  : 'not run';
plainKey = await createObjects();

type Unit = { label: string; go: (round: number) => Promise<void> };
const UNITS: Unit[] = [
  ...(only.includes('pgbench') ? [{ label: 'pgbench', go: pgbenchUnit }] : []),
  ...cellsRun.map((c) => ({ label: c.id, go: (round: number) => cellUnit(round, c) })),
];
try {
  for (let round = 1; round <= rounds; round++) {
    const k = (round - 1) % UNITS.length;
    const order = UNITS.slice(k).concat(UNITS.slice(0, k));
    console.log(`\nround ${round}/${rounds}: ${order.map((u) => u.label).join(', ')}`);
    for (const u of order) await u.go(round);
  }
  if (values.drift) for (const c of cellsRun) await driftUnit(c, Math.max(...CALLERS));
} finally {
  await admin.end();
}
const finishedAt = new Date();
const loadAfter = loadavg();

for (const r of rows) {
  const same = (id: CellId) => rows.find((x) => x.cell === id && x.round === r.round && x.callers === r.callers);
  const f = same(CELLS.find((c) => c.id === r.cell)!.floor);
  if (f && r.cell !== f.cell) {
    r.rps_vs_floor = round2(r.rps / f.rps);
    if (r.calls_per_cpu_s && f.calls_per_cpu_s) r.per_cpu_vs_floor = round2(r.calls_per_cpu_s / f.calls_per_cpu_s);
  }
  const p = same('platformatic');
  if (p && r.db === 'PostgreSQL' && r.cell !== 'platformatic') r.rps_vs_platformatic = round2(r.rps / p.rps);
}

// ---------------------------------------------------------------- the tables

/** Median (min-max) of per-round ratios. */
const ratios = (xs: (number | undefined)[]) => {
  const v = xs.filter((x): x is number => x !== undefined);
  if (!v.length) return '-';
  return v.length === 1 ? `${v[0].toFixed(2)}x` : `${median(v).toFixed(2)}x (${Math.min(...v).toFixed(2)}-${Math.max(...v).toFixed(2)})`;
};

/** Runs kept, the lowest round's share (the one that matters); '-' for a server that records none. */
const kept = (rs: Row[]) => {
  const ks = rs.map((r) => r.runs_kept).filter((k) => k !== null);
  return ks.length ? `${(Math.min(...ks) * 100).toFixed(2)}%${ks.length > 1 ? ' (lowest)' : ''}` : '-';
};

function cellTable(db: Cell['db']): string {
  const peers = db === 'PostgreSQL';
  let t =
    `| Cell | Callers | req/s | p50 ms | p99 ms | non-2xx + errors | server CPU-s | calls per CPU-s | RSS after MiB | runs kept | req/s vs floor | calls per CPU-s vs floor |${peers ? ' req/s vs Platformatic |' : ''}\n` +
    `|---|---|---|---|---|---|---|---|---|---|---|---|${peers ? '---|' : ''}\n`;
  for (const callers of CALLERS) {
    for (const c of cellsRun.filter((x) => x.db === db)) {
      const rs = rows.filter((r) => r.cell === c.id && r.callers === callers);
      if (!rs.length) continue;
      t +=
        `| ${c.label} | ${callers} | ${range(rs.map((r) => r.rps))} | ${range(
          rs.map((r) => r.p50_ms),
          2,
        )} | ${range(
          rs.map((r) => r.p99_ms),
          2,
        )} | ` +
        `${rs.reduce((a, r) => a + r.non2xx + r.errors, 0)} | ${fmt(median(rs.map((r) => r.cpu_s ?? 0)), 2)} | ${range(rs.map((r) => r.calls_per_cpu_s ?? 0))} | ` +
        `${range(
          rs.map((r) => r.rss_after_mib),
          1,
        )} | ${kept(rs)} | ${ratios(rs.map((r) => r.rps_vs_floor))} | ${ratios(rs.map((r) => r.per_cpu_vs_floor))} |` +
        `${peers ? ` ${ratios(rs.map((r) => r.rps_vs_platformatic))} |` : ''}\n`;
    }
  }
  return t;
}

let pgbenchTable = '| pgbench -S -M prepared | Clients | Transactions a second | Average latency ms |\n|---|---|---|---|\n';
for (const callers of CALLERS) {
  const rs = pgRows.filter((r) => r.callers === callers);
  if (rs.length)
    pgbenchTable += `| the database alone (-j ${rs[0].threads}) | ${callers} | ${range(rs.map((r) => r.tps))} | ${range(
      rs.map((r) => r.latency_avg_ms),
      3,
    )} |\n`;
}

let driftTable = '';
if (driftRows.length) {
  driftTable =
    '| Cell | Callers | req/s, first 10 s | req/s, last 10 s | last / first | p99 ms first, last | calls per CPU-s first, last | RSS MiB first, last | non-2xx + errors |\n|---|---|---|---|---|---|---|---|---|\n';
  for (const c of cellsRun) {
    const ws = driftRows.filter((r) => r.cell === c.id);
    if (!ws.length) continue;
    const a = ws[0];
    const z = ws[ws.length - 1];
    const perCpu = (w: DriftRow) => (w.cpu_s ? fmt((w.rps * DRIFT_WINDOW_S) / w.cpu_s) : '-');
    driftTable +=
      `| ${c.label} | ${a.callers} | ${fmt(a.rps)} | ${fmt(z.rps)} | ${(z.rps / a.rps).toFixed(2)}x | ${fmt(a.p99_ms, 2)}, ${fmt(z.p99_ms, 2)} | ` +
      `${perCpu(a)}, ${perCpu(z)} | ${fmt(a.rss_mib, 1)}, ${fmt(z.rss_mib, 1)} | ${ws.reduce((s, w) => s + w.non2xx + w.errors, 0)} |\n`;
  }
}

const args = process.argv.slice(2).join(' ');
const md = `# The gateway next to its peers: one lookup by primary key (${today()})

Made with \`npm run build && node dist/bench/peers.js${args ? ` ${args}` : ''}\` on commit ${codeVersion()},
${startedAt.toISOString()} to ${finishedAt.toISOString()}. **Load average before ${loadBefore}, after ${loadAfter}**
(1, 5, 15 minutes): the machine has 2 cores, shared by wrk, the servers and the databases, and by any
other work that ran meanwhile (the load average shows it), so read the ratios within a round, not the absolute figures.

## How it was made

- The lookup: \`SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = ?\` by a random aid
  \`${AID}\` (1-999,999, each length equally likely, as bench/oltp.ts draws them), one row per call.
- PostgreSQL: \`${BENCH_DB}\`, ${pgSetup}. MariaDB: \`${MY_DB}.pgbench_accounts\`, ${mySetup}
  (aid INT primary key, bid, abalance, filler CHAR(84), InnoDB, filled from the SEQUENCE engine).
- **One server at a time.** Each cell starts its server, makes one call to check the answer, then for
  each caller count (${CALLERS.join(', ')}) a ${WARMUP} s warm-up and a ${seconds} s measured window with wrk
  (\`bench/load.ts\`, 2 threads at most), reads the RSS and stops the server. ${rounds} round${rounds > 1 ? 's' : ''}; the order of
  the cells rotates from round to round. Each figure is the median of the rounds${rounds > 1 ? ' with the min-max in brackets' : ''};
  the ratios are taken within each round (the cell over the floor, or over Platformatic, at the same
  callers in the same round), then their median and min-max.
- **Server CPU-s**: utime+stime of the server's process and its descendants (all threads) over the
  measured window, from /proc; **calls per CPU-s** = calls / that. **RSS after**: VmRSS of the same
  processes right after the last window of that caller count. wrk and the database are not counted.
- **p50, p99**: wrk's, which it corrects for coordinated omission once the window closes: a call that took longer
  than twice a connection's mean interval between calls counts as well the calls that connection held back meanwhile,
  one an interval. So the p99 follows the window's longest stalls: at one caller one stall of 80 ms adds about 250
  calls, at 32 callers one of the whole server adds as many on every connection.
- **pgbench**: \`pgbench -n -S -M prepared -c N -j min(N,2) -T ${seconds}\`, the database alone, in the same rounds.
- **floor** (\`bench/floor.ts\`, not a product): node:http + postgres.js, 8 clients with max: 1 used in
  turn, the same lookup, no key, no record. **floor-batch**: the same, every thread of it under SCHED_BATCH (as the
  gateway runs its own by default, \`QUERYAPIGATE_BATCH_SCHEDULING\`). **floor-my** (\`bench/floorMysql.ts\`, not a product):
  node:http + mysql2, one pool of 10 connections, \`pool.execute\`.
- **QueryAPIGate**: this commit's \`dist/src/main.js serve\`, a saved query \`account\` (and \`my_account\`
  on MariaDB) called as \`GET /q/account?aid=N\` with a plain key (no governance), the store in a
  fresh PostgreSQL database \`${STORE_DB}\`, \`QUERYAPIGATE_METADATA_CACHE_TTL=5\`,
  \`QUERYAPIGATE_WORKERS=0\` (inline) or \`=1\` (pooled); everything else at its defaults (the run history
  keeps the newest 50 runs a version; every run goes to the event log).
- **Runs kept** (the gateway's cells): runs its store's event log gained over the window / calls wrk counted,
  the lowest round's. Each count follows a \`GET /api/v1/history\`, which has the recorder write every run made
  before it; the calls still in flight when wrk's window closed are answered and recorded after it, so a count can pass
  100% by up to the callers. Every cell, gateway or not, pauses ${SETTLE_MS / 1000} s between its warm-up and its window (the gateway's count waits in it).
- **Platformatic DB** (${versions.split(', ')[0] ?? ''}): \`bench/peers/platformatic.mjs\`, its \`buildServer\` on the
  same database, REST (OpenAPI) on, GraphQL and events off, no authorization rules, logger at
  \`warn\` (its default \`info\` logs every request); called as \`GET /pgbenchAccounts/N?fields=aid,bid,abalance\`, the primary key route with the same three columns.
- **PostGraphile** (${versions.split(', ')[1] ?? ''}): \`bench/peers/postgraphile.mjs\`, library mode on node:http with the
  options of its production page (no query log, no GraphiQL, dynamic JSON); called as \`POST /graphql\`
  with \`${GRAPHQL}\` and a random aid in the variables (a wrk Lua script builds each body).
- The peers are installed by the bench from \`bench/peers/package-lock.json\` (\`npm ci --ignore-scripts --prefix\` a
  temporary copy, kept in \`~/.cache/queryapigate-peers/<lock hash>\`), never into the project. Node ${process.version}.

${
  rows.some((r) => r.db === 'PostgreSQL') || pgRows.length
    ? `## PostgreSQL

${rows.some((r) => r.db === 'PostgreSQL') ? `${cellTable('PostgreSQL')}\n` : ''}${pgRows.length ? pgbenchTable : ''}`
    : ''
}${
  rows.some((r) => r.db === 'MariaDB')
    ? `
## MariaDB

${cellTable('MariaDB')}`
    : ''
}${
  driftTable
    ? `
## Drift: a 60 s cell, its last 10 s against its first 10 s

Reported, not asserted: one server per cell, a ${WARMUP} s warm-up, then six 10 s wrk windows back to back.

${driftTable}`
    : ''
}${notes.length ? `\n## Notes from the run\n\n${notes.map((n) => `- ${n}`).join('\n')}\n` : ''}`;
rmSync(PARTIAL, { force: true });
console.log(`\n${md}\nwritten to ${writeResults(values.name!, [...rows, ...pgRows, ...driftRows], md)}`);
