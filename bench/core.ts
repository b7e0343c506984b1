// The gateway core's first measurement: /health and example_film_lookup on the bundled SQLite
// examples, at 1 and 32 callers, with executors inline (QUERYAPIGATE_WORKERS=0) and pooled (1
// executor thread on this 2-core machine). Rounds are interleaved; each cell is the median round
// with its min-max. Run: npm run build && node dist/bench/core.js [--seconds 5] [--rounds 3]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureWrk, runLoad, type LoadResult } from './load.js';
import { fmt, median, startGateway, today, writeResults, type Gateway } from './gateway.js';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '3' } } });
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
ensureWrk();

const MODES = [
  { mode: 'inline', env: { QUERYAPIGATE_WORKERS: '0' } },
  { mode: 'pooled (1 executor)', env: { QUERYAPIGATE_WORKERS: '1' } },
];
const CALLS = [
  { call: '/health', path: '/health', key: false },
  { call: 'example_film_lookup', path: '/q/example_film_lookup\\?film_id=[1-9][0-9]?', key: true },
];
const CALLERS = [1, 32];

type Row = LoadResult & { mode: string; call: string; round: number; calls_per_cpu_s: number | null };
const rows: Row[] = [];

const gateways = new Map<string, { g: Gateway; home: string; key: string }>();
for (const m of MODES) {
  const home = mkdtempSync(join(tmpdir(), 'qag-bench-'));
  const g = await startGateway({ ...m.env, QUERYAPIGATE_HOME: home, QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  const key = (await g.api<{ secret: string }>('POST', '/api/v1/api-keys', { name: 'bench-plain', queries: ['example_film_lookup'], connections: [] })).secret;
  gateways.set(m.mode, { g, home, key });
}
try {
  for (let round = 1; round <= rounds; round++) {
    for (const c of CALLS) {
      for (const callers of CALLERS) {
        for (const m of MODES) {
          const { g, key } = gateways.get(m.mode)!;
          const r = await runLoad({
            randRegexUrl: g.url + c.path,
            duration: seconds,
            connections: callers,
            warmup: round === 1 ? 2 : 1,
            headers: c.key ? { 'X-API-Key': key } : {},
            pid: g.pid,
          });
          const row = { ...r, mode: m.mode, call: c.call, round, calls_per_cpu_s: r.cpu_s ? Math.round(r.requests / r.cpu_s) : null };
          rows.push(row);
          console.log(JSON.stringify(row));
        }
      }
    }
  }
} finally {
  for (const { g, home } of gateways.values()) {
    await g.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

const cell = (mode: string, call: string, callers: number) => rows.filter((r) => r.mode === mode && r.call === call && r.callers === callers);
const range = (xs: number[], d = 0) => `${fmt(median(xs), d)} (${fmt(Math.min(...xs), d)}-${fmt(Math.max(...xs), d)})`;
let table = '| Call | Callers | Executors | req/s | p50 ms | p99 ms | non-2xx | calls per gateway CPU-s |\n|---|---|---|---|---|---|---|---|\n';
for (const c of CALLS) {
  for (const callers of CALLERS) {
    for (const m of MODES) {
      const rs = cell(m.mode, c.call, callers);
      table +=
        `| ${c.call} | ${callers} | ${m.mode} | ${range(rs.map((r) => r.rps))} | ${range(
          rs.map((r) => r.p50_ms),
          2,
        )} | ` +
        `${range(
          rs.map((r) => r.p99_ms),
          2,
        )} | ${rs.reduce((a, r) => a + r.non2xx + r.errors, 0)} | ${range(rs.map((r) => r.calls_per_cpu_s ?? 0))} |\n`;
    }
  }
}
const md = `# Gateway core: /health and example_film_lookup (${today()})

Made with \`npm run build && node dist/bench/core.js --seconds ${seconds} --rounds ${rounds}\` on this project's machine
(2 cores; wrk, the gateway and SQLite share them). Each cell is the median of ${rounds} interleaved rounds of ${seconds} s,
with the min-max in brackets. The film id is random (1-99; ids above 60 return the empty answer, still 200).
"Calls per gateway CPU-s" divides the calls by the gateway process's utime+stime over the measured window.

${table}`;
console.log(`\n${md}\nwritten to ${writeResults('core', rows, md)}`);
