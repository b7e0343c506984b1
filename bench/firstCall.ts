// The first call of a newly published version against its next calls, through HTTP: the seeds'
// statements (the film lookup on the bundled SQLite examples, the pgbench account lookup and the
// 100-row page with the join on PostgreSQL, TPC-C order_status on MariaDB through the governed key
// of bench/tpcc: allowed tables, a hash and a mask), each published afresh (a new text, so nothing about
// it is cached), then called once after --settle ms, then --calls more times. A call's time is the
// client's wall time for the whole request. The gateway is inline (one thread), metadata cache on,
// a plain key. With MAIN=<a build's dist/src/main.js> another build runs the same cells, interleaved.
//
//   npx tsc -p . && node dist/bench/firstCall.js [--versions 15] [--calls 15] [--settle 300] [--pg postgres://.../qag_oltp_bench]
//        [--build name:path/to/dist/src/main.js ...] [--wake call|health] [--cases film_lookup,account_lookup,page_join,order_status]
//        [--my mysql://root@127.0.0.1:3306/qag_tpcc_bench]
// order_status needs the TPC-C estate on MariaDB: node dist/bench/tpcc/generate.js (one warehouse).
//
// Results go to bench/results/firstcall-<date>/ (results.jsonl + README.md).
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { exampleQueries } from '../src/examples/catalog.js';
import { DATABASE as TPCC_DATABASE } from './tpcc/generate.js';
import { ALLOWED_TABLES, MASK, SQL as TPCC_SQL } from './tpcc/queries.js';
import { adminApi, fmt, GATEWAY_NODE_ARGS, median, mysqlConnection, oltpConnection, spawnListening, today, writeResults } from './gateway.js';

const { values } = parseArgs({
  options: {
    versions: { type: 'string', default: '15' },
    calls: { type: 'string', default: '15' },
    settle: { type: 'string', default: '300' },
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    build: { type: 'string', multiple: true, default: [] },
    /** What wakes the server before each first call: a call of a version called before (call), or /health. */
    wake: { type: 'string', default: 'call' },
    cases: { type: 'string', default: 'film_lookup,account_lookup,page_join,order_status' },
    my: { type: 'string', default: `mysql://root@127.0.0.1:3306/${TPCC_DATABASE}` },
  },
});
const VERSIONS = Number(values.versions);
const CALLS = Number(values.calls);
const SETTLE = Number(values.settle);
const THIS_BUILD = new URL('../src/main.js', import.meta.url).pathname;
const builds = [
  { name: 'this build', main: THIS_BUILD },
  ...values.build!.map((b) => ({ name: b.slice(0, b.indexOf(':')), main: b.slice(b.indexOf(':') + 1) })),
];

interface Case {
  id: string;
  label: string;
  connection: string;
  /** The i-th fresh text of the statement. */
  sql(i: number): string;
  parameters: Record<string, unknown>;
  /** A call's query string. */
  args(n: number): string;
  /** Called through bench/tpcc's governed key (allowed tables, masks) rather than the plain one. */
  governed?: true;
}
const FILM_SQL = exampleQueries.find((q) => q.name === 'example_film_lookup')!.sql;
const ALL_CASES: Case[] = [
  {
    id: 'film_lookup',
    label: 'example_film_lookup (SQLite)',
    connection: 'examples',
    sql: (i) => FILM_SQL.replace("'-30 days'", `'-${30 + i} days'`),
    parameters: { film_id: { type: 'integer', required: true } },
    args: (n) => `film_id=${1 + (n % 900)}`,
  },
  {
    id: 'account_lookup',
    label: 'pgbench account lookup (PostgreSQL)',
    connection: 'oltp',
    sql: (i) => `SELECT aid, bid, abalance FROM pgbench_accounts t${i} WHERE t${i}.aid = :aid`,
    parameters: { aid: { type: 'int', required: true } },
    args: (n) => `aid=${1 + ((n * 7919) % 999_999)}`,
  },
  {
    id: 'page_join',
    label: 'pgbench 100-row page with the join (PostgreSQL)',
    connection: 'oltp',
    sql: (i) =>
      'SELECT a.aid, a.abalance, b.bid, b.bbalance FROM pgbench_accounts a JOIN pgbench_branches b ON b.bid = a.bid ' +
      `WHERE a.aid BETWEEN :start AND :start + ${99 + i} ORDER BY a.aid`,
    parameters: { start: { type: 'int', required: true } },
    args: (n) => `start=${1 + ((n * 7919) % 999_000)}`,
  },
  {
    id: 'order_status',
    label: 'TPC-C order_status, governed key (MariaDB)',
    connection: 'tpcc',
    // A condition every row meets (10 districts a warehouse) makes each version's text new.
    sql: (i) => TPCC_SQL.order_status.replace('WHERE o.o_w_id = :w_id', `WHERE o.o_w_id = :w_id AND o.o_d_id <= ${10 + i}`),
    parameters: { w_id: { type: 'int', required: true }, d_id: { type: 'int', required: true }, c_id: { type: 'int', required: true } },
    args: (n) => `w_id=1&d_id=${1 + (n % 9)}&c_id=${1000 + ((n * 7919) % 2000)}&page_size=20`,
    governed: true,
  },
];
const CASES = ALL_CASES.filter((c) => values.cases!.split(',').includes(c.id));
const MY = new URL(values.my!);

/** The TPC-C estate must be there before a gateway is started for it. */
async function checkTpcc(): Promise<void> {
  const c = await mysql.createConnection({ host: MY.hostname, port: Number(MY.port || 3306), user: decodeURIComponent(MY.username) });
  try {
    const [rows] = (await c.query('SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = ?', [
      MY.pathname.slice(1),
      'orders',
    ])) as unknown as [unknown[]];
    if (rows.length === 0)
      throw new Error(`order_status: no TPC-C estate in ${values.my}; run node dist/bench/tpcc/generate.js first, or leave it out with --cases`);
  } finally {
    await c.end();
  }
}
if (CASES.some((c) => c.id === 'order_status')) await checkTpcc();

interface Row {
  build: string;
  case: string;
  round: number;
  first_ms: number;
  steady_ms: number;
}
const rows: Row[] = [];

async function timed(url: string, key: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(url, { headers: { 'X-API-Key': key } });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return performance.now() - t;
}

async function cell(build: { name: string; main: string }, round: number): Promise<void> {
  const home = mkdtempSync(join(tmpdir(), 'qag-first-'));
  const l = await spawnListening([...GATEWAY_NODE_ARGS, build.main, 'serve'], {
    QUERYAPIGATE_PORT: '0',
    QUERYAPIGATE_API_KEY: 'bench-admin',
    QUERYAPIGATE_HOME: home,
    QUERYAPIGATE_WORKERS: '0',
    QUERYAPIGATE_METADATA_CACHE_TTL: '5',
    QUERYAPIGATE_LOAD_EXAMPLES: '1',
  });
  const api = adminApi(l.url, 'bench-admin');
  try {
    await oltpConnection(api, values.pg!);
    const { secret: plain } = await api<{ secret: string }>('POST', '/api/v1/api-keys', { name: 'first', queries: '*', connections: [] });
    const keyOf = (c: Case) => (c.governed ? governed : plain);
    let governed = '';
    if (CASES.some((c) => c.connection === 'tpcc')) {
      await mysqlConnection(api, 'tpcc', values.my!);
      const key = { name: 'governed', queries: '*', connections: [], allowed_tables: ALLOWED_TABLES, mask: MASK };
      governed = (await api<{ secret: string }>('POST', '/api/v1/api-keys', key)).secret;
    }
    let n = 0;
    // Each statement also published once more as a version called before every measured first call (see below).
    for (const c of CASES) {
      await api('POST', '/api/v1/queries', {
        name: `${c.id}_wake`,
        connection_name: c.connection,
        description: 'wakes',
        publish: true,
        sql: c.sql(round * 1000 + 999),
        parameters: c.parameters,
      });
      for (let i = 0; i < 3; i++) await timed(`${l.url}/q/${c.id}_wake?${c.args(n++)}`, keyOf(c));
    }
    for (let v = 0; v < VERSIONS; v++) {
      for (const c of CASES) {
        const name = `${c.id}_${v}`;
        await api('POST', '/api/v1/queries', {
          name,
          connection_name: c.connection,
          description: name,
          publish: true,
          sql: c.sql(round * 1000 + v),
          parameters: c.parameters,
        });
        await new Promise((r) => setTimeout(r, SETTLE)); // a user's first call comes some time after the publish
        // After the idle settle any request is slower, whatever it asks: /health took 3.1-3.9 ms, then
        // 0.9-3.1 ms just after, on this machine. A call that measures nothing wakes the client, the
        // server's call path and the database's session first (a version of the same statement called
        // before, on the same connection; --wake health: only /health, as before 2026-12-03), so
        // "first - next" is the first call's own cost, not the idle's.
        if (values.wake === 'health') await (await fetch(`${l.url}/health`)).arrayBuffer();
        else await timed(`${l.url}/q/${c.id}_wake?${c.args(n++)}`, keyOf(c));
        const url = `${l.url}/q/${name}?`;
        const first = await timed(url + c.args(n++), keyOf(c));
        const next: number[] = [];
        for (let i = 0; i < CALLS; i++) next.push(await timed(url + c.args(n++), keyOf(c)));
        rows.push({ build: build.name, case: c.id, round, first_ms: first, steady_ms: median(next) });
      }
    }
  } finally {
    await l.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

const load0 = loadavg();
for (let round = 0; round < 2; round++) {
  const order = round % 2 === 0 ? builds : [...builds].reverse();
  for (const b of order) await cell(b, round);
}
const load1 = loadavg();

let md = `# The first call of a newly published version (${today()})

Made with \`node dist/bench/firstCall.js --versions ${VERSIONS} --calls ${CALLS} --settle ${SETTLE} --wake ${values.wake} --cases ${CASES.map((c) => c.id).join(',')}${values.build!.map((b) => ` --build ${b}`).join('')}\`: each build's gateway inline, in 2 interleaved rounds; in each, every
statement published ${VERSIONS} times as a fresh text, called once ${SETTLE} ms after its publish (right after ${values.wake === 'health' ? 'a /health request that wakes the HTTP connection' : "a call of another version of the same statement, called before, which wakes the HTTP connection, the call path and the database's session"}), then ${CALLS} more times (their
median is "next calls"). Times are the client's wall time for the whole request over HTTP on this 2-core machine, shared
with the databases. Load average ${load0.map((x) => x.toFixed(1)).join(' ')} before, ${load1.map((x) => x.toFixed(1)).join(' ')} after.

| Build | Statement | first call ms, median (p90) | next calls ms, median | first - next ms |
|---|---|---|---|---|
`;
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.9))];
for (const b of builds) {
  for (const c of CASES) {
    const mine = rows.filter((r) => r.build === b.name && r.case === c.id);
    const first = mine.map((r) => r.first_ms);
    const steady = mine.map((r) => r.steady_ms);
    md += `| ${b.name} | ${c.label} | ${fmt(median(first), 2)} (${fmt(p90(first), 2)}) | ${fmt(median(steady), 2)} | ${fmt(median(first) - median(steady), 2)} |\n`;
  }
}
console.log(md);
console.log(`written to ${writeResults('firstcall', rows, md)}`);
