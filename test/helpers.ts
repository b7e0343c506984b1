// Shared test plumbing: a real server on a free port with its own home folder, a small HTTP client,
// and scratch PostgreSQL databases that tests create and drop themselves.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import postgres from 'postgres';
import { GatewayError } from '../src/contract/errors.js';
import { loadConfig } from '../src/config.js';
import { startServer, type RunningServer } from '../src/serve.js';

/** The property-based suites' seed (QUERYAPIGATE_TEST_SEED replays a failure) and the factor on their runs (QUERYAPIGATE_TEST_RUNS). */
export const TEST_SEED = process.env.QUERYAPIGATE_TEST_SEED ? Number(process.env.QUERYAPIGATE_TEST_SEED) : Date.now() % 2 ** 31;
export const TEST_RUNS = Number(process.env.QUERYAPIGATE_TEST_RUNS ?? '1');

export const PG_ADMIN_URL = process.env.QUERYAPIGATE_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const ADMIN_KEY = 'test-admin-key';

/** Every way the gateway runs, for the conformance suites: each must give the same answers. */
export const CONFORMANCE_MODES: Array<{ name: string; env: Record<string, string>; pgStore?: boolean }> = [
  { name: 'inline executors, SQLite store', env: { QUERYAPIGATE_WORKERS: '0' } },
  { name: 'pooled executors, SQLite store', env: { QUERYAPIGATE_WORKERS: '2' } },
  { name: 'pooled executors, PostgreSQL store', env: { QUERYAPIGATE_WORKERS: '2' }, pgStore: true },
  { name: 'inline executors, PostgreSQL store', env: { QUERYAPIGATE_WORKERS: '0' }, pgStore: true },
];

/** The management API's body for a connection `name` to the test PostgreSQL's own database (PG_ADMIN_URL). */
export function pgConnection(name: string): Record<string, unknown> {
  const pg = new URL(PG_ADMIN_URL);
  return {
    name,
    db: 'postgres',
    host: pg.hostname,
    port: Number(pg.port || 5432),
    database: pg.pathname.slice(1) || 'postgres',
    user: decodeURIComponent(pg.username) || 'postgres',
  };
}

/**
 * A SQLite database file `data/<file>` in the server's home, made by running `sql`, and a connection `name` to it
 * created through the management API; its answer.
 */
export async function sqliteConnection(s: TestServer, name: string, file: string, sql: string): Promise<Reply> {
  mkdirSync(join(s.home, 'data'), { recursive: true });
  const db = new Database(join(s.home, 'data', file));
  db.exec(sql);
  db.close();
  return s.call('POST', '/api/v1/connections', { body: { name, db: 'sqlite', database: `data/${file}` } });
}

/** An administrator token for `name`, issued straight in a SQLite store (for a server no longer open). */
export async function storeToken(s: TestServer, name: string): Promise<string> {
  const { openStore } = await import('../src/store/store.js');
  const { generateAdminToken, generateTokenId } = await import('../src/auth/roles.js');
  const { hashSecret } = await import('../src/auth/keys.js');
  const store = await openStore({ home: s.home, databaseUrl: null });
  const secret = generateAdminToken();
  await store.admins.addToken({
    id: generateTokenId(),
    admin_name: name,
    hash: hashSecret(secret),
    label: null,
    expires_at: null,
    created_at: '2026-01-01 00:00:00',
    last_used_at: null,
  });
  await store.close();
  return secret;
}

export interface TestServer {
  url: string;
  home: string;
  server: RunningServer;
  call(method: string, path: string, opts?: { body?: unknown; key?: string | null; headers?: Record<string, string> }): Promise<Reply>;
  stop(): Promise<void>;
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The body as it came (xlsx and parquet answers are bytes). */
  bytes: Uint8Array;
  // biome-ignore lint/suspicious/noExplicitAny: the tests read answers of every shape (rows, error bodies, lists) straight off this field, and each read is what an assertion checks
  json: any;
}

export async function startTestServer(env: Record<string, string> = {}): Promise<TestServer> {
  const home = mkdtempSync(join(tmpdir(), 'qag-test-'));
  const config = loadConfig({
    QUERYAPIGATE_HOME: home,
    QUERYAPIGATE_PORT: '0',
    QUERYAPIGATE_API_KEY: ADMIN_KEY,
    QUERYAPIGATE_HISTORY_FLUSH_INTERVAL: '0.05',
    // In-process servers write to the test's own output: warnings and errors only (test/integration/logs.test.ts reads the lines).
    QUERYAPIGATE_LOG_LEVEL: 'warning',
    ...env,
  });
  const server = await startServer(config);
  const url = `http://127.0.0.1:${server.port}`;
  return {
    url,
    home,
    server,
    call: (method, path, opts = {}) => request(url, method, path, opts),
    async stop() {
      await server.stop();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

export async function request(
  base: string,
  method: string,
  path: string,
  opts: { body?: unknown; key?: string | null; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  const key = opts.key === undefined ? ADMIN_KEY : opts.key;
  if (key) headers['X-API-Key'] = key;
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body });
  const bytes = new Uint8Array(await res.arrayBuffer());
  const text = new TextDecoder().decode(bytes);
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, text, bytes, json };
}

/** A scratch PostgreSQL database, created for a suite and dropped after it. */
export async function scratchDatabase(prefix: string): Promise<{ name: string; url: string; sql: postgres.Sql; drop(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${Math.floor(Math.random() * 1e9)}`;
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
  const sql = postgres(url, { max: 2, onnotice: () => undefined });
  return {
    name,
    url,
    sql,
    async drop() {
      await sql.end({ timeout: 5 });
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end({ timeout: 5 });
    },
  };
}

/**
 * A scratch database (as scratchDatabase) and a role of its own that may use its public schema but not create
 * temporary tables there (TEMPORARY revoked from PUBLIC): `url` connects as that role; `grant()` gives it back.
 */
export async function roleWithoutTemp(prefix: string) {
  const db = await scratchDatabase(prefix);
  const role = `${prefix}_role_${process.pid}`;
  const url = new URL(db.url);
  url.username = role;
  await db.sql.unsafe(`CREATE ROLE ${role} LOGIN`);
  await db.sql.unsafe(`GRANT ALL ON SCHEMA public TO ${role}`);
  await db.sql.unsafe(`REVOKE TEMPORARY ON DATABASE ${db.name} FROM PUBLIC`);
  return {
    database: db.name,
    role,
    url: url.href,
    grant: () => db.sql.unsafe(`GRANT TEMPORARY ON DATABASE ${db.name} TO ${role}`),
    async drop() {
      await db.drop(); // the role's privileges go with the database; then the role can go
      const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => undefined });
      await admin.unsafe(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    },
  };
}

export async function eventually<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 5000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > until) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
}

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

/**
 * The server as its own process (`node dist/src/main.js serve`), for signals and multi-instance tests;
 * `main` runs another build's entry instead (a bench comparing before and after).
 */
/** `node [nodeArgs] <main> serve` with `env`, its output kept; `listening` resolves to its URL. */
export function startProcess(env: Record<string, string>, main = MAIN, nodeArgs: string[] = []) {
  const child = spawn(process.execPath, [...nodeArgs, main, 'serve'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 15000);
    child.stdout.on('data', () => {
      const m = out.match(/listening on (http:\/\/[^\s"]+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`server exited:\n${out}`));
    });
  });
  listening.catch(() => undefined); // tests that expect an exit never await it
  return { child, listening, exited, output: () => out };
}

/** Awaits `p`, which must fail with a GatewayError of `code`; returns the error for further checks. */
export async function rejectsWith(p: Promise<unknown>, code: string): Promise<GatewayError> {
  let caught: unknown;
  await p.then(
    () => assert.fail(`expected ${code}, but the run succeeded`),
    (err: unknown) => {
      caught = err;
    },
  );
  assert.ok(caught instanceof GatewayError, `expected a GatewayError, got ${String(caught)}`);
  assert.equal(caught.code, code, `${caught.message} ${caught.extras?.detail ?? ''}`);
  return caught;
}
