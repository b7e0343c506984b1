// Bench plumbing: start the gateway as its own process (so its CPU can be counted alone), create
// objects through its management API, and write a bench's results as JSON lines plus a table.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type postgres from 'postgres';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));
export const RESULTS = fileURLToPath(new URL('../../bench/results/', import.meta.url));

export interface Gateway {
  url: string;
  pid: number;
  output(): string;
  /** An admin API call: the answer's JSON (null for an empty body); throws on a status >= 400. */
  api<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
  stop(): Promise<void>;
}

/** A child process started as `node args...` (or `command args...`), once it printed "listening on <url>". */
export interface Listening {
  url: string;
  pid: number;
  output(): string;
  stop(): Promise<void>;
}

const OUTPUT_KEPT = 32 * 1024 * 1024;

/**
 * Starts `node args...` and waits for its "listening on <url>" line (on stdout or stderr). Its output
 * is kept as it comes (chunks, joined when asked) and searched only until that line: a gateway logs
 * an access line per call, and searching all of it on every chunk cost this process more CPU the
 * longer a cell ran, CPU taken from the server it measures on a 2-core machine.
 */
export async function spawnListening(args: string[], env: Record<string, string> = {}, command = process.execPath): Promise<Listening> {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  // The first chunk (the start-up lines) and the newest ones, OUTPUT_KEPT bytes at most: a fast machine logs more
  // access lines in a long bench than a string can hold (keys.js's 40 pairs came to over 512 MB).
  const chunks: Buffer[] = [];
  let kept = 0;
  const output = () => Buffer.concat(chunks).toString();
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    let head: string | null = '';
    const on = (d: Buffer) => {
      chunks.push(d);
      kept += d.length;
      while (kept > OUTPUT_KEPT && chunks.length > 2) kept -= chunks.splice(1, 1)[0].length;
      if (head === null) return;
      head += d;
      const m = head.match(/listening on (http:\/\/[^\s"]+)/);
      if (m) {
        head = null;
        resolve(m[1]);
      }
    };
    child.stdout.on('data', on);
    child.stderr.on('data', on);
    void exited.then(() => head !== null && reject(new Error(`${args.join(' ')} exited:\n${output()}`)));
  });
  return {
    url,
    pid: child.pid!,
    output,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A bench's variant: its name, the variables it sets, and how node is started for it. */
export interface Variant {
  name: string;
  env: Record<string, string>;
  /** NODE_ARGS=<flags, space-separated>: for node itself (the V8 flags NODE_OPTIONS refuses). */
  nodeArgs: string[];
  /** MAIN=<a build's dist/src/main.js>: another build (a baseline) run in the same cells. */
  main?: string;
  /** KEY=governed: the lookup called with the seeds' governed key (accountLookup), not the plain one. */
  governed: boolean;
}

/**
 * A bench's `--variant 'name:ENV=V,ENV2=V2'`. A value may hold ':' (a database URL) and '=' (NODE_OPTIONS);
 * NODE_ARGS and MAIN are the bench's (Variant), not the server's variables.
 */
export function parseVariant(spec: string): Variant {
  const colon = spec.indexOf(':');
  const [name, envs] = colon < 0 ? [spec, ''] : [spec.slice(0, colon), spec.slice(colon + 1)];
  const pairs = envs.split(',').filter(Boolean);
  const { NODE_ARGS = '', MAIN, KEY = 'plain', ...env } = Object.fromEntries(pairs.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
  if (KEY !== 'plain' && KEY !== 'governed') throw new Error(`variant ${name}: KEY is plain or governed, not ${KEY}`);
  return { name, env, nodeArgs: NODE_ARGS.split(' ').filter(Boolean), main: MAIN, governed: KEY === 'governed' };
}

/** A management API client for `url` with the admin key: JSON in, JSON out, throws on 4xx/5xx. */
export function adminApi(url: string, adminKey: string): Gateway['api'] {
  return async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(url + path, {
      method,
      headers: { 'X-API-Key': adminKey, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : null) as T;
  };
}

/** `main`: another build's dist/src/main.js (a baseline), run with the same settings. */
/**
 * Node's flags for the gateway, as its start commands give them (package.json's start, the Dockerfile; src/serve.ts
 * GC_FLAG, YOUNG_FLAG); a variant's own come after them and win (`--no-single-threaded-gc` measures without).
 */
export const GATEWAY_NODE_ARGS = ['--single-threaded-gc', '--max-semi-space-size=8'];

export async function startGateway(env: Record<string, string>, adminKey = 'bench-admin', nodeArgs: string[] = [], main = MAIN): Promise<Gateway> {
  const g = await spawnListening([...GATEWAY_NODE_ARGS, ...nodeArgs, main, 'serve'], { QUERYAPIGATE_PORT: '0', QUERYAPIGATE_API_KEY: adminKey, ...env });
  return { ...g, api: adminApi(g.url, adminKey) };
}

/** The connection `oltp` on a gateway, to the PostgreSQL database at `pgUrl` (the pgbench tables). */
export async function oltpConnection(api: Gateway['api'], pgUrl: string): Promise<void> {
  const u = new URL(pgUrl);
  await api('POST', '/api/v1/connections', {
    name: 'oltp',
    db: 'postgres',
    host: u.hostname,
    port: Number(u.port || 5432),
    database: u.pathname.slice(1),
    user: u.username || 'postgres',
  });
}

/** The connection `name` on a gateway, to the MySQL/MariaDB database at `myUrl` (mysql://user@host:port/db). */
export async function mysqlConnection(api: Gateway['api'], name: string, myUrl: string): Promise<void> {
  const u = new URL(myUrl);
  await api('POST', '/api/v1/connections', {
    name,
    db: 'mysql',
    host: u.hostname,
    port: Number(u.port || 3306),
    database: u.pathname.slice(1),
    user: decodeURIComponent(u.username) || 'root',
    active: true,
  });
}

/** The seeds' governed key's rules (bench/oltp.ts): the tables it may read, and `abalance` hashed. */
export const GOVERNED = { allowed_tables: ['pgbench_accounts', 'pgbench_branches'], mask: [{ column: '*.abalance', action: 'hash' }] };

/**
 * The seeds' lookup on a gateway: the connection `oltp` to the pgbench database at `dbUrl` (or `my` to a MariaDB one,
 * for a mysql:// URL), the saved query `account` and a key `p` for it, plain or with the seeds' governed rules; the wrk
 * URL pattern (a random aid) and the key's secret.
 */
export async function accountLookup(g: Pick<Gateway, 'url' | 'api'>, dbUrl: string, governed = false): Promise<{ url: string; key: string }> {
  // bench/peers.ts fills the same table on MariaDB (qag_bench_my).
  const connection = dbUrl.startsWith('mysql:') ? 'my' : 'oltp';
  if (connection === 'my') await mysqlConnection(g.api, connection, dbUrl);
  else await oltpConnection(g.api, dbUrl);
  await g.api('POST', '/api/v1/queries', {
    name: 'account',
    connection_name: connection,
    description: 'a',
    publish: true,
    sql: 'SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = :aid',
    parameters: { aid: { type: 'int', required: true } },
  });
  const key = await lookupKey(g.api, 'p', governed ? GOVERNED : {});
  return { url: `${g.url}/q/account\\?aid=[1-9][0-9]{0,5}`, key };
}

/** A key `name` for the account lookup with `rules` (the API's allowed_tables, mask, ...); its secret. */
export async function lookupKey(api: Gateway['api'], name: string, rules: object): Promise<string> {
  const { secret } = await api<{ secret: string }>('POST', '/api/v1/api-keys', { name, queries: ['account'], connections: [], ...rules });
  return secret;
}

/** A variant's gateway serving the account lookup (accountLookup), as levers and perfCells run it; stop() also removes its home. */
export interface LookupCell {
  url: string;
  key: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * Starts variant `v` on the lookup of `dbUrl`: a home of its own, its PostgreSQL store (when it names one) made afresh,
 * metadata cache 5 s and inline unless the variant says otherwise; `nodeArgs` after the variant's own.
 */
export async function lookupCell(v: Variant, dbUrl: string, nodeArgs: string[] = []): Promise<LookupCell & Pick<Gateway, 'api'>> {
  const home = mkdtempSync(join(tmpdir(), 'qag-cell-'));
  if (v.env.QUERYAPIGATE_DATABASE_URL) await freshStore(v.env.QUERYAPIGATE_DATABASE_URL);
  const settings = { QUERYAPIGATE_HOME: home, QUERYAPIGATE_METADATA_CACHE_TTL: '5', QUERYAPIGATE_WORKERS: '0', ...v.env };
  const g = await startGateway(settings, 'bench-admin', [...v.nodeArgs, ...nodeArgs], v.main);
  const stop = async () => {
    await g.stop();
    rmSync(home, { recursive: true, force: true });
  };
  try {
    return { ...(await accountLookup(g, dbUrl, v.governed)), api: g.api, pid: g.pid, stop };
  } catch (e) {
    await stop(); // a failed setup leaves no server behind to disturb later runs
    throw e;
  }
}

/** The checked-out commit, and whether src/, workers/ or bench/ differ from it. */
export function codeVersion(): string {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  try {
    const head = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', root, 'status', '--porcelain', '--', 'src', 'workers', 'bench', ':!bench/results'], { encoding: 'utf8' }).trim();
    return dirty ? `${head} with uncommitted changes` : head;
  } catch {
    return 'unknown';
  }
}

export function today(): string {
  return new Date().toISOString().slice(0, 10);
}

/** Writes results.jsonl and README.md (the table plus how it was made) to bench/results/<name>-<date>[-<suffix>]/. */
export function writeResults(name: string, rows: object[], markdown: string, suffix?: string): string {
  const dir = join(RESULTS, `${name}-${today()}${suffix ? `-${suffix}` : ''}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'results.jsonl'), `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`);
  writeFileSync(join(dir, 'README.md'), markdown);
  return dir;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** The median with the min-max in brackets; a single value alone. */
export const range = (xs: number[], digits = 0) =>
  xs.length === 1 ? fmt(xs[0], digits) : `${fmt(median(xs), digits)} (${fmt(Math.min(...xs), digits)}-${fmt(Math.max(...xs), digits)})`;

/** Drops and creates database `name` through `admin` (a connection to another database), so a store starts empty. */
export async function freshDatabase(admin: postgres.Sql, name: string): Promise<void> {
  await admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await admin.unsafe(`CREATE DATABASE "${name}"`);
}

/** The database a PostgreSQL URL names, made afresh (through the server's `postgres` database), so a cell's store starts empty as a SQLite one does. */
export async function freshStore(url: string): Promise<void> {
  const { default: postgres } = await import('postgres');
  const u = new URL(url);
  const name = u.pathname.slice(1);
  u.pathname = '/postgres';
  const admin = postgres(u.href, { max: 1, onnotice: () => undefined });
  try {
    await freshDatabase(admin, name);
  } finally {
    await admin.end();
  }
}

/** Events in the event log of the PostgreSQL store `db`: the sum over its segment tables (a row a page: ids id..last_id). */
export async function countEvents(db: string): Promise<number> {
  const { default: postgres } = await import('postgres');
  const sql = postgres(`postgres://postgres@127.0.0.1:5432/${db}`, { max: 1, onnotice: () => undefined });
  try {
    const tables = await sql<{ name: string }[]>`SELECT table_name AS name FROM event_segments`;
    let total = 0;
    for (const t of tables) {
      const [{ n }] = await sql.unsafe<{ n: string }[]>(`SELECT COALESCE(sum(COALESCE(last_id, id) - id + 1), 0) AS n FROM "${t.name}"`);
      total += Number(n);
    }
    return total;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
