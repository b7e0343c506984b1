// Where a call's CPU goes, thread by thread: the gateway (inline or pooled) and the floor under the
// same lookup, each server thread's CPU and voluntary context switches per call (from
// /proc/<pid>/task/<tid>), next to the database's (its server processes, store and data apart). A
// profiler shows what a thread does; this shows which thread does it, and how often each one sleeps
// and wakes (at one caller every wake-up is on the call's latency).
// The cells run in interleaved rounds (their order rotating from round to round); the table gives
// each figure's median over the rounds. This machine's speed swings between minutes, so compare
// cells within one run. Cells: floor (node:http + postgres.js), uws (the same floor on uWebSockets.js,
// bench/floorUws.ts), inline and pooled (the gateway).
// --gc starts every server with --trace-gc-nvp and adds its young-generation collections (scavenges)
// in the measured window: how often and how long they stop the main thread, and how much of what
// was allocated per call they kept (survived) or moved to the old generation (promoted).
//   npm run build && node dist/bench/threads.js [--seconds 10] [--rounds 1] [--callers 1,32] [--cells floor,uws,inline,pooled] [--store pg|sqlite] [--gc] [--history-limit N]
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { accountLookup, fmt, median, spawnListening, startGateway, today, writeResults } from './gateway.js';
import { ensureWrk, runLoad } from './load.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '1' },
    callers: { type: 'string', default: '1,32' },
    cells: { type: 'string', default: 'floor,inline,pooled' },
    store: { type: 'string', default: 'pg' },
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    name: { type: 'string', default: 'threads' },
    gc: { type: 'boolean', default: false },
    /** The gateway's QUERYAPIGATE_HISTORY_LIMIT: every run a ring row of its own by default; peers.ts keeps the default 50. */
    'history-limit': { type: 'string', default: '1000000' },
  },
});
ensureWrk();
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const CELLS = values.cells!.split(',');
const CALLERS = values.callers!.split(',').map(Number);
const STORE_DB = 'qag_threads_store';
const TICK = 100; // USER_HZ on Linux
const NODE_ARGS = values.gc ? ['--trace-gc-nvp'] : [];

interface ThreadSample {
  ticks: number;
  voluntary: number;
}

/** Every thread of `pid`, by tid: its name, CPU ticks and voluntary context switches so far. */
function threads(pid: number): Map<string, ThreadSample> {
  const out = new Map<string, ThreadSample>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      out.set(tid, { ticks: Number(f[11]) + Number(f[12]), voluntary: Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0) });
    } catch {
      // the thread ended while listed
    }
  }
  return out;
}

/** The database's server processes by what they serve (the database in their title), CPU ticks so far. */
function postgresTicks(): Map<string, number> {
  const out = new Map<string, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (!cmd.startsWith('postgres')) continue;
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const what = cmd.includes(STORE_DB) ? 'store' : cmd.includes('qag_oltp_bench') ? 'data' : 'other';
      out.set(`${what}:${d}`, Number(f[11]) + Number(f[12]));
    } catch {
      // gone
    }
  }
  return out;
}

/**
 * Node names every thread "node" (executors, the recorder, V8's helpers, libuv's pool), so threads are
 * told apart by what they did in the window: the main thread (the process's first), the busiest other
 * (with executors, the executor; inline, the recorder's thread if it has one) and the rest together.
 */
function group(tid: string, pid: number, busiest: string | undefined): string {
  return tid === String(pid) ? 'main' : tid === busiest ? 'busiest other' : 'other threads';
}

interface Row {
  round: number;
  cell: string;
  callers: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  calls: number;
  /** µs of CPU per call by thread group, and voluntary switches per call. */
  threads: Record<string, { us: number; wakes: number }>;
  db: Record<string, number>;
  gc?: GcFigures;
}

/**
 * The main thread's scavenges in a window, per second and per call, and every isolate's GC pauses
 * (all_pause_ms_per_s: milliseconds a second that some isolate was stopped, full GCs included).
 */
const GC_FIELDS = ['scavenges_per_s', 'pause_ms', 'max_pause_ms', 'allocated_b', 'survived_b', 'promoted_b', 'all_pause_ms_per_s'] as const;
type GcFigures = Record<(typeof GC_FIELDS)[number], number>;

/** One --trace-gc-nvp line: "[pid:isolate] 1234 ms: pause=3.2 mutator=... gc=s ... allocated=... promoted=...". */
const NVP = /^\[\d+:(0x[0-9a-f]+)\]\s+[\d.]+ ms: pause=([\d.]+) .*?gc=(\w+) .*?allocated=(\d+) promoted=(\d+) new_space_survived=(\d+)/;

/**
 * GC figures from the trace printed during a window of `seconds` and `calls`. The main thread's
 * isolate is the first to report in the whole output: Workers' isolates start after it.
 */
function gcFigures(whole: string, window: string, seconds: number, calls: number): GcFigures {
  const main = /^\[\d+:(0x[0-9a-f]+)\]/m.exec(whole)?.[1];
  let scavenges = 0;
  let pause = 0;
  let maxPause = 0;
  let allPause = 0;
  let allocated = 0;
  let survived = 0;
  let promoted = 0;
  for (const line of window.split('\n')) {
    const m = NVP.exec(line);
    if (!m) continue;
    allPause += Number(m[2]);
    if (m[1] !== main) continue;
    allocated += Number(m[4]);
    if (m[3] !== 's') continue;
    scavenges++;
    pause += Number(m[2]);
    maxPause = Math.max(maxPause, Number(m[2]));
    promoted += Number(m[5]);
    survived += Number(m[6]);
  }
  return {
    scavenges_per_s: scavenges / seconds,
    pause_ms: scavenges ? pause / scavenges : 0,
    max_pause_ms: maxPause,
    allocated_b: allocated / calls,
    survived_b: survived / calls,
    promoted_b: promoted / calls,
    all_pause_ms_per_s: allPause / seconds,
  };
}

async function measure(round: number, cell: string, pid: number, url: string, headers: string[], output: () => string): Promise<Row[]> {
  const rows: Row[] = [];
  for (const callers of CALLERS) {
    await runLoad({ randRegexUrl: url, connections: callers, duration: 2, headers });
    const t0 = threads(pid);
    const d0 = postgresTicks();
    const from = output().length;
    const r = await runLoad({ randRegexUrl: url, connections: callers, duration: SECONDS, headers });
    const t1 = threads(pid);
    const d1 = postgresTicks();
    const log = output();
    const calls = r.requests;
    const byGroup: Record<string, { us: number; wakes: number }> = {};
    const used = (tid: string): number => (t1.get(tid)?.ticks ?? 0) - (t0.get(tid)?.ticks ?? 0);
    let busiest: string | undefined;
    for (const tid of t1.keys()) if (tid !== String(pid) && (busiest === undefined || used(tid) > used(busiest))) busiest = tid;
    for (const [tid, s] of t1) {
      const before = t0.get(tid) ?? { ticks: 0, voluntary: 0 };
      const name = group(tid, pid, busiest);
      byGroup[name] ??= { us: 0, wakes: 0 };
      const g = byGroup[name];
      g.us += (((s.ticks - before.ticks) / TICK) * 1e6) / calls;
      g.wakes += (s.voluntary - before.voluntary) / calls;
    }
    const db: Record<string, number> = {};
    for (const [k, v] of d1) {
      const what = k.slice(0, k.indexOf(':'));
      db[what] = (db[what] ?? 0) + (((v - (d0.get(k) ?? 0)) / TICK) * 1e6) / calls;
    }
    const gc = values.gc ? gcFigures(log, log.slice(from), SECONDS, calls) : undefined;
    const row = { round, cell, callers, rps: r.rps, p50_ms: r.p50_ms, p99_ms: r.p99_ms, calls, threads: byGroup, db, gc };
    console.log(JSON.stringify(row));
    rows.push(row);
  }
  return rows;
}

const FLOORS: Record<string, string> = {
  floor: fileURLToPath(new URL('./floor.js', import.meta.url)),
  uws: fileURLToPath(new URL('./floorUws.js', import.meta.url)),
};
const all: Row[] = [];
/** An empty PostgreSQL database for the gateway's store, made again for each cell. */
async function freshStore(): Promise<void> {
  const admin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => undefined });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${STORE_DB} WITH (FORCE)`);
  await admin.unsafe(`CREATE DATABASE ${STORE_DB}`);
  await admin.end();
}
const storeEnv: Record<string, string> = values.store === 'pg' ? { QUERYAPIGATE_DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${STORE_DB}` } : {};
/** One cell: its server started, measured at each caller count, stopped. */
async function cell(round: number, name: string): Promise<Row[]> {
  const floor = FLOORS[name];
  if (floor) {
    const f = await spawnListening([...NODE_ARGS, floor, values.pg!]);
    const rows = await measure(round, name, f.pid, `${f.url}/q/account\\?aid=[1-9][0-9]{0,5}`, [], f.output);
    await f.stop();
    return rows;
  }
  if (values.store === 'pg') await freshStore();
  const home = mkdtempSync(join(tmpdir(), 'qag-threads-'));
  const g = await startGateway(
    {
      ...storeEnv,
      QUERYAPIGATE_HOME: home,
      QUERYAPIGATE_METADATA_CACHE_TTL: '5',
      QUERYAPIGATE_HISTORY_LIMIT: values['history-limit']!,
      QUERYAPIGATE_WORKERS: name === 'pooled' ? '1' : '0',
    },
    undefined,
    NODE_ARGS,
  );
  const { url, key } = await accountLookup(g, values.pg!);
  const rows = await measure(round, name, g.pid, url, [`X-API-Key: ${key}`], g.output);
  await g.stop();
  rmSync(home, { recursive: true, force: true });
  return rows;
}

for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < CELLS.length; i++) all.push(...(await cell(round, CELLS[(i + round) % CELLS.length]!)));
}

/** Each cell and caller count once, with every figure the median of its rounds. */
const medians = CELLS.flatMap((c) =>
  CALLERS.map((callers) => {
    const rows = all.filter((r) => r.cell === c && r.callers === callers);
    const m = (f: (r: Row) => number) => median(rows.map(f));
    const groups = [...new Set(rows.flatMap((r) => Object.keys(r.threads)))];
    return {
      cell: c,
      callers,
      rps: m((r) => r.rps),
      p50_ms: m((r) => r.p50_ms),
      p99_ms: m((r) => r.p99_ms),
      threads: Object.fromEntries(groups.map((g) => [g, { us: m((r) => r.threads[g]?.us ?? 0), wakes: m((r) => r.threads[g]?.wakes ?? 0) }])),
      db: { data: m((r) => r.db.data ?? 0), store: m((r) => r.db.store ?? 0) },
      gc: values.gc ? (Object.fromEntries(GC_FIELDS.map((f) => [f, m((r) => r.gc?.[f] ?? 0)])) as unknown as GcFigures) : undefined,
    };
  }),
);

const GC_HEAD =
  '| Cell | Callers | req/s | p99 ms | main: scavenges/s | pause ms (max) | allocated B/call | survived B/call | promoted B/call | all isolates: GC pause ms/s |';
const gcLine = (r: (typeof medians)[number]) => {
  const g = r.gc!;
  return `| ${r.cell} | ${r.callers} | ${fmt(r.rps)} | ${fmt(r.p99_ms, 2)} | ${fmt(g.scavenges_per_s, 1)} | ${fmt(g.pause_ms, 2)} (${fmt(g.max_pause_ms, 1)}) | ${fmt(g.allocated_b)} | ${fmt(g.survived_b)} | ${fmt(g.promoted_b)} | ${fmt(g.all_pause_ms_per_s, 1)} |`;
};
const names = [...new Set(medians.flatMap((r) => Object.keys(r.threads)))].sort((a, b) => (a === 'main' ? -1 : b === 'main' ? 1 : a < b ? -1 : 1));
const lines = [
  `# Where a call's CPU goes, thread by thread (${today()})`,
  '',
  `Made with \`node dist/bench/threads.js --seconds ${SECONDS} --rounds ${ROUNDS} --callers ${values.callers} --cells ${values.cells} --store ${values.store}\`. Each cell: a 2 s warm-up, then ${SECONDS} s measured with wrk, in ${ROUNDS} interleaved round(s), the medians below; µs of CPU per call of each server thread (Node names them all "node", so: the main thread, the process's first; the busiest other in the window, with executors the executor; and the rest together) and voluntary context switches per call (wake-ups), from /proc. The database's CPU per call is split by what its server process serves: the data (qag_oltp_bench) or the gateway's store.`,
  '',
  `| Cell | Callers | req/s | p50 ms | p99 ms | ${names.map((n) => `${n} µs (wakes)`).join(' | ')} | database: data µs | store µs |`,
  `|---|---|---|---|---|${names.map(() => '---|').join('')}---|---|`,
  ...medians.map(
    (r) =>
      `| ${r.cell} | ${r.callers} | ${fmt(r.rps)} | ${fmt(r.p50_ms, 3)} | ${fmt(r.p99_ms, 2)} | ${names
        .map((n) => (r.threads[n] ? `${fmt(r.threads[n].us, 1)} (${fmt(r.threads[n].wakes, 2)})` : '-'))
        .join(' | ')} | ${fmt(r.db.data ?? 0, 1)} | ${fmt(r.db.store ?? 0, 1)} |`,
  ),
  ...(values.gc
    ? [
        '',
        "Garbage collection in the same windows (`--gc`: each server ran with `--trace-gc-nvp`). The main thread's scavenges: how many a second, their mean (and longest) pause, and per call the bytes it allocated, the bytes its scavenges kept (survived: copied within the young generation or promoted) and promoted to the old generation, where they stay until a full GC. The last column adds every isolate's pauses, full GCs included.",
        '',
        GC_HEAD,
        '|---|---|---|---|---|---|---|---|---|---|',
        ...medians.map(gcLine),
      ]
    : []),
];
console.log(`written to ${writeResults(values.name!, all, lines.join('\n'))}`);
