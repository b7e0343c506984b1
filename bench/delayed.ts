// The seeds' "a database 0.5 ms away" (performance-v5, "One caller, and a database 0.5 ms away"): the
// pgbench lookup at 1 and 32 callers (wrk, closed loop) against the floor (bench/floor.ts, not a
// product) and the gateway inline and pooled, the metadata cache off and on, with PostgreSQL (the
// lookup's database and the gateway's store) reached directly and through bench/delayproxy, which
// holds each chunk going to PostgreSQL for --to-us (500) and each coming back for --back-us (0).
// The seeds added the delay with tc netem on a veth; this kernel has no netem (and no modules to
// load), so the delay is a userspace proxy's: see the README it writes.
//
//   npx tsc -p . && node dist/bench/delayed.js [--seconds 8] [--rounds 2] [--callers 1,32]
//        [--only floor,inline,inline-cache,pooled,pooled-cache] [--paths direct,delayed] (or hop too)
//        [--to-us 500] [--back-us 0] [--name delayed]
//
// One server per cell, path and round (the gateway on a fresh store database), each caller count
// after a 2 s warm-up; the order rotates from round to round. Each round starts with pgbench -S at one
// client, direct, through the proxy holding nothing (its hop alone) and through the delay: the round
// trip each adds, as measured.
import { spawn } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { builtC } from './cBuild.js';
import { codeVersion, fmt, range, today, writeResults } from './gateway.js';
import { runLoad } from './load.js';
import { BENCH_DB, smokeLookup, startLookupServer, type LookupSpec } from './lookupServers.js';
import { treeCpuSeconds } from './processTree.js';

const ALL_CELLS = ['floor', 'inline', 'inline-cache', 'pooled', 'pooled-cache'] as const;
type CellId = (typeof ALL_CELLS)[number];
const ALL_PATHS = ['direct', 'hop', 'delayed'] as const;
type PathId = (typeof ALL_PATHS)[number];

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '2' },
    callers: { type: 'string', default: '1,32' },
    only: { type: 'string', default: ALL_CELLS.join(',') },
    paths: { type: 'string', default: 'direct,delayed' },
    'to-us': { type: 'string', default: '500' },
    'back-us': { type: 'string', default: '0' },
    name: { type: 'string', default: 'delayed' },
  },
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const CALLERS = values.callers!.split(',').map(Number);
const toUs = Number(values['to-us']);
const backUs = Number(values['back-us']);
for (const [k, v] of Object.entries({ seconds, rounds })) if (!(Number.isInteger(v) && v >= 1)) throw new Error(`--${k}: a whole number >= 1`);
const only = values.only!.split(',') as CellId[];
for (const o of only) if (!ALL_CELLS.includes(o)) throw new Error(`--only: no cell ${o} (cells: ${ALL_CELLS.join(',')})`);
const paths = values.paths!.split(',') as PathId[];
for (const p of paths) if (!ALL_PATHS.includes(p)) throw new Error(`--paths: some of ${ALL_PATHS.join(',')}, not ${p}`);
const WARMUP = 2;
const DIRECT = 'postgres://postgres@127.0.0.1:5432';
const STORE_DB = 'qag_delayed_store';

const LABELS: Record<CellId, string> = {
  floor: 'floor: node:http + postgres.js (not a product)',
  inline: 'QueryAPIGate inline (WORKERS=0)',
  'inline-cache': 'QueryAPIGate inline + metadata cache',
  pooled: 'QueryAPIGate pooled (WORKERS=1)',
  'pooled-cache': 'QueryAPIGate pooled + metadata cache',
};

const admin = postgres(`${DIRECT}/postgres`, { max: 1, onnotice: () => undefined });

function spec(id: CellId): LookupSpec {
  if (id === 'floor') return { kind: 'floor' };
  return { kind: 'gateway', workers: id.startsWith('inline') ? 0 : 1, metadataCacheTtl: id.endsWith('-cache') ? 5 : 0, storeDb: STORE_DB, admin };
}

// ---------------------------------------------------------------- the proxy

interface Proxy {
  port: number;
  /** Stops it; its report of how late it released chunks. */
  stop(): Promise<string>;
}

async function startProxy(to: number, back: number): Promise<Proxy> {
  const child = spawn(builtC('delayproxy'), ['--target', '127.0.0.1:5432', '--to-us', String(to), '--back-us', String(back)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  const port = await new Promise<number>((resolve, reject) => {
    const check = () => {
      const m = /listening on [\d.]+:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    };
    child.stdout.on('data', check);
    void exited.then(() => reject(new Error(`delayproxy exited: ${out}`)));
  });
  return {
    port,
    async stop() {
      child.kill('SIGTERM');
      await exited;
      return out.split('\n').find((l) => l.startsWith('{')) ?? '';
    },
  };
}

// ---------------------------------------------------------------- measuring

type Row = {
  kind: 'cell';
  round: number;
  cell: CellId;
  path: PathId;
  callers: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  failed: number;
  server_cores: number;
  per_core: number | null;
  loadavg_1m: number;
};
type PgbenchRow = { kind: 'pgbench'; round: number; path: PathId; tps: number; latency_avg_ms: number };

const rows: Row[] = [];
const pgRows: PgbenchRow[] = [];
const round2 = (n: number) => Math.round(n * 100) / 100;

/** The proxies: the delay, and the same program holding nothing (what its hop costs by itself). */
type Proxies = Record<Exclude<PathId, 'direct'>, Proxy>;

function pgPort(path: PathId, proxies: Proxies): number {
  return path === 'direct' ? 5432 : proxies[path].port;
}

async function cellUnit(round: number, id: CellId, path: PathId, proxies: Proxies): Promise<void> {
  const s = await startLookupServer(spec(id), `postgres://postgres@127.0.0.1:${pgPort(path, proxies)}`);
  try {
    await smokeLookup(s, id);
    for (const callers of CALLERS) {
      const load = { randRegexUrl: s.pattern, headers: s.headers, connections: callers };
      await runLoad({ ...load, duration: WARMUP });
      const t0 = process.hrtime.bigint();
      const r = await runLoad({ ...load, duration: seconds, cpuSeconds: () => treeCpuSeconds(s.pid) });
      const wall = Number(process.hrtime.bigint() - t0) / 1e9;
      const cores = (r.cpu_s ?? 0) / wall;
      const row: Row = {
        kind: 'cell',
        round,
        cell: id,
        path,
        callers,
        rps: r.rps,
        p50_ms: r.p50_ms,
        p99_ms: r.p99_ms,
        failed: r.non2xx + r.errors,
        server_cores: round2(cores),
        per_core: cores > 0 ? Math.round(r.rps / cores) : null,
        loadavg_1m: round2(loadavg()[0]),
      };
      rows.push(row);
      console.log(
        `r${round} ${id.padEnd(12)} ${path.padEnd(7)} c=${String(callers).padEnd(3)} ${fmt(r.rps).padStart(6)}/s p50 ${r.p50_ms} p99 ${r.p99_ms} ` +
          `failed ${row.failed} cores ${row.server_cores} per core ${row.per_core} load ${row.loadavg_1m}`,
      );
    }
  } finally {
    await s.stop();
  }
}

/** pgbench -S at one client: the round trip as PostgreSQL's own client sees it. */
async function pgbenchUnit(round: number, path: PathId, proxies: Proxies): Promise<void> {
  const port = String(pgPort(path, proxies));
  const out = await new Promise<string>((resolve, reject) => {
    const c = spawn('pgbench', ['-h', '127.0.0.1', '-p', port, '-U', 'postgres', '-n', '-S', '-M', 'prepared', '-c', '1', '-T', '3', BENCH_DB]);
    let o = '';
    c.stdout.on('data', (d: Buffer) => (o += d));
    c.stderr.on('data', (d: Buffer) => (o += d));
    c.on('close', (code) => (code === 0 ? resolve(o) : reject(new Error(`pgbench: ${o}`))));
  });
  const tps = /tps = ([\d.]+)/.exec(out);
  const lat = /latency average = ([\d.]+) ms/.exec(out);
  if (!tps || !lat) throw new Error(`pgbench output not understood:\n${out}`);
  const row: PgbenchRow = { kind: 'pgbench', round, path, tps: Number(tps[1]), latency_avg_ms: Number(lat[1]) };
  pgRows.push(row);
  console.log(`r${round} pgbench -S c=1 ${path}: ${fmt(row.tps)} tps, latency ${row.latency_avg_ms} ms`);
}

// ---------------------------------------------------------------- the run

const version = codeVersion(); // read first: the tree may change while the bench runs
const startedAt = new Date();
const loadBefore = loadavg().map((x) => x.toFixed(2));
const proxies: Proxies = { hop: await startProxy(0, 0), delayed: await startProxy(toUs, backUs) };
let lateness = '';
try {
  const units = paths.flatMap((path) => only.map((id) => ({ id, path })));
  for (let round = 1; round <= rounds; round++) {
    const k = (round - 1) % units.length;
    const order = units.slice(k).concat(units.slice(0, k));
    console.log(`\nround ${round}/${rounds}`);
    for (const path of ALL_PATHS) await pgbenchUnit(round, path, proxies);
    for (const u of order) await cellUnit(round, u.id, u.path, proxies);
  }
} finally {
  await proxies.hop.stop();
  lateness = await proxies.delayed.stop();
  await admin.unsafe(`DROP DATABASE IF EXISTS ${STORE_DB} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
}
const finishedAt = new Date();
const loadAfter = loadavg().map((x) => x.toFixed(2));

// ---------------------------------------------------------------- the tables

const pick = (id: CellId, path: PathId, callers: number) => rows.filter((r) => r.cell === id && r.path === path && r.callers === callers);
let table = `| Cell | ${paths.flatMap((p) => CALLERS.map((c) => `${p}, ${c} caller${c > 1 ? 's' : ''}: calls/s; p50, p99 ms; per core`)).join(' | ')} | non-2xx + errors |\n`;
table += `|${'---|'.repeat(2 + paths.length * CALLERS.length)}\n`;
for (const id of only) {
  const cells = paths.flatMap((p) =>
    CALLERS.map((c) => {
      const rs = pick(id, p, c);
      if (!rs.length) return '-';
      return `${range(rs.map((r) => r.rps))}; ${range(
        rs.map((r) => r.p50_ms),
        2,
      )}, ${range(
        rs.map((r) => r.p99_ms),
        2,
      )}; ${range(rs.map((r) => r.per_core ?? 0))}`;
    }),
  );
  const failed = rows.filter((r) => r.cell === id).reduce((a, r) => a + r.failed, 0);
  table += `| ${LABELS[id]} | ${cells.join(' | ')} | ${failed} |\n`;
}
const pgTable = `| pgbench -S -M prepared, 1 client, 3 s | ${ALL_PATHS.join(' | ')} |\n|${'---|'.repeat(1 + ALL_PATHS.length)}\n| latency average ms | ${ALL_PATHS.map(
  (p) =>
    range(
      pgRows.filter((r) => r.path === p).map((r) => r.latency_avg_ms),
      3,
    ),
).join(' | ')} |\n| transactions a second | ${ALL_PATHS.map((p) => range(pgRows.filter((r) => r.path === p).map((r) => r.tps))).join(' | ')} |\n`;

const args = process.argv.slice(2).join(' ');
const md = `# A database ${toUs / 1000} ms away: the seeds' table on this machine (${today()})

Made with \`npx tsc -p . && node dist/bench/delayed.js${args ? ` ${args}` : ''}\` on commit ${version},
${startedAt.toISOString()} to ${finishedAt.toISOString()}, Node ${process.version}, ${cpus().length} cores.
**Load average before ${loadBefore.join(' ')}, after ${loadAfter.join(' ')}** (1, 5, 15 min): the 2 cores are
shared by the server, PostgreSQL, the proxy, wrk and other helpers' work.

**The delay is a userspace proxy's, not netem's.** The seeds put PostgreSQL's address in a network
namespace behind a veth and added a one-way delay with \`tc qdisc ... netem delay\`. This machine's
kernel has no netem (\`tc qdisc add dev lo root netem delay 1ms\` answers "Specified qdisc kind is
unknown"), and no /lib/modules to load it from. So \`bench/delayproxy/delayproxy.c\` sits in front of
PostgreSQL (127.0.0.1:5432) on a port of its own and holds each chunk it reads for a fixed time before
writing it on: ${toUs} µs towards PostgreSQL, ${backUs} µs back, so each round trip to the database costs
${(toUs + backUs) / 1000} ms more, as a one-way netem delay of ${toUs / 1000} ms on the way in would. What differs from netem:
the proxy delays what one read() returned (not each packet), adds its own hop (two more socket
writes and reads, and a process to wake, on a machine whose 2 cores are busy), and is woken late when
the machine is busy: its own count of how late it released chunks is below. The pgbench rows measure
what it adds to a round trip, all in, and with the same proxy holding nothing (*hop*), what its hop
costs without the delay.

## How it was made

- **The call**: \`GET /q/account?aid=N\` (pgbench scale 10, a random aid), a plain key.
- **Paths**: *direct*, the servers reach PostgreSQL at 127.0.0.1:5432; *delayed*, at the proxy's port;
  *hop* (when asked for, and always in the pgbench rows), through a second proxy that holds nothing.
  Both the lookup's database and the gateway's store go the same way (the seed's store sat on the
  database server too).
- **Cells**: the floor (node:http + postgres.js, 8 clients; not a product); QueryAPIGate inline
  (\`QUERYAPIGATE_WORKERS=0\`) and pooled (\`=1\`), each with the metadata cache off
  (\`QUERYAPIGATE_METADATA_CACHE_TTL=0\`, the default: each call reads its key, query and connection rows
  from the store) and on (\`=5\`), the store a fresh PostgreSQL database \`${STORE_DB}\` per cell.
- **Load**: wrk (\`bench/load.ts\`), closed loop, ${CALLERS.join(' and ')} callers, a ${WARMUP} s warm-up then ${seconds} s measured.
  One server per cell, path and round; ${rounds} rounds in rotating order; medians with the min-max in brackets.
- **Per core**: calls a second over the server's cores (utime + stime of its process tree, all threads,
  from /proc, over the window's wall time).

## The round trip the proxy adds

${pgTable}
The proxy's own count, over the whole run: ${lateness || 'not read'} (late: how long after its due time a chunk was written).

## Results

${table}
## Against the seed's rows

The seed (performance-v5, "One caller, and a database 0.5 ms away"), its data plane on 8 cores of its own:
one caller 475/s, p50 2.07 ms without the metadata cache and 1,317/s, p50 0.74 ms with it; 32 callers
4,956/s and 14,234/s; on the same host at one caller 4,785/s (p50 0.20 ms) and 8,347/s (0.11 ms).
Here, on 2 shared cores with a userspace proxy, compare the cells with each other within a path, and
each cell's direct figure with its delayed one: the cache's worth is the number of store reads a
call no longer makes across the distance.
`;
console.log(`\n${md}\nwritten to ${writeResults(values.name!, [...rows, ...pgRows], md)}`);
