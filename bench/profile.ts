// Where a call's time goes: runs the gateway under `node --cpu-prof` (inline executors, so one
// thread holds the whole call), puts load on a lookup, and sums the profile's self time by part of
// the call path, thread by thread (the recorder's, an executor's); with --pg, the hand-written floor
// (bench/floor.ts) is profiled the same way in the same run, and with --pooled also the gateway with
// one executor thread (the acceptor and the executor apart: where the hand-off's cost lands); with
// --my, the same lookup on MariaDB beside the node:http + mysql2 floor (bench/floorMysql.ts).
// With a gateway and its floor in the same run, it adds the per-call budget: each stage of the gateway's call next
// to the floor's, against a target for each stage (OWN_STAGES below), and with --pooled what the crossing costs.
// Run: npm run build && node dist/bench/profile.js [--seconds 10] [--rounds 1] [--suffix name] [--pg postgres://.../qag_oltp_bench] [--pg-only] [--pooled] [--callers 32]
//      [--my mysql://root@127.0.0.1:3306/qag_bench_my]
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensureWrk, runLoad } from './load.js';
import { accountLookup, median, spawnListening, startGateway, today, writeResults } from './gateway.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    pg: { type: 'string' },
    'pg-only': { type: 'boolean', default: false },
    pooled: { type: 'boolean', default: false },
    /** Callers (wrk connections); at 1 what a call costs is not shared with others in its turn. */
    callers: { type: 'string', default: '32' },
    /** Rounds of every target, interleaved (the order rotating); the budget takes each stage's median over them. */
    rounds: { type: 'string', default: '1' },
    /** Written to bench/results/profile-<date>-<suffix> (without it, profile-<date>). */
    suffix: { type: 'string' },
    /** A MariaDB/MySQL database holding pgbench_accounts (bench/peers.ts --only floor-my fills qag_bench_my). */
    my: { type: 'string' },
  },
});
ensureWrk();

/** Parts of a call, matched on the profiled function's script URL (first match wins). */
const PARTS: Array<[string, RegExp]> = [
  [
    'logging (pino, sonic-boom, the access line)',
    /node_modules\/(pino|sonic-boom|on-exit-leak-free|quick-format-unescaped|safe-stable-stringify|atomic-sleep)\/|src\/log\.js|src\/http\/accessLog/,
  ],
  ['HTTP (uWebSockets.js, respond)', /uWebSockets|uws|src\/http\//],
  ['HTTP (node:http, the floor)', /^node:(_http|http|net|stream|internal\/(streams|http|url|net))/],
  ['data source: driver and the query itself', /node_modules\/(postgres|better-sqlite3|mysql2)\/|src\/sources\//],
  ['store reads (key, query, connection)', /src\/store\//],
  ['parameters, plan, governance checks', /src\/call\/(binder|param\w+|plan|request|authorize|govern)|src\/governance\//],
  ['serialization (formats)', /src\/call\/formats/],
  ['call orchestration (runCall and its stages)', /src\/call\/(runCall|limits|execute|shape|record)/],
  ['run recording (batcher)', /src\/recorder\//],
  ['metrics (prom-client)', /prom-client|src\/metrics\//],
  ['rate limits / auth', /src\/auth\//],
  ['other JavaScript', /./],
];

interface Node {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

interface Summary {
  /** main, executor, recorder or worker: told by the thread's entry script. */
  thread: string;
  parts: Array<{ part: string; ms: number; share: number }>;
  top: Array<{ fn: string; ms: number }>;
}

function summarize(file: string): Summary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const entry = p.nodes.find((n) => /workers\/\w+\.js$/.test(n.callFrame.url))?.callFrame.url;
  const thread = /\.0\.\d+\.cpuprofile$/.test(file) ? 'main' : (entry?.match(/workers\/(\w+)\.js$/)?.[1] ?? 'worker');
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  const fns = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const n = byId.get(p.samples[i])!;
    const dt = (p.timeDeltas[i] ?? 0) / 1000;
    const name = n.callFrame.functionName;
    if (name === '(idle)' || name === '(program)') continue; // waiting, not working
    const part =
      name === '(garbage collector)'
        ? 'garbage collection'
        : !n.callFrame.url
          ? 'native / runtime (syscalls, C++)'
          : PARTS.find(([, re]) => re.test(n.callFrame.url))![0];
    self.set(part, (self.get(part) ?? 0) + dt);
    const fn = `${name || '(anonymous)'} ${n.callFrame.url.replace(/^.*?\/(node_modules\/[^/]+|src|dist)\//, '$1/')}:${(n.callFrame as { lineNumber?: number }).lineNumber ?? ''}`;
    fns.set(fn, (fns.get(fn) ?? 0) + dt);
    total += dt;
  }
  return {
    thread,
    parts: [...self.entries()].sort((a, b) => b[1] - a[1]).map(([part, ms]) => ({ part, ms: Math.round(ms), share: Math.round((ms / total) * 1000) / 10 })),
    top: [...fns.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 15)
      .map(([fn, ms]) => ({ fn, ms: Math.round(ms) })),
  };
}

/**
 * The per-call budget: the issue's inline target is at least 0.9x the floor's calls per CPU-s, so the gateway may
 * spend the floor's CPU a call / 0.9 in all. Stages the floor has too get its own figure (the same driver and query;
 * its collections; its other JavaScript); the gateway's own stages get a fixed allowance in µs (recording: the
 * issue's 5 µs a run); serving HTTP (uWebSockets.js where the floor has node:http) gets what is left of the total.
 * So every stage within its target means the whole within the issue's target.
 */
const OWN_STAGES: Array<[stage: string, parts: string[], targetUs: number]> = [
  ['recording (the batcher; the recorder, on its thread or this one)', ['run recording (batcher)'], 5],
  ['call orchestration (runCall and its stages)', ['call orchestration (runCall and its stages)'], 2],
  ['parameters, plan, governance checks', ['parameters, plan, governance checks'], 2],
  ['logging (the access line)', ['logging (pino, sonic-boom, the access line)'], 2],
  ['rate limits / auth', ['rate limits / auth'], 1],
  ['metrics', ['metrics (prom-client)'], 1],
  ['serialization (formats)', ['serialization (formats)'], 1],
  ['store reads (key, query, connection)', ['store reads (key, query, connection)'], 1],
];
const SHARED_STAGES: Array<[stage: string, parts: string[]]> = [
  ['the driver and the query', ['data source: driver and the query itself']],
  ['garbage collection', ['garbage collection']],
  ['other JavaScript (promises, timers, Node internals)', ['other JavaScript']],
];
const SERVING = ['HTTP (uWebSockets.js, respond)', 'HTTP (node:http, the floor)', 'native / runtime (syscalls, C++)'];
/** The pooled crossing's target (the issue's): what a call costs pooled beyond inline, in µs of CPU. */
const CROSSING_TARGET_US = 8;

/**
 * µs of CPU per call by part, all threads together, scaled so they add up to the process's CPU a call from /proc
 * (`cpuUs`): a sample's time is wall time, so a thread waiting for a core (2 cores, shared with the database and the
 * load) makes the profile's sums run over its CPU time. A recorder thread's whole time counts as recording.
 */
function perCallParts(threads: Summary[], calls: number, cpuUs: number | null): Map<string, number> {
  const out = new Map<string, number>();
  let sampled = 0;
  for (const t of threads) {
    for (const { part, ms } of t.parts) {
      const key = t.thread === 'recorder' ? 'run recording (batcher)' : part;
      out.set(key, (out.get(key) ?? 0) + (ms * 1000) / calls);
      sampled += (ms * 1000) / calls;
    }
  }
  if (cpuUs && sampled) for (const [k, v] of out) out.set(k, (v * cpuUs) / sampled);
  return out;
}

/** A budget's stage: the median over rounds of a target's µs a call in `parts` (all parts if none given). */
function stageUs(rounds: Array<Map<string, number>>, parts?: string[]): number {
  return median(rounds.map((m) => [...m].filter(([k]) => !parts || parts.includes(k)).reduce((a, [, v]) => a + v, 0)));
}

function budget(title: string, gateway: Array<Map<string, number>>, floor: Array<Map<string, number>>, pooled?: Array<Map<string, number>>): string {
  const floorTotal = stageUs(floor);
  const gatewayTotal = stageUs(gateway);
  const total = floorTotal / 0.9;
  const lines: Array<[string, number, number, number]> = []; // stage, floor, gateway, target
  for (const [stage, parts] of SHARED_STAGES) {
    const ofFloor = stageUs(floor, parts);
    lines.push([stage, ofFloor, stageUs(gateway, parts), ofFloor]); // the floor's own figure is the target
  }
  for (const [stage, parts, target] of OWN_STAGES) lines.push([stage, 0, stageUs(gateway, parts), target]);
  const rest = total - lines.reduce((a, l) => a + l[3], 0);
  lines.unshift(['serving HTTP: parsing, socket reads and writes, the runtime', stageUs(floor, SERVING), stageUs(gateway, SERVING), rest]);
  const f = (x: number) => x.toFixed(1);
  const over = lines.filter((l) => l[2] > l[3]);
  let out =
    `\n## The per-call budget: ${title}\n\nµs of CPU a call (profiler on), every thread of each process, the profile's parts scaled to the process's ` +
    `CPU from /proc, medians over ${floor.length} round(s) (each stage's and the totals apart); the floor's total ${f(floorTotal)}, so the ` +
    `gateway's target in all is ${f(total)} (at least 0.9x the floor's calls per CPU-s). Stages the floor has too are allowed its figure; ` +
    `the gateway's own stages a fixed allowance; serving HTTP what is left (bench/profile.ts, OWN_STAGES).\n\n` +
    '| Stage | the floor | the gateway | target | |\n|---|---|---|---|---|\n' +
    lines.map(([stage, fl, gw, target]) => `| ${stage} | ${fl ? f(fl) : '-'} | ${f(gw)} | ${f(target)} | ${gw > target ? 'over' : 'within'} |`).join('\n') +
    `\n| **in all** | ${f(floorTotal)} | ${f(gatewayTotal)} | ${f(total)} | ${gatewayTotal > total ? 'over' : 'within'} |\n\n` +
    (over.length ? `Over: ${over.map((l) => `${l[0]} by ${f(l[2] - l[3])}`).join('; ')}.\n` : 'Every stage within its target.\n');
  const totals = (rounds: Array<Map<string, number>>) => rounds.map((m) => f(stageUs([m]))).join(' / ');
  if (floor.length > 1) out += `\nIn all, by round: the floor ${totals(floor)}; the gateway ${totals(gateway)}${pooled ? `; pooled ${totals(pooled)}` : ''}.\n`;
  if (pooled) {
    const crossing = median(pooled.map((m, i) => stageUs([m]) - stageUs([gateway[i] ?? m])));
    out += `\nPooled (one executor): ${f(stageUs(pooled))} µs a call; beyond inline in the same round ${f(crossing)} (median): the crossing's target is ${CROSSING_TARGET_US} (${crossing > CROSSING_TARGET_US ? 'over' : 'within'}).\n`;
  }
  return out;
}

const ROUNDS = Number(values.rounds);
const rows: object[] = [];
/** Each target's µs a call by part in each round, by the target's name, for the budget. */
const measured = new Map<string, Array<Map<string, number>>>();
const loadAverage = loadavg()
  .map((x) => x.toFixed(1))
  .join(' ');
const roundsNote =
  ROUNDS > 1 ? ` ${ROUNDS} rounds, the targets' order rotating: the tables are the first round's, the budget at the end takes every round.` : '';
let md = `# Where a call's time goes (${today()})\n\nMade with \`node dist/bench/profile.js ${process.argv.slice(2).join(' ')}\`: the gateway under \`node --cpu-prof\`, executors inline (one thread does the whole call) unless the target says pooled, ${values.callers} caller(s) for ${values.seconds} s. Each thread's table sums its profile's self time (idle excluded) by the part of the path each function belongs to. Load average at start: ${loadAverage} on 2 cores.${roundsNote}\n`;

/** What a target's load runs against: a process under --cpu-prof, and the URL pattern and key to call. */
interface Profiled {
  url: string;
  key: string;
  pid: number;
  stop(): Promise<void>;
}
interface Target {
  name: string;
  start(profArgs: string[], home: string): Promise<Profiled>;
}

const PG_INLINE = 'account lookup (PostgreSQL, plain key, metadata cache on)';
const PG_POOLED = 'account lookup, pooled: one executor thread (PostgreSQL, plain key, metadata cache on)';
const PG_FLOOR = 'the floor: node:http + postgres.js (the same lookup, not a product)';
const MY_INLINE = 'account lookup (MariaDB, plain key, metadata cache on)';
const MY_FLOOR = 'the floor: node:http + mysql2 (the same lookup, not a product)';
const FLOOR = fileURLToPath(new URL('./floor.js', import.meta.url));
const FLOOR_MY = fileURLToPath(new URL('./floorMysql.js', import.meta.url));
const targets: Target[] = [];
if (!values['pg-only']) {
  targets.push({
    name: 'example_film_lookup (SQLite, plain key)',
    start: async (profArgs, home) => {
      const g = await startGateway({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: '0' }, 'bench-admin', profArgs);
      const { secret } = await g.api<{ secret: string }>('POST', '/api/v1/api-keys', { name: 'p', queries: ['example_film_lookup'], connections: [] });
      return { url: `${g.url}/q/example_film_lookup\\?film_id=[1-5][0-9]`, key: secret, pid: g.pid, stop: g.stop };
    },
  });
}
if (values.pg) {
  const pg = values.pg;
  targets.push({
    name: PG_INLINE,
    start: async (profArgs, home) => {
      const g = await startGateway({ QUERYAPIGATE_METADATA_CACHE_TTL: '5', QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: '0' }, 'bench-admin', profArgs);
      return { ...(await accountLookup(g, pg)), pid: g.pid, stop: g.stop };
    },
  });
  if (values.pooled) {
    targets.push({
      name: PG_POOLED,
      start: async (profArgs, home) => {
        const g = await startGateway({ QUERYAPIGATE_METADATA_CACHE_TTL: '5', QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: '1' }, 'bench-admin', profArgs);
        return { ...(await accountLookup(g, pg)), pid: g.pid, stop: g.stop };
      },
    });
  }
  // The floor under the same profiler in the same run: node:http + postgres.js, no key, no record.
  targets.push({
    name: PG_FLOOR,
    start: async (profArgs) => {
      const f = await spawnListening([...profArgs, FLOOR, pg, '10']);
      return { url: `${f.url}/q/account\\?aid=[1-9][0-9]{0,5}`, key: '-', pid: f.pid, stop: f.stop };
    },
  });
}

if (values.my) {
  targets.push({
    name: MY_INLINE,
    start: async (profArgs, home) => {
      const g = await startGateway({ QUERYAPIGATE_METADATA_CACHE_TTL: '5', QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: '0' }, 'bench-admin', profArgs);
      return { ...(await accountLookup(g, values.my!)), pid: g.pid, stop: g.stop };
    },
  });
  targets.push({
    name: MY_FLOOR,
    start: async (profArgs) => {
      const f = await spawnListening([...profArgs, FLOOR_MY, values.my!, '10']);
      return { url: `${f.url}/q/account\\?aid=[1-9][0-9]{0,5}`, key: '-', pid: f.pid, stop: f.stop };
    },
  });
}

for (let round = 0; round < ROUNDS; round++)
  for (const t of [...targets.slice(round % targets.length), ...targets.slice(0, round % targets.length)]) {
    const home = mkdtempSync(join(tmpdir(), 'qag-prof-'));
    const profDir = join(home, 'prof');
    const p = await t.start(['--cpu-prof', `--cpu-prof-dir=${profDir}`], home);
    try {
      const load = await runLoad({
        randRegexUrl: p.url,
        duration: Number(values.seconds),
        connections: Number(values.callers),
        warmup: 2,
        headers: { 'X-API-Key': p.key },
        pid: p.pid,
      });
      await p.stop(); // the profile is written at exit
      // One profile per thread (Node writes each at its exit), the main thread's first.
      const files = readdirSync(profDir)
        .filter((f) => f.endsWith('.cpuprofile'))
        .sort();
      const threads = files.map((f) => summarize(join(profDir, f))).sort((a, b) => Number(b.thread === 'main') - Number(a.thread === 'main'));
      if (process.env.PROFILE_KEEP) for (const f of files) copyFileSync(join(profDir, f), join(process.env.PROFILE_KEEP, `${rows.length}-${f}`));
      const perCallUs = load.cpu_s ? (load.cpu_s / load.requests) * 1e6 : null;
      rows.push({ round, target: t.name, load, threads, cpu_us_per_call: perCallUs });
      measured.set(t.name, [...(measured.get(t.name) ?? []), perCallParts(threads, load.requests, perCallUs)]);
      if (round > 0) continue; // the tables of the first round; the budget takes every round
      md +=
        `\n## ${t.name}\n\n${load.requests} calls, ${Math.round(load.rps)} req/s, p50 ${load.p50_ms} ms, p99 ${load.p99_ms} ms, ` +
        `${perCallUs ? Math.round(perCallUs) : '?'} µs of CPU per call (all threads, profiler on).\n`;
      for (const { thread, parts, top } of threads) {
        const busy = parts.reduce((sum, x) => sum + x.ms, 0);
        md +=
          `\n### Thread: ${thread} (${Math.round((busy * 1000) / load.requests)} µs per call)\n\n| Part of a call | Self time ms | Share | µs per call |\n|---|---|---|---|\n` +
          parts.map((x) => `| ${x.part} | ${x.ms} | ${x.share}% | ${Math.round((x.ms * 1000) / load.requests)} |`).join('\n') +
          '\n\nThe functions with the most self time:\n\n| Function | ms |\n|---|---|\n' +
          top.map((f) => `| \`${f.fn}\` | ${f.ms} |`).join('\n') +
          '\n';
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }
const [pgInline, pgPooled, pgFloor, myInline, myFloor] = [PG_INLINE, PG_POOLED, PG_FLOOR, MY_INLINE, MY_FLOOR].map((n) => measured.get(n));
if (pgInline && pgFloor) md += budget('the account lookup on PostgreSQL', pgInline, pgFloor, pgPooled);
if (myInline && myFloor) md += budget('the account lookup on MariaDB', myInline, myFloor);
console.log(md);
console.log('written to', writeResults('profile', rows, md, values.suffix));
