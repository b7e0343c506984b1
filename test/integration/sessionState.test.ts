// The class "session state leaks between calls": a pooled connection comes back to every call in the
// state the gateway set. Statements that would change the session beyond the call are refused by
// analysis, for every caller (read_only for a caller that may not write, forbidden for the others,
// the admin included), on PostgreSQL, MariaDB and SQLite; statements whose effect analysis can't see
// (a volatile function, a trigger, a view calling a function, a stored function) run, and their
// session is put back afterwards. After every shape, the sessions still hold the gateway's settings.
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import mysql from 'mysql2/promise';
import { after, before, describe, test } from 'node:test';
import { openSource } from '../../src/sources/index.js';
import { ADMIN_KEY, type Reply, rejectsWith, scratchDatabase, sqliteConnection, startTestServer, type TestServer } from '../helpers.js';

let n = 0;
async function call(s: TestServer, conn: string, sql: string, key: string): Promise<Reply> {
  const name = `session_${n++}`;
  const saved = await s.call('POST', '/api/v1/queries', { body: { name, connection_name: conn, description: 'probe', publish: true, sql } });
  assert.equal(saved.status, 201, `${sql}: ${saved.text}`);
  return s.call('GET', `/q/${name}`, { key });
}

async function keys(s: TestServer, conn: string): Promise<{ reader: string; writer: string }> {
  const reader = (await s.call('POST', '/api/v1/api-keys', { body: { name: `reader_${conn}`, queries: [], connections: [conn] } })).json.secret;
  const writer = (await s.call('POST', '/api/v1/api-keys', { body: { name: `writer_${conn}`, queries: [], connections: [conn], allow_writes: true } })).json
    .secret;
  return { reader, writer };
}

/** Each statement refused for every caller, with the caller's code; none reaches the database. */
async function refusedForAll(s: TestServer, conn: string, k: { reader: string; writer: string }, shapes: string[]) {
  for (const sql of shapes) {
    for (const [who, key, code] of [
      ['reader', k.reader, 'read_only'],
      ['writer', k.writer, 'forbidden'],
      ['admin', ADMIN_KEY, 'forbidden'],
    ] as const) {
      const r = await call(s, conn, sql, key);
      assert.equal(r.status, 403, `${who}: ${sql}: ${r.text}`);
      assert.equal(r.json.code, code, `${who}: ${sql}: ${r.text}`);
    }
  }
}

describe('PostgreSQL: sessions stay as the gateway set them', () => {
  let s: TestServer;
  let data: Awaited<ReturnType<typeof scratchDatabase>>;
  let k: { reader: string; writer: string };
  before(async () => {
    data = await scratchDatabase('qag_session');
    await data.sql.unsafe(`
      CREATE SCHEMA private;
      CREATE TABLE customers (id int, name text);
      INSERT INTO customers VALUES (1, 'Ann');
      CREATE TABLE private.customers (id int, name text);
      INSERT INTO private.customers VALUES (1, 'Private');
      CREATE FUNCTION move_path() RETURNS int LANGUAGE plpgsql AS $$
        BEGIN PERFORM set_config('search_path', 'private', false); PERFORM set_config('statement_timeout', '0', false); RETURN 1; END $$;
      CREATE FUNCTION path_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM set_config('search_path', 'private', false); RETURN NEW; END $$;
      CREATE TABLE audit (id int);
      CREATE TRIGGER audit_path BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION path_on_insert();
      CREATE VIEW moving AS SELECT move_path() AS m;`);
    // One connection per pool, so every call reaches the session an earlier one may have changed.
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1', QUERYAPIGATE_POOL_SIZE: '1' });
    const c = await s.call('POST', '/api/v1/connections', {
      body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: data.name, user: 'postgres' },
    });
    assert.equal(c.status, 201, c.text);
    k = await keys(s, 'pg');
  });
  after(async () => {
    await s.stop();
    await data.drop();
  });

  /** What every caller's session looks like: the default path, the server's limit, the connecting role, nothing listened to. */
  async function assertClean(label: string) {
    for (const key of [k.reader, k.writer, ADMIN_KEY]) {
      const r = await call(
        s,
        'pg',
        "SELECT current_setting('search_path') AS path, current_setting('statement_timeout') AS t, current_user AS u, (SELECT name FROM customers LIMIT 1) AS name, (SELECT count(*)::int FROM pg_listening_channels()) AS listens, (SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS locks",
        key,
      );
      assert.equal(r.status, 200, `${label}: ${r.text}`);
      assert.deepEqual(r.json, [{ path: '"$user", public', t: '30s', u: 'postgres', name: 'Ann', listens: 0, locks: 0 }], label);
    }
  }

  test('statements that change the session are refused for every caller', async () => {
    await refusedForAll(s, 'pg', k, [
      'SET search_path = private',
      'SET SESSION search_path TO private',
      'set statement_timeout = 0',
      'SET ROLE postgres',
      'SET SESSION AUTHORIZATION postgres',
      'SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE',
      'RESET ALL',
      'RESET search_path',
      'DISCARD ALL',
      "SELECT set_config('search_path', 'private', false)",
      "SELECT set_config('statement_timeout', '0', FALSE) AS x",
      "SELECT pg_catalog.set_config('search_path', 'private', 'f'::boolean)",
      `SELECT "set_config"('search_path', 'private', false)`,
      "SELECT SET_CONFIG('search_path', 'private', 1 = 0)",
      "WITH x AS (SELECT set_config('search_path', 'private', false) AS v) SELECT * FROM x",
      "SELECT name FROM customers WHERE set_config('search_path', 'private', false) IS NOT NULL",
      'LISTEN queryapigate_changes',
      'UNLISTEN *',
      'PREPARE p AS SELECT 1',
      'DEALLOCATE ALL',
      'EXECUTE p',
      'CREATE TEMP TABLE t (x int)',
      'CREATE TEMPORARY TABLE t AS SELECT 1 AS x',
      'CREATE TABLE pg_temp.t (x int)',
      'SELECT 1 AS x INTO TEMP t2',
      'SELECT pg_advisory_lock(1)',
      'SELECT pg_try_advisory_lock(2) AS got',
      'SELECT pg_advisory_lock_shared(3)',
      'SELECT setseed(0.5)',
      'DECLARE c CURSOR WITH HOLD FOR SELECT 1',
      'BEGIN',
      'START TRANSACTION',
      "LOAD 'plpgsql'",
    ]);
    await assertClean('after the refusals');
  });

  test('what analysis cannot see runs, and the session is put back after it', async () => {
    // a volatile function, by the admin and a writer
    for (const key of [ADMIN_KEY, k.writer]) {
      const r = await call(s, 'pg', 'SELECT move_path() AS m', key);
      assert.equal(r.status, 200, r.text);
      await assertClean('after move_path()');
    }
    // a trigger fired by a writer's insert
    const w = await call(s, 'pg', 'INSERT INTO audit VALUES (1)', k.writer);
    assert.equal(w.status, 200, w.text);
    await assertClean('after a trigger');
    // a view calling a volatile function, read by a key that may not write
    const v = await call(s, 'pg', 'SELECT m FROM moving', k.reader);
    assert.equal(v.status, 200, v.text);
    await assertClean('after a view');
    // an export streams through a cursor in a transaction of its own: what it did to the session is put back too
    const name = `session_${n++}`;
    const saved = await s.call('POST', '/api/v1/queries', {
      body: { name, connection_name: 'pg', sql: 'SELECT m, g FROM moving, generate_series(1, 3) g', description: 'export', publish: true },
    });
    assert.equal(saved.status, 201, saved.text);
    const exported = await s.call('GET', `/q/${name}?stream=true&format=csv`, { key: k.reader });
    assert.equal(exported.status, 200, exported.text);
    assert.equal(exported.text, 'm,g\r\n1,1\r\n1,2\r\n1,3\r\n');
    // The reader's next call, on the one connection of its pool, finds the default path.
    const next = await call(s, 'pg', "SELECT current_setting('search_path') AS p, (SELECT name FROM customers LIMIT 1) AS name", k.reader);
    assert.deepEqual(next.json, [{ p: '"$user", public', name: 'Ann' }], next.text);
    await assertClean('after an export');
    // a transaction-local setting is the caller's to make: it ends with the call
    const local = await call(s, 'pg', "SELECT set_config('search_path', 'private', true) AS p", k.writer);
    assert.equal(local.status, 200, local.text);
    assert.deepEqual(local.json, [{ p: 'private' }]);
    await assertClean('after a local setting');
  });
});

describe('MariaDB: sessions stay as the gateway set them', () => {
  let s: TestServer;
  let admin: mysql.Connection;
  let k: { reader: string; writer: string };
  const db = `qag_session_${process.pid}`;
  before(async () => {
    admin = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
    await admin.query(`CREATE DATABASE ${db}; USE ${db};
      CREATE TABLE customers (id INT, name VARCHAR(20));
      INSERT INTO customers VALUES (1, 'Ann');
      CREATE FUNCTION leak() RETURNS INT DETERMINISTIC BEGIN SET @leak = 42; RETURN 1; END;
      CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, amount INT);
      CREATE FUNCTION add_order(a INT) RETURNS INT MODIFIES SQL DATA BEGIN INSERT INTO orders (amount) VALUES (a); RETURN 1; END;`);
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1', QUERYAPIGATE_POOL_SIZE: '1' });
    await s.call('POST', '/api/v1/connections', { body: { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: db, user: 'root' } });
    k = await keys(s, 'my');
  });
  after(async () => {
    await s.stop();
    await admin.query(`DROP DATABASE ${db}`);
    await admin.end();
  });

  async function assertClean(label: string) {
    for (const key of [k.reader, k.writer, ADMIN_KEY]) {
      const r = await call(s, 'my', "SELECT @a AS a, @leak AS l, DATABASE() AS d, (SELECT name FROM customers LIMIT 1) AS name, IS_USED_LOCK('x') AS lk", key);
      assert.equal(r.status, 200, `${label}: ${r.text}`);
      assert.deepEqual(r.json, [{ a: null, l: null, d: db, name: 'Ann', lk: null }], label);
    }
  }

  test('statements that change the session are refused for every caller', async () => {
    await refusedForAll(s, 'my', k, [
      'SET @a = 1',
      'SET SESSION max_statement_time = 0',
      "SET sql_mode = 'ANSI_QUOTES'",
      'SET NAMES latin1',
      'SET TRANSACTION READ WRITE',
      'SELECT @a := 1 AS x',
      'SELECT id INTO @a FROM customers LIMIT 1',
      'SELECT id, name INTO @a, @b FROM customers LIMIT 1',
      'SELECT id, name FROM customers LIMIT 1 INTO @a , @b',
      'SELECT 1, 2, 3 INTO @a, @b, @c',
      'SELECT @a:=1',
      'SELECT (@a := 2) AS x',
      'SET @a := 1',
      'SET @a = 1, @b = 2',
      'SET STATEMENT max_statement_time = 0 FOR SELECT 1',
      "SELECT GET_LOCK('x', 0) AS l",
      'SELECT RELEASE_ALL_LOCKS() AS r',
      'SELECT LAST_INSERT_ID(5) AS i',
      'USE mysql',
      "PREPARE st FROM 'SELECT 1'",
      'CREATE TEMPORARY TABLE t (x INT)',
      'LOCK TABLES customers READ',
      'START TRANSACTION',
      'BEGIN',
    ]);
    await assertClean('after the refusals');
  });

  test('reading a user variable changes nothing: it is served (NULL, as no call can set one), INSERT ... VALUES (@x) included', async () => {
    for (const [sql, rows] of [
      ['SELECT @x AS x', [{ x: null }]],
      ['SELECT @x AS x, @y AS y, @@autocommit AS ac', [{ x: null, y: null, ac: 1 }]],
      ['SELECT id FROM customers WHERE @nothing IS NULL', [{ id: 1 }]],
      ['SELECT COALESCE(@x, name) AS n FROM customers', [{ n: 'Ann' }]],
    ] as const) {
      for (const key of [k.reader, k.writer]) {
        const r = await call(s, 'my', sql, key);
        assert.equal(r.status, 200, `${sql}: ${r.text}`);
        assert.deepEqual(r.json, rows, sql);
      }
    }
    for (const sql of [
      'INSERT INTO customers (id, name) VALUES (@x, @y)',
      'INSERT INTO customers VALUES (7, @x)',
      'INSERT INTO customers (id, name) SELECT 8, @x',
      'UPDATE customers SET name = COALESCE(@x, name) WHERE id = 7',
    ]) {
      const r = await call(s, 'my', sql, k.writer);
      assert.equal(r.status, 200, `${sql}: ${r.text}`);
    }
    const [rows] = await admin.query(`SELECT id, name FROM ${db}.customers WHERE id IS NULL OR id > 1 ORDER BY id`);
    assert.deepEqual(rows, [
      { id: null, name: null },
      { id: 7, name: null },
      { id: 8, name: null },
    ]);
    await admin.query(`DELETE FROM ${db}.customers WHERE id IS NULL OR id > 1`);
    await assertClean('after reading user variables');
  });

  test('a stored function runs, and its connection is not reused', async () => {
    for (const key of [k.reader, k.writer, ADMIN_KEY]) {
      const r = await call(s, 'my', 'SELECT leak() AS x', key);
      assert.equal(r.status, 200, r.text);
      await assertClean('after leak()');
    }
  });

  test("a stored function that writes: a writer's SELECT of it writes, a reader's is refused by its read-only session", async () => {
    const written = await call(s, 'my', 'SELECT add_order(5) AS x', k.writer);
    assert.equal(written.status, 200, written.text);
    assert.deepEqual(written.json, [{ x: 1 }]);
    const refused = await call(s, 'my', 'SELECT add_order(6) AS x', k.reader);
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.json.code, 'read_only', refused.text);
    const [rows] = await admin.query(`SELECT amount FROM ${db}.orders ORDER BY id`);
    assert.deepEqual(rows, [{ amount: 5 }]);
    await assertClean('after add_order()');
  });
});

describe('SQLite: the connection stays as the gateway opened it', () => {
  let s: TestServer;
  let k: { reader: string; writer: string };
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1' });
    await sqliteConnection(s, 'lite', 'session.db', "CREATE TABLE customers (id INTEGER, name TEXT); INSERT INTO customers VALUES (1, 'Ann');");
    k = await keys(s, 'lite');
  });
  after(() => s.stop());

  test('PRAGMA, ATTACH, temporary tables and transactions are refused for every caller', async () => {
    await refusedForAll(s, 'lite', k, [
      'PRAGMA query_only = 0',
      'PRAGMA cache_size = 10',
      'pragma foreign_keys',
      "ATTACH DATABASE 'other.db' AS other",
      'DETACH other',
      'CREATE TEMP TABLE t (x)',
      'CREATE TEMPORARY VIEW v AS SELECT 1',
      'BEGIN',
      'SAVEPOINT a',
    ]);
    const r = await call(s, 'lite', 'SELECT name FROM customers', ADMIN_KEY);
    assert.deepEqual(r.json, [{ name: 'Ann' }]);
  });
});

describe("PostgreSQL source: the gateway's time limit does not rest on the session's settings", () => {
  test('a session whose statement_timeout a statement switched off still stops a call at its limit', async () => {
    const source = openSource(
      { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: 'postgres', user: 'postgres' },
      { poolSize: 1, home: tmpdir() },
    );
    try {
      const opts = { timeoutMs: 500, readOnly: true };
      // Run below governance (which refuses it): the session's limit is now off, unknown to the source.
      await source.run("SELECT set_config('statement_timeout', '0', false)", [], opts);
      const started = performance.now();
      await rejectsWith(source.run('SELECT pg_sleep(5)', [], opts), 'query_timeout');
      const took = performance.now() - started;
      assert.ok(took < 2500, `stopped after ${Math.round(took)} ms`);
      // the client that held it was retired: the next call runs, with the limit
      await rejectsWith(source.run('SELECT pg_sleep(5)', [], opts), 'query_timeout');
      const r = await source.run("SELECT current_setting('statement_timeout') AS t", [], opts);
      assert.deepEqual(r.rows, [['500ms']]);
    } finally {
      await source.close();
    }
  });
});
