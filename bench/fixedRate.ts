// The seeds' fixed-rate table (performance-v5, "At a fixed rate"): the pgbench lookup offered at fixed
// rates in open loop with latency correction (bench/openloop.c, as wrk2 does it), against the floor
// (bench/floor.ts, not a product) and the gateway inline (QUERYAPIGATE_WORKERS=0) and pooled (=1), the
// metadata cache on. Per cell: offered, served a second, non-2xx + errors, the server's cores (its
// process tree's CPU-s over the window's wall seconds, all threads, from /proc), served per core, p50,
// p99 and max from the due time, and for the gateway the runs kept: the recorder's counters
// (queryapigate_history_runs_total{outcome}) against the lookups it ran (queryapigate_queries_total).
//
//   npx tsc -p . && node dist/bench/fixedRate.js [--rates 500,1000,2000,4000,8000] [--seconds 10]
//        [--rounds 2] [--connections 64] [--only floor,inline,pooled] [--name fixedrate]
//
// One server per cell and round: started (the gateway on a fresh PostgreSQL store database, so its
// event log starts empty), warmed up, then each rate from the lowest, then stopped. The cells' order
// rotates from round to round. Results: bench/results/<name>-<date>/ (README.md + results.jsonl).
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { codeVersion, fmt, range, today, writeResults } from './gateway.js';
import { AID, BENCH_DB, smokeLookup, startLookupServer, type LookupServer, type Runs } from './lookupServers.js';
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

const PG = 'postgres://postgres@127.0.0.1:5432';
const BENCH_URL = `${PG}/${BENCH_DB}`;
const STORE_DB = 'qag_fixedrate_store';
/** Seconds the recorder may take to count a window's last runs (it writes every 50 ms when keeping up). */
const RECORDER_SETTLE_S = 10;

const admin = postgres(`${PG}/postgres`, { max: 1, onnotice: () => undefined });

// ---------------------------------------------------------------- the cells

const LABELS: Record<CellId, string> = {
  floor: 'floor: node:http + postgres.js (not a product)',
  inline: 'QueryAPIGate, inline (WORKERS=0)',
  pooled: 'QueryAPIGate, pooled (WORKERS=1)',
};

const startCell = (id: CellId): Promise<LookupServer> =>
  startLookupServer(
    id === 'floor' ? { kind: 'floor' } : { kind: 'gateway', workers: id === 'inline' ? 0 : 1, metadataCacheTtl: 5, storeDb: STORE_DB, admin },
    PG,
  );

/** The counters once the recorder has counted every lookup the gateway ran, or stopped moving for 2 s. */
async function settledRuns(s: LookupServer): Promise<Runs> {
  let last = await s.runs!();
  let still = 0;
  for (let waited = 0; waited < RECORDER_SETTLE_S * 4; waited++) {
    if ((last.recorded + last.dropped + last.failed >= last.executed && waited >= 2) || still >= 8) break;
    await new Promise((r) => setTimeout(r, 250));
    const now = await s.runs!();
    still = now.recorded === last.recorded && now.dropped === last.dropped && now.executed === last.executed ? still + 1 : 0;
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
  /** Lookups the gateway ran from the window's start until its recorder had counted them: the calls
   *  the generator gave up on (unfinished, timed out) are here when the gateway ran them anyway. */
  executed: number | null;
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
    await smokeLookup(s, id);
    await runOpenLoop({ pattern: s.pattern, headers: s.headers, rate: RATES[0], durationS: warmup, connections });
    for (const rate of [...RATES].sort((a, b) => a - b)) {
      const before = s.runs ? await settledRuns(s) : null;
      const cpu0 = treeCpuSeconds(s.pid);
      const pg0 = treeCpuSeconds(postmaster, true);
      const t0 = process.hrtime.bigint();
      const r = await runOpenLoop({ pattern: s.pattern, headers: s.headers, rate, durationS: seconds, connections });
      const wall = Number(process.hrtime.bigint() - t0) / 1e9;
      const cores = (treeCpuSeconds(s.pid) - cpu0) / wall;
      const pgCores = (treeCpuSeconds(postmaster, true) - pg0) / wall;
      const ok = r.completed - r.non2xx;
      const after = before ? await settledRuns(s) : null;
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
        executed: after && before ? after.executed - before.executed : null,
        runs_recorded: after && before ? after.recorded - before.recorded : null,
        runs_dropped: after && before ? after.dropped - before.dropped : null,
        runs_failed: after && before ? after.failed - before.failed : null,
        runs_kept: after && before && after.executed > before.executed ? (after.recorded - before.recorded) / (after.executed - before.executed) : null,
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
  '| Offered | Cell | Served/s | non-2xx + errors | Server cores | Served per core | p50 ms | p99 ms | max ms | p99 ms, uncorrected | ' +
  'Runs kept, per round | Runs recorded / dropped / lookups run / 2xx answered | PostgreSQL cores | Load generator cores | Load avg 1 min |\n' +
  `|${'---|'.repeat(15)}\n`;
for (const rate of [...RATES].sort((a, b) => a - b)) {
  for (const id of only) {
    const rs = rows.filter((r) => r.cell === id && r.offered === rate);
    if (!rs.length) continue;
    const col = (f: (r: Row) => number, digits = 0) => range(rs.map(f), digits);
    const sum = (f: (r: Row) => number | null) => fmt(rs.reduce((a, r) => a + (f(r) ?? 0), 0));
    const kept = rs.filter((r) => r.runs_kept !== null);
    const runs = kept.length
      ? [
          kept.map((r) => pct(r.runs_kept!)).join(', '),
          `${sum((r) => r.runs_recorded)} / ${sum((r) => r.runs_dropped)} / ${sum((r) => r.executed)} / ${sum((r) => r.answered_2xx)}`,
        ]
      : ['-', '-'];
    const cells = [
      `${fmt(rate)}/s`,
      LABELS[id],
      col((r) => r.served_rps),
      String(rs.reduce((a, r) => a + r.failed, 0)),
      col((r) => r.server_cores, 2),
      col((r) => r.served_per_core ?? 0),
      col((r) => r.p50_ms, 2),
      col((r) => r.p99_ms, 2),
      col((r) => r.max_ms, 1),
      col((r) => r.p99_uncorrected_ms, 2),
      ...runs,
      col((r) => r.postgres_cores, 2),
      col((r) => r.loadgen_cores, 2),
      col((r) => r.loadavg_1m, 1),
    ];
    table += `| ${cells.join(' | ')} |\n`;
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
  over the window's wall seconds (the drain included). **PostgreSQL cores**: the same for PostgreSQL's
  postmaster and its backends, those that ended in the window included (other helpers' sessions too).
  **Load generator cores**: its own getrusage over the same wall time.
- **Runs kept**: the gateway's /metrics read before the window and again once its recorder has counted
  every lookup it ran (or its counters stood still for 2 s, at most ${RECORDER_SETTLE_S} s):
  \`queryapigate_history_runs_total{outcome="recorded"}\` over the lookups run
  (\`queryapigate_queries_total\` on the connection), one figure per round; dropped is \`{outcome="dropped"}\`.
  The lookups run and the 2xx answers the generator received are both given: past saturation the gateway
  still runs (and records) the calls the generator stopped waiting for, so lookups run exceed answers.

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
