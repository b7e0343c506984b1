// Failing servers (issue 20): a PostgreSQL of the bench's own is stopped and started again under a
// steady load, once as a data source and once as the store (metadata cache on and off), and the
// answers, the runs kept and dropped, the time to fail and the time to recover are written to
// bench/results/faults-<date>/. The scenarios are the fault test's (test/faultRig.ts), run longer.
//
//   node dist/bench/faults.js [--down 10] [--callers 4] [--pause 5] [--workers 1] [--before <dist/src/main.js of another build>]
//                             [--only source,store-cached,store-uncached]
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { dataSourceOutage, type FaultOptions, type FaultOutcome, type StoreOutcome, startPrivatePostgres, storeOutage } from '../test/faultRig.js';
import { fmt, today, writeResults } from './gateway.js';

const { values } = parseArgs({
  options: {
    down: { type: 'string', default: '10' },
    callers: { type: 'string', default: '4' },
    pause: { type: 'string', default: '5' },
    workers: { type: 'string', default: '1' },
    before: { type: 'string' },
    /** Comma-separated: source, store-cached, store-uncached (default all three). */
    only: { type: 'string', default: 'source,store-cached,store-uncached' },
  },
});

const base: FaultOptions = {
  callers: Number(values.callers),
  pauseMs: Number(values.pause),
  warmMs: 3000,
  downMs: Number(values.down) * 1000,
  afterMs: 8000,
  workers: Number(values.workers),
};
const builds: [name: string, main: string | undefined][] = [['this branch', undefined]];
if (values.before) builds.unshift(['before', values.before]);

/** An outcome without the server's output; its stack-trace lines are counted, the first few kept. */
type Row = Omit<FaultOutcome, 'output'> & Partial<StoreOutcome> & { build: string; stackLineCount: number; log: string[] };
const rows: Row[] = [];
const pg = await startPrivatePostgres();
let n = 0;
try {
  for (const [build, main] of builds) {
    const o = { ...base, main };
    const run = async (f: (home: string) => Promise<FaultOutcome | StoreOutcome>) => {
      const home = mkdtempSync(join(tmpdir(), 'qag-bench-faults-'));
      try {
        const { output, ...outcome } = await f(home);
        // The server's own lines (not stack frames), deduplicated, for what an outage looks like in the log.
        const log = [...new Set(output.split('\n').filter((l) => l.trim() && !/^\s+at /.test(l)))].slice(0, 20);
        const r: Row = { ...outcome, stackLines: outcome.stackLines.slice(0, 5), stackLineCount: outcome.stackLines.length, log, build };
        rows.push(r);
        console.log(JSON.stringify(r));
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    };
    const only = values.only.split(',');
    if (only.includes('source')) await run((home) => dataSourceOutage(pg, home, o));
    if (only.includes('store-cached')) await run((home) => storeOutage(pg, home, `bench_store_${++n}`, 60, o));
    if (only.includes('store-uncached')) await run((home) => storeOutage(pg, home, `bench_store_${++n}`, 0, o));
  }
} finally {
  await pg.destroy();
}

const ms = (x: number | null) => (x === null ? 'never' : `${fmt(x)} ms`);
const statuses = (by: Record<string, number>) =>
  Object.entries(by)
    .sort()
    .map(([s, c]) => `${s === '0' ? 'no answer' : s}: ${fmt(c)}`)
    .join(', ');
const isStore = (r: Row): r is Row & StoreOutcome => r.runsMade !== undefined;
const table = rows
  .map((r) => {
    const runs = isStore(r) ? `${fmt(r.runsMade)} / ${fmt(r.runsInLog)} / ${fmt(r.dropped)} / ${fmt(r.failed)} / ${fmt(r.runsMissing)}` : 'n/a (SQLite store)';
    return `| ${r.scenario} | ${r.build} | ${fmt(r.calls)} | ${statuses(r.byStatus)} | ${statuses(r.downByStatus)} | ${ms(r.longestWhileDownMs)} | ${ms(r.longestMs)} | ${ms(r.timeToFailMs)} | ${ms(r.timeToRecoverMs)} | ${fmt(r.errorsAfterRecovery)} | ${runs} | ${fmt(r.stackLineCount)} | ${r.problems.join('; ') || 'none'} |`;
  })
  .join('\n');
const logs = rows.map((r) => `- ${r.scenario}, ${r.build}:\n${r.log.map((l) => `  - \`${l.slice(0, 200)}\``).join('\n')}`).join('\n');
const codes = rows
  .map(
    (r) =>
      `- ${r.scenario}, ${r.build}: ${
        Object.entries(r.codes)
          .map(([c, k]) => `${c} × ${fmt(k)}`)
          .join(', ') || 'none'
      }`,
  )
  .join('\n');

const md = `# Failing servers (${today()})

Made with \`node dist/bench/faults.js --down ${values.down} --callers ${values.callers} --pause ${values.pause} --workers ${values.workers}${values.before ? " --before <the base commit's dist/src/main.js>" : ''}\`
(test/faultRig.ts): a PostgreSQL of the bench's own (initdb in a temporary folder) is stopped with \`pg_ctl stop -m fast\`
after ${base.warmMs / 1000} s of load, started again ${values.down} s later, and the load goes on for ${base.afterMs / 1000} s more. The load is
${values.callers} callers in a loop, each pausing ${values.pause} ms between answers, on a one-row saved query; one gateway process with
${values.workers} executor thread(s). Scenarios:

- **data source**: the query runs on that PostgreSQL; the store is SQLite.
- **store, metadata cache on / off**: that PostgreSQL is the store (\`QUERYAPIGATE_DATABASE_URL\`), with
  \`QUERYAPIGATE_METADATA_CACHE_TTL=60\` or \`0\`, \`QUERYAPIGATE_HISTORY_MAX_PENDING=10000\`; the query runs on the shared
  PostgreSQL at 127.0.0.1:5432. After the load the event log is read back through \`GET /api/v1/events\` and every run is
  looked for by its request id.

Load average at the end: ${loadavg()
  .map((x) => x.toFixed(1))
  .join(' ')} on 2 cores (shared with other work: read the figures within one row, and rows against each other as rough).

| Scenario | Build | Calls | Answers | Answers to calls sent while down | Longest wait while down | Longest wait | Time to fail | Time to recover | Errors after recovery | Runs made / in the event log / dropped / failed / missing | Stack-trace lines in the log | Problems |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
${table}

- Time to fail: from the start of \`pg_ctl stop\` to the first error answer. Time to recover: from \`pg_ctl start\` returning
  (the server accepts connections) to the first 200 answer to a call sent after it. Errors after recovery: error answers
  to calls sent after that first 200 arrived.
- Runs made: what the callers know to be runs: every 200, and every error answer whose run is in the log (a call
  that got its key and query rows and then failed on the connection's row is a run; a 500 or 503 before that is not).
  Missing: runs made that are not in the event log. Dropped and failed are the recorder's
  \`queryapigate_history_runs_total\` counts.
- Longest wait: over the whole run, the first calls included (the first connect and the parsers' warm-up).
- Problems: the event log could not be read back after the load (20 s limit), or the server did not stop within 20 s
  of SIGTERM.

Error codes:

${codes}

What the server logged (its own lines, each once, stack frames left out; the first 20):

${logs}
`;
console.log(md, '\nwritten to', writeResults('faults', rows, md));
