// What V8's collections cost a server on the account lookup, window by window: 32 callers for a few
// seconds, then a full collection and a pause, again, in one process. Per window: calls per CPU-s, bytes
// promoted to the old generation and kept young by scavenges per call, the main thread's scavenge
// pauses, its CPU and the other threads' (V8's helpers, the recorder) per call, and the live heap
// after the full collection. Promotion is bimodal on this lookup (ARCHITECTURE.md, "Measured traps"),
// so windows, not one long cell: a process may change mode between them.
//   npm run build && node dist/bench/gcWindows.js [--seconds 4] [--windows 4] [--pause 1] [--runs 2]
//        [--variant 'name:ENV=V,NODE_ARGS=<node flags>,MAIN=<a build's dist/src/main.js>' ...]
//        (gateway variants; floor and inline always run)
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { fmt, median, parseVariant, range, writeResults } from './gateway.js';
import { ensureWrk, processCpuSeconds, runLoad, threadCpuSeconds } from './load.js';
import { type LookupServer, startLookupServer } from './lookupServers.js';
import { treeRssMiB } from './processTree.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '4' },
    windows: { type: 'string', default: '4' },
    pause: { type: 'string', default: '1' },
    runs: { type: 'string', default: '2' },
    variant: { type: 'string', multiple: true, default: [] },
  },
});
ensureWrk();
const PG = 'postgres://postgres@127.0.0.1:5432';
const STORE_DB = 'qag_bench_gc_store';
const PROBE = fileURLToPath(new URL('./gcProbe.js', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Probe = { promoted: number; survived: number; scavenges: number; pauses: Record<string, { n: number; ms: number }>; liveAfterFullGc: number };
type Window = {
  cell: string;
  run: number;
  window: number;
  calls: number;
  perCpu: number;
  promotedPerCall: number;
  survivedPerCall: number;
  scavenges: number;
  scavengeMsPer1kCalls: number;
  majors: number;
  mainUsPerCall: number;
  otherUsPerCall: number;
  rssMiB: number;
  liveMiB: number;
};

const mainThreadCpu = (pid: number) => threadCpuSeconds(pid, pid);

const admin = postgres(`${PG}/postgres`, { max: 1, onnotice: () => undefined });
const PROBE_ARGS = ['--expose-gc', '--import', PROBE];
const cells: { name: string; start(out: string): Promise<LookupServer> }[] = [
  { name: 'floor', start: (out) => startLookupServer({ kind: 'floor', nodeArgs: PROBE_ARGS, env: { QAG_GC_PROBE_OUT: out } }, PG) },
  ...[parseVariant('inline'), ...values.variant!.map(parseVariant)].map(({ name, env, nodeArgs, main }) => ({
    name,
    start: (out: string) =>
      startLookupServer(
        {
          kind: 'gateway',
          workers: 0,
          metadataCacheTtl: 5,
          storeDb: STORE_DB,
          admin,
          nodeArgs: [...PROBE_ARGS, ...nodeArgs],
          env: { QAG_GC_PROBE_OUT: out, ...env },
          main,
        },
        PG,
      ),
  })),
];

/** Asks the probe for its window and waits for the file it writes. */
async function closeWindow(pid: number, out: string): Promise<Probe> {
  rmSync(out, { force: true });
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 200 && !existsSync(out); i++) await sleep(25);
  await sleep(50); // written at once, but let it finish
  return JSON.parse(readFileSync(out, 'utf8')) as Probe;
}

const rows: Window[] = [];
try {
  for (let run = 0; run < Number(values.runs); run++) {
    for (const c of run % 2 ? [...cells].reverse() : cells) {
      const out = join(tmpdir(), `qag-gc-probe-${process.pid}.json`);
      const s = await c.start(out);
      try {
        await runLoad({ randRegexUrl: s.pattern, connections: 32, duration: 2, headers: s.headers }); // warm-up
        for (let w = 0; w < Number(values.windows); w++) {
          process.kill(s.pid, 'SIGURG');
          const main0 = mainThreadCpu(s.pid);
          const all0 = processCpuSeconds(s.pid);
          const load = await runLoad({ randRegexUrl: s.pattern, connections: 32, duration: Number(values.seconds), headers: s.headers });
          const main = mainThreadCpu(s.pid) - main0;
          const all = processCpuSeconds(s.pid) - all0;
          const rss = treeRssMiB(s.pid); // the server alone: it starts no processes
          const p = await closeWindow(s.pid, out);
          const n = load.requests;
          const row: Window = {
            cell: c.name,
            run,
            window: w,
            calls: n,
            perCpu: n / all,
            promotedPerCall: p.promoted / n,
            survivedPerCall: p.survived / n,
            scavenges: p.scavenges,
            scavengeMsPer1kCalls: ((p.pauses.minor?.ms ?? 0) * 1000) / n,
            majors: p.pauses.major?.n ?? 0,
            mainUsPerCall: (main * 1e6) / n,
            otherUsPerCall: ((all - main) * 1e6) / n,
            rssMiB: rss,
            liveMiB: p.liveAfterFullGc / 2 ** 20,
          };
          rows.push(row);
          console.log(
            `run ${run} ${c.name.padEnd(10)} w${w} ${fmt(row.perCpu)}/cpu-s promoted ${fmt(row.promotedPerCall)} B/call scavenges ${fmt(row.scavengeMsPer1kCalls, 1)} ms/1k calls main ${fmt(row.mainUsPerCall, 1)} µs other ${fmt(row.otherUsPerCall, 1)} µs rss ${fmt(rss)} MiB live ${fmt(row.liveMiB, 1)} MiB`,
          );
          await sleep(Number(values.pause) * 1000);
        }
      } finally {
        await s.stop();
      }
    }
  }
} finally {
  await admin.end();
}

// A window is "low" when it promoted under 400 B a call: the modes seen so far sit near 150-200 and 700-1,000.
const LOW = 400;
let md = `# V8's collections on the account lookup, window by window\n\nMade with \`node dist/bench/gcWindows.js ${process.argv.slice(2).join(' ')}\`: 32 callers, ${values.seconds} s windows, ${values.windows} a process with a full collection and a ${values.pause} s pause between them, ${values.runs} processes a cell (cells in turn, reversed every other run); the gateway inline on a fresh PostgreSQL store, metadata cache 5 s, plain key. "Low" windows promoted under ${LOW} B a call. Figures are medians over windows, with the min-max in brackets.\n\n| Cell | windows low / all | calls per CPU-s, low | calls per CPU-s, high | promoted B a call | scavenge pauses ms per 1k calls, low / high | main thread µs a call | other threads µs a call | RSS after a window MiB | live heap MiB |\n|---|---|---|---|---|---|---|---|---|---|\n`;
for (const c of cells) {
  const xs = rows.filter((r) => r.cell === c.name);
  const low = xs.filter((r) => r.promotedPerCall < LOW);
  const high = xs.filter((r) => r.promotedPerCall >= LOW);
  const med = (ys: Window[], f: (r: Window) => number, d = 0) => (ys.length ? fmt(median(ys.map(f)), d) : '-');
  md += `| ${c.name} | ${low.length} / ${xs.length} | ${med(low, (r) => r.perCpu)} | ${med(high, (r) => r.perCpu)} | ${range(
    xs.map((r) => r.promotedPerCall),
  )} | ${med(low, (r) => r.scavengeMsPer1kCalls, 1)} / ${med(high, (r) => r.scavengeMsPer1kCalls, 1)} | ${range(
    xs.map((r) => r.mainUsPerCall),
    1,
  )} | ${range(
    xs.map((r) => r.otherUsPerCall),
    1,
  )} | ${range(xs.map((r) => r.rssMiB))} | ${range(
    xs.map((r) => r.liveMiB),
    1,
  )} |\n`;
}
console.log(md);
console.log('written to', writeResults('gcwindows', rows, md));
