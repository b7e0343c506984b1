// Two gateways side by side, inline against pooled unless two --variant say otherwise: both serve the seeds' account
// lookup, started together and kept running, and 32 callers (wrk) go to one, then the other, in short slices
// (bench/pairs.ts), each charged the CPU of the process it went to. peers.ts and levers.ts run each setting as a cell of
// its own, minutes apart on a host whose load swings within minutes; here the two figures of a pair are seconds apart,
// and the pairs' spread shows the noise. A process keeps what it started with (its store, its place in the start order),
// so a setting is best weighed in two runs, the variants given in both orders.
//
//   node dist/bench/modes.js [--pg postgres://postgres@127.0.0.1:5432/qag_oltp_bench]
//        [--stores postgres://.../qag_lev_store,postgres://.../qag_levers_store | --stores sqlite] [--pairs 40] [--slice 2]
//        [--warm 15] [--callers 32] [--main <a build's dist/src/main.js>] [--name modes]
//        [--variant 'name:ENV=V,NODE_ARGS=<node flags>' --variant ...]   (levers.ts's form; two, started in that order)
//
// Results go to bench/results/<name>-<date>/ (results.jsonl + README.md).
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { codeVersion, type LookupCell, lookupCell, parseVariant, writeResults } from './gateway.js';
import { ensureWrk, runLoad } from './load.js';
import { alternate, type PairRow, pairsMarkdown, type Side, summarize } from './pairs.js';

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    /** Each gateway's store: two PostgreSQL databases (dropped and made afresh), inline's first, or `sqlite` for both. */
    stores: {
      type: 'string',
      default: 'postgres://postgres@127.0.0.1:5432/qag_lev_store,postgres://postgres@127.0.0.1:5432/qag_levers_store',
    },
    pairs: { type: 'string', default: '40' },
    slice: { type: 'string', default: '2' },
    /** Seconds of each gateway before the pairs: its code compiled and its caches filled. */
    warm: { type: 'string', default: '15' },
    callers: { type: 'string', default: '32' },
    main: { type: 'string', default: fileURLToPath(new URL('../src/main.js', import.meta.url)) },
    name: { type: 'string', default: 'modes' },
    variant: { type: 'string', multiple: true, default: ['inline:QUERYAPIGATE_WORKERS=0', 'pooled:QUERYAPIGATE_WORKERS=1'] },
  },
});
ensureWrk();
const PAIRS = Number(values.pairs);
const SLICE = Number(values.slice);
const CALLERS = Number(values.callers);
const sqlite = values.stores === 'sqlite';
const stores = sqlite ? [] : values.stores!.split(',');
if (!sqlite && (stores.length !== 2 || stores[0] === stores[1])) throw new Error('--stores: two different PostgreSQL URLs, or sqlite');

const variants = values.variant!.map(parseVariant);
if (variants.length !== 2 || variants[0].name === variants[1].name) throw new Error('--variant: two, with different names');
const NAMES: [string, string] = [variants[0].name, variants[1].name];
const start = (i: number) => {
  const v = variants[i];
  const env = sqlite ? v.env : { QUERYAPIGATE_DATABASE_URL: stores[i], ...v.env };
  return lookupCell({ ...v, env, main: v.main ?? values.main }, values.pg!);
};
const cells: LookupCell[] = [];
const started = new Date();
const loadBefore = loadavg();
let rows: PairRow[];
try {
  for (const i of [0, 1]) cells.push(await start(i));
  const side = (name: string, c: LookupCell): Side => ({
    name,
    slice: (seconds) => runLoad({ randRegexUrl: c.url, duration: seconds, connections: CALLERS, headers: { 'X-API-Key': c.key }, pid: c.pid }),
  });
  rows = await alternate([side(NAMES[0], cells[0]), side(NAMES[1], cells[1])], PAIRS, SLICE, Number(values.warm));
} finally {
  for (const c of cells) await c.stop();
}
const summary = summarize(rows, NAMES);
const described = variants.map((v) => {
  const settings = [...Object.entries(v.env).map(([k, x]) => `${k}=${x}`), ...v.nodeArgs, ...(v.main ? [`MAIN=${v.main}`] : [])];
  return `${v.name} (\`${settings.join(' ') || 'the defaults'}\`)`;
});
const markdown = `# ${NAMES[0]} against ${NAMES[1]}, two gateways side by side, calls per CPU-s (bench/modes.ts)

Run on ${started.toISOString()} with \`node dist/bench/modes.js --pairs ${PAIRS} --slice ${SLICE} --warm ${values.warm} --callers ${CALLERS}
--stores ${sqlite ? 'sqlite' : '<two PostgreSQL databases>'} ${values.variant!.map((v) => `--variant '${v}'`).join(' ')}\`: ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version},
build ${codeVersion()}; load average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${loadavg()
  .map((l) => l.toFixed(2))
  .join(' ')}.

Two gateways, both running throughout, started in this order: ${described.join(' and ')}, metadata cache 5 s,
every run recorded, each its store ${sqlite ? 'SQLite' : 'in a PostgreSQL database of its own'}. They serve the seeds'
account lookup (a random aid of 1,000,000 on pgbench scale 10) with the plain key to ${CALLERS} callers (wrk), one
gateway at a time: ${values.warm} s of each to warm up, then ${PAIRS} pairs of ${SLICE} s slices, the order within a
pair alternating. Each slice is charged the CPU of the gateway it went to (utime + stime of the process, all its
threads, from /proc, 10 ms ticks). What a gateway does after its slice (its last runs written, its timers) falls in
the other's slice and is charged to neither, alike for both.

${pairsMarkdown(rows, NAMES, summary)}`;
const dir = writeResults(values.name!, [...rows, { summary }], markdown);
console.log(`${markdown}\n${dir}`);
