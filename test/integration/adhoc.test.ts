// POST /execute_sql end to end on real PostgreSQL, MariaDB and SQLite: ad-hoc SQL goes through the
// same governance as /q/ (read-only guard, write policy, allowed_tables, masks), with paging and
// formats; a key with only query grants is refused; bad bodies are 400s; runs are kept in history as
// ad-hoc runs (query null, the statement's text, its parameter names).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import { eventually, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const HEX16 = /^[0-9a-f]{16}$/;
const CUSTOMERS = [
  [1, 'ann', 'ann@example.com'],
  [2, 'bob', 'bob@example.com'],
  [3, 'cy', 'cy@example.com'],
];
const SETUP = `CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, email VARCHAR(40));
  INSERT INTO customers VALUES ${CUSTOMERS.map(([id, n, e]) => `(${id}, '${n}', '${e}')`).join(', ')};
  CREATE TABLE secrets (id INT PRIMARY KEY, top VARCHAR(20));
  INSERT INTO secrets VALUES (1, 'launch codes');`;

let s: TestServer;
let pg: Awaited<ReturnType<typeof scratchDatabase>>;
let my: mysql.Connection;
const myDb = `qag_adhoc_${process.pid}`;
const keys: Record<string, string> = {};

before(async () => {
  pg = await scratchDatabase('qag_adhoc');
  await pg.sql.unsafe(SETUP);
  my = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
  await my.query(`CREATE DATABASE ${myDb}; USE ${myDb}; ${SETUP}`);
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1' });
  const lite = new Database(join(s.home, 'shop.db'));
  lite.exec(SETUP);
  lite.close();
  const made = [
    await s.call('POST', '/api/v1/connections', { body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' } }),
    await s.call('POST', '/api/v1/connections', { body: { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: myDb, user: 'root' } }),
    await s.call('POST', '/api/v1/connections', { body: { name: 'lite', db: 'sqlite', database: 'shop.db' } }),
    await s.call('POST', '/api/v1/queries', {
      body: { name: 'names', connection_name: 'pg', description: 'n', publish: true, sql: 'SELECT name FROM customers' },
    }),
  ];
  for (const r of made) assert.ok(r.status < 300, r.text);
  const key = async (name: string, grants: Record<string, unknown>) => {
    const r = await s.call('POST', '/api/v1/api-keys', { body: { name, ...grants } });
    assert.equal(r.status, 201, r.text);
    keys[name] = r.json.secret;
  };
  await key('reader', { connections: ['pg', 'my', 'lite'], allowed_tables: ['customers'], mask: [{ column: 'customers.email', action: 'hash' }] });
  await key('open-reader', { connections: ['pg', 'my', 'lite'] });
  await key('tables-only', { connections: ['pg', 'my', 'lite'], allowed_tables: ['customers'] });
  await key('queries-only', { queries: ['names'], connections: [] });
  await key('star-queries', { queries: '*', connections: [] });
});

after(async () => {
  await s?.stop();
  await pg?.drop();
  await my?.query(`DROP DATABASE IF EXISTS ${myDb}`);
  await my?.end();
});

/** As the reader key unless told; `ADMIN` calls as the administrator. */
const ADMIN = 'admin';
const adhoc = (body: unknown, opts: { key?: string; query?: string } = {}) =>
  s.call('POST', `/execute_sql${opts.query ?? ''}`, { body, key: opts.key === ADMIN ? undefined : (opts.key ?? keys.reader) });

for (const connection of ['pg', 'my', 'lite']) {
  describe(`/execute_sql on ${connection}`, () => {
    test('an allowed read answers rows, with :markers bound from params', async () => {
      const r = await adhoc({ connection_name: connection, sql: 'SELECT id, name FROM customers WHERE id = :id', params: { id: 2 } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json, [{ id: 2, name: 'bob' }]);
    });

    test('paging in the query string, formats in the body', async () => {
      const r = await adhoc({ connection_name: connection, sql: 'SELECT id FROM customers ORDER BY id' }, { query: '?page=2&page_size=2' });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json, [{ id: 3 }]);
      assert.equal(r.headers.get('X-Page'), '2');
      assert.equal(r.headers.get('X-Has-More'), 'false');
      const first = await adhoc({ connection_name: connection, sql: 'SELECT id FROM customers ORDER BY id' }, { query: '?page_size=2' });
      assert.equal(first.headers.get('X-Has-More'), 'true');
      const csv = await adhoc({ connection_name: connection, sql: 'SELECT id, name FROM customers ORDER BY id', format: 'csv' });
      assert.equal(csv.status, 200, csv.text);
      assert.match(csv.headers.get('Content-Type') ?? '', /text\/csv/);
      assert.equal(csv.text.trim().split(/\r?\n/)[1], '1,ann');
    });

    test('a masked column is hashed, however it is reached (directly, computed, through *)', async () => {
      for (const sql of [
        'SELECT email FROM customers ORDER BY id',
        'SELECT lower(email) AS email FROM customers ORDER BY id',
        'SELECT * FROM customers ORDER BY id',
      ]) {
        const r = await adhoc({ connection_name: connection, sql });
        assert.equal(r.status, 200, `${sql}: ${r.text}`);
        assert.equal(r.json.length, 3);
        for (const row of r.json) assert.match(row.email, HEX16, sql);
        assert.doesNotMatch(r.text, /example\.com/, sql);
      }
      const plain = await adhoc({ connection_name: connection, sql: 'SELECT email FROM customers WHERE id = 1' }, { key: keys['open-reader'] });
      assert.deepEqual(plain.json, [{ email: 'ann@example.com' }]);
    });

    test('a table outside allowed_tables is refused, joined or in a subquery', async () => {
      for (const sql of [
        'SELECT * FROM secrets',
        'SELECT c.id FROM customers c JOIN secrets s ON s.id = c.id',
        'SELECT id FROM customers WHERE id IN (SELECT id FROM secrets)',
      ]) {
        const r = await adhoc({ connection_name: connection, sql });
        assert.equal(r.status, 403, `${sql}: ${r.text}`);
        assert.equal(r.json.code, 'table_not_allowed');
        assert.doesNotMatch(r.text, /launch/);
      }
    });

    test('a write is refused for a key that may not write, even with writes on for the server', async () => {
      for (const [sql, code] of [
        ['DELETE FROM customers', 'read_only'],
        ["UPDATE customers SET name = 'x'", 'read_only'],
        ['SELECT 1; DELETE FROM customers', 'multiple_statements'],
      ] as const) {
        for (const key of [keys.reader, keys['open-reader']]) {
          const r = await adhoc({ connection_name: connection, sql }, { key });
          assert.equal(r.json.code, code, `${sql}: ${r.text}`);
        }
      }
      const still = await adhoc({ connection_name: connection, sql: 'SELECT count(*) AS n FROM customers' }, { key: ADMIN });
      assert.equal(Number(still.json[0].n), 3);
    });

    test('a key with query grants only is refused ad-hoc SQL', async () => {
      for (const key of [keys['queries-only'], keys['star-queries']]) {
        const r = await adhoc({ connection_name: connection, sql: 'SELECT 1 AS one' }, { key });
        assert.equal(r.status, 403, r.text);
        assert.equal(r.json.code, 'connection_forbidden');
      }
    });

    test('the database text of a failure is kept for the caller who wrote the SQL', async () => {
      const r = await adhoc({ connection_name: connection, sql: 'SELECT nosuch FROM customers' }, { key: keys['open-reader'] });
      assert.equal(r.status, 500, r.text);
      assert.equal(r.json.code, 'query_failed');
      assert.match(r.json.detail, /nosuch/i);
    });
  });
}

describe('/execute_sql requests', () => {
  test('bad bodies and options are 400s with their codes', async () => {
    const cases: Array<[unknown, string, string?]> = [
      ['not json', 'invalid_body'],
      [[1, 2], 'invalid_body'],
      [{ connection_name: 'pg' }, 'sql_required'],
      [{ connection_name: 'pg', sql: '  ' }, 'sql_required'],
      [{ connection_name: 'pg', sql: 42 }, 'invalid_body'],
      [{ sql: 'SELECT 1' }, 'connection_required'],
      [{ connection_name: 'pg', sql: 'SELECT 1', params: [1] }, 'invalid_body'],
      [{ connection_name: 'pg', sql: 'SELECT 1', nonsense: true }, 'unknown_field'],
      [{ connection_name: 'pg', sql: 'SELECT 1', format: 'pdf' }, 'invalid_format'],
      [{ connection_name: 'pg', sql: 'SELECT 1', timeout: -1 }, 'invalid_timeout'],
      [{ connection_name: 'pg', sql: 'SELECT id FROM customers WHERE id = :id' }, 'param_required'],
      [{ connection_name: 'pg', sql: 'SELECT 1' }, 'invalid_paging', '?page=0'],
      [{ connection_name: 'pg', sql: 'SELECT id FROM customers) AS x, (SELECT top FROM secrets' }, 'invalid_sql'],
    ];
    for (const [body, code, query] of cases) {
      const r = await adhoc(body, { query });
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal(r.json.code, code, JSON.stringify(body));
      assert.doesNotMatch(r.text, /at \w+ \(/); // no stack trace
    }
    assert.equal((await s.call('GET', '/execute_sql', { key: keys.reader })).json.code, 'method_not_allowed');
    assert.equal((await adhoc({ connection_name: 'pg', sql: 'SELECT 1' }, { key: 'wrong' })).status, 401);
    assert.equal((await adhoc({ connection_name: 'nope', sql: 'SELECT 1' }, { key: ADMIN })).json.code, 'connection_not_found');
    assert.equal((await adhoc({ connection_name: 'pg', sql: 'SELECT 1', database: 'other' })).json.code, 'admin_only');
  });

  test('a statement the parsers cannot read is refused for a scoped key', async () => {
    const r = await adhoc({ connection_name: 'pg', sql: "SELECT U&'\\0061' AS a" }, { key: keys['open-reader'] });
    assert.equal(r.status, 403, r.text);
    assert.ok(['table_check_failed', 'read_only'].includes(r.json.code), r.text);
  });

  test('a scoped key never reads outside tables through ad-hoc SQL, even without a table list', async () => {
    const cases: Array<[string, string]> = [
      ['my', "SELECT LOAD_FILE('/etc/hostname') AS f"],
      ['pg', "SELECT pg_read_file('/etc/hostname') AS f"],
    ];
    for (const [connection_name, sql] of cases) {
      const r = await adhoc({ connection_name, sql }, { key: keys['open-reader'] });
      assert.equal(r.status, 403, `${sql}: ${r.text}`);
      assert.ok(['table_not_allowed', 'read_only'].includes(r.json.code), r.text);
    }
    const mine = await adhoc({ connection_name: 'my', sql: "SELECT LOAD_FILE('/etc/hostname') AS f" }, { key: keys['open-reader'] });
    assert.equal(mine.json.code, 'table_not_allowed');
  });

  test("a key with rules reads no other session's statements (the server's state, which quotes them as written)", async () => {
    const SECRET = 'launch codes';
    // PostgreSQL keeps each backend's last statement; the administrator's names a value of a table the key may not read
    assert.equal((await adhoc({ connection_name: 'pg', sql: `SELECT id FROM secrets WHERE top = '${SECRET}'` }, { key: ADMIN })).status, 200);
    const backends = Array.from({ length: 8 }, (_, k) => `pg_stat_get_backend_activity(${k + 1}) AS b${k}`).join(', ');
    const shown = await adhoc({ connection_name: 'pg', sql: 'SELECT query FROM pg_stat_activity' }, { key: keys['open-reader'] });
    assert.ok(shown.text.includes(SECRET), `a key without rules sees them: ${shown.text}`);
    // MariaDB lists the statements running now: one of the administrator's runs while the key asks
    const running = adhoc({ connection_name: 'my', sql: `SELECT SLEEP(1.5) AS s FROM secrets WHERE top = '${SECRET}'` }, { key: ADMIN });
    await new Promise((r) => setTimeout(r, 300));
    const cases: Array<[string, string]> = [
      ['pg', `SELECT ${backends}`],
      ['pg', 'SELECT q FROM pg_stat_get_activity(NULL) AS a(datid, pid, usesysid, application_name, state, q)'],
      ['pg', 'SHOW search_path'],
      ['my', 'SHOW FULL PROCESSLIST'],
      ['my', 'SHOW ENGINE INNODB STATUS'],
      ['my', 'SHOW TABLES'],
    ];
    for (const [connection_name, sql] of cases) {
      const r = await adhoc({ connection_name, sql }, { key: keys['tables-only'] });
      assert.equal(r.status, 403, `${sql}: ${r.text}`);
      assert.equal(r.json.code, 'table_not_allowed', `${sql}: ${r.text}`);
    }
    const processes = await adhoc({ connection_name: 'my', sql: 'SHOW FULL PROCESSLIST' }, { key: keys['open-reader'] });
    assert.ok(processes.text.includes(SECRET), `a key without rules sees them: ${processes.text}`);
    assert.equal((await running).status, 200);
    for (const sql of ['SHOW COLUMNS FROM customers', 'SHOW CREATE TABLE customers']) {
      const r = await adhoc({ connection_name: 'my', sql }, { key: keys['tables-only'] });
      assert.equal(r.status, 200, `${sql}: ${r.text}`);
    }
  });

  test("MariaDB's parenthesized FROM lists are read, tables and masks alike", async () => {
    // node-sql-parser gives `FROM (a, b)`, `FROM ((a))` and `FROM (a JOIN b)` as one object, not a list: read as no FROM
    for (const sql of [
      'SELECT * FROM (customers, secrets)',
      'SELECT * FROM ((secrets))',
      'SELECT top FROM (customers JOIN secrets)',
      'SELECT s.top FROM (customers c LEFT JOIN secrets s USING (id))',
      'SELECT c.id FROM customers c JOIN (secrets s JOIN customers x ON s.id = x.id) ON c.id = s.id',
    ]) {
      for (const key of ['tables-only', 'reader']) {
        const r = await adhoc({ connection_name: 'my', sql }, { key: keys[key] });
        assert.equal(r.status, 403, `${key}: ${sql}: ${r.text}`);
        assert.equal(r.json.code, 'table_not_allowed', `${key}: ${sql}: ${r.text}`);
        assert.ok(!r.text.includes('launch codes'), r.text);
      }
    }
    // The allowed table in parentheses is served, its masked column hashed.
    for (const sql of ['SELECT * FROM ((customers)) ORDER BY id', 'SELECT c.email FROM (customers c JOIN customers d ON c.id = d.id) ORDER BY c.id']) {
      const r = await adhoc({ connection_name: 'my', sql });
      assert.equal(r.status, 200, `${sql}: ${r.text}`);
      assert.equal(r.json.length, 3);
      for (const row of r.json) assert.match(row.email, HEX16, `${sql}: ${r.text}`);
    }
  });

  test("SHOW and DESCRIBE of a table in another database are that database's table, not the allowed one of its name", async () => {
    const other = `${myDb}_other`;
    await my.query(`CREATE DATABASE ${other}; CREATE TABLE ${other}.customers (id INT, hidden_card VARCHAR(20), KEY by_card (hidden_card))`);
    try {
      for (const sql of [
        `DESCRIBE ${other}.customers`,
        `DESC \`${other}\`.customers`,
        `SHOW COLUMNS FROM customers FROM ${other}`,
        `SHOW FULL FIELDS FROM customers IN ${other}`,
        `SHOW INDEX FROM customers FROM ${other}`,
        `SHOW KEYS IN ${other}.customers`,
        `SHOW CREATE TABLE ${other}.customers`,
        `SHOW COLUMNS FROM ${myDb}.customers FROM ${other}`,
      ]) {
        const r = await adhoc({ connection_name: 'my', sql }, { key: keys['tables-only'] });
        assert.equal(r.status, 403, `${sql}: ${r.text}`);
        assert.equal(r.json.code, 'table_not_allowed', `${sql}: ${r.text}`);
        assert.ok(!r.text.includes('hidden_card'), r.text);
      }
      // The key's own table, named with its database or without, is still described.
      for (const sql of ['DESCRIBE customers', `DESCRIBE ${myDb}.customers`, `SHOW COLUMNS FROM customers FROM ${myDb}`]) {
        const r = await adhoc({ connection_name: 'my', sql }, { key: keys['tables-only'] });
        assert.equal(r.status, 200, `${sql}: ${r.text}`);
        assert.ok(r.text.includes('email'), r.text);
      }
    } finally {
      await my.query(`DROP DATABASE ${other}`);
    }
  });

  test('TABLE t is read as SELECT * FROM t and what follows it (a UNION, a schema, an ORDER BY), not as t alone', async () => {
    // staff is as wide as customers, so a UNION of the two runs; vault.customers is another schema's table of that name
    await pg.sql.unsafe(`CREATE TABLE staff (id INT, name TEXT, email TEXT); INSERT INTO staff VALUES (9, 'root', 'root@vault');
      CREATE SCHEMA vault; CREATE TABLE vault.customers (id INT, name TEXT, email TEXT); INSERT INTO vault.customers VALUES (7, 'x', 'x@vault')`);
    for (const [key, sql, code] of [
      ['tables-only', 'TABLE customers UNION ALL TABLE staff', 'table_check_failed'],
      ['tables-only', 'TABLE vault.customers', 'table_not_allowed'],
      ['reader', 'TABLE customers UNION ALL TABLE staff', 'table_check_failed'],
    ]) {
      const r = await adhoc({ connection_name: 'pg', sql }, { key: keys[key] });
      assert.equal(r.status, 403, `${key}: ${sql}: ${r.text}`);
      assert.equal(r.json.code, code, `${key}: ${sql}: ${r.text}`);
      assert.ok(!r.text.includes('@vault'), r.text);
    }
    const sorted = await adhoc({ connection_name: 'pg', sql: 'TABLE customers ORDER BY id DESC LIMIT 1' }, { key: keys['tables-only'] });
    assert.equal(sorted.status, 200, sorted.text);
    assert.deepEqual(sorted.json, [{ id: 3, name: 'cy', email: 'cy@example.com' }]);
    const hashed = await adhoc({ connection_name: 'pg', sql: 'TABLE customers ORDER BY id LIMIT 1' });
    assert.equal(hashed.status, 200, hashed.text);
    assert.match(hashed.json[0].email, HEX16);
  });

  test('the administrator may write when the server allows it', async () => {
    const r = await adhoc({ connection_name: 'pg', sql: "INSERT INTO secrets VALUES (2, 'x')" }, { key: ADMIN });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('X-Rows-Affected'), '1');
  });

  test('a stream exports the whole result', async () => {
    const r = await adhoc({ connection_name: 'pg', sql: 'SELECT id, email FROM customers ORDER BY id', format: 'csv' }, { query: '?stream=true' });
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get('Content-Disposition') ?? '', /result\.csv/);
    const lines = r.text.trim().split(/\r?\n/);
    assert.equal(lines.length, 4);
    assert.match(lines[1].split(',')[1], HEX16);
  });

  test('runs are kept in history as ad-hoc runs: no query, the statement, its parameter names', async () => {
    const marker = `/* ${Date.now()} */`;
    await adhoc({ connection_name: 'my', sql: `SELECT id FROM customers WHERE id = :id ${marker}`, params: { id: 1 } });
    await adhoc({ connection_name: 'my', sql: `SELECT top FROM secrets ${marker}` });
    const h = await eventually(
      () => s.call('GET', '/api/v1/history?kind=adhoc&limit=1000'),
      (r) => r.json.items.filter((i: { sql?: string }) => i.sql?.includes(marker)).length === 2,
    );
    const mine = h.json.items.filter((i: { sql?: string }) => i.sql?.includes(marker));
    assert.equal(mine.length, 2, h.text);
    const [refused, ran] = mine; // newest first
    assert.equal(ran.kind, 'adhoc');
    assert.equal(ran.query, null);
    assert.equal(ran.status, 'success');
    assert.equal(ran.rows, 1);
    assert.equal(ran.key_name, 'reader');
    assert.equal(ran.transport, 'rest');
    assert.deepEqual(ran.params, ['id']);
    assert.equal(ran.connection_name, 'my');
    assert.equal(refused.status, 'error');
    assert.equal(refused.code, 'table_not_allowed');
    assert.ok(h.json.items.every((i: { kind: string }) => i.kind === 'adhoc'));
    const saved = await s.call('GET', '/api/v1/history?kind=saved&limit=1000');
    assert.ok(saved.json.items.every((i: { kind: string }) => i.kind === 'saved'));
    assert.equal((await s.call('GET', '/api/v1/history?kind=other')).json.code, 'invalid_filter');
  });
});

describe('/execute_sql in pooled executors, with the ad-hoc history bounded', () => {
  let p: TestServer;
  before(async () => {
    p = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_HISTORY_ADHOC_LIMIT: '3' });
    await p.call('POST', '/api/v1/connections', { body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' } });
  });
  after(() => p?.stop());

  test('only the newest runs are kept', async () => {
    for (let i = 1; i <= 5; i++) {
      const r = await p.call('POST', '/execute_sql', { body: { connection_name: 'pg', sql: `SELECT ${i} AS n` } });
      assert.deepEqual(r.json, [{ n: i }]);
    }
    const h = await eventually(
      () => p.call('GET', '/api/v1/history?kind=adhoc'),
      (r) => r.json.items[0]?.sql === 'SELECT 5 AS n',
    );
    assert.deepEqual(
      h.json.items.map((i: { sql: string }) => i.sql),
      ['SELECT 5 AS n', 'SELECT 4 AS n', 'SELECT 3 AS n'],
    );
  });
});
