// Where a call's time goes: runs the gateway under `node --cpu-prof` (inline executors, so one
// thread holds the whole call), puts load on a lookup, and sums the profile's self time by part of
// the call path, thread by thread (the recorder's, an executor's); with --pg, the hand-written floor
// (bench/floor.ts) is profiled the same way in the same run, and with --pooled also the gateway with
// one executor thread (the acceptor and the executor apart: where the hand-off's cost lands); with
// --my, the same lookup on MariaDB beside the node:http + mysql2 floor (bench/floorMysql.ts).
// Run: npm run build && node dist/bench/profile.js [--seconds 10] [--pg postgres://.../qag_oltp_bench] [--pg-only] [--pooled] [--callers 32]
//      [--my mysql://root@127.0.0.1:3306/qag_bench_my]
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensureWrk, runLoad } from './load.js';
import { accountLookup, spawnListening, startGateway, today, writeResults } from './gateway.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    pg: { type: 'string' },
    'pg-only': { type: 'boolean', default: false },
    pooled: { type: 'boolean', default: false },
    /** Callers (wrk connections); at 1 what a call costs is not shared with others in its turn. */
    callers: { type: 'string', default: '32' },
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

const rows: object[] = [];
let md = `# Where a call's time goes (${today()})\n\nMade with \`node dist/bench/profile.js ${process.argv.slice(2).join(' ')}\`: the gateway under \`node --cpu-prof\`, executors inline (one thread does the whole call) unless the target says pooled, ${values.callers} caller(s) for ${values.seconds} s. Each thread's table sums its profile's self time (idle excluded) by the part of the path each function belongs to. Load average at start: ${(
  await import('node:os')
)
  .loadavg()
  .map((x) => x.toFixed(1))
  .join(' ')} on 2 cores.\n`;

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
    name: 'account lookup (PostgreSQL, plain key, metadata cache on)',
    start: async (profArgs, home) => {
      const g = await startGateway({ QUERYAPIGATE_METADATA_CACHE_TTL: '5', QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: '0' }, 'bench-admin', profArgs);
      return { ...(await accountLookup(g, pg)), pid: g.pid, stop: g.stop };
    },
  });
  if (values.pooled) {
    targets.push({
      name: 'account lookup, pooled: one executor thread (PostgreSQL, plain key, metadata cache on)',
      start: async (profArgs, home) => {
        const g = await startGateway({ QUERYAPIGATE_METADATA_CACHE_TTL: '5', QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: '1' }, 'bench-admin', profArgs);
        return { ...(await accountLookup(g, pg)), pid: g.pid, stop: g.stop };
      },
    });
  }
  // The floor under the same profiler in the same run: node:http + postgres.js, no key, no record.
  targets.push({
    name: 'the floor: node:http + postgres.js (the same lookup, not a product)',
    start: async (profArgs) => {
      const f = await spawnListening([...profArgs, FLOOR, pg, '10']);
      return { url: `${f.url}/q/account\\?aid=[1-9][0-9]{0,5}`, key: '-', pid: f.pid, stop: f.stop };
    },
  });
}

if (values.my) {
  targets.push({
    name: 'account lookup (MariaDB, plain key, metadata cache on)',
    start: async (profArgs, home) => {
      const g = await startGateway({ QUERYAPIGATE_METADATA_CACHE_TTL: '5', QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: '0' }, 'bench-admin', profArgs);
      return { ...(await accountLookup(g, values.my!)), pid: g.pid, stop: g.stop };
    },
  });
  targets.push({
    name: 'the floor: node:http + mysql2 (the same lookup, not a product)',
    start: async (profArgs) => {
      const f = await spawnListening([...profArgs, FLOOR_MY, values.my!, '10']);
      return { url: `${f.url}/q/account\\?aid=[1-9][0-9]{0,5}`, key: '-', pid: f.pid, stop: f.stop };
    },
  });
}

for (const t of targets) {
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
    rows.push({ target: t.name, load, threads, cpu_us_per_call: perCallUs });
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
console.log(md);
console.log('written to', writeResults('profile', rows, md));
