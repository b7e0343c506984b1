// A/B of gateway settings on the PostgreSQL account lookup: each variant's process in turn, in
// interleaved rounds, calls per gateway CPU-s and req/s at 32 callers (--callers); the floor in the same rounds.
//   node dist/bench/levers.js --pg postgres://postgres@127.0.0.1:5432/qag_oltp_bench [--seconds 5] [--rounds 3] [--callers 32]
//        (--pg mysql://root@127.0.0.1:3306/qag_bench_my: the lookup on MariaDB, its floor node:http + mysql2)
//        [--variant 'name:ENV=V,ENV2=V2' ...]   (MAIN=<a build's dist/src/main.js> runs that build,
//        NODE_ARGS='<node flags>' starts it with them; KEY=governed calls with the seeds' governed key (allowed tables,
//        abalance hashed) instead of the plain one; QUERYAPIGATE_DATABASE_URL=postgres://.../<db> puts its
//        store there, a database this bench drops and creates afresh for every cell) [--floor-args '<node flags>']
// With a local PostgreSQL server, each cell also gives the CPU its backends spent a call, for the lookup's database and
// the cell's store (bench/dbCpu.ts). Variants must keep the log level at info or below: the start is seen by its
// "listening on" line.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { BackendCpu } from './dbCpu.js';
import { ensureWrk, runLoad } from './load.js';
import { fmt, type LookupCell, lookupCell, median, parseVariant, spawnListening, today, type Variant, writeResults } from './gateway.js';

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    callers: { type: 'string', default: '32' },
    variant: { type: 'string', multiple: true, default: ['inline:QUERYAPIGATE_WORKERS=0', 'pooled:QUERYAPIGATE_WORKERS=1'] },
    /** Node flags for the floor too (say, the V8 flags a variant tries), space-separated. */
    'floor-args': { type: 'string', default: '' },
  },
});
ensureWrk();
// A mysql:// URL for --pg runs the lookup on MariaDB, beside the node:http + mysql2 floor.
const FLOOR = fileURLToPath(new URL(values.pg!.startsWith('mysql:') ? './floorMysql.js' : './floor.js', import.meta.url));
const variants = values.variant!.map(parseVariant);

async function gatewayCell(v: Variant): Promise<LookupCell> {
  const cell = await lookupCell(v, values.pg!);
  return {
    ...cell,
    stop: async () => {
      rss = rssMb(cell.pid);
      await cell.stop();
    },
  };
}

/** VmRSS of a process in MiB, read just before it is stopped (after its cell's load). */
let rss = 0;
const rssMb = (pid: number) => Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);

const floor = await spawnListening([...values['floor-args']!.split(' ').filter(Boolean), FLOOR, values.pg!, '10']);
const cells: Array<{ name: string; start: () => Promise<LookupCell> }> = [
  {
    name: 'floor',
    start: async () => ({
      url: `${floor.url}/q/account\\?aid=[1-9][0-9]{0,5}`,
      key: '-',
      pid: floor.pid,
      stop: async () => {
        rss = rssMb(floor.pid);
      },
    }),
  },
  ...variants.map((v) => ({ name: v.name, start: () => gatewayCell(v) })),
];
// The PostgreSQL server's backends for the lookup's database and each cell's store: their CPU a call (bench/dbCpu.ts).
const sourceDb = values.pg!.startsWith('postgres') ? new URL(values.pg!).pathname.slice(1) : null;
const admin = sourceDb ? postgres(Object.assign(new URL(values.pg!), { pathname: '/postgres' }).href, { max: 1, onnotice: () => undefined }) : null;
const storeDb = (name: string) => {
  const url = variants.find((v) => v.name === name)?.env.QUERYAPIGATE_DATABASE_URL;
  return url?.startsWith('postgres') ? new URL(url).pathname.slice(1) : null;
};
type Row = { rps: number; perCpu: number; p50: number; p99: number; rss: number; dbSourceUs: number | null; dbStoreUs: number | null };
const got = new Map<string, Row[]>();
try {
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const c of [...cells.slice(r % cells.length), ...cells.slice(0, r % cells.length)]) {
      const p = await c.start();
      const store = storeDb(c.name);
      const db = admin && sourceDb ? new BackendCpu(admin, store ? [sourceDb, store] : [sourceDb]) : null;
      const load = await runLoad({
        measured: db?.measured,
        randRegexUrl: p.url,
        duration: Number(values.seconds),
        connections: Number(values.callers),
        warmup: 2,
        headers: { 'X-API-Key': p.key },
        pid: p.pid,
      }).finally(() => p.stop());
      const perCall = (d: string | null) => (d && db?.seconds?.has(d) ? Math.round((db.seconds.get(d)! * 1e7) / load.requests) / 10 : null);
      const row: Row = {
        rps: load.rps,
        perCpu: load.cpu_s ? load.requests / load.cpu_s : 0,
        p50: load.p50_ms,
        p99: load.p99_ms,
        rss,
        dbSourceUs: perCall(sourceDb),
        dbStoreUs: perCall(store),
      };
      got.set(c.name, [...(got.get(c.name) ?? []), row]);
      console.log(r, c.name, Math.round(row.rps), Math.round(row.perCpu), row.p50, row.p99, row.rss, row.dbSourceUs, row.dbStoreUs);
    }
  }
} finally {
  await floor.stop();
  await admin?.end();
}
const floorPerCpu = median(got.get('floor')!.map((x) => x.perCpu));
let md = `# Levers on the account lookup (${today()})\n\nMade with \`node dist/bench/levers.js ${process.argv.slice(2).join(' ')}\`: ${values.callers} caller(s), ${values.seconds} s cells, ${values.rounds} interleaved rounds, medians; metadata cache on, a plain key unless the variant says KEY=governed (allowed_tables pgbench_accounts and pgbench_branches, \`*.abalance\` hashed: bench/oltp.ts's governed key). Calls per CPU-s count the gateway's (or the floor's) process; the PostgreSQL server's backends are apart, as µs of CPU a call for the lookup's database and the cell's store (bench/dbCpu.ts; - where not measured).\n\n| Cell | req/s | calls per CPU-s | ÷ floor per CPU-s | p50 ms | p99 ms | RSS after, MiB | PostgreSQL µs a call: lookup, store |\n|---|---|---|---|---|---|---|---|\n`;
const dbMedian = (xs: Array<number | null>) => (xs.every((x) => x !== null) ? median(xs as number[]).toFixed(1) : '-');
for (const [name, xs] of got) {
  const perCpu = median(xs.map((x) => x.perCpu));
  md += `| ${name} | ${fmt(median(xs.map((x) => x.rps)))} | ${fmt(perCpu)} | ${(perCpu / floorPerCpu).toFixed(2)} | ${median(xs.map((x) => x.p50)).toFixed(2)} | ${median(xs.map((x) => x.p99)).toFixed(1)} | ${median(xs.map((x) => x.rss))} | ${dbMedian(xs.map((x) => x.dbSourceUs))}, ${dbMedian(xs.map((x) => x.dbStoreUs))} |\n`;
}
console.log(md);
console.log(
  'written to',
  writeResults(
    'levers',
    [...got].map(([name, xs]) => ({ name, xs, variants })),
    md,
  ),
);
