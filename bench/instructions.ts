// Instructions a call, keys side by side: the gateway inline under valgrind's callgrind, serving the seeds' account
// lookup to a plain key and to the seeds' governed key (allowed tables, abalance hashed) in alternating phases of the
// same process. Callgrind counts the instructions the process executes in user space, on every thread; the same
// binary, inputs and environment give the same count whatever else the machine does, so a difference of a few percent
// between two keys shows where calls per CPU-s in interleaved rounds (bench/levers.ts KEY=governed) drown in a loud
// machine's noise. What it does not count is the kernel's share (the sockets), the same for both keys: against CPU
// time the ratio is therefore an upper bound. Instructions are not time either: code that keeps the CPU busy (the
// hash's arithmetic) runs more of them a µs than code that waits on memory.
//
// Valgrind runs the process about a hundred times slower, so work a gateway does by the clock (a schema re-read every
// 45 s, the metadata cache's, the recorder's flushes) would fall on a hundred times fewer calls than natively, and
// land in one phase and not the other. The process's clock is slowed to match (libfaketime, `--clock`: its seconds
// a real second), so such work falls on about as many calls as it does natively; the README gives the call rate that came of it.
// Under valgrind V8's optimizing compiler still comes in bursts after 10,000 calls: the warm-up is 30,000.
//
//   node dist/bench/instructions.js [--pg postgres://postgres@127.0.0.1:5432/qag_oltp_bench]
//        [--store postgres://postgres@127.0.0.1:5432/qag_lev_store | --store sqlite] [--warm 30000] [--calls 5000]
//        [--rounds 3] [--callers 4] [--clock 0.02] [--main <a build's dist/src/main.js>] [--name instructions] [--keep <dir>]
//        [--node-args='<node flags>']
// (Debian's valgrind and libfaketime.)
//
// A phase: callgrind's counters zeroed, `--calls` calls with one key by `--callers` loops over keep-alive connections
// (a random aid each), the counters dumped. Warm-up first, both keys, uncounted. Results go to
// bench/results/<name>-<date>/ (results.jsonl + README.md).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  accountLookup,
  adminApi,
  codeVersion,
  fmt,
  freshStore,
  GATEWAY_NODE_ARGS,
  GOVERNED,
  lookupKey,
  median,
  spawnListening,
  writeResults,
} from './gateway.js';

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    store: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_lev_store' },
    warm: { type: 'string', default: '30000' },
    calls: { type: 'string', default: '5000' },
    rounds: { type: 'string', default: '3' },
    callers: { type: 'string', default: '4' },
    clock: { type: 'string', default: '0.02' },
    main: { type: 'string', default: fileURLToPath(new URL('../src/main.js', import.meta.url)) },
    name: { type: 'string', default: 'instructions' },
    /** A folder to keep callgrind's dumps in, for callgrind_annotate. */
    keep: { type: 'string' },
    /** Node flags for the gateway, space-separated (`--perf-basic-prof` writes /tmp/perf-<pid>.map, which names the JIT code the dumps hold as addresses). */
    'node-args': { type: 'string', default: '' },
  },
});
const WARM = Number(values.warm);
const CALLS = Number(values.calls);
const ROUNDS = Number(values.rounds);
const CALLERS = Number(values.callers);
const CLOCK = Number(values.clock);
const sqliteStore = values.store === 'sqlite';
const FAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1';
if (!existsSync(FAKETIME)) throw new Error(`${FAKETIME} is missing: apt-get install libfaketime`);

type Key = 'plain' | 'governed';

const home = mkdtempSync(join(tmpdir(), 'qag-instr-'));
const dumps = join(home, 'callgrind');
if (!sqliteStore) await freshStore(values.store!);
// --smc-check: V8 writes the code it compiles into the heap; valgrind must see every such write to run it.
const valgrind = ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${dumps}.%p`, process.execPath];
const g = await spawnListening(
  [...valgrind, ...GATEWAY_NODE_ARGS, ...values['node-args']!.split(' ').filter(Boolean), values.main!, 'serve'],
  {
    QUERYAPIGATE_PORT: '0',
    QUERYAPIGATE_API_KEY: 'bench-admin',
    QUERYAPIGATE_HOME: home,
    QUERYAPIGATE_WORKERS: '0',
    QUERYAPIGATE_METADATA_CACHE_TTL: '5',
    LD_PRELOAD: FAKETIME,
    FAKETIME: `+0 x${CLOCK}`,
    ...(sqliteStore ? {} : { QUERYAPIGATE_DATABASE_URL: values.store! }),
  },
  'valgrind',
);

const api = adminApi(g.url, 'bench-admin');
const plain = await accountLookup({ url: g.url, api }, values.pg!);
const governed = await lookupKey(api, 'g', GOVERNED);
const secrets: Record<Key, string> = { plain: plain.key, governed };
const agent = new Agent({ keepAlive: true, maxSockets: CALLERS });
const origin = new URL(g.url);

function call(key: string): Promise<void> {
  const aid = 1 + Math.floor(Math.random() * 1_000_000);
  return new Promise((resolve, reject) => {
    const req = request({ host: origin.hostname, port: origin.port, path: `/q/account?aid=${aid}`, agent, headers: { 'X-API-Key': key } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`aid ${aid}: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

async function calls(key: Key, n: number): Promise<void> {
  let left = n;
  const loop = async () => {
    while (left-- > 0) await call(secrets[key]);
  };
  await Promise.all(Array.from({ length: CALLERS }, loop));
}

/** Callgrind's totals for the phase just ended: its counters dumped to a file of their own, read. */
function dump(label: string): number {
  const before = new Set(readdirSync(home));
  execFileSync('callgrind_control', [`--dump=${label}`, String(g.pid)], { stdio: 'ignore' });
  const file = readdirSync(home).find((f) => f.startsWith('callgrind.') && !before.has(f));
  if (!file) throw new Error(`callgrind wrote no dump for ${label}`);
  const text = readFileSync(join(home, file), 'utf8');
  const m = text.match(/^(?:totals|summary): (\d+)/m);
  if (!m) throw new Error(`no totals in ${file}`);
  return Number(m[1]);
}

interface Row {
  round: number;
  key: Key;
  calls: number;
  instructions: number;
  per_call: number;
  /** Calls a second of the process's slowed clock. */
  rate: number;
}
const rows: Row[] = [];
const started = new Date();
try {
  for (const key of ['plain', 'governed', 'plain', 'governed'] as Key[]) await calls(key, WARM / 2);
  for (let round = 1; round <= ROUNDS; round++) {
    // Each round's order the other way round from the last's, so neither key always follows the other.
    for (const key of (round % 2 ? ['plain', 'governed'] : ['governed', 'plain']) as Key[]) {
      execFileSync('callgrind_control', ['--zero', String(g.pid)], { stdio: 'ignore' });
      const t = performance.now();
      await calls(key, CALLS);
      const rate = CALLS / ((performance.now() - t) / 1000) / CLOCK;
      const instructions = dump(`${key}-${round}`);
      rows.push({ round, key, calls: CALLS, instructions, per_call: instructions / CALLS, rate });
      console.log(`round ${round} ${key}: ${fmt(instructions / CALLS)} instructions a call, ${fmt(rate)} calls a second of its clock`);
    }
  }
} finally {
  agent.destroy();
  await g.stop();
  if (values.keep) cpSync(home, values.keep, { recursive: true, filter: (f) => f === home || f.includes('callgrind.') });
  rmSync(home, { recursive: true, force: true });
}

const per = (key: Key) => rows.filter((r) => r.key === key).map((r) => r.per_call);
const ratios = Array.from({ length: ROUNDS }, (_, i) => per('governed')[i] / per('plain')[i]);
const table = Array.from({ length: ROUNDS }, (_, i) => `| ${i + 1} | ${fmt(per('plain')[i])} | ${fmt(per('governed')[i])} | ${fmt(ratios[i], 4)} |`).join('\n');
const markdown = `# Instructions a call, plain key against governed (bench/instructions.ts)

Run on ${started.toISOString()} with \`node dist/bench/instructions.js --warm ${WARM} --calls ${CALLS} --rounds ${ROUNDS}
--callers ${CALLERS} --clock ${CLOCK} --store ${sqliteStore ? 'sqlite' : '<PostgreSQL>'}\`: ${cpus().length} × ${cpus()[0]?.model.trim()}, Node
${process.version}, build ${codeVersion()}.

The gateway inline (\`QUERYAPIGATE_WORKERS=0\`, metadata cache 5 s, every run recorded, its store ${sqliteStore ? 'SQLite' : 'in PostgreSQL'})
under \`valgrind --tool=callgrind --smc-check=all-non-file\`, its clock slowed to ${CLOCK} s a second (libfaketime),
${fmt(median(rows.map((r) => r.rate)))} calls a second of that clock at the median of the phases
(${fmt(Math.min(...rows.map((r) => r.rate)))}-${fmt(Math.max(...rows.map((r) => r.rate)))}): work done by the clock falls on about as many calls as natively. Serving the seeds' account lookup (a random aid of
1,000,000 on pgbench scale 10) to a plain key and to the seeds' governed key (allowed_tables pgbench_accounts,
pgbench_branches; \`*.abalance\` hashed). ${fmt(WARM)} calls of warm-up, both keys; then in each round a phase a key,
the order alternating by round: callgrind's counters zeroed, ${fmt(CALLS)} calls by ${CALLERS} loops, the counters
dumped. Instructions in user space on every thread of the process, a call:

| round | plain | governed | governed / plain |
|---:|---:|---:|---:|
${table}

Medians: plain ${fmt(median(per('plain')))}, governed ${fmt(median(per('governed')))}, governed / plain ${fmt(median(ratios), 4)}.

Not counted: the kernel's work (the sockets, the same for both keys), so against CPU time the ratio is an upper bound.
Instructions are not time either: code that keeps the CPU busy (a hash's arithmetic) runs more of them a µs than code
that waits on memory. libfaketime's clock_gettime counts too (about 5,500 instructions a call, both keys alike).
`;
const dir = writeResults(values.name!, rows, markdown);
console.log(`${markdown}\n${dir}`);
