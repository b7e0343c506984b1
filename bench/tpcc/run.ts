// The TPC-C estate on MariaDB through the gateway, laid out like the seeds' MySQL table: a customer
// lookup, order_status with a reader key and with a governed key (allowed_tables, a hash and a
// mask rule), and stock_level, each at 1 and 32 callers; plus the database alone on the same
// statements (mysql2 prepared statements from this process) and a /health floor. Rounds are
// interleaved and rotated; each cell is the median round with its min-max.
//
//   npm run build && node dist/bench/tpcc/run.js [--warehouses 1] [--seconds 5] [--rounds 3] [--quick]
//        [--small] [--seed 42]
//
// --quick: 2 s cells, 1 round, for checking the bench works. The estate is built (or kept) by
// generate.ts first; the gateway runs with a SQLite store in a temp home. To measure committed code
// rather than the working tree: bash bench/tpcc/run-committed.sh [--ref HEAD] [these arguments].
import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { ensureWrk, processCpuSeconds, runLoad, type LoadResult } from '../load.js';
import { fmt, median, range, startGateway, today, writeResults, type Gateway } from '../gateway.js';
import { DEFAULT_TARGET, ensureEstate, SCALES, type Estate } from './generate.js';
import { ALLOWED_TABLES, MASK, SQL } from './queries.js';

const { values } = parseArgs({
  options: {
    warehouses: { type: 'string', default: '1' },
    seconds: { type: 'string' },
    rounds: { type: 'string' },
    quick: { type: 'boolean', default: false },
    small: { type: 'boolean', default: false },
    seed: { type: 'string', default: '42' },
  },
});
const quick = values.quick!;
const seconds = Number(values.seconds ?? (quick ? 2 : 5));
const rounds = Number(values.rounds ?? (quick ? 1 : 3));
const warehouses = Number(values.warehouses);
const seed = Number(values.seed);
const scale = values.small ? SCALES.small : SCALES.full;
const CALLERS = [1, 32];
const target = DEFAULT_TARGET;

// ---------------------------------------------------------------- the saved queries

type QueryName = keyof typeof SQL;
const INT = { type: 'int', required: true };
const PARAMS: Record<QueryName, string[]> = {
  customer: ['w_id', 'd_id', 'c_id'],
  order_status: ['w_id', 'd_id', 'c_id'],
  stock_level: ['w_id', 'd_id', 'threshold'],
};

// Random parameters, the same spread for wrk's URL patterns and the database-alone driver:
// w_id 1..W (W <= 9), d_id 1..9 (district 10 is left out: the pattern language has no alternation),
// c_id uniform over 1000-2999 (a [12][0-9]{3} pattern; 100-299 at --small), threshold 10-19.
if (warehouses > 9) throw new RangeError('--warehouses: at most 9 (the random URL patterns draw one digit)');
const custDigits = String(scale.customers).length - 1; // 3000 -> 3 digits after the leading 1 or 2
const cLo = 10 ** custDigits;
const PATTERN = {
  w_id: `[1-${warehouses}]`,
  d_id: '[1-9]',
  c_id: `[12][0-9]{${custDigits}}`,
  threshold: '1[0-9]',
};
const draw: Record<string, () => number> = {
  w_id: () => 1 + Math.floor(Math.random() * warehouses),
  d_id: () => 1 + Math.floor(Math.random() * 9),
  c_id: () => cLo + Math.floor(Math.random() * 2 * cLo),
  threshold: () => 10 + Math.floor(Math.random() * 10),
};
const queryPattern = (q: QueryName) =>
  `/q/${q}\\?${PARAMS[q].map((p) => `${p}=${PATTERN[p as keyof typeof PATTERN]}`).join('&')}${q === 'order_status' ? '&page_size=20' : ''}`;

/** The gateway cells, in the seed's order. */
const CALLS: Array<{ call: string; query: QueryName; key: 'reader' | 'governed' }> = [
  { call: 'Customer lookup', query: 'customer', key: 'reader' },
  { call: 'order_status', query: 'order_status', key: 'reader' },
  { call: 'order_status, governed key', query: 'order_status', key: 'governed' },
  { call: 'stock_level', query: 'stock_level', key: 'reader' },
];

// ---------------------------------------------------------------- the database alone

/** `:name` placeholders to `?` with the argument order (the gateway does the same on its side). */
function positional(sql: string): { sql: string; names: string[] } {
  const names: string[] = [];
  return {
    sql: sql.replace(/:([a-z_]+)/g, (_, n: string) => {
      names.push(n);
      return '?';
    }),
    names,
  };
}

interface DbResult {
  callers: number;
  duration_s: number;
  requests: number;
  errors: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

/** Closed loop: `callers` sessions each run the statement back to back for `s` seconds. */
async function runDb(query: QueryName, callers: number, s: number): Promise<DbResult> {
  const { sql, names } = positional(SQL[query]);
  const pool = mysql.createPool({ ...target, connectionLimit: callers, maxIdle: callers });
  try {
    // open every session and prepare the statement on it before the clock starts
    const conns = await Promise.all(Array.from({ length: callers }, () => pool.getConnection()));
    await Promise.all(
      conns.map((c) =>
        c.execute(
          sql,
          names.map((n) => draw[n]()),
        ),
      ),
    );
    for (const c of conns) c.release();
    const lat: number[] = [];
    let errors = 0;
    const t0 = performance.now();
    const end = t0 + s * 1000;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        const c = await pool.getConnection();
        try {
          while (performance.now() < end) {
            const args = names.map((n) => draw[n]());
            const t = performance.now();
            try {
              await c.execute(sql, args);
              lat.push(performance.now() - t);
            } catch {
              errors++;
            }
          }
        } finally {
          c.release();
        }
      }),
    );
    const duration_s = (performance.now() - t0) / 1000;
    lat.sort((a, b) => a - b);
    const pct = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))] : 0);
    const r3 = (n: number) => Number(n.toFixed(3));
    return {
      callers,
      duration_s: r3(duration_s),
      requests: lat.length,
      errors,
      rps: Number((lat.length / duration_s).toFixed(1)),
      p50_ms: r3(pct(50)),
      p99_ms: r3(pct(99)),
      max_ms: r3(lat[lat.length - 1] ?? 0),
    };
  } finally {
    await pool.end();
  }
}

// ---------------------------------------------------------------- setup

function mariadbPid(): number | null {
  for (const f of ['/var/run/mysqld/mysqld.pid', '/run/mysqld/mysqld.pid']) {
    try {
      return Number(readFileSync(f, 'utf8').trim());
    } catch {
      /* next */
    }
  }
  try {
    return Number(execFileSync('pidof', ['mariadbd'], { encoding: 'utf8' }).trim().split(/\s+/)[0]) || null;
  } catch {
    return null;
  }
}

/** The commit and the uncommitted files under src/ and workers/: the gateway measured is the working tree. */
function gitState(): string {
  const repo = fileURLToPath(new URL('../../../', import.meta.url));
  try {
    const head = execFileSync('git', ['-C', repo, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', repo, 'status', '--porcelain', '--', 'src', 'workers'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .split('\n')
      .filter(Boolean)
      .map((l) => l.slice(3));
    return dirty.length ? `${head} plus uncommitted changes to ${dirty.join(', ')}` : head;
  } catch {
    return process.env.QAG_BENCH_REF ?? 'unknown (not a git checkout; set QAG_BENCH_REF)';
  }
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.error(`  ok: ${what}`);
}

/** A row of a /q/ answer. */
type AnswerRow = Record<string, unknown>;

/** A call's status, its body (JSON when it parses, else the text) and the rows when the body is an array. */
async function call(g: Gateway, secret: string, path: string): Promise<{ status: number; body: unknown; rows: AnswerRow[] }> {
  const res = await fetch(g.url + path, { headers: { 'X-API-Key': secret } });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* text */
  }
  return { status: res.status, body, rows: Array.isArray(body) ? body : [] };
}

/** Every query answers through both keys, as the database does, and the governed answers are masked. */
async function checkAnswers(g: Gateway, keys: Record<string, string>): Promise<void> {
  const db = await mysql.createConnection(target);
  try {
    const [w, d, c] = [1, 3, 1234];
    const direct = async (q: QueryName, args: Record<string, number>) => {
      const p = positional(SQL[q]);
      return (
        await db.execute<mysql.RowDataPacket[]>(
          p.sql,
          p.names.map((n) => args[n]),
        )
      )[0];
    };
    const qs = `w_id=${w}&d_id=${d}&c_id=${c}`;
    const cust = await direct('customer', { w_id: w, d_id: d, c_id: c });
    const rc = await call(g, keys.reader, `/q/customer?${qs}`);
    const gc = await call(g, keys.governed, `/q/customer?${qs}`);
    check(
      rc.status === 200 && rc.rows.length === 1 && rc.rows[0].c_last === cust[0].c_last && rc.rows[0].c_data === cust[0].c_data,
      `customer, reader key: 200, the database's row (c_last ${cust[0].c_last})`,
    );
    check(
      gc.status === 200 && gc.rows.length === 1 && gc.rows[0].c_first === cust[0].c_first && gc.rows[0].c_last !== cust[0].c_last,
      `customer, governed key: 200, c_last hashed (${String(gc.rows[0]?.c_last).slice(0, 24)}...)`,
    );
    const masked = String(gc.rows[0].c_data);
    check(
      masked.length === cust[0].c_data.length && masked[0] === cust[0].c_data[0] && /^.\*+$/.test(masked),
      `customer, governed key: c_data masked (${masked.slice(0, 12)}..., ${masked.length} chars)`,
    );

    const os = await direct('order_status', { w_id: w, d_id: d, c_id: c });
    const ro = await call(g, keys.reader, `/q/order_status?${qs}&page_size=20`);
    const go = await call(g, keys.governed, `/q/order_status?${qs}&page_size=20`);
    check(
      os.length >= 5 && ro.status === 200 && ro.rows.length === os.length && ro.rows[0].o_id === os[0].o_id,
      `order_status, reader key: 200, ${os.length} lines of order ${os[0]?.o_id}, as the database`,
    );
    check(
      go.status === 200 && go.rows.length === os.length,
      `order_status, governed key: 200, ${Array.isArray(go.body) ? go.body.length : go.body} lines` +
        (go.status === 200 ? '' : ` (got ${go.status} ${JSON.stringify(go.body)})`),
    );
    check(
      go.rows.every((r, i) => r.c_last === go.rows[0].c_last && r.c_last !== os[i].c_last && r.ol_i_id === os[i].ol_i_id && r.c_first === os[i].c_first),
      'order_status, governed key: c_last hashed on every line, the other columns as the database',
    );
    check(go.rows[0].c_last === gc.rows[0].c_last, 'the hash of c_last is the same in both queries');

    const sl = await direct('stock_level', { w_id: w, d_id: d, threshold: 15 });
    for (const k of ['reader', 'governed']) {
      const r = await call(g, keys[k], `/q/stock_level?w_id=${w}&d_id=${d}&threshold=15`);
      check(r.status === 200 && r.rows[0]?.low_stock === sl[0].low_stock, `stock_level, ${k} key: ${sl[0].low_stock}, as the database`);
    }
    // the allow-list is enforced: a table outside it is refused for the governed key
    await g.api('POST', '/api/v1/queries', {
      name: 'item_probe',
      connection_name: 'tpcc',
      sql: 'SELECT i_id, i_name FROM item WHERE i_id = :i_id',
      parameters: { i_id: INT },
      description: 'allow-list probe',
      publish: true,
    });
    await g.api('PATCH', '/api/v1/api-keys/tpcc-governed', { queries: ['customer', 'order_status', 'stock_level', 'item_probe'] });
    const probe = await call(g, keys.governed, '/q/item_probe?i_id=1');
    check(probe.status === 403, `item (outside allowed_tables), governed key: ${probe.status} ${(probe.body as { code?: string } | null)?.code ?? ''}`);
    await g.api('PATCH', '/api/v1/api-keys/tpcc-governed', { queries: ['customer', 'order_status', 'stock_level'] });
  } finally {
    await db.end();
  }
}

// ---------------------------------------------------------------- the store's run count

/** Runs recorded so far (each version counts its runs, whatever the history keeps), so the difference
 *  over a window is the runs the recorder wrote for it. Waits for the batches in flight. */
async function settledRunId(store: Database.Database): Promise<number> {
  const read = () => Number((store.prepare('SELECT sum(runs_recorded) AS n FROM saved_query_versions').get() as { n: number | null } | undefined)?.n ?? 0);
  // the recorder writes a batch every QUERYAPIGATE_HISTORY_FLUSH_INTERVAL (1 s): settled means no
  // change for well over one interval
  let last = read();
  let since = performance.now();
  for (const deadline = since + 15_000; performance.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 300));
    const now = read();
    if (now !== last) {
      last = now;
      since = performance.now();
    } else if (performance.now() - since >= 1800) {
      break;
    }
  }
  return last;
}

// ---------------------------------------------------------------- the rounds

type Cell =
  | { kind: 'gateway'; call: string; query: QueryName; key: 'reader' | 'governed'; callers: number }
  | { kind: 'db'; call: string; query: QueryName; callers: number }
  | { kind: 'health'; call: string; callers: number };

interface Row {
  kind: Cell['kind'];
  call: string;
  callers: number;
  round: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  requests: number;
  non2xx: number;
  errors: number;
  cpu_s: number | null;
  calls_per_cpu_s: number | null;
  db_cpu_s: number | null;
  runs_recorded: number | null;
  runs_kept_pct: number | null;
  /** The machine's 1-minute load average when the cell ended (2 cores; other work shares them). */
  loadavg1: number;
  load?: LoadResult;
}

async function main(): Promise<void> {
  ensureWrk();
  const started = new Date();
  const estate: Estate = await ensureEstate({ warehouses, seed, scale });
  const home = mkdtempSync(join(tmpdir(), 'qag-tpcc-'));
  const env = { QUERYAPIGATE_HOME: home, QUERYAPIGATE_HISTORY_LIMIT: '1000000' };
  const g = await startGateway(env);
  const dbPid = mariadbPid();
  const rows: Row[] = [];
  const git = gitState();
  let gatewayLog: string[] = [];
  let store: Database.Database | null = null;
  try {
    await g.api('POST', '/api/v1/connections', {
      name: 'tpcc',
      db: 'mysql',
      host: target.host,
      port: target.port,
      database: target.database,
      user: target.user,
      ...(target.password ? { password: target.password } : {}),
      active: true,
    });
    for (const q of Object.keys(SQL) as QueryName[]) {
      await g.api('POST', '/api/v1/queries', {
        name: q,
        connection_name: 'tpcc',
        sql: SQL[q],
        description: `TPC-C ${q}`,
        publish: true,
        parameters: Object.fromEntries(PARAMS[q].map((p) => [p, INT])),
      });
    }
    const queries = Object.keys(SQL);
    const keys = {
      reader: (await g.api<{ secret: string }>('POST', '/api/v1/api-keys', { name: 'tpcc-reader', queries, connections: [] })).secret,
      governed: (
        await g.api<{ secret: string }>('POST', '/api/v1/api-keys', {
          name: 'tpcc-governed',
          queries,
          connections: [],
          allowed_tables: ALLOWED_TABLES,
          mask: MASK,
        })
      ).secret,
    };
    console.error('tpcc: checking the answers');
    await checkAnswers(g, keys);
    store = new Database(join(home, 'queryapigate.db'), { readonly: true, fileMustExist: true });

    const cells: Cell[] = [];
    for (const callers of CALLERS) {
      for (const c of CALLS) cells.push({ kind: 'gateway', ...c, callers });
      for (const q of ['customer', 'order_status', 'stock_level'] as QueryName[]) cells.push({ kind: 'db', call: q, query: q, callers });
    }
    cells.push({ kind: 'health', call: '/health', callers: 32 });

    for (let round = 1; round <= rounds; round++) {
      // rotate the order each round, so no cell always follows the same one
      const shift = ((round - 1) * 5) % cells.length;
      const order = [...cells.slice(shift), ...cells.slice(0, shift)];
      console.error(`tpcc: round ${round} of ${rounds}`);
      for (const cell of order) {
        const warm = round === 1 ? 2 : 1;
        const dbBefore = () => (dbPid ? processCpuSeconds(dbPid) : null);
        let row: Row;
        if (cell.kind === 'db') {
          await runDb(cell.query, cell.callers, warm);
          const cpu0 = dbBefore();
          const r = await runDb(cell.query, cell.callers, seconds);
          const dbCpu = cpu0 === null ? null : Number((processCpuSeconds(dbPid!) - cpu0).toFixed(2));
          row = {
            kind: 'db',
            call: cell.call,
            callers: cell.callers,
            round,
            rps: r.rps,
            p50_ms: r.p50_ms,
            p99_ms: r.p99_ms,
            requests: r.requests,
            non2xx: 0,
            errors: r.errors,
            cpu_s: null,
            calls_per_cpu_s: null,
            db_cpu_s: dbCpu,
            runs_recorded: null,
            runs_kept_pct: null,
            loadavg1: Number(loadavg()[0].toFixed(2)),
          };
        } else {
          const opts =
            cell.kind === 'health'
              ? { url: `${g.url}/health`, connections: cell.callers, pid: g.pid }
              : { randRegexUrl: g.url + queryPattern(cell.query), connections: cell.callers, pid: g.pid, headers: { 'X-API-Key': keys[cell.key] } };
          await runLoad({ ...opts, duration: warm });
          const id0 = cell.kind === 'gateway' ? await settledRunId(store) : 0;
          const cpu0 = dbBefore();
          const r = await runLoad({ ...opts, duration: seconds });
          const dbCpu = cpu0 === null ? null : Number((processCpuSeconds(dbPid!) - cpu0).toFixed(2));
          const recorded = cell.kind === 'gateway' ? (await settledRunId(store)) - id0 : null;
          row = {
            kind: cell.kind,
            call: cell.call,
            callers: cell.callers,
            round,
            rps: r.rps,
            p50_ms: r.p50_ms,
            p99_ms: r.p99_ms,
            requests: r.requests,
            non2xx: r.non2xx,
            errors: r.errors,
            cpu_s: r.cpu_s,
            calls_per_cpu_s: r.cpu_s ? Math.round(r.requests / r.cpu_s) : null,
            db_cpu_s: dbCpu,
            runs_recorded: recorded,
            runs_kept_pct: recorded === null || !r.requests ? null : Number(((100 * recorded) / r.requests).toFixed(1)),
            loadavg1: Number(loadavg()[0].toFixed(2)),
            load: r,
          };
        }
        rows.push(row);
        const { load: _l, ...brief } = row;
        console.log(JSON.stringify(brief));
      }
    }
  } finally {
    store?.close();
    const out = g.output();
    await g.stop();
    const errs = out.split('\n').filter((l) => /error|warn|unhandled/i.test(l));
    gatewayLog = errs;
    if (errs.length) console.error(`tpcc: the gateway logged ${errs.length} error/warning line(s), first: ${errs.slice(0, 5).join('\n')}`);
    rmSync(home, { recursive: true, force: true });
  }
  report(rows, estate, started, git, gatewayLog);
}

// ---------------------------------------------------------------- the report

function report(rows: Row[], estate: Estate, started: Date, git: string, gatewayLog: string[]): void {
  const cell = (kind: Row['kind'], call: string, callers: number) => rows.filter((r) => r.kind === kind && r.call === call && r.callers === callers);
  const med = (xs: number[], d = 0) => fmt(median(xs), d);
  const pct = (xs: number[]) => (xs.length === 1 ? `${fmt(xs[0], 1)}%` : `${fmt(median(xs), 1)}% (${fmt(Math.min(...xs), 1)}-${fmt(Math.max(...xs), 1)})`);

  let compact = `| Call | 1 caller | 32 callers | MariaDB alone, 32 callers |\n|---|---|---|---|\n`;
  for (const c of CALLS) {
    const one = cell('gateway', c.call, 1);
    const many = cell('gateway', c.call, 32);
    const db = cell('db', c.query, 32);
    compact += `| ${c.call} | ${med(one.map((r) => r.rps))}/s | ${med(many.map((r) => r.rps))}/s | ${c.key === 'governed' ? '-' : `${med(db.map((r) => r.rps))}/s`} |\n`;
    compact += `| per gateway CPU-second | ${med(one.map((r) => r.calls_per_cpu_s ?? 0))} | ${med(many.map((r) => r.calls_per_cpu_s ?? 0))} | |\n`;
  }
  const lk = (k: Row['kind'], call: string, n: number) => cell(k, call, n);
  compact += `| p99, customer lookup | ${med(
    lk('gateway', 'Customer lookup', 1).map((r) => r.p99_ms),
    2,
  )} ms | ${med(
    lk('gateway', 'Customer lookup', 32).map((r) => r.p99_ms),
    2,
  )} ms | ${med(
    lk('db', 'customer', 32).map((r) => r.p99_ms),
    2,
  )} ms |\n`;

  let full =
    '| Call | Callers | req/s | p50 ms | p99 ms | gateway CPU-s | calls per gateway CPU-s | MariaDB CPU-s | non-2xx | runs kept |\n' +
    '|---|---|---|---|---|---|---|---|---|---|\n';
  for (const callers of CALLERS) {
    for (const c of CALLS) {
      const rs = cell('gateway', c.call, callers);
      const kept = rs.map((r) => r.runs_kept_pct ?? 0);
      full +=
        `| ${c.call} | ${callers} | ${range(rs.map((r) => r.rps))} | ${range(
          rs.map((r) => r.p50_ms),
          2,
        )} | ${range(
          rs.map((r) => r.p99_ms),
          2,
        )} | ` +
        `${range(
          rs.map((r) => r.cpu_s ?? 0),
          2,
        )} | ${range(rs.map((r) => r.calls_per_cpu_s ?? 0))} | ${range(
          rs.map((r) => r.db_cpu_s ?? 0),
          2,
        )} | ` +
        `${rs.reduce((a, r) => a + r.non2xx + r.errors, 0)} | ${pct(kept)} |\n`;
    }
  }
  let db = '| Statement | Callers | req/s | p50 ms | p99 ms | MariaDB CPU-s | errors |\n|---|---|---|---|---|---|---|\n';
  for (const callers of CALLERS) {
    for (const q of ['customer', 'order_status', 'stock_level']) {
      const rs = cell('db', q, callers);
      db +=
        `| ${q} | ${callers} | ${range(rs.map((r) => r.rps))} | ${range(
          rs.map((r) => r.p50_ms),
          3,
        )} | ${range(
          rs.map((r) => r.p99_ms),
          2,
        )} | ` +
        `${range(
          rs.map((r) => r.db_cpu_s ?? 0),
          2,
        )} | ${rs.reduce((a, r) => a + r.errors, 0)} |\n`;
    }
  }
  const h = cell('health', '/health', 32);
  const args = `--warehouses ${warehouses}${scale.name === 'small' ? ' --small' : ''} --seconds ${seconds} --rounds ${rounds}`;
  const cmd = process.env.QAG_BENCH_REF ? `bash bench/tpcc/run-committed.sh ${args}` : `npm run build && node dist/bench/tpcc/run.js ${args}`;
  const r = estate.rows;
  const md = `# TPC-C on MariaDB through the gateway (${today()})

Made with \`${cmd}\` on this project's machine: 2 cores, shared by wrk, the gateway,
MariaDB ${'10.11'} and, during this run, other work on the machine, so read the figures as proportions. Started
${started.toISOString().slice(0, 16).replace('T', ' ')} UTC. Each cell is the median of ${rounds} interleaved, rotated round(s) of ${seconds} s
(after an unmeasured warm-up of 2 s in the first round, 1 s after), with the min-max in brackets.
The gateway measured: ${git}. The machine's 1-minute load average at the end of the cells:
${fmt(Math.min(...rows.map((x) => x.loadavg1)), 1)}-${fmt(Math.max(...rows.map((x) => x.loadavg1)), 1)} (median ${fmt(median(rows.map((x) => x.loadavg1)), 1)}) on its 2 cores.
The gateway's output had ${gatewayLog.length} error or warning line(s)${gatewayLog.length ? `; the first: \`${gatewayLog[0].slice(0, 200)}\`` : ''}.

**The estate** (\`bench/tpcc/generate.ts\`, database \`qag_tpcc_bench\`): ${estate.warehouses} warehouse(s), ${scale.name} scale, seed ${estate.seed},
built by our own deterministic generator${estate.build_s === null ? '' : ` in ${estate.build_s} s`}: item ${fmt(r.item)}, stock ${fmt(r.stock)}, district ${fmt(r.district)},
customer ${fmt(r.customer)}, history ${fmt(r.history)}, orders ${fmt(r.orders)}, order_line ${fmt(r.order_line)}, new_order ${fmt(r.new_order)}.
TPC-C's primary keys, plus idx_order (o_w_id, o_d_id, o_c_id, o_id) and idx_customer (c_w_id, c_d_id, c_last, c_first).

**The calls**, through \`/q/<name>\` with random parameters on every request: w_id 1-${warehouses}, d_id 1-9,
c_id ${cLo}-${3 * cLo - 1}, threshold 10-19.

- Customer lookup: the customer row (20 columns, c_data 300-500 characters) by (w_id, d_id, c_id).
- order_status: one statement, the customer's first/middle/last name and balance with the lines of their
  newest order (\`o_id = (SELECT MAX(o_id) ... o_c_id = :c_id)\`, via idx_order), 5-15 rows, \`page_size=20\`.
- stock_level: \`COUNT(DISTINCT s_i_id)\` of the district's last 20 orders' lines (from d_next_o_id) with s_quantity below the threshold.

**The keys**: a reader key granted the three queries; a governed key granted the same, with
allowed_tables (${ALLOWED_TABLES.join(', ')}) and two masking rules: \`customer.c_last\` hashed and \`*.c_data\` masked.
Before the load the bench checks every answer against MariaDB's, that the governed key's c_last is hashed
(in order_status too) and its c_data masked, and that a query on \`item\` is refused for it (403).

**The gateway**: \`startGateway\` (one Node process: the acceptor, the default 1 executor thread on 2 cores,
the recorder), a SQLite store in a temp home, QUERYAPIGATE_HISTORY_LIMIT=1000000 so no run is pruned
while measuring; everything else at its defaults (no metadata cache, pool of 8 MariaDB sessions). Gateway
CPU-s is the process's utime+stime over the measured window (all its threads); MariaDB CPU-s is
mariadbd's over the same window. Runs kept is the runs the store's history gained over the window (its
versions' runs_recorded counters, after the recorder's batches settled) divided by wrk's count of answered calls: a few
calls in flight when wrk stops are recorded but not counted, so it can read a little above 100%.

**The database alone** runs the same statements as mysql2 prepared statements (\`execute\`) from the bench's
own Node process, with 1 and 32 sessions calling back to back for the same ${seconds} s: one Node thread drives all 32,
so at 32 callers it is partly the driver's limit, not only MariaDB's.

## Through the gateway, laid out like the seed's MySQL table

Medians; one build (this one), so the seed's columns per build become columns per load.

${compact}
## Every gateway cell

${full}
## MariaDB alone, the same statements

${db}
/health floor, 32 callers: ${
    h.length
      ? `${range(h.map((x) => x.rps))} req/s, p99 ${range(
          h.map((x) => x.p99_ms),
          2,
        )} ms`
      : 'not run'
  }.
`;
  console.log(`\n${md}\nwritten to ${writeResults('tpcc', rows, md)}`);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? (e.stack ?? e.message) : e);
  process.exitCode = 1;
});
