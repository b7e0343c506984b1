// The fault rig, shared by test/integration/faults.test.ts and bench/faults.ts: a PostgreSQL of its
// own (initdb in a temporary folder, its own port) that can be stopped and started under load, a few
// callers in a loop that note every answer, and the two scenarios (the database as a data source,
// and as the store) measured the same way for the test's assertions and the bench's table.
import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { ADMIN_KEY, PG_ADMIN_URL, request, startProcess } from './helpers.js';

// ── a PostgreSQL of our own ─────────────────────────────────────────────────────────────────

/** The newest installed server's binaries (Debian's layout), or those on the PATH. */
function pgBin(tool: string): string {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, 'bin', tool)))
      .sort((a, b) => Number(b) - Number(a));
    if (versions.length) return join(root, versions[0], 'bin', tool);
  }
  return tool;
}

/** initdb refuses to run as root: then every server command runs as the `postgres` user. */
const AS_ROOT = process.getuid?.() === 0;

/** Runs a server tool as the cluster's owner; asynchronous, so the callers' loop goes on meanwhile. */
async function asOwner(tool: string, args: string[]): Promise<void> {
  const [cmd, argv] = AS_ROOT ? ['runuser', ['-u', 'postgres', '--', pgBin(tool), ...args]] : [pgBin(tool), args];
  await new Promise<void>((resolve, reject) =>
    execFile(cmd, argv, { encoding: 'utf8' }, (err, stdout, stderr) =>
      err ? reject(new Error(`${tool} ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`)) : resolve(),
    ),
  );
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface PrivatePostgres {
  port: number;
  /** postgres://postgres@127.0.0.1:<port>/<database> */
  url(database?: string): string;
  createDatabase(name: string): Promise<string>;
  /** pg_ctl stop -m fast: sessions are ended, new connections refused. Resolves once it is down. */
  stop(): Promise<void>;
  /** pg_ctl start -w: resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops it and removes its folder. */
  destroy(): Promise<void>;
}

/** A throwaway cluster: trust auth on 127.0.0.1 only, its socket in its own folder, fsync off. */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'qag-faults-pg-'));
  if (AS_ROOT) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const port = await freePort();
  await asOwner('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c full_page_writes=off -c max_connections=100`;
  const pgCtl = (args: string[]) => asOwner('pg_ctl', ['-D', data, '-s', ...args]);
  const start = () => pgCtl(['-w', '-t', '30', '-l', join(dir, 'server.log'), '-o', options, 'start']);
  await start();
  let running = true;
  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;
  return {
    port,
    url,
    async createDatabase(name) {
      const sql = postgres(url(), { max: 1, onnotice: () => undefined });
      try {
        await sql.unsafe(`CREATE DATABASE ${name}`);
      } finally {
        await sql.end({ timeout: 2 });
      }
      return url(name);
    },
    async stop() {
      await pgCtl(['-w', '-m', 'fast', 'stop']);
      running = false;
    },
    async start() {
      await start();
      running = true;
    },
    async destroy() {
      try {
        if (running) await pgCtl(['-w', '-m', 'immediate', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

// ── callers in a loop ───────────────────────────────────────────────────────────────────────

export interface Sample {
  /** When the call was sent and answered, in ms since the load started. */
  sent: number;
  answered: number;
  status: number;
  code: string | null;
  requestId: string;
}

export interface Load {
  /** ms since the load started. */
  now(): number;
  samples: Sample[];
  /** Resolves at the first 200 (true), or false if none came within `ms`. */
  served(ms: number): Promise<boolean>;
  stop(): Promise<void>;
}

/** `callers` loops, each sending `path` and pausing `pauseMs` between answers; a call gives up after 30 s. */
export function startLoad(url: string, path: string, key: string, callers: number, pauseMs: number): Load {
  const t0 = performance.now();
  const now = () => performance.now() - t0;
  const samples: Sample[] = [];
  let running = true;
  let n = 0;
  let firstServed: () => void = () => undefined;
  const servedOnce = new Promise<true>((r) => (firstServed = () => r(true)));
  const loop = async (caller: number) => {
    while (running) {
      const requestId = `fault-${caller}-${++n}`;
      const sent = now();
      let status = 0;
      let code: string | null = null;
      try {
        const res = await fetch(url + path, { headers: { 'X-API-Key': key, 'X-Request-Id': requestId }, signal: AbortSignal.timeout(30_000) });
        status = res.status;
        const text = await res.text();
        if (status >= 400) code = (JSON.parse(text) as { code?: string }).code ?? null;
      } catch (e) {
        code = (e as Error).name; // no answer at all (status 0)
      }
      samples.push({ sent, answered: now(), status, code, requestId });
      if (status === 200) firstServed();
      if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    }
  };
  const loops = Array.from({ length: callers }, (_, i) => loop(i));
  return {
    now,
    samples,
    served: (ms) => Promise.race([servedOnce, sleep(ms).then(() => false)]),
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ── the scenarios ───────────────────────────────────────────────────────────────────────────

export interface FaultOptions {
  /** Concurrent callers and the pause each makes between calls. */
  callers: number;
  pauseMs: number;
  /** ms of load before the stop, with the database down, and after it answers again. */
  warmMs: number;
  downMs: number;
  afterMs: number;
  /** The gateway's executor threads. */
  workers: number;
  /** Another build's dist/src/main.js (the bench's "before"); default this build's. */
  main?: string;
}

/** What happened, in ms since the load started, and the answers by phase. */
export interface FaultOutcome {
  scenario: string;
  options: FaultOptions;
  calls: number;
  /** Answers by status ('0' = no answer) over the whole run, and while the database was down. */
  byStatus: Record<string, number>;
  downByStatus: Record<string, number>;
  /** Error codes seen, by status and code. */
  codes: Record<string, number>;
  /** The stop began, it was down, the start began, it answered again (pg_ctl's own view). */
  stopAt: number;
  downAt: number;
  startAt: number;
  upAt: number;
  /** The longest wait for an answer to a call sent while the database was down. */
  longestWhileDownMs: number;
  /** The longest wait for any answer over the whole run. */
  longestMs: number;
  /** From the stop's start to the first error answer. */
  timeToFailMs: number | null;
  /** From the database answering again to the first 200 answer to a call sent after that. */
  timeToRecoverMs: number | null;
  /** Error answers to calls sent after that first 200 had arrived. */
  errorsAfterRecovery: number;
  /** Lines of the server's output that look like a stack trace. */
  stackLines: string[];
  /** What went wrong around the load: the event log not readable, the server not stopping. */
  problems: string[];
  /** The server's output. */
  output: string;
}

export interface StoreOutcome extends FaultOutcome {
  cacheTtl: number;
  /** Runs: answered calls known to be runs (every 200, and error answers found recorded), those in the event log, and the recorder's counts. */
  runsMade: number;
  runsInLog: number;
  /** 200 answers whose run is not in the event log. */
  runsMissing: number;
  /** Events of this run that appear more than once. */
  runsDuplicated: number;
  recorded: number;
  dropped: number;
  failed: number;
  maxPending: number;
}

interface Gateway {
  url: string;
  output(): string;
  /** SIGTERM; false when it had not exited 20 s later and was killed. */
  stop(): Promise<boolean>;
}

/** Stops the gateway after a scenario; a server that would not stop is one of the outcome's problems. */
async function stopAfter<T extends FaultOutcome>(g: Gateway, outcome: T): Promise<T> {
  if (!(await g.stop())) outcome.problems.push('the server did not stop within 20 s of SIGTERM (killed)');
  outcome.output = g.output(); // with what the shutdown logged
  outcome.stackLines = stackLines(outcome.output);
  return outcome;
}

/** Lines that look like a stack trace's frames. */
function stackLines(output: string): string[] {
  return output.split('\n').filter((l) => /^\s+at .+(:\d+:\d+\)?|\(native\))$/.test(l));
}

async function startGateway(env: Record<string, string>, main?: string): Promise<Gateway> {
  const p = startProcess({ QUERYAPIGATE_PORT: '0', QUERYAPIGATE_API_KEY: ADMIN_KEY, ...env }, main);
  const url = await p.listening;
  return {
    url,
    output: p.output,
    /** SIGTERM; a server that has not exited 20 s later is killed, and that is an error. */
    async stop() {
      p.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<'hung'>((r) => {
        timer = setTimeout(() => r('hung'), 20_000);
      });
      const how = await Promise.race([p.exited, hung]);
      clearTimeout(timer);
      if (how === 'hung') {
        p.child.kill('SIGKILL');
        await p.exited;
        return false;
      }
      return true;
    },
  };
}

async function admin(url: string, method: string, path: string, body?: unknown): Promise<{ secret?: string }> {
  const r = await request(url, method, path, { body });
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`);
  return r.json;
}

/** A connection to `pgUrl`, a one-row saved query on it and a key for that query; returns the key's secret. */
async function publish(url: string, pgUrl: string): Promise<string> {
  const u = new URL(pgUrl);
  await admin(url, 'POST', '/api/v1/connections', {
    name: 'target',
    db: 'postgres',
    host: u.hostname,
    port: Number(u.port),
    database: u.pathname.slice(1),
    user: u.username,
  });
  await admin(url, 'POST', '/api/v1/queries', {
    name: 'probe',
    description: 'one row',
    connection_name: 'target',
    sql: 'SELECT CAST(:n AS int) AS n',
    parameters: { n: 'int' },
    publish: true,
  });
  return (await admin(url, 'POST', '/api/v1/api-keys', { name: 'caller', queries: ['probe'], connections: [] })).secret!;
}

/** Loads the gateway, stops `pg` after warmMs, starts it again after downMs, and loads on for afterMs. */
async function outage(scenario: string, g: Gateway, key: string, pg: PrivatePostgres, o: FaultOptions): Promise<{ outcome: FaultOutcome; samples: Sample[] }> {
  const load = startLoad(g.url, '/q/probe?n=7', key, o.callers, o.pauseMs);
  // Warm means served: on a loaded machine an executor's first call (its thread starting, its first
  // store read) can outlast warmMs, and a store stopped before any row was read has nothing cached.
  const warm = await load.served(30_000);
  await sleep(o.warmMs);
  const stopAt = load.now();
  await pg.stop();
  const downAt = load.now();
  await sleep(o.downMs);
  const startAt = load.now();
  await pg.start();
  const upAt = load.now();
  await sleep(o.afterMs);
  await load.stop();

  const s = load.samples;
  const count = (xs: Sample[]) => {
    const by: Record<string, number> = {};
    for (const x of xs) by[x.status] = (by[x.status] ?? 0) + 1;
    return by;
  };
  const codes: Record<string, number> = {};
  for (const x of s) if (x.code) codes[`${x.status} ${x.code}`] = (codes[`${x.status} ${x.code}`] ?? 0) + 1;
  const whileDown = s.filter((x) => x.sent >= downAt && x.sent < startAt);
  const firstError = s.filter((x) => x.sent >= stopAt && x.status !== 200).sort((a, b) => a.answered - b.answered)[0];
  const firstBack = s.filter((x) => x.sent >= upAt && x.status === 200).sort((a, b) => a.answered - b.answered)[0];
  const output = g.output();
  const outcome: FaultOutcome = {
    scenario,
    options: o,
    calls: s.length,
    byStatus: count(s),
    downByStatus: count(whileDown),
    codes,
    stopAt,
    downAt,
    startAt,
    upAt,
    longestWhileDownMs: Math.max(0, ...whileDown.map((x) => x.answered - x.sent)),
    longestMs: Math.max(0, ...s.map((x) => x.answered - x.sent)),
    timeToFailMs: firstError ? firstError.answered - stopAt : null,
    timeToRecoverMs: firstBack ? firstBack.answered - upAt : null,
    errorsAfterRecovery: firstBack ? s.filter((x) => x.sent > firstBack.answered && x.status !== 200).length : 0,
    stackLines: stackLines(output),
    problems: warm ? [] : ['no call was served within 30 s of the load starting'],
    output,
  };
  return { outcome, samples: s };
}

/** The database as a data source: the gateway (SQLite store) runs a query on it while it goes down and comes back. */
export async function dataSourceOutage(pg: PrivatePostgres, home: string, o: FaultOptions): Promise<FaultOutcome> {
  const g = await startGateway({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: String(o.workers) }, o.main);
  let outcome: FaultOutcome;
  try {
    const key = await publish(g.url, pg.url());
    outcome = (await outage('data source', g, key, pg, o)).outcome;
  } catch (e) {
    await g.stop();
    throw e;
  }
  return stopAfter(g, outcome);
}

/**
 * The database as the store (QUERYAPIGATE_DATABASE_URL), with the metadata cache on (`cacheTtl` > 0)
 * or off; the data source is the tests' shared PostgreSQL. Afterwards every run is looked for in the
 * event log by its request id.
 */
export async function storeOutage(pg: PrivatePostgres, home: string, database: string, cacheTtl: number, o: FaultOptions): Promise<StoreOutcome> {
  const maxPending = 10_000;
  const storeUrl = await pg.createDatabase(database);
  const g = await startGateway(
    {
      QUERYAPIGATE_HOME: home,
      QUERYAPIGATE_DATABASE_URL: storeUrl,
      QUERYAPIGATE_WORKERS: String(o.workers),
      QUERYAPIGATE_METADATA_CACHE_TTL: String(cacheTtl),
      QUERYAPIGATE_HISTORY_MAX_PENDING: String(maxPending),
      QUERYAPIGATE_HISTORY_FLUSH_INTERVAL: '0.2',
    },
    o.main,
  );
  let result: StoreOutcome;
  try {
    const key = await publish(g.url, PG_ADMIN_URL);
    const { outcome, samples: answered } = await outage(`store, metadata cache ${cacheTtl > 0 ? 'on' : 'off'}`, g, key, pg, o);
    const ids = new Map<string, number>(); // request id → events found
    try {
      await readEventLog(g.url, ids);
    } catch (e) {
      outcome.problems.push(`the event log could not be read: ${(e as Error).message}`);
    }
    const metrics = (await request(g.url, 'GET', '/metrics').catch(() => ({ text: '' }))).text;
    const runs = (name: string) => Number(new RegExp(`queryapigate_history_runs_total\\{outcome="${name}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0);
    // Runs made, as far as the callers can tell: every 200, and every error answer whose run is in the log.
    const made = answered.filter((x) => x.status === 200 || ids.has(x.requestId));
    result = {
      ...outcome,
      cacheTtl,
      runsMade: made.length,
      runsInLog: made.filter((x) => ids.has(x.requestId)).length,
      runsMissing: made.filter((x) => !ids.has(x.requestId)).length,
      runsDuplicated: [...ids.values()].filter((n) => n > 1).length,
      recorded: runs('recorded'),
      dropped: runs('dropped'),
      failed: runs('failed'),
      maxPending,
    };
  } catch (e) {
    await g.stop();
    throw e;
  }
  return stopAfter(g, result);
}

/** Every event of the saved query, paged through GET /api/v1/events (which first flushes every executor's runs). */
async function readEventLog(url: string, ids: Map<string, number>): Promise<void> {
  let after = 0;
  for (;;) {
    const res = await fetch(`${url}/api/v1/events?query=probe&limit=1000&after=${after}`, {
      headers: { 'X-API-Key': ADMIN_KEY },
      signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${res.status} ${text}`);
    const page = JSON.parse(text) as { items: Array<{ request_id: string }>; next_after: number | null };
    for (const e of page.items) ids.set(e.request_id, (ids.get(e.request_id) ?? 0) + 1);
    if (page.next_after === null) return;
    after = page.next_after;
  }
}
