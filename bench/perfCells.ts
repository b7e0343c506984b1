// Where a gateway's CPU goes as the CPU counts it: each variant (bench/levers.ts's form) on the account lookup, one
// measured window at a time under `perf record` (CPU-clock samples of every thread of the process, the kernel's
// included), and its samples a call by shared object (node: V8's runtime, builtins and Node's C++; [JIT]: compiled
// JavaScript, named by --perf-basic-prof-only-functions; the kernel; libc) and its busiest symbols. V8's profiler
// (bench/profile.ts) samples a thread by wall time while it runs or waits to, so a call that wakes another process (a
// socket write to the database, a postMessage) is charged with the time the thread then waited for the CPU; perf's
// samples are CPU time only. Variants run in turn, in interleaved rounds; the tables add the rounds' samples and calls.
// Needs perf (Debian's linux-perf) allowed to read the gateway's process (perf_event_paranoid, or root).
//   npm run build && node dist/bench/perfCells.js [--pg postgres://.../qag_oltp_bench | mysql://.../qag_bench_my]
//        [--seconds 8] [--rounds 1] [--callers 32] [--top 25] [--suffix name] [--variant 'name:ENV=V,MAIN=<dist/src/main.js>' ...]
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureWrk, runLoad } from './load.js';
import { fmt, lookupCell, parseVariant, today, writeResults } from './gateway.js';

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '1' },
    callers: { type: 'string', default: '32' },
    top: { type: 'string', default: '25' },
    suffix: { type: 'string' },
    variant: { type: 'string', multiple: true, default: ['inline:QUERYAPIGATE_WORKERS=0'] },
  },
});
ensureWrk();
/** Samples a second: each stands for 1/HZ s of CPU. Odd, so it does not beat with the kernel's 1 ms ticks. */
const HZ = 1999;
const variants = values.variant!.map(parseVariant);

interface Cell {
  variant: string;
  round: number;
  calls: number;
  rps: number;
  p99: number;
  /** Samples by "object\tsymbol" (a JIT map's "[JIT] tid N" made "[JIT]"). */
  symbols: Record<string, number>;
}

/** `perf report`'s lines (-F sample,dso,sym): samples, the shared object, the symbol. */
function report(file: string): Record<string, number> {
  const out = execFileSync('perf', ['report', '-i', file, '--no-children', '--sort', 'dso,sym', '-F', 'sample,dso,sym', '--stdio', '-g', 'none'], {
    encoding: 'utf8',
    maxBuffer: 256 << 20,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const symbols: Record<string, number> = {};
  for (const line of out.split('\n')) {
    const m = /^\s*(\d+)\s+(.+?)\s+\[[.k]\]\s+(.*)$/.exec(line);
    if (!m) continue;
    const key = `${m[2].startsWith('[JIT]') ? '[JIT]' : m[2]}\t${m[3].trim()}`;
    symbols[key] = (symbols[key] ?? 0) + Number(m[1]);
  }
  return symbols;
}

async function measure(v: (typeof variants)[number], round: number): Promise<Cell> {
  const cell = await lookupCell(v, values.pg!, ['--perf-basic-prof-only-functions']);
  const dir = mkdtempSync(join(tmpdir(), 'qag-perf-'));
  const data = join(dir, 'perf.data');
  try {
    const load = { randRegexUrl: cell.url, connections: Number(values.callers), headers: { 'X-API-Key': cell.key }, pid: cell.pid };
    await runLoad({ ...load, duration: 2 }); // warm-up, unrecorded
    const perf = spawn('perf', ['record', '-F', String(HZ), '-p', String(cell.pid), '-o', data], { stdio: 'ignore' });
    const exited = new Promise((resolve) => perf.once('exit', resolve));
    const r = await runLoad({ ...load, duration: Number(values.seconds) });
    perf.kill('SIGINT');
    await exited;
    return { variant: v.name, round, calls: r.requests, rps: r.rps, p99: r.p99_ms, symbols: report(data) };
  } finally {
    await cell.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(`/tmp/perf-${cell.pid}.map`, { force: true }); // the JIT's names, which node writes there for perf and leaves
  }
}

const cells: Cell[] = [];
for (let round = 0; round < Number(values.rounds); round++) {
  const order = [...variants.slice(round % variants.length), ...variants.slice(0, round % variants.length)];
  for (const v of order) {
    const c = await measure(v, round);
    cells.push(c);
    console.log(`r${round + 1} ${c.variant} ${fmt(c.rps)} req/s, ${fmt(c.calls)} calls measured`);
  }
}

/** µs of CPU a call, from samples over calls. */
const usPerCall = (samples: number, calls: number) => ((samples * 1e6) / HZ / calls).toFixed(2);
const sum = (xs: Array<Record<string, number>>) => {
  const out: Record<string, number> = {};
  for (const x of xs) for (const [k, n] of Object.entries(x)) out[k] = (out[k] ?? 0) + n;
  return out;
};
let md = `# Where the gateway's CPU goes, by perf (${today()})\n\nMade with \`node dist/bench/perfCells.js ${process.argv.slice(2).join(' ')}\`: the account lookup at ${values.callers} caller(s), ${values.seconds} s windows after a 2 s warm-up, ${values.rounds} round(s), each window under \`perf record -F ${HZ} -p <gateway pid>\` (every thread); µs of CPU a call = samples / ${HZ} / calls, the rounds added. Unlike bench/profile.ts (V8's profiler, wall time while a thread runs or waits for the CPU), these are CPU time only, the kernel's included. perf's own interrupts cost the process a little: compare variants within one run.\n`;
const byVariant = variants.map((v) => {
  const own = cells.filter((c) => c.variant === v.name);
  const symbols = sum(own.map((c) => c.symbols));
  const dsos: Record<string, number> = {};
  for (const [key, n] of Object.entries(symbols)) {
    const dso = key.slice(0, key.indexOf('\t'));
    dsos[dso] = (dsos[dso] ?? 0) + n;
  }
  return { name: v.name, calls: own.reduce((a, c) => a + c.calls, 0), dsos, symbols };
});
const dsoNames = [...new Set(byVariant.flatMap((v) => Object.keys(v.dsos)))].sort((a, b) => (byVariant[0].dsos[b] ?? 0) - (byVariant[0].dsos[a] ?? 0));
md += `\n## By shared object, µs of CPU a call\n\n| Object | ${byVariant.map((v) => v.name).join(' | ')} |\n|---|${byVariant.map(() => '---|').join('')}\n`;
for (const d of dsoNames) md += `| ${d} | ${byVariant.map((v) => usPerCall(v.dsos[d] ?? 0, v.calls)).join(' | ')} |\n`;
const samplesOf = (dsos: Record<string, number>) => Object.values(dsos).reduce((a, n) => a + n, 0);
md += `| **in all** | ${byVariant.map((v) => usPerCall(samplesOf(v.dsos), v.calls)).join(' | ')} |\n`;
for (const v of byVariant) {
  md += `\n## ${v.name}: the ${values.top} busiest symbols\n\n| µs a call | Object and symbol |\n|---|---|\n`;
  for (const [sym, n] of Object.entries(v.symbols)
    .sort((a, b) => b[1] - a[1])
    .slice(0, Number(values.top)))
    md += `| ${usPerCall(n, v.calls)} | \`${sym.replace('\t', ' ').replaceAll('|', '\\|').slice(0, 160)}\` |\n`;
}
console.log(md);
console.log('written to', writeResults('perf', cells, md, values.suffix));
