// What the PostgreSQL driver costs a lookup, for the versions of postgres.js in bench/drivers: each
// run by bench/drivers/lookup.mjs as the gateway's sources/postgres.ts uses it (max: 1 clients, a
// turn's calls joined on one), 32 callers, no HTTP, in interleaved rounds. The driver's process CPU a
// query, and the whole machine's over the same window (the database's backends with it, from /proc/stat). The drivers are
// installed from bench/drivers/package-lock.json with `npm ci` into ~/.cache/queryapigate-drivers.
//   npm run build && node dist/bench/drivers.js [--seconds 8] [--rounds 3] [--callers 32] [--suffix name]
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { median, writeResults } from './gateway.js';
import { installedVersion, installLocked, runCommand } from './locked.js';

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '3' },
    callers: { type: 'string', default: '32' },
    suffix: { type: 'string' },
  },
});
const DRIVERS = ['postgres-3', 'postgres-4'];
const SRC = fileURLToPath(new URL('../../bench/drivers', import.meta.url));
const dir = await installLocked(SRC, 'queryapigate-drivers', ['lookup.mjs']);
const versions = new Map(DRIVERS.map((d) => [d, installedVersion(dir, d)]));

type Row = { round: number; driver: string; version: string; queries_per_s: number; driver_us: number; machine_us: number };
const rows: Row[] = [];
for (let round = 0; round < Number(values.rounds); round++) {
  const order = round % 2 ? [...DRIVERS].reverse() : DRIVERS;
  for (const driver of order) {
    const out = await runCommand('node', [join(dir, 'lookup.mjs'), driver, values.pg!, values.seconds!, values.callers!]);
    const r = JSON.parse(out.trim().split('\n').pop()!) as { queries: number; cpu_us: number; machine_us: number; seconds: number };
    const row = {
      round,
      driver,
      version: versions.get(driver)!,
      queries_per_s: r.queries / r.seconds,
      driver_us: r.cpu_us / r.queries,
      machine_us: r.machine_us / r.queries,
    };
    rows.push(row);
    console.log(
      `${round} ${driver} ${row.version}: ${Math.round(row.queries_per_s)} q/s, driver ${row.driver_us.toFixed(1)} µs, machine ${row.machine_us.toFixed(1)} µs a query`,
    );
  }
}

const table = DRIVERS.map((d) => {
  const mine = rows.filter((r) => r.driver === d);
  const m = (k: 'queries_per_s' | 'driver_us' | 'machine_us') => median(mine.map((r) => r[k]));
  return `| postgres.js ${mine[0]!.version} | ${Math.round(m('queries_per_s')).toLocaleString('en-US')} | ${m('driver_us').toFixed(1)} | ${m('machine_us').toFixed(1)} |`;
}).join('\n');
const md = `# The PostgreSQL driver on the lookup (${new Date().toISOString().slice(0, 10)})

Made with \`node dist/bench/drivers.js --seconds ${values.seconds} --rounds ${values.rounds} --callers ${values.callers}\`:
pgbench's accounts by aid (scale 10), ${values.callers} callers each awaiting its query, 10 \`max: 1\` clients picked as
sources/postgres.ts picks them (a turn's calls joined on one, up to 16), prepared; no HTTP. Medians of the rounds.
The machine's CPU is every process's over the window (the database's backends, the driver, anything else running).
Node ${process.version}.

| Driver | queries/s | driver CPU µs a query | machine CPU µs a query |
|---|---|---|---|
${table}
`;
console.log(md);
console.log('written to', writeResults('drivers', rows, md, values.suffix));
