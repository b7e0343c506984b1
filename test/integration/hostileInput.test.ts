// Hostile input through the whole gateway, against real servers: each class with many shapes.
// - A NUL byte in a parameter is a 400 param_invalid on every data source, never a 500.
// - PostgreSQL's Unicode-escaped names (U&"...") never reach a masked or table-restricted key's data.
// - A mask trace cached on a schema that has changed since is refused, never applied by position.
// - A SQLite connection opens only files inside QUERYAPIGATE_HOME, and never the store itself.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import { scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

let s: TestServer;
let pg: Awaited<ReturnType<typeof scratchDatabase>>;
let my: mysql.Connection;
const MY_DB = `qag_hostile_${process.pid}`;
const outside = mkdtempSync(join(tmpdir(), 'qag-outside-'));
const keys: Record<string, string> = {};

const post = async (path: string, body: unknown) => {
  const r = await s.call('POST', path, { body });
  assert.equal(r.status, 201, `${path}: ${r.text}`);
  return r.json;
};

before(async () => {
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  pg = await scratchDatabase('qag_hostile');
  await pg.sql.unsafe(`CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
    INSERT INTO customers VALUES (1, 'Ann', 'ann@example.com'), (2, 'Bob', 'bob@example.com');
    CREATE TABLE secrets (id int, v text); INSERT INTO secrets VALUES (1, 'top secret');`);
  my = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root', multipleStatements: true });
  await my.query(`CREATE DATABASE ${MY_DB}; USE ${MY_DB};
    CREATE TABLE customers (id INT PRIMARY KEY, name TEXT, email TEXT); INSERT INTO customers VALUES (1, 'Ann', 'ann@example.com');`);
  const lite = new Database(join(s.home, 'shop.db'));
  lite.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT); INSERT INTO customers VALUES (1, 'Ann', 'ann@example.com');");
  lite.close();

  await post('/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' });
  await post('/api/v1/connections', { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: MY_DB, user: 'root' });
  await post('/api/v1/connections', { name: 'lite', db: 'sqlite', database: 'shop.db' });
  for (const c of ['pg', 'my', 'lite']) {
    await post('/api/v1/queries', {
      name: `by_name_${c}`,
      connection_name: c,
      description: 'typed',
      publish: true,
      sql: 'SELECT id FROM customers WHERE name = :name',
      parameters: { name: 'str' },
    });
    await post('/api/v1/queries', {
      name: `untyped_${c}`,
      connection_name: c,
      description: 'untyped',
      publish: true,
      sql: 'SELECT id FROM customers WHERE name = :name',
      // declared without a type (a save refuses an undeclared marker), so any scalar passes through
      parameters: { name: {} },
    });
  }
  keys.reader = (await post('/api/v1/api-keys', { name: 'reader', queries: [], connections: '*' })).secret;
  keys.masked = (
    await post('/api/v1/api-keys', { name: 'masked', queries: [], connections: ['pg'], mask: [{ column: 'customers.email', action: 'hash' }] })
  ).secret;
  keys.tables = (await post('/api/v1/api-keys', { name: 'tables', queries: [], connections: ['pg'], allowed_tables: ['customers'] })).secret;
});

after(async () => {
  await s.stop();
  await pg.drop();
  await my.query(`DROP DATABASE IF EXISTS ${MY_DB}`);
  await my.end();
  rmSync(outside, { recursive: true, force: true });
});

describe('a NUL byte in a parameter is param_invalid, on every data source', () => {
  const NULS = ['a%00b', '%00', 'Ann%00', '%00Ann', 'x%00%00y'];
  for (const c of ['pg', 'my', 'lite']) {
    for (const q of [`by_name_${c}`, `untyped_${c}`]) {
      test(`${q}: query-string and JSON shapes`, async () => {
        for (const v of NULS) {
          const r = await s.call('GET', `/q/${q}?name=${v}`, { key: keys.reader });
          assert.equal(r.status, 400, `${v}: ${r.text}`);
          assert.equal(r.json.code, 'param_invalid');
          assert.match(r.json.errors.name, /NUL/);
          const j = await s.call('POST', `/q/${q}`, { key: keys.reader, body: { params: { name: decodeURIComponent(v) } } });
          assert.equal(j.status, 400, `${v} (JSON): ${j.text}`);
          assert.equal(j.json.code, 'param_invalid');
        }
        const fine = await s.call('GET', `/q/${q}?name=Ann`, { key: keys.reader });
        assert.equal(fine.status, 200, fine.text);
        assert.deepEqual(fine.json, [{ id: 1 }]);
      });
    }
  }
});

describe('postgres: Unicode-escaped names never reach the data of a governed key', () => {
  const execute = (key: string, sql: string) =>
    s
      .call('POST', '/api/v1/queries', {
        body: { name: `probe_${Math.random().toString(36).slice(2)}`, connection_name: 'pg', description: 'p', publish: true, sql },
      })
      .then(async (created) => {
        assert.equal(created.status, 201, created.text);
        return s.call('GET', `/q/${created.json.name}`, { key });
      });

  test('the plain column is masked and the escaped spellings of it are refused', async () => {
    const plain = await execute(keys.masked, 'SELECT email FROM customers ORDER BY id');
    assert.equal(plain.status, 200, plain.text);
    assert.ok(
      plain.json.every((r: { email: string }) => !r.email.includes('@')),
      'hashed',
    );
    for (const sql of [
      'SELECT U&"\\0065mail" FROM customers',
      'SELECT u&"\\0065mail" AS x FROM customers',
      'SELECT U&"!0065mail" UESCAPE \'!\' FROM customers',
      'SELECT c.U&"\\0065\\006d\\0061\\0069\\006c" FROM customers c',
      'SELECT x FROM (SELECT U&"\\0065mail" AS x FROM customers) s',
    ]) {
      const r = await execute(keys.masked, sql);
      assert.equal(r.status, 403, `${sql}: ${r.text}`);
      assert.equal(r.json.code, 'read_only');
      assert.ok(!r.text.includes('@example.com'), 'no email in the answer');
    }
  });

  test('a table-restricted key reaches no other table or file through an escaped function name', async () => {
    for (const sql of [
      "SELECT * FROM U&\"\\0071uery_to_xml\"('select v from secrets', true, false, '') AS x",
      "SELECT U&\"\\0071uery_to_xml\"('select v from secrets', true, false, '') AS x",
      'SELECT * FROM U&"pg_read_file"(\'/etc/hostname\') AS f(line)',
      'SELECT * FROM U&"\\0073ecrets"',
    ]) {
      const r = await execute(keys.tables, sql);
      assert.equal(r.status, 403, `${sql}: ${r.text}`);
      assert.ok(!r.text.includes('top secret'));
    }
  });
});

describe('postgres: a table changed under a cached mask trace is never masked by position', () => {
  test('a column dropped and added again (it moves) is refused until the schema is read again, then masked', async () => {
    const saved = await s.call('POST', '/api/v1/queries', {
      body: { name: 'all_customers', connection_name: 'pg', description: 'p', publish: true, sql: 'SELECT * FROM customers ORDER BY id' },
    });
    assert.equal(saved.status, 201, saved.text);
    const first = await s.call('GET', '/q/all_customers', { key: keys.masked });
    assert.equal(first.status, 200, first.text);
    assert.ok(!first.text.includes('@example.com'));
    // email moves from the third place to the second; the trace cached for it is of the old order
    await pg.sql.unsafe("ALTER TABLE customers DROP COLUMN name, ADD COLUMN name text; UPDATE customers SET name = 'N' || id");
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await s.call('GET', '/q/all_customers', { key: keys.masked }));
    for (const r of answers) assert.ok(!r.text.includes('@example.com'), `an email in clear: ${r.text}`);
    assert.equal(answers[0].status, 403, answers[0].text);
    assert.equal(answers[0].json.code, 'mask_unresolvable');
    const last = answers[answers.length - 1];
    assert.equal(last.status, 200, last.text);
    assert.deepEqual(Object.keys(last.json[0]), ['id', 'email', 'name']);
    assert.match(last.json[0].email, /^[0-9a-f]{16}$/, 'hashed');
  });
});

describe('inference through predicates: refused for a key that asks for it, on every source', () => {
  test("mask_predicates: 'refuse' refuses a masked column in WHERE; the output stays masked; the default allows it", async () => {
    const strict = await post('/api/v1/api-keys', {
      name: 'strict',
      queries: [],
      connections: ['pg', 'my', 'lite'],
      mask: [{ column: 'customers.email', action: 'hash' }],
      mask_predicates: 'refuse',
    });
    const lenient = await post('/api/v1/api-keys', {
      name: 'lenient',
      queries: [],
      connections: ['pg', 'my', 'lite'],
      mask: [{ column: 'customers.email', action: 'hash' }],
    });
    const shown = await s.call('GET', '/api/v1/api-keys/strict');
    assert.equal(shown.json.mask_predicates, 'refuse');
    assert.equal((await s.call('GET', '/api/v1/api-keys/lenient')).json.mask_predicates, 'allow');
    for (const c of ['pg', 'my', 'lite']) {
      await post('/api/v1/queries', {
        name: `guess_${c}`,
        connection_name: c,
        description: 'p',
        publish: true,
        sql: 'SELECT name FROM customers WHERE email LIKE :p',
        parameters: { p: 'str' },
      });
      await post('/api/v1/queries', {
        name: `list_${c}`,
        connection_name: c,
        description: 'p',
        publish: true,
        sql: 'SELECT name, email FROM customers WHERE id = :i',
        parameters: { i: 'int' },
      });
      const refused = await s.call('GET', `/q/guess_${c}?p=a%25`, { key: strict.secret });
      assert.equal(refused.status, 403, `${c}: ${refused.text}`);
      assert.equal(refused.json.code, 'mask_predicate');
      const listed = await s.call('GET', `/q/list_${c}?i=1`, { key: strict.secret });
      assert.equal(listed.status, 200, `${c}: ${listed.text}`);
      assert.match(listed.json[0].email, /^[0-9a-f]{16}$/);
      // the documented limit when it is off: the predicate answers what the mask hides
      const guessed = await s.call('GET', `/q/guess_${c}?p=a%25`, { key: lenient.secret });
      assert.equal(guessed.status, 200, `${c}: ${guessed.text}`);
      assert.equal(guessed.json.length, 1, 'the one email starting with a');
    }
  });

  // Whether a statement fails, how many rows a generator makes, DISTINCT keeps or a NATURAL JOIN matches answers a
  // predicate on what it reads: the rule's action does not matter, as the database computes before the gateway nulls or
  // drops.
  const failsWhere: Record<string, (guess: string) => string> = {
    pg: (g) => `SELECT id, CASE WHEN email LIKE '${g}%' THEN 1 / (id - id) ELSE 1 END AS x FROM customers WHERE id = 1`,
    my: (g) => `SELECT id, CASE WHEN email LIKE '${g}%' THEN EXP(800) ELSE 1 END AS x FROM customers WHERE id = 1`,
    lite: (g) => `SELECT id, CASE WHEN email LIKE '${g}%' THEN abs(-9223372036854775808) ELSE 1 END AS x FROM customers WHERE id = 1`,
  };
  // NATURAL JOIN matches rows on every column the two sides share, here id and email: a row comes back if the guess is
  // right (a reader that took NATURAL for the left table's alias saw no predicate at all).
  // The same as a WHERE, GROUP BY or ORDER BY of the column, through an output's alias or position, or a DISTINCT.
  const BY_OUTPUT = [
    'SELECT DISTINCT email FROM customers',
    'SELECT email AS e FROM customers ORDER BY e',
    'SELECT id, email FROM customers ORDER BY 2',
    'SELECT email AS e, count(*) AS n FROM customers GROUP BY e',
    'SELECT email FROM customers UNION ALL SELECT name FROM customers ORDER BY 1',
  ];
  const NATURAL_GUESS = "SELECT id FROM customers NATURAL JOIN (SELECT 1 AS id, 'ann@example.com' AS email) AS guess";
  const rowCounts: Record<string, string[]> = {
    pg: [
      'SELECT id FROM customers, generate_series(1, length(customers.email))',
      "SELECT id FROM customers CROSS JOIN LATERAL unnest(string_to_array(email, 'a')) AS u",
      'SELECT id FROM (SELECT id, generate_series(1, length(email)) AS z FROM customers) AS t',
      NATURAL_GUESS,
    ],
    my: ['SELECT id FROM (SELECT id, EXP(LENGTH(email) * 50) AS z FROM customers) AS t'],
    lite: ['SELECT id FROM (SELECT id, json(email) AS z FROM customers) AS t', NATURAL_GUESS],
  };
  for (const action of ['null', 'drop', 'hash']) {
    test(`mask_predicates: 'refuse' with '${action}': a value computed from the column, shown or not, is refused; the column itself is served`, async () => {
      const key = await post('/api/v1/api-keys', {
        name: `refuse-${action}`,
        queries: [],
        connections: ['pg', 'my', 'lite'],
        mask: [{ column: 'customers.email', action }],
        mask_predicates: 'refuse',
      });
      const adhoc = (connection: string, sql: string) => s.call('POST', '/execute_sql', { body: { connection_name: connection, sql }, key: key.secret });
      for (const c of ['pg', 'my', 'lite']) {
        for (const sql of [failsWhere[c]('a'), failsWhere[c]('b'), ...rowCounts[c], ...BY_OUTPUT]) {
          const r = await adhoc(c, sql);
          assert.equal(r.status, 403, `${c}: ${sql}: ${r.text}`);
          assert.equal(r.json.code, 'mask_predicate', sql);
        }
        const own = await adhoc(c, 'SELECT e FROM (SELECT id, email AS e FROM customers) AS t WHERE id = 1');
        assert.equal(own.status, 200, `${c}: ${own.text}`);
        const counted = await adhoc(c, 'SELECT count(*) AS n FROM customers');
        assert.equal(counted.status, 200, `${c}: ${counted.text}`);
        assert.equal(Number(counted.json[0].n) >= 1, true);
      }
    });
  }
});

describe('sqlite: a connection opens only files inside QUERYAPIGATE_HOME, never the store', () => {
  before(() => {
    const file = new Database(join(outside, 'elsewhere.db'));
    file.exec('CREATE TABLE customers (id INTEGER, name TEXT, email TEXT)');
    file.close();
    mkdirSync(join(s.home, 'data'));
    symlinkSync(join(outside, 'elsewhere.db'), join(s.home, 'link-out.db'));
    symlinkSync(join(s.home, 'queryapigate.db'), join(s.home, 'data', 'link-store.db'));
    symlinkSync(outside, join(s.home, 'dir-out'));
  });

  /** Paths that leave the home (plainly, through `..`, or through a link) or name the store's files. */
  const refused = (home: string) => [
    join(outside, 'elsewhere.db'),
    '../elsewhere.db',
    `../${outside.split('/').pop()}/elsewhere.db`,
    'data/../../elsewhere.db',
    'link-out.db',
    'dir-out/elsewhere.db',
    'queryapigate.db',
    './queryapigate.db',
    'data/../queryapigate.db',
    join(home, 'queryapigate.db'),
    'queryapigate.db-wal',
    'queryapigate.db-shm',
    'data/link-store.db',
    '/etc/passwd',
    '.',
  ];

  test('every shape that leaves the home or names the store is connection_misconfigured', async () => {
    let n = 0;
    for (const database of refused(s.home)) {
      const name = `lite_${n++}`;
      await post('/api/v1/connections', { name, db: 'sqlite', database });
      await post('/api/v1/queries', { name: `q_${name}`, connection_name: name, description: 'p', publish: true, sql: 'SELECT name FROM sqlite_master' });
      const r = await s.call('GET', `/q/q_${name}`, { key: keys.reader });
      assert.equal(r.status, 400, `${database}: ${r.status} ${r.text}`);
      assert.equal(r.json.code, 'connection_misconfigured', database);
    }
  });

  test('a file in a folder of the home is served', async () => {
    const inside = new Database(join(s.home, 'data', 'inside.db'));
    inside.exec("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('here')");
    inside.close();
    await post('/api/v1/connections', { name: 'inside', db: 'sqlite', database: 'data/inside.db' });
    await post('/api/v1/queries', { name: 'inside_q', connection_name: 'inside', description: 'p', publish: true, sql: 'SELECT v FROM t' });
    const r = await s.call('GET', '/q/inside_q', { key: keys.reader });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, [{ v: 'here' }]);
  });
});
