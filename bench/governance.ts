// Measures what governance costs a call, as the issue asks (in bench/, not in tests):
//
//  1. The first-call cost of the table check and of the masking trace per seed statement: the
//     film lookup on SQLite, the pgbench account lookup and the pgbench 100-row page with the join
//     on PostgreSQL, and the TPC-C order_status statement on MySQL. One call is
//     inspectStatement + checkTables + planMasks (with a schema Map for the statement's tables);
//     nothing caches it, and every sample is a text the process has not seen (a literal or an alias
//     varies). Measured (a) in a warm process (parsers loaded, code hot), median of many, and (b) as
//     the very first call in a fresh process, with and without the executor's parser preload
//     (createCallContext in src/call/context.ts analyses two statements when it starts).
//  2. A governed call against a plain one in steady state: a real server in this process
//     (QUERYAPIGATE_WORKERS=0, the examples loaded in a temp home), a plain key and a governed key
//     (allowed_tables film, rental; mask *.title hash), sequential example_film_lookup calls with
//     each key in interleaved rounds, over HTTP and straight through runCall.
//
//   npx tsc -p . && node dist/bench/governance.js [--samples 400] [--fresh 7] [--rounds 30] [--calls 100]
//
// Results go to bench/results/governance-<date>/ (results.jsonl + README.md).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Caller } from '../src/auth/keys.js';
import type { Inspection, SqlDialect } from '../src/governance/analysis.js';
import type { MaskRule, Schema } from '../src/governance/masking.js';
import { bodyText } from '../src/contract/exchange.js';
import { schemaOf } from '../src/governance/names.js';
import { exampleQueries } from '../src/examples/catalog.js';
import { adminApi, fmt, median, today, writeResults } from './gateway.js';
import { ALLOWED_TABLES, MASK, SQL } from './tpcc/queries.js';

const { values: args } = parseArgs({
  options: {
    samples: { type: 'string', default: '400' },
    fresh: { type: 'string', default: '7' },
    rounds: { type: 'string', default: '30' },
    calls: { type: 'string', default: '100' },
    // internal: one fresh-process measurement, printed as JSON
    'fresh-case': { type: 'string' },
    preload: { type: 'boolean', default: false },
  },
});

// ---------------------------------------------------------------- the seed statements

interface Case {
  id: string;
  label: string;
  dialect: SqlDialect;
  /** The statement; i > 0 varies a literal or an alias, so no text repeats. */
  sql(i: number): string;
  schema: Schema;
  allowed: string[];
  mask: MaskRule[];
  /** What the check and the trace must find, checked once before timing. */
  expect: { tables: string[]; actions: Array<string | null> };
}

const FILM_SQL = exampleQueries.find((q) => q.name === 'example_film_lookup')!.sql;
const ACCOUNT_SQL = 'SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = :aid'; // bench/oltp.ts
const PAGE_SQL =
  'SELECT a.aid, a.abalance, b.bid, b.bbalance FROM pgbench_accounts a JOIN pgbench_branches b ON b.bid = a.bid ' +
  'WHERE a.aid BETWEEN :start AND :start + 99 ORDER BY a.aid'; // bench/oltp.ts
const ORDER_STATUS_SQL = SQL.order_status; // bench/tpcc/run.ts's governed key runs it

const CASES: Case[] = [
  {
    id: 'film_lookup',
    label: 'example_film_lookup (sqlite)',
    dialect: 'sqlite',
    sql: (i) => (i === 0 ? FILM_SQL : FILM_SQL.replace("'-30 days'", `'-${30 + i} days'`)),
    schema: schemaOf(
      'sqlite',
      new Map([
        ['film', ['film_id', 'title', 'category', 'rating', 'length', 'rental_rate', 'rental_duration', 'release_year']],
        ['rental', ['rental_id', 'film_id', 'customer_id', 'staff_id', 'rental_date', 'return_date', 'amount']],
      ]),
    ),
    allowed: ['film', 'rental'],
    mask: [{ column: '*.title', action: 'hash' }],
    expect: { tables: ['film', 'rental'], actions: [null, 'hash', null, null, null, null, null] },
  },
  {
    id: 'pgbench_account',
    label: 'pgbench account lookup (postgres)',
    dialect: 'postgres',
    sql: (i) => (i === 0 ? ACCOUNT_SQL : ACCOUNT_SQL.replace('FROM pgbench_accounts', `FROM pgbench_accounts t${i}`)),
    schema: schemaOf(
      'postgres',
      new Map([
        ['pgbench_accounts', ['aid', 'bid', 'abalance', 'filler']],
        ['pgbench_branches', ['bid', 'bbalance', 'filler']],
      ]),
    ),
    allowed: ['pgbench_accounts', 'pgbench_branches'],
    mask: [{ column: '*.abalance', action: 'hash' }],
    expect: { tables: ['pgbench_accounts'], actions: [null, null, 'hash'] },
  },
  {
    id: 'pgbench_page',
    label: 'pgbench 100-row page with the join (postgres)',
    dialect: 'postgres',
    sql: (i) => (i === 0 ? PAGE_SQL : PAGE_SQL.replace(':start + 99', `:start + ${99 + i}`)),
    schema: schemaOf(
      'postgres',
      new Map([
        ['pgbench_accounts', ['aid', 'bid', 'abalance', 'filler']],
        ['pgbench_branches', ['bid', 'bbalance', 'filler']],
      ]),
    ),
    allowed: ['pgbench_accounts', 'pgbench_branches'],
    mask: [{ column: '*.abalance', action: 'hash' }],
    expect: { tables: ['pgbench_accounts', 'pgbench_branches'], actions: [null, 'hash', null, null] },
  },
  {
    id: 'tpcc_order_status',
    label: 'TPC-C order_status (mysql)',
    dialect: 'mysql',
    sql: (i) => (i === 0 ? ORDER_STATUS_SQL : ORDER_STATUS_SQL.replace(/\bo2\b/g, `o2_${i}`)),
    schema: schemaOf(
      'mysql',
      new Map([
        [
          'customer',
          [
            'c_id',
            'c_d_id',
            'c_w_id',
            'c_first',
            'c_middle',
            'c_last',
            'c_street_1',
            'c_street_2',
            'c_city',
            'c_state',
            'c_zip',
            'c_phone',
            'c_since',
            'c_credit',
            'c_credit_lim',
            'c_discount',
            'c_balance',
            'c_ytd_payment',
            'c_payment_cnt',
            'c_delivery_cnt',
            'c_data',
          ],
        ],
        ['orders', ['o_id', 'o_d_id', 'o_w_id', 'o_c_id', 'o_entry_d', 'o_carrier_id', 'o_ol_cnt', 'o_all_local']],
        [
          'order_line',
          ['ol_o_id', 'ol_d_id', 'ol_w_id', 'ol_number', 'ol_i_id', 'ol_supply_w_id', 'ol_delivery_d', 'ol_quantity', 'ol_amount', 'ol_dist_info'],
        ],
      ]),
    ),
    allowed: ALLOWED_TABLES,
    mask: MASK,
    expect: { tables: ['customer', 'order_line', 'orders'], actions: [null, null, 'hash', null, null, null, null, null, null, null, null, null, null] },
  },
];

type Gov = {
  inspectStatement: typeof import('../src/governance/analysis.js').inspectStatement;
  checkTables: typeof import('../src/governance/policy.js').checkTables;
  planMasks: typeof import('../src/governance/masking.js').planMasks;
};

async function importGovernance(): Promise<Gov> {
  // One after the other: concurrent import()s sharing a dependency can fail to link on Node 20.
  const a = await import('../src/governance/analysis.js');
  const p = await import('../src/governance/policy.js');
  const m = await import('../src/governance/masking.js');
  return { inspectStatement: a.inspectStatement, checkTables: p.checkTables, planMasks: m.planMasks };
}

/** What a fresh process prints, as its last line. */
interface FreshRun {
  imported: number;
  preloadMs: number;
  analyse: number;
  check: number;
  plan: number;
  total: number;
  parser: string;
  second: number;
}

interface Timed {
  analyse: number;
  check: number;
  plan: number;
  total: number;
  parser: string;
  inspection: Inspection;
  actions: Array<string | null>;
}

/** One governed first call: analyse the text, check the tables, trace the masks. */
function governOnce(g: Gov, c: Case, sql: string): Timed {
  const t0 = performance.now();
  const inspection = g.inspectStatement(sql, c.dialect);
  const t1 = performance.now();
  g.checkTables(inspection.analysis, c.allowed, c.schema);
  const t2 = performance.now();
  const plan = g.planMasks(inspection.analysis, c.schema, c.mask);
  const t3 = performance.now();
  return {
    analyse: t1 - t0,
    check: t2 - t1,
    plan: t3 - t2,
    total: t3 - t0,
    parser: inspection.analysis?.parser ?? `none (${inspection.failure})`,
    inspection,
    actions: plan.actions,
  };
}

// ---------------------------------------------------------------- a fresh process (child mode)

if (args['fresh-case']) {
  const c = CASES.find((x) => x.id === args['fresh-case']);
  if (!c) throw new Error(`unknown case ${args['fresh-case']}`);
  const t0 = performance.now();
  const g = await importGovernance();
  const imported = performance.now() - t0;
  let preloadMs = 0;
  if (args.preload) {
    // What createCallContext does when an executor starts.
    const p0 = performance.now();
    g.inspectStatement('SELECT a FROM t WHERE b = 1', 'postgres');
    g.inspectStatement('SELECT a FROM t LIMIT 1, 2', 'mysql');
    preloadMs = performance.now() - p0;
  }
  const first = governOnce(g, c, c.sql(1));
  const second = governOnce(g, c, c.sql(2));
  process.stdout.write(
    `${JSON.stringify({
      imported,
      preloadMs,
      analyse: first.analyse,
      check: first.check,
      plan: first.plan,
      total: first.total,
      parser: first.parser,
      second: second.total,
    })}\n`,
  );
  process.exit(0);
}

// ---------------------------------------------------------------- the bench (parent mode)

const SAMPLES = Number(args.samples);
const FRESH = Number(args.fresh);
const ROUNDS = Number(args.rounds);

const CALLS = Number(args.calls);
const loads: Array<{ at: string; load: number[] }> = [];
const noteLoad = (at: string) => loads.push({ at, load: loadavg().map((x) => Math.round(x * 100) / 100) });
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const ms = (x: number) => (x >= 10 ? fmt(x, 1) : x >= 1 ? fmt(x, 2) : fmt(x, 3));
const rows: object[] = [];
noteLoad('start');

// Check the cases read as they should before timing anything.
const gov = await importGovernance();
for (const c of CASES) {
  const r = governOnce(gov, c, c.sql(0));
  const got = JSON.stringify({ tables: r.inspection.analysis?.tables, actions: r.actions });
  if (got !== JSON.stringify(c.expect)) throw new Error(`${c.id}: ${got} (${r.parser}), expected ${JSON.stringify(c.expect)}`);
}

// 1a. Warm process: code hot, every sample a new text. Cases interleaved, sample by sample.
console.log(`1a. warm process: ${SAMPLES} unseen statements per case`);
for (let i = 0; i < 200; i++) for (const c of CASES) governOnce(gov, c, c.sql(100_000 + i)); // warm-up, other texts
const warm = new Map<string, Timed[]>(CASES.map((c) => [c.id, []]));
for (let i = 0; i < SAMPLES; i++) for (const c of CASES) warm.get(c.id)!.push(governOnce(gov, c, c.sql(1000 + i)));
const warmRows = CASES.map((c) => {
  const xs = warm.get(c.id)!;
  const col = (k: 'analyse' | 'check' | 'plan' | 'total') => xs.map((x) => x[k]);
  const row = {
    kind: 'first_call_warm',
    case: c.id,
    dialect: c.dialect,
    parser: xs[0].parser,
    samples: xs.length,
    analyse_ms: median(col('analyse')),
    check_ms: median(col('check')),
    plan_ms: median(col('plan')),
    total_ms: median(col('total')),
    total_p10_ms: pct(col('total'), 0.1),
    total_p90_ms: pct(col('total'), 0.9),
  };
  rows.push(row);
  console.log(`   ${c.label}: ${ms(row.total_ms)} ms (analyse ${ms(row.analyse_ms)}, check ${ms(row.check_ms)}, plan ${ms(row.plan_ms)}) via ${row.parser}`);
  return row;
});
noteLoad('after warm');

// 1b. Fresh processes: the very first call, parsers loaded on the way (or by the executor's preload).
console.log(`1b. fresh processes: ${FRESH} per case and mode`);
const SELF = fileURLToPath(import.meta.url);
const fresh = new Map<string, FreshRun[]>();
for (let k = 0; k < FRESH; k++) {
  for (const c of CASES) {
    for (const preload of [false, true]) {
      const r = spawnSync(process.execPath, [SELF, '--fresh-case', c.id, ...(preload ? ['--preload'] : [])], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`fresh ${c.id}: ${r.stderr}`); // no retry: a failure here is worth seeing
      const key = c.id + (preload ? '|preload' : '|cold');
      if (!fresh.has(key)) fresh.set(key, []);
      fresh.get(key)!.push(JSON.parse(r.stdout.trim().split('\n').pop()!));
    }
  }
}
const freshRows = CASES.flatMap((c) =>
  [false, true].map((preload) => {
    const xs = fresh.get(c.id + (preload ? '|preload' : '|cold'))!;
    const col = (k: Exclude<keyof FreshRun, 'parser'>) => xs.map((x) => x[k]);
    const row = {
      kind: 'first_call_fresh',
      case: c.id,
      dialect: c.dialect,
      preload,
      parser: xs[0].parser,
      processes: xs.length,
      import_ms: median(col('imported')),
      preload_ms: median(col('preloadMs')),
      total_ms: median(col('total')),
      total_min_ms: Math.min(...col('total')),
      total_max_ms: Math.max(...col('total')),
      analyse_ms: median(col('analyse')),
      check_ms: median(col('check')),
      plan_ms: median(col('plan')),
      second_call_ms: median(col('second')),
    };
    rows.push(row);
    console.log(
      `   ${c.label}, ${preload ? 'after the preload' : 'cold'}: first ${ms(row.total_ms)} ms (${ms(row.total_min_ms)}-${ms(row.total_max_ms)}), ` +
        `second ${ms(row.second_call_ms)} ms; import ${ms(row.import_ms)} ms${preload ? `, preload ${ms(row.preload_ms)} ms` : ''}`,
    );
    return row;
  }),
);
noteLoad('after fresh');

// 2. Steady state: the real call path, plain key against governed key.
console.log(`2. steady state: ${ROUNDS} interleaved rounds of ${CALLS} sequential calls per key`);
const { loadConfig } = await import('../src/config.js');
const { startServer } = await import('../src/serve.js');
const { createCallContext } = await import('../src/call/context.js');
const { createLimiterMemory } = await import('../src/auth/sharedBuckets.js');
const { runCall } = await import('../src/call/runCall.js');
const ADMIN = 'bench-admin-key';
const home = mkdtempSync(join(tmpdir(), 'qag-govbench-'));
const env = {
  QUERYAPIGATE_HOME: home,
  QUERYAPIGATE_PORT: '0',
  QUERYAPIGATE_API_KEY: ADMIN,
  QUERYAPIGATE_WORKERS: '0',
  QUERYAPIGATE_LOAD_EXAMPLES: '1',
  QUERYAPIGATE_LOG_LEVEL: 'warning',
};
const config = loadConfig(env);
const server = await startServer(config);
const base = `http://127.0.0.1:${server.port}`;
const api = adminApi(base, ADMIN);
const keys = {
  plain: (await api<{ secret: string }>('POST', '/api/v1/api-keys', { name: 'bench-plain', queries: ['example_film_lookup'], connections: [] })).secret,
  governed: (
    await api<{ secret: string }>('POST', '/api/v1/api-keys', {
      name: 'bench-governed',
      queries: ['example_film_lookup'],
      connections: [],
      allowed_tables: ['film', 'rental'],
      mask: [{ column: '*.title', action: 'hash' }],
    })
  ).secret,
};
type Who = keyof typeof keys;
const filmId = (i: number) => (i % 60) + 1;

async function httpCall(who: Who, i: number): Promise<string> {
  const res = await fetch(`${base}/q/example_film_lookup?film_id=${filmId(i)}`, { headers: { 'X-API-Key': keys[who] } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`HTTP ${who}: ${res.status} ${text}`);
  return text;
}

const ctx = createCallContext({ config, limiterMemory: createLimiterMemory(), answers: '' });
let seq = 0;
async function directCall(who: Who, i: number): Promise<string> {
  const a = await runCall(ctx, {
    requestId: `bench${(seq++).toString(16)}`,
    method: 'GET',
    url: '/q/example_film_lookup',
    query: `film_id=${filmId(i)}`,
    apiKey: keys[who],
    ifNoneMatch: '',
    lastEventId: '',
    body: null,
    ip: '127.0.0.1',
    started: performance.now(),
  });
  if (a.status !== 200) throw new Error(`runCall ${who}: ${a.status} ${bodyText(a)}`);
  return bodyText(a);
}

// The governed answer hides the title, the plain one shows it; both paths agree.
for (const call of [httpCall, directCall]) {
  const clear = JSON.parse(await call('plain', 6))[0];
  const hidden = JSON.parse(await call('governed', 6))[0];
  if (!/^[0-9a-f]{16}$/.test(hidden.title) || hidden.title === clear.title || hidden.film_id !== clear.film_id) {
    throw new Error(`the governed key's answer is not masked as expected: ${JSON.stringify({ clear, hidden })}`);
  }
}

type Stat = { m: number; lo: number; hi: number };
/** A steady-state row, as far as the report below reads it. */
interface SteadyRow {
  path: string;
  plain_cps: Stat;
  governed_cps: Stat;
  ratio: Stat;
  plain_cpu_cps: Stat;
  governed_cpu_cps: Stat;
  ratio_cpu: Stat;
  per_call_overhead_us: number;
  per_call_cpu_overhead_us: number;
  plain_median_ms: number;
  governed_median_ms: number;
  latency_ratio: number;
}
const steadyRows: SteadyRow[] = [];
for (const [path, call] of [
  ['http', httpCall],
  ['runCall', directCall],
] as const) {
  for (let i = 0; i < 300; i++) {
    await call('plain', i);
    await call('governed', i);
  }
  type Round = { plain: number; governed: number; ratio: number; plainCpu: number; governedCpu: number; ratioCpu: number };
  const perRound: Round[] = [];
  const latencies: Record<Who, number[]> = { plain: [], governed: [] };
  for (let r = 0; r < ROUNDS; r++) {
    // Interleaved call by call (plain, governed, plain, ... and the other way round in odd rounds), so a
    // change in the machine's load falls on both keys alike. Each key's rate in the round is its calls
    // over the time (wall, and this process's CPU) spent in them.
    const wall: Record<Who, number> = { plain: 0, governed: 0 };
    const cpu: Record<Who, number> = { plain: 0, governed: 0 };
    const order: Who[] = r % 2 === 0 ? ['plain', 'governed'] : ['governed', 'plain'];
    for (let i = 0; i < CALLS; i++) {
      for (const who of order) {
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await call(who, r * CALLS + i);
        const dt = performance.now() - t0;
        const c = process.cpuUsage(c0);
        wall[who] += dt;
        cpu[who] += (c.user + c.system) / 1000;
        latencies[who].push(dt);
      }
    }
    const rate = (who: Who, m: Record<Who, number>) => CALLS / (m[who] / 1000);
    perRound.push({
      plain: rate('plain', wall),
      governed: rate('governed', wall),
      ratio: wall.plain / wall.governed,
      plainCpu: rate('plain', cpu),
      governedCpu: rate('governed', cpu),
      ratioCpu: cpu.plain / cpu.governed,
    });
  }
  const col = (k: keyof Round) => perRound.map((x) => x[k]);
  const stat = (k: keyof Round) => ({ m: median(col(k)), lo: Math.min(...col(k)), hi: Math.max(...col(k)) });
  const row = {
    kind: 'steady',
    path,
    rounds: ROUNDS,
    calls_per_round: CALLS,
    plain_cps: stat('plain'),
    governed_cps: stat('governed'),
    ratio: stat('ratio'),
    plain_cpu_cps: stat('plainCpu'),
    governed_cpu_cps: stat('governedCpu'),
    ratio_cpu: stat('ratioCpu'),
    // from the median ratio, so it agrees with the ratio column: (1/ratio - 1) plain calls' time
    per_call_overhead_us: ((1 / stat('ratio').m - 1) / stat('plain').m) * 1e6,
    per_call_cpu_overhead_us: ((1 / stat('ratioCpu').m - 1) / stat('plainCpu').m) * 1e6,
    plain_median_ms: median(latencies.plain),
    governed_median_ms: median(latencies.governed),
    latency_ratio: median(latencies.plain) / median(latencies.governed),
    rounds_detail: perRound,
  };
  steadyRows.push(row);
  rows.push(row);
  console.log(
    `   ${path}: plain ${fmt(row.plain_cps.m)} calls/s, governed ${fmt(row.governed_cps.m)} calls/s, ratio ${fmt(row.ratio.m, 3)} ` +
      `(${fmt(row.ratio.lo, 3)}-${fmt(row.ratio.hi, 3)}); per CPU-s ${fmt(row.plain_cpu_cps.m)} vs ${fmt(row.governed_cpu_cps.m)}, ratio ${fmt(row.ratio_cpu.m, 3)} ` +
      `(${fmt(row.ratio_cpu.lo, 3)}-${fmt(row.ratio_cpu.hi, 3)}); median call ${fmt(row.plain_median_ms, 3)} vs ${fmt(row.governed_median_ms, 3)} ms`,
  );
  noteLoad(`after steady ${path}`);
}
// The governance stage alone, as runCall runs it for each call (governCall, then the masker on the row):
// the plan, the key rows, the connection and the source are the ones the calls above used.
const { governCall } = await import('../src/call/govern.js');
const { hashSecret } = await import('../src/auth/keys.js');
const plan = [...ctx.plans.values()][0];
const connection = (await ctx.meta.connection('examples'))!;
const source = ctx.source(connection);
const callers = Object.fromEntries(
  await Promise.all(
    (Object.keys(keys) as Who[]).map(async (who) => {
      const key = (await ctx.meta.key(hashSecret(keys[who])))!;
      return [who, { kind: 'key' as const, name: key.name, key }];
    }),
  ),
) as Record<Who, Caller>;
const COLUMNS = ['film_id', 'title', 'category', 'rating', 'length', 'rentals_last_30_days', 'currently_rented'];
async function stage(who: Who, n: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const g = await governCall(ctx.governance, plan, callers[who], 'example_film_lookup', connection, source);
    if (g.masker) g.masker(COLUMNS, [[i, 'ACADEMY DINOSAUR', 'Documentary', 'PG', 86, 3, 1]]);
  }
  return ((performance.now() - t0) / n) * 1000;
}
for (const who of ['plain', 'governed'] as Who[]) await stage(who, 2000);
const stageUs: Record<Who, number[]> = { plain: [], governed: [] };
for (let r = 0; r < 20; r++) for (const who of (r % 2 ? ['governed', 'plain'] : ['plain', 'governed']) as Who[]) stageUs[who].push(await stage(who, 1000));
const stageRow = {
  kind: 'governance_stage',
  rounds: 20,
  calls_per_round: 1000,
  plain_us: median(stageUs.plain),
  plain_min: Math.min(...stageUs.plain),
  plain_max: Math.max(...stageUs.plain),
  governed_us: median(stageUs.governed),
  governed_min: Math.min(...stageUs.governed),
  governed_max: Math.max(...stageUs.governed),
};
rows.push(stageRow);
console.log(`   governance stage alone: plain key ${fmt(stageRow.plain_us, 2)} µs, governed key ${fmt(stageRow.governed_us, 2)} µs per call`);
await ctx.close();
await server.stop();
rmSync(home, { recursive: true, force: true });
noteLoad('end');
rows.push({ kind: 'load', cores: cpus().length, loadavg: loads });

// ---------------------------------------------------------------- the report

const range = (m: number, lo: number, hi: number, f = (x: number) => fmt(x)) => `${f(m)} (${f(lo)}-${f(hi)})`;
const byCase = (id: string) => CASES.find((c) => c.id === id)!;
const meetsTrace = (x: number) => (x < 1 ? 'yes' : 'no');
const md = `# Governance: first-call cost and governed vs plain (${today()})

Made with \`npx tsc -p . && node dist/bench/governance.js --samples ${SAMPLES} --fresh ${FRESH} --rounds ${ROUNDS} --calls ${CALLS}\`
on this project's machine: ${cpus().length} cores, shared with other agents' benches while this ran. Load average
(1, 5, 15 min) during the run: ${loads.map((l) => `${l.at} ${l.load.join(' / ')}`).join('; ')}. With a load
of several runnable processes per core, every figure here is pessimistic and the spreads are wide.

The issue's targets: a governed call within 5% of a plain one in steady state, and the first-call trace under
1 ms for the seeds' queries. The seed's Python measured 0.3-1.5 ms for the table check and 6.9-28.9 ms for the
masking trace (first call).

## 1. First call per statement: analysis + table check + mask trace

One "first call" is \`inspectStatement\` (keyword scan, parse, lineage) + \`checkTables\` (the key's
allowed_tables) + \`planMasks\` (the key's mask rules over a schema Map of the statement's tables). The gateway
does this once per saved-query version, connection and rules (the plan and trace caches), so it is the
cost of a call that misses those caches. Every sample is a text the process has not seen (a literal or an
alias varies). Rules: film \`*.title\` hash; pgbench \`*.abalance\` hash; TPC-C \`customer.c_last\` hash and
\`*.c_data\` mask, with run.ts's allow-list.

### Warm process (parsers loaded, code hot): median of ${SAMPLES} per statement

| Statement | Parser | analyse ms | checkTables ms | planMasks ms | total ms (p10-p90) | under 1 ms |
|---|---|---|---|---|---|---|
${warmRows.map((r) => `| ${byCase(r.case).label} | ${r.parser} | ${ms(r.analyse_ms)} | ${ms(r.check_ms)} | ${ms(r.plan_ms)} | ${ms(r.total_ms)} (${ms(r.total_p10_ms)}-${ms(r.total_p90_ms)}) | ${meetsTrace(r.total_ms)} |`).join('\n')}
| *seed's Python, for comparison* | sqlglot | | *0.3-1.5 (table check)* | *6.9-28.9 (masking trace)* | | |

### The very first call in a fresh process: median of ${FRESH} processes (min-max)

"cold": nothing loaded, the parser is required on the way. "after the preload": as an executor, which
analyses one PostgreSQL and one MySQL statement when it starts (src/call/context.ts), loading
pgsql-ast-parser and node-sql-parser's MySQL grammar. "import" is loading the three governance modules
(the parsers themselves load lazily, in the first call or the preload).

| Statement | Mode | first call ms | analyse / check / plan ms | second call ms | import ms | preload ms |
|---|---|---|---|---|---|---|
${freshRows.map((r) => `| ${byCase(r.case).label} | ${r.preload ? 'after the preload' : 'cold'} | ${ms(r.total_ms)} (${ms(r.total_min_ms)}-${ms(r.total_max_ms)}) | ${ms(r.analyse_ms)} / ${ms(r.check_ms)} / ${ms(r.plan_ms)} | ${ms(r.second_call_ms)} | ${ms(r.import_ms)} | ${r.preload ? ms(r.preload_ms) : '-'} |`).join('\n')}

## 2. Steady state: governed against plain, example_film_lookup on the examples (SQLite)

A server in this process (\`startServer\`, QUERYAPIGATE_WORKERS=0, QUERYAPIGATE_LOAD_EXAMPLES=1, temp home,
other settings default). Keys made through the management API: plain (example_film_lookup only) and governed
(the same, plus allowed_tables film, rental and mask \`*.title\` hash). Each round makes ${CALLS} sequential
calls with each key (film ids 1-60 in turn, the same for both), interleaved call by call (plain, governed,
plain, ...; governed first in odd rounds); ${ROUNDS} rounds after 300 warm-up calls per key. A key's rate in a
round is its calls over the time spent in them. "http" is fetch from this process to the server; "runCall" calls
\`runCall\` with a CallContext of its own (\`createCallContext(config, createLimiterMemory())\`), no HTTP.
Cells are the median round (min-max); the ratio is governed/plain per round, then the median.

Wall clock (what was asked), and per CPU-second of this process (\`process.cpuUsage\`: the server, the client
and the recorder thread alike), which the other processes on the machine disturb less than the wall clock:

| Path | Measure | plain | governed | governed/plain | governed cost per call | within 5% |
|---|---|---|---|---|---|---|
${steadyRows.map((r) => `| ${r.path} | median call (all rounds) | ${fmt(r.plain_median_ms, 3)} ms | ${fmt(r.governed_median_ms, 3)} ms | ${fmt(r.latency_ratio, 3)} (as a rate) | ${fmt((r.governed_median_ms - r.plain_median_ms) * 1000, 1)} µs | ${r.latency_ratio >= 0.95 ? 'yes' : 'no'} |`).join('\n')}
${steadyRows
  .map((r) =>
    [
      `| ${r.path} | calls/s | ${range(r.plain_cps.m, r.plain_cps.lo, r.plain_cps.hi)} | ${range(r.governed_cps.m, r.governed_cps.lo, r.governed_cps.hi)} | ${range(r.ratio.m, r.ratio.lo, r.ratio.hi, (x) => fmt(x, 3))} | ${fmt(r.per_call_overhead_us, 1)} µs | ${r.ratio.m >= 0.95 ? 'yes' : 'no'} |`,
      `| ${r.path} | calls per CPU-s | ${range(r.plain_cpu_cps.m, r.plain_cpu_cps.lo, r.plain_cpu_cps.hi)} | ${range(r.governed_cpu_cps.m, r.governed_cpu_cps.lo, r.governed_cpu_cps.hi)} | ${range(r.ratio_cpu.m, r.ratio_cpu.lo, r.ratio_cpu.hi, (x) => fmt(x, 3))} | ${fmt(r.per_call_cpu_overhead_us, 1)} µs CPU | ${r.ratio_cpu.m >= 0.95 ? 'yes' : 'no'} |`,
    ].join('\n'),
  )
  .join('\n')}

The governance stage alone (\`governCall\` with the calls' own plan, key rows, connection and source, then the
masker on one row), 20 interleaved rounds of 1,000: plain key ${fmt(stageRow.plain_us, 2)} µs
(${fmt(stageRow.plain_min, 2)}-${fmt(stageRow.plain_max, 2)}), governed key ${fmt(stageRow.governed_us, 2)} µs
(${fmt(stageRow.governed_min, 2)}-${fmt(stageRow.governed_max, 2)}) per call, against a median call of
${steadyRows.map((r) => `${fmt(r.plain_median_ms, 3)} ms (${r.path})`).join(' and ')} with the plain key.

In steady state a governed call re-checks the key's tables against the cached analysis, looks its mask plan
up by plan, rules and schema fingerprint (the schema itself is cached for up to 60 s), and hashes the title
of each row (HMAC-SHA256); the analysis and the trace are not repeated. "governed cost per call" is
(1/ratio - 1) times the median plain call (or the difference of the median calls), so noise can make it negative.

Reading these: on this machine the round-to-round spread (tens of percent) is far wider than the 5% target, so
the medians can say "within a few percent" but not "within 5%" with confidence. The stage alone costs a few µs,
about 1% of a call, but the end-to-end medians differ by a few tens of µs more than that; an ad hoc split with
four keys (plain, allowed_tables only, mask only, both), call-by-call interleaved, 4,000 calls each, three
runs, gave runCall medians of plain 404/330/417 µs, tables only 384/317/400, mask only 414/338/424, both
445/358/451: the tables check costs nothing visible, the two together cost 25-40 µs that the stage itself does
not account for. Not explained here; worth a rerun on a quiet machine before reading it as real. Masking
cost grows with the rows: one HMAC is about 5 µs here, so the pgbench 100-row page with \`*.abalance\` hashed
spends about 0.5 ms a call on hashing alone (measured apart from this script), which matters against the 5%
target for that call.

## Parser order

PostgreSQL and SQLite text still goes to pgsql-ast-parser first, node-sql-parser being the fallback. Trying
node-sql-parser first (unsafe lexing still refused before it) made the analysis cheaper (measured apart from
this script, on the same loaded machine, median of 300 unseen texts, both orders interleaved in one process:
film lookup 11.2 -> 1.07 ms, pgbench page 4.07 -> 0.98 ms, pgbench account 0.97 -> 0.72 ms), but changed the
governance corpus (\`node --test dist/test/unit/governance.test.js\`: 3 of 13 tests
failed), so the order was kept:

- \`UPDATE film SET title = (SELECT pw FROM secret LIMIT 1)\` on PostgreSQL: node-sql-parser's PostgreSQL
  grammar gives each SET item \`type: 'column_ref'\` with the new value under \`value\`, and lowerNsp's walk
  stops at a column_ref, so the subquery's table \`secret\` is never seen: table_not_allowed became ok.
- The SQLite statements the tests pin to pgsql-ast-parser (the film lookup among them) changed parser.
- On a differential over the test file's statements in all three dialects (plus probes), the only other changes
  were output names (\`"Id"\` read as \`?column?\`) and, on SQLite text that SQLite itself rejects, lineage
  (\`email::text\` read as a column named \`email::text\`, \`LATERAL\` as a table function).

The SET gap is live today for PostgreSQL text that pgsql-ast-parser can't read and node-sql-parser can:
\`UPDATE film SET title = (SELECT pw FROM secret LIMIT 1) WHERE film_id IN (SELECT film_id FROM film INTERSECT
SELECT 1)\` analyses (node-sql-parser) as tables [film], so a key with writes and allowed_tables [film] would
pass it (src/governance/lowerNsp.ts, \`walk\`: a column_ref's \`value\` is never walked). MySQL's grammar shapes
SET differently and is not affected.

## What the first-call figures mean

- The table check and the mask trace proper (\`checkTables\`, \`planMasks\`, given the analysis) cost 2-3 µs
  and 10-30 µs: far under the seed's 0.3-1.5 ms and 6.9-28.9 ms. Nearly all of a first call is the parse
  (\`inspectStatement\`), which the seed's figures also include.
- With the parse counted, only the pgbench account lookup is under 1 ms here; the film lookup is the slowest by far
  (pgsql-ast-parser is a nearley/Earley parser; its cost grows with the select list, the two SUM(...)
  expressions and the GROUP BY list alike), and node-sql-parser would read it in about 1 ms.
- In a fresh process the first call is tens of ms even after the executor's preload, and the second call is
  still 10-40 ms: most of it is cold code (V8 compiling the parsers' grammar paths and the lowering), not the
  require. The preload warms one trivial statement per parser only.
`;

const dir = writeResults('governance', rows, md);
console.log(`results in ${dir}`);
process.exit(0);
