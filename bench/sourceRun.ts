// A data source's run alone, build against build: CPU of this process a call for Source.run (src/sources/) on the
// seeds' lookup by a random aid, 32 calls in flight, no HTTP, no governance, no recording. The builds (copies of dist/
// inside this worktree) take turns, the order flipped each round; each opens its own source (its own pool of 10).
//
//   node dist/bench/sourceRun.js --dist dist-before,dist [--rounds 8] [--seconds 5] [--callers 32]
//     [--pg postgres://postgres@127.0.0.1:5432/qag_oltp_bench] [--suffix x]
//
// Results go to bench/results/sourcerun-<date>[-<suffix>]/ (results.jsonl + README.md).
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fmt, median, writeResults } from './gateway.js';

const { values: args } = parseArgs({
  options: {
    dist: { type: 'string', default: 'dist' },
    rounds: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '5' },
    callers: { type: 'string', default: '32' },
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    suffix: { type: 'string' },
  },
});
const BUILDS = args.dist.split(',');
const ROUNDS = Number(args.rounds);
const SECONDS = Number(args.seconds);
const CALLERS = Number(args.callers);
const LOOKUP = 'SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = $1';
const OPTS = { readOnly: true, timeoutMs: 30_000 };

interface Row {
  round: number;
  build: string;
  calls: number;
  rps: number;
  us_per_call: number;
}

interface Source {
  run(text: string, values: unknown[], opts: typeof OPTS): Promise<unknown>;
  close(): Promise<void>;
}

/** Calls for `ms` with CALLERS in flight; the calls made. */
async function load(source: Source, ms: number): Promise<number> {
  let calls = 0;
  const until = performance.now() + ms;
  const caller = async () => {
    while (performance.now() < until) {
      await source.run(LOOKUP, [1 + Math.floor(Math.random() * 999_999)], OPTS);
      calls++;
    }
  };
  await Promise.all(Array.from({ length: CALLERS }, caller));
  return calls;
}

async function measure(round: number, build: string): Promise<Row> {
  const { openSource } = await import(`${resolve(build)}/src/sources/index.js`);
  const url = new URL(args.pg);
  const source: Source = openSource(
    {
      name: 'bench',
      db: 'postgres',
      host: url.hostname,
      port: Number(url.port || 5432),
      database: url.pathname.slice(1),
      user: decodeURIComponent(url.username),
    },
    { poolSize: 10, home: tmpdir(), connectTimeoutMs: 2000 },
  );
  await load(source, 2000); // warm-up: connections, statements, JIT
  const before = process.cpuUsage();
  const t0 = performance.now();
  const calls = await load(source, SECONDS * 1000);
  const used = process.cpuUsage(before);
  const rps = Math.round(calls / ((performance.now() - t0) / 1000));
  await source.close();
  return { round, build, calls, rps, us_per_call: Math.round(((used.user + used.system) / calls) * 100) / 100 };
}

const rows: Row[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  for (const build of round % 2 ? BUILDS : [...BUILDS].reverse()) {
    const row = await measure(round, build);
    rows.push(row);
    console.log(JSON.stringify(row));
  }
}

const cell = (xs: number[], digits: number) => `${fmt(median(xs), digits)} (${xs.map((x) => fmt(x, digits)).join(' / ')})`;
const table = BUILDS.map((b) => {
  const g = rows.filter((r) => r.build === b);
  return `| ${b} | ${cell(
    g.map((r) => r.us_per_call),
    2,
  )} | ${cell(
    g.map((r) => r.rps),
    0,
  )} |`;
});
const dir = writeResults(
  'sourcerun',
  rows,
  [
    "# A data source's run alone (bench/sourceRun.ts)",
    '',
    `Run on ${new Date().toISOString()} with \`node dist/bench/sourceRun.js --dist ${args.dist} --rounds ${ROUNDS} --seconds ${SECONDS} --callers ${CALLERS}\`: ` +
      `Source.run on the lookup by a random aid (${LOOKUP}), ${CALLERS} calls in flight, ${SECONDS} s a cell after 2 s of warm-up, the builds in turn, the order flipped each round. ` +
      "CPU is this process's (user + system) over the window; the database's is not counted.",
    '',
    '| Build | µs of CPU a call (rounds) | calls a second (rounds) |',
    '|---|---|---|',
    ...table,
    '',
  ].join('\n'),
  args.suffix,
);
console.log(`results in ${dir}`);
