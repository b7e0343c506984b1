// The seeds' fixed-rate table (performance-v5, "At a fixed rate"): the pgbench lookup offered at fixed
// rates in open loop with latency correction (bench/openloop.c, as wrk2 does it), against the floor
// (bench/floor.ts, not a product) and the gateway inline (QUERYAPIGATE_WORKERS=0) and pooled (=1), the
// metadata cache on. Per cell: offered, served a second, non-2xx + errors, the server's cores (its
// process tree's CPU-s over the window's wall seconds, all threads, from /proc), served per core, p50,
// p99 and max from the due time, and for the gateway the runs kept: the recorder's counters
// (queryapigate_history_runs_total{outcome}) over the window against the calls answered.
//
//   npx tsc -p . && node dist/bench/fixedRate.js [--rates 500,1000,2000,4000,8000] [--seconds 10]
//        [--rounds 2] [--connections 64] [--only floor,inline,pooled] [--name fixedrate]
//
// One server per cell and round: started (the gateway on a fresh PostgreSQL store database, so its
// event log starts empty), warmed up, then each rate from the lowest, then stopped. The cells' order
// rotates from round to round. Results: bench/results/<name>-<date>/ (README.md + results.jsonl).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { accountLookup, fmt, range, spawnListening, startGateway, today, writeResults, type Listening } from './gateway.js';
import { runOpenLoop, type OpenLoopResult } from './openloop.js';
import { treeCpuSeconds } from './processTree.js';

const ALL_CELLS = ['floor', 'inline', 'pooled'] as const;
type CellId = (typeof ALL_CELLS)[number];

const { values } = parseArgs({
  options: {
    rates: { type: 'string', default: '500,1000,2000,4000,8000' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '2' },
    connections: { type: 'string', default: '64' },
    warmup: { type: 'string', default: '2' },
    only: { type: 'string', default: ALL_CELLS.join(',') },
    name: { type: 'string', default: 'fixedrate' },
  },
});
const RATES = values.rates!.split(',').map((s) => Number(s.trim()));
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const connections = Number(values.connections);
const warmup = Number(values.warmup);
if (!RATES.every((r) => r > 0)) throw new Error('--rates: calls a second, comma-separated');
for (const [k, v] of Object.entries({ seconds, rounds, connections })) if (!(Number.isInteger(v) && v >= 1)) throw new Error(`--${k}: a whole number >= 1`);
const only = values.only!.split(',').map((s) => s.trim()) as CellId[];
for (const o of only) if (!ALL_CELLS.includes(o)) throw new Error(`--only: no cell ${o} (cells: ${ALL_CELLS.join(',')})`);

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FLOOR = fileURLToPath(new URL('./floor.js', import.meta.url));
const PG = 'postgres://postgres@127.0.0.1:5432';
const BENCH_URL = `${PG}/qag_oltp_bench`;
const STORE_DB = 'qag_fixedrate_store';
const AID = '[1-9][0-9]{0,5}';
/** Seconds the recorder may take to count a window's last runs (it writes every 50 ms when keeping up). */
const RECORDER_SETTLE_S = 10;

const admin = postgres(`${PG}/postgres`, { max: 1, onnotice: () => undefined });

// ---------------------------------------------------------------- the cells

interface Server extends Listening {
  /** The load generator's URL pattern and headers. */
  pattern: string;
  headers: Record<string, string>;
  /** The recorder's counters, for the gateway. */
  runs?: () => Promise<Runs>;
}
type Runs = { recorded: number; dropped: number; failed: number };

const LABELS: Record<CellId, string> = {
  floor: 'floor: node:http + postgres.js (not a product)',
  inline: 'QueryAPIGate, inline (WORKERS=0)',
  pooled: 'QueryAPIGate, pooled (WORKERS=1)',
};

async function startCell(id: CellId): Promise<Server> {
  if (id === 'floor') {
    const f = await spawnListening([FLOOR, BENCH_URL, '8']);
    return { ...f, pattern: `${f.url}/q/account\\?aid=${AID}`, headers: {} };
  }
  await admin.unsafe(`DROP DATABASE IF EXISTS ${STORE_DB} WITH (FORCE)`);
  await admin.unsafe(`CREATE DATABASE ${STORE_DB}`);
  const home = mkdtempSync(join(tmpdir(), 'qag-fixedrate-'));
  const g = await startGateway({
    QUERYAPIGATE_HOME: home,
    QUERYAPIGATE_DATABASE_URL: `${PG}/${STORE_DB}`,
    QUERYAPIGATE_WORKERS: id === 'inline' ? '0' : '1',
    QUERYAPIGATE_METADATA_CACHE_TTL: '5',
  });
  const { key } = await accountLookup(g, BENCH_URL);
  return {
    ...g,
    pattern: `${g.url}/q/account\\?aid=${AID}`,
    headers: { 'X-API-Key': key },
    runs: async () => {
      const text = await (await fetch(`${g.url}/metrics`)).text();
      const count = (outcome: string) => Number(new RegExp(`queryapigate_history_runs_total\\{outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
      return { recorded: count('recorded'), dropped: count('dropped'), failed: count('failed') };
    },
    async stop() {
      await g.stop();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** The recorder's counters once they account for `answered` calls, or stop moving for 2 s. */
async function settledRuns(s: Server, answered: number): Promise<Runs> {
  let last = await s.runs!();
  let still = 0;
  for (let waited = 0; waited < RECORDER_SETTLE_S * 4; waited++) {
    if (last.recorded + last.dropped + last.failed >= answered || still >= 8) break;
    await new Promise((r) => setTimeout(r, 250));
    const now = await s.runs!();
    still = now.recorded === last.recorded && now.dropped === last.dropped && now.failed === last.failed ? still + 1 : 0;
    last = now;
  }
  return last;
}

// ---------------------------------------------------------------- measuring

type Row = {
  kind: 'cell';
  round: number;
  cell: CellId;
  label: string;
  offered: number;
  served_rps: number;
  failed: number;
  server_cores: number;
  served_per_core: number | null;
  postgres_cores: number;
  loadgen_cores: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  p99_uncorrected_ms: number;
  /** Calls answered with a 2xx in the window and the drain after it. */
  answered_2xx: number;
  runs_recorded: number | null;
  runs_dropped: number | null;
  runs_failed: number | null;
  runs_kept: number | null;
  loadavg_1m: number;
  openloop: OpenLoopResult;
};

const rows: Row[] = [];
const ms = (us: number) => Math.round(us / 10) / 100;

async function cellUnit(round: number, id: CellId): Promise<void> {
  const s = await startCell(id);
  try {
    const smoke = await fetch(s.pattern.replace(/\\\?aid=.*$/, '?aid=7'), { headers: s.headers });
    const body = await smoke.text();
    if (smoke.status !== 200 || !/"aid"\s*:\s*7\b/.test(body)) throw new Error(`smoke ${id}: ${smoke.status} ${body.slice(0, 300)}`);
    const w = await runOpenLoop({ pattern: s.pattern, headers: s.headers, rate: RATES[0], durationS: warmup, connections });
    let answered = 1 + w.completed - w.non2xx; // 2xx answers so far, each a run to record
    for (const rate of [...RATES].sort((a, b) => a - b)) {
      const before = s.runs ? await settledRuns(s, answered) : null;
      const cpu0 = treeCpuSeconds(s.pid);
      const pg0 = treeCpuSeconds(postmaster, true);
      const t0 = process.hrtime.bigint();
      const r = await runOpenLoop({ pattern: s.pattern, headers: s.headers, rate, durationS: seconds, connections });
      const wall = Number(process.hrtime.bigint() - t0) / 1e9;
      const cores = (treeCpuSeconds(s.pid) - cpu0) / wall;
      const pgCores = (treeCpuSeconds(postmaster, true) - pg0) / wall;
      const ok = r.completed - r.non2xx;
      answered += ok;
      const after = before ? await settledRuns(s, answered) : null;
      const row: Row = {
        kind: 'cell',
        round,
        cell: id,
        label: LABELS[id],
        offered: rate,
        served_rps: r.served_rps,
        failed: r.non2xx + r.errors.connect + r.errors.read + r.errors.write + r.errors.timeout + r.unfinished,
        server_cores: round2(cores),
        served_per_core: cores > 0 ? Math.round(r.served_rps / cores) : null,
        postgres_cores: round2(pgCores),
        loadgen_cores: round2(r.cpu_s / wall),
        p50_ms: ms(r.latency_us.p50),
        p99_ms: ms(r.latency_us.p99),
        max_ms: ms(r.latency_us.max),
        p99_uncorrected_ms: ms(r.uncorrected_us.p99),
        answered_2xx: ok,
        runs_recorded: after && before ? after.recorded - before.recorded : null,
        runs_dropped: after && before ? after.dropped - before.dropped : null,
        runs_failed: after && before ? after.failed - before.failed : null,
        runs_kept: after && before && ok ? (after.recorded - before.recorded) / ok : null,
        loadavg_1m: round2(loadavg()[0]),
        openloop: r,
      };
      rows.push(row);
      console.log(
        `r${round} ${id.padEnd(7)} ${String(rate).padStart(6)}/s: served ${fmt(r.served_rps)} failed ${row.failed} cores ${row.server_cores} ` +
          `p50 ${row.p50_ms} p99 ${row.p99_ms} max ${row.max_ms} ms (uncorrected p99 ${row.p99_uncorrected_ms})` +
          `${row.runs_kept === null ? '' : ` runs kept ${pct(row.runs_kept)} (dropped ${row.runs_dropped})`} pg ${row.postgres_cores} load ${row.loadavg_1m}`,
      );
    }
  } finally {
    await s.stop();
  }
}

const round2 = (n: number) => Math.round(n * 100) / 100;
const pct = (x: number) => `${(x * 100).toFixed(x >= 0.9995 && x < 1 ? 2 : 1)}%`;

function codeVersion(): string {
  try {
    const head = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src', 'workers', 'bench'], { encoding: 'utf8' }).trim();
    return dirty ? `${head} with uncommitted changes` : head;
  } catch {
    return 'unknown';
  }
}

// ---------------------------------------------------------------- the run

const benchDb = postgres(BENCH_URL, { max: 1, onnotice: () => undefined });
const [bench] = await benchDb`SELECT count(*)::int AS n FROM pgbench_accounts`.catch(() => [{ n: 0 }]);
await benchDb.end();
if (bench.n !== 1_000_000) throw new Error('qag_oltp_bench must hold pgbench scale 10 (1,000,000 accounts): run bench/peers.ts once, or pgbench -i -s 10');
const [{ data_directory }] = await admin`SELECT current_setting('data_directory') AS data_directory`;
/** PostgreSQL's postmaster: its tree's CPU, ended backends included, is the database's. */
const postmaster = Number(readFileSync(join(data_directory, 'postmaster.pid'), 'utf8').split('\n')[0]);
const version = codeVersion(); // read first: the tree may change while the bench runs
const startedAt = new Date();
const loadBefore = loadavg().map((x) => x.toFixed(2));
try {
  for (let round = 1; round <= rounds; round++) {
    const k = (round - 1) % only.length;
    const order = only.slice(k).concat(only.slice(0, k));
    console.log(`\nround ${round}/${rounds}: ${order.join(', ')}`);
    for (const id of order) await cellUnit(round, id);
  }
} finally {
  await admin.unsafe(`DROP DATABASE IF EXISTS ${STORE_DB} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
}
const finishedAt = new Date();
const loadAfter = loadavg().map((x) => x.toFixed(2));

// ---------------------------------------------------------------- the table

let table =
  '| Offered | Cell | Served/s | non-2xx + errors | Server cores | Served per core | p50 ms | p99 ms | max ms | p99 ms, uncorrected | Runs kept (dropped) | PostgreSQL cores | Load generator cores | Load avg 1 min |\n' +
  '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n';
for (const rate of [...RATES].sort((a, b) => a - b)) {
  for (const id of only) {
    const rs = rows.filter((r) => r.cell === id && r.offered === rate);
    if (!rs.length) continue;
    const kept = rs.filter((r) => r.runs_kept !== null);
    const keptCell = kept.length ? `${kept.map((r) => pct(r.runs_kept!)).join(', ')} (${kept.map((r) => fmt(r.runs_dropped!)).join(', ')})` : '-';
    table +=
      `| ${fmt(rate)}/s | ${LABELS[id]} | ${range(rs.map((r) => r.served_rps))} | ${rs.reduce((a, r) => a + r.failed, 0)} | ` +
      `${range(
        rs.map((r) => r.server_cores),
        2,
      )} | ${range(rs.map((r) => r.served_per_core ?? 0))} | ${range(
        rs.map((r) => r.p50_ms),
        2,
      )} | ${range(
        rs.map((r) => r.p99_ms),
        2,
      )} | ` +
      `${range(
        rs.map((r) => r.max_ms),
        1,
      )} | ${range(
        rs.map((r) => r.p99_uncorrected_ms),
        2,
      )} | ${keptCell} | ${range(
        rs.map((r) => r.postgres_cores),
        2,
      )} | ` +
      `${range(
        rs.map((r) => r.loadgen_cores),
        2,
      )} | ${range(
        rs.map((r) => r.loadavg_1m),
        1,
      )} |\n`;
  }
}

const gatewayRows = rows.filter((r) => r.cell !== 'floor' && r.failed === 0 && r.served_rps >= r.offered * 0.99);
const best = gatewayRows.sort((a, b) => b.served_rps - a.served_rps)[0];
const args = process.argv.slice(2).join(' ');
const md = `# At a fixed rate: the seeds' table on this machine (${today()})

Made with \`npx tsc -p . && node dist/bench/fixedRate.js${args ? ` ${args}` : ''}\` on commit ${version},
${startedAt.toISOString()} to ${finishedAt.toISOString()}, Node ${process.version}, ${cpus().length} cores
(${cpus()[0]?.model ?? 'unknown'}). **Load average before ${loadBefore.join(' ')}, after ${loadAfter.join(' ')}** (1, 5, 15 min).

**This machine is not the seed's.** The seed ran the gateway on 8 cores of its own, the database on 4
and the load generator on 8 more. Here everything shares 2 cores: the server, PostgreSQL (which also
holds the gateway's store), the load generator, and other helpers' builds and benchmarks, which the load
average shows. Compare the cells with each other in the same round, not with the seed's absolute figures.

## How it was made

- **Open loop with latency correction**: \`bench/openloop/openloop.c\` (built with \`cc -O2\` on first use).
  Request k is due at start + k / rate, whatever the server does; it goes out on the next idle one of
  ${connections} keep-alive connections, and its latency is taken from its due time, so a stall is charged
  to every call it held back (coordinated omission, corrected as wrk2 does; wrk2 is not in Debian).
  "p99, uncorrected" is the same calls timed from when they were sent, what a closed-loop tool reports.
  After the ${seconds} s window the generator sends what is still due and waits up to 5 s for it;
  **served/s** is the answers received within the window over its length.
- **The call**: \`GET /q/account?aid=N\`, \`SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = :aid\`
  on \`qag_oltp_bench\` (pgbench scale 10), a random aid \`${AID}\` per request, a plain key.
- **Cells**: the floor (\`bench/floor.ts\`: node:http + postgres.js, 8 clients, no key, no record; not a
  product); QueryAPIGate inline (\`QUERYAPIGATE_WORKERS=0\`) and pooled (\`=1\`), both with
  \`QUERYAPIGATE_METADATA_CACHE_TTL=5\`, the store in a fresh PostgreSQL database \`${STORE_DB}\` on the same
  server for each cell (its event log empty at the start), \`QUERYAPIGATE_HISTORY_LIMIT\` at its default
  (50 runs per version, as the seed's "each version keeps 50 runs"), everything else at its defaults.
- **One server per cell and round**: started, one checked call, a ${warmup} s warm-up at ${fmt(RATES[0])}/s, then
  each rate from the lowest, then stopped. ${rounds} round${rounds > 1 ? 's' : ''}; the order of the cells rotates from round to
  round. Figures are the median of the rounds${rounds > 1 ? ' with the min-max in brackets' : ''}.
- **Server cores**: utime + stime of the server's process and its descendants, all threads, from /proc,
  over the window's wall seconds (the drain included). **PostgreSQL cores**: the same for every process
  PostgreSQL's postmaster and its backends, those that ended in the window included (other
  helpers' sessions too). **Load generator cores**: its own
  getrusage over the same wall time.
- **Runs kept**: \`queryapigate_history_runs_total{outcome="recorded"}\` from the gateway's /metrics, read
  before the window and again once the recorder has counted the window's runs (up to ${RECORDER_SETTLE_S} s), over the
  2xx answers to the window's calls; dropped is \`{outcome="dropped"}\` over the same span. One figure per round.

## Results

${table}
## Against the seed's row

The seed (performance-v5-data-plane, "At a fixed rate"): the data plane + cache held **20,000 calls a
second on 2.97 of its 8 cores (6,734 per core), p50 0.49 ms, p99 1.8 ms, every run kept**, 64
connections, with PostgreSQL on 4 cores of its own and the load generator on 8 more.

${
  best
    ? `Here the highest offered rate the gateway served in full (within 1%, no failed call) was **${fmt(best.offered)}/s** (${best.label},
round ${best.round}): ${best.server_cores} server cores (${fmt(best.served_per_core ?? 0)} per core), p50 ${best.p50_ms} ms, p99 ${best.p99_ms} ms, runs kept
${best.runs_kept === null ? '-' : pct(best.runs_kept)}, with PostgreSQL on ${best.postgres_cores} cores and the load generator on ${best.loadgen_cores}, load average ${best.loadavg_1m}.`
    : 'Here no gateway cell served its offered rate in full (within 1%, no failed call).'
} The 2 cores
this machine has are shared by the gateway, PostgreSQL and the load generator (and other work), so the
seed's 20,000/s is out of reach on it whatever the gateway costs: compare per core, and within a round.
`;
console.log(`\n${md}\nwritten to ${writeResults(values.name!, rows, md)}`);
