// The class "names are matched loosely": a table is the one the database resolves, never another of
// a similar name. Against real databases with look-alike tables (PostgreSQL: "Customers" beside
// customers, the same name in two schemas on the search path, a schema off the path, a view;
// MariaDB: Customers beside customers, another database's customers; SQLite: any case, main.),
// every shape asserts its concrete outcome: served with the masked column masked (the raw value
// appears nowhere in the answer), or refused with its code. allowed_tables entries are compared as
// the connection resolves them.
import assert from 'node:assert/strict';
import mysql from 'mysql2/promise';
import { after, before, describe, test } from 'node:test';
import { type Reply, scratchDatabase, sqliteConnection, startTestServer, type TestServer } from '../helpers.js';
import { type PrivateMariadb, startPrivateMariadb } from '../privateMariadb.js';

/** Every email in the fixtures: none may come back in clear to a key that masks it. */
const EMAILS = ['pub@example.com', 'cap@example.com', 'priv@example.com', 'extra@example.com', 'other@example.com', 'lite@example.com'];
const SSN = '123-45-6789';

let n = 0;
/** Saves `sql` on `conn` and calls it with `key`. */
async function call(s: TestServer, conn: string, sql: string, key: string): Promise<Reply> {
  const name = `names_${n++}`;
  const saved = await s.call('POST', '/api/v1/queries', { body: { name, connection_name: conn, description: 'probe', publish: true, sql } });
  assert.equal(saved.status, 201, `${sql}: ${saved.text}`);
  return s.call('GET', `/q/${name}`, { key });
}

async function key(s: TestServer, name: string, grants: Record<string, unknown>): Promise<string> {
  const r = await s.call('POST', '/api/v1/api-keys', { body: { name, queries: [], ...grants } });
  assert.equal(r.status, 201, r.text);
  return r.json.secret;
}

/** [statement, 'served' (with no clear email or SSN in it) or the refusal's code, the rows when served]. */
type Shape = [string, string, unknown?];

async function holds(s: TestServer, conn: string, k: string, shapes: Shape[], clear: string[] = [...EMAILS, SSN]) {
  for (const [sql, want, rows] of shapes) {
    const r = await call(s, conn, sql, k);
    if (want === 'served') {
      assert.equal(r.status, 200, `${sql}: ${r.text}`);
      for (const raw of clear) assert.ok(!r.text.includes(raw), `${sql}: ${raw} in clear: ${r.text}`);
      if (rows !== undefined) assert.deepEqual(r.json, rows, sql);
    } else {
      assert.equal(r.status, 403, `${sql}: ${r.text}`);
      assert.equal(r.json.code, want, `${sql}: ${r.text}`);
    }
  }
}

describe('PostgreSQL: names resolve by schema, exact quoted case and the search path', () => {
  let s: TestServer;
  let data: Awaited<ReturnType<typeof scratchDatabase>>;
  before(async () => {
    data = await scratchDatabase('qag_names');
    await data.sql.unsafe(`
      CREATE SCHEMA private; CREATE SCHEMA extra;
      CREATE TABLE public.customers (id int, name text, email text);
      INSERT INTO public.customers VALUES (1, 'Pub', 'pub@example.com');
      CREATE TABLE public."Customers" (email text, id int, name text);
      INSERT INTO public."Customers" VALUES ('cap@example.com', 1, 'Cap');
      CREATE TABLE private.customers (id int, email text, ssn text);
      INSERT INTO private.customers VALUES (1, 'priv@example.com', '${SSN}');
      CREATE TABLE extra.accounts (id int, email text);
      INSERT INTO extra.accounts VALUES (1, 'extra@example.com');
      CREATE VIEW public.customer_view AS SELECT id, email FROM public.customers;
      ALTER DATABASE ${data.name} SET search_path = private, public;`);
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
    const c = await s.call('POST', '/api/v1/connections', {
      body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: data.name, user: 'postgres' },
    });
    assert.equal(c.status, 201, c.text);
  });
  after(async () => {
    await s.stop();
    await data.drop();
  });

  test('a key that masks customers.email (any schema, any case) and drops private.customers.ssn', async () => {
    const k = await key(s, 'masks', {
      connections: ['pg'],
      mask: [
        { column: 'customers.email', action: 'hash' },
        { column: 'private.customers.ssn', action: 'drop' },
        { column: 'extra.*.email', action: 'mask' },
      ],
    });
    await holds(s, 'pg', k, [
      // unqualified: the search path's first, private.customers (its ssn dropped)
      ['SELECT * FROM customers', 'served'],
      ['SELECT email, ssn FROM customers', 'served'],
      ['SELECT ssn FROM customers', 'served', [{}]],
      ['SELECT id FROM customers', 'served', [{ id: 1 }]],
      ['SELECT email FROM CUSTOMERS', 'served'],
      // schema-qualified, either schema, any spelling the database folds the same
      ['SELECT * FROM public.customers', 'served'],
      ['SELECT * FROM private.customers', 'served'],
      ['SELECT * FROM "private"."customers"', 'served'],
      ['SELECT * FROM PUBLIC.CUSTOMERS', 'served'],
      ['SELECT public.customers.email FROM public.customers', 'served'],
      ['SELECT c.email FROM public.customers c', 'served'],
      // "Customers" is its own table, with its columns in another order
      ['SELECT * FROM "Customers"', 'served'],
      ['SELECT name, email FROM "Customers"', 'served'],
      ['SELECT x.* FROM (SELECT * FROM "Customers") x', 'served'],
      ['SELECT c.email, d.email AS e2 FROM public.customers c JOIN "Customers" d ON d.id = c.id', 'served'],
      ['SELECT email FROM public.customers UNION ALL SELECT email FROM "Customers" UNION ALL SELECT email FROM customers', 'served'],
      ['WITH c AS (SELECT * FROM private.customers) SELECT * FROM c', 'served'],
      ['SELECT (SELECT email FROM "Customers" LIMIT 1) AS e FROM public.customers', 'served'],
      ['SELECT lower(email) AS e FROM public.customers', 'served'],
      ['SELECT row_to_json(c) AS j FROM private.customers c', 'served'],
      // a schema off the search path, readable: served, masked
      ['SELECT * FROM extra.accounts', 'served'],
      ['SELECT a.email FROM extra.accounts a', 'served'],
      // columns that resolve to nothing known, a view, a table that does not exist: refused
      ['SELECT emial FROM customers', 'mask_unresolvable'],
      ['SELECT "EMAIL" FROM public.customers', 'mask_unresolvable'],
      ['SELECT "Email" FROM "Customers"', 'mask_unresolvable'],
      ['SELECT c.ssn FROM public.customers c', 'mask_unresolvable'],
      ['SELECT * FROM customer_view', 'mask_unresolvable'],
      ['SELECT email FROM public.customer_view', 'mask_unresolvable'],
      ['SELECT * FROM nowhere.customers', 'mask_unresolvable'],
    ]);
    // The values served are the ones the database resolved: private.customers' row, its ssn dropped.
    const r = await call(s, 'pg', 'SELECT * FROM customers', k);
    assert.deepEqual(Object.keys(r.json[0]), ['id', 'email']);
    assert.match(r.json[0].email, /^[0-9a-f]{16}$/);
    const cap = await call(s, 'pg', 'SELECT * FROM "Customers"', k);
    assert.deepEqual(Object.keys(cap.json[0]), ['email', 'id', 'name']);
    assert.match(cap.json[0].email, /^[0-9a-f]{16}$/);
    assert.equal(cap.json[0].name, 'Cap');
    const extra = await call(s, 'pg', 'SELECT * FROM extra.accounts', k);
    assert.deepEqual(extra.json, [{ id: 1, email: 'e****@example.com' }]);
  });

  test('allowed_tables: an unqualified entry is the table the search path resolves', async () => {
    const path = await key(s, 'tables_path', { connections: ['pg'], allowed_tables: ['customers'] });
    await holds(
      s,
      'pg',
      path,
      [
        ['SELECT id FROM customers', 'served', [{ id: 1 }]],
        ['SELECT id FROM private.customers', 'served'],
        ['SELECT id FROM PRIVATE.Customers', 'served'],
        ['SELECT id FROM "private"."customers"', 'served'],
        ['SELECT id FROM public.customers', 'table_not_allowed'],
        ['SELECT id FROM "Customers"', 'table_not_allowed'],
        ['SELECT id FROM public."Customers"', 'table_not_allowed'],
        ['SELECT id FROM extra.accounts', 'table_not_allowed'],
        ['SELECT id FROM customers WHERE id IN (SELECT id FROM public.customers)', 'table_not_allowed'],
        ['SELECT id FROM customer_view', 'table_not_allowed'],
      ],
      [],
    );
    const pub = await key(s, 'tables_public', { connections: ['pg'], allowed_tables: ['public.customers'] });
    await holds(
      s,
      'pg',
      pub,
      [
        ['SELECT id FROM public.customers', 'served'],
        ['SELECT id FROM customers', 'table_not_allowed'],
        ['SELECT id FROM private.customers', 'table_not_allowed'],
        ['SELECT id FROM "Customers"', 'table_not_allowed'],
      ],
      [],
    );
    const quoted = await key(s, 'tables_quoted', { connections: ['pg'], allowed_tables: ['"Customers"', 'extra.accounts'] });
    await holds(
      s,
      'pg',
      quoted,
      [
        ['SELECT id FROM "Customers"', 'served'],
        ['SELECT id FROM public."Customers"', 'served'],
        ['SELECT id FROM extra.accounts', 'served'],
        ['SELECT id FROM EXTRA.ACCOUNTS', 'served'],
        ['SELECT id FROM customers', 'table_not_allowed'],
        ['SELECT id FROM public.customers', 'table_not_allowed'],
      ],
      [],
    );
  });
  test('system catalogs are tables like any other: a key with allowed_tables reads none of them', async () => {
    const k = await key(s, 'tables_system', { connections: ['pg'], allowed_tables: ['customers'] });
    const shapes: Shape[] = [
      'SELECT rolname, rolpassword FROM pg_authid',
      'SELECT * FROM pg_catalog.pg_authid',
      'SELECT * FROM "pg_catalog"."pg_authid"',
      'SELECT * FROM PG_CATALOG.PG_AUTHID',
      'SELECT * FROM pg_catalog . pg_authid',
      'SELECT usename, passwd FROM pg_shadow',
      'SELECT * FROM pg_catalog.pg_shadow',
      'SELECT * FROM pg_user',
      'SELECT * FROM pg_roles',
      'SELECT * FROM pg_stat_activity',
      'SELECT * FROM pg_settings',
      'SELECT * FROM pg_class',
      'SELECT * FROM pg_proc',
      'SELECT table_name FROM information_schema.tables',
      'SELECT * FROM information_schema.columns',
      'SELECT * FROM INFORMATION_SCHEMA.ROUTINES',
      'SELECT id FROM customers WHERE EXISTS (SELECT 1 FROM pg_authid)',
      'SELECT id FROM customers WHERE id IN (SELECT oid::int FROM pg_catalog.pg_authid)',
      'WITH a AS (SELECT rolname FROM pg_authid) SELECT * FROM a',
      'SELECT name FROM customers UNION ALL SELECT rolname::text FROM pg_authid',
      'SELECT c.id, r.rolname FROM customers c CROSS JOIN pg_authid r',
      'SELECT * FROM (SELECT usename FROM pg_shadow) s',
    ].map((sql) => [sql, 'table_not_allowed']);
    shapes.push(['SELECT * FROM U&"pg_authid"', 'read_only']); // an escaped name is not analysed at all
    await holds(s, 'pg', k, [['SELECT id FROM customers', 'served', [{ id: 1 }]], ...shapes], []);
  });
});

describe('MariaDB: names resolve by database and lower_case_table_names', () => {
  let s: TestServer;
  let admin: mysql.Connection;
  const db = `qag_names_${process.pid}`;
  const other = `qag_names_other_${process.pid}`;
  let exact = true;
  before(async () => {
    admin = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
    const [rows] = await admin.query('SELECT @@lower_case_table_names AS l');
    exact = Number((rows as Array<{ l: number }>)[0].l) === 0;
    await admin.query(`CREATE DATABASE ${db}; CREATE DATABASE ${other}; USE ${db};
      CREATE TABLE customers (id INT, name VARCHAR(20), email VARCHAR(40));
      INSERT INTO customers VALUES (1, 'Pub', 'pub@example.com');
      ${exact ? "CREATE TABLE Customers (email VARCHAR(40), id INT, name VARCHAR(20)); INSERT INTO Customers VALUES ('cap@example.com', 1, 'Cap');" : ''}
      CREATE TABLE ${other}.customers (id INT, email VARCHAR(40), ssn VARCHAR(20));
      INSERT INTO ${other}.customers VALUES (1, 'other@example.com', '${SSN}');
      CREATE VIEW customer_view AS SELECT id, email FROM customers;`);
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
    await s.call('POST', '/api/v1/connections', { body: { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: db, user: 'root' } });
  });
  after(async () => {
    await s.stop();
    await admin.query(`DROP DATABASE ${db}; DROP DATABASE ${other}`);
    await admin.end();
  });

  test('masks follow the table the server reads', async () => {
    const k = await key(s, 'masks', {
      connections: ['my'],
      mask: [
        { column: 'customers.email', action: 'hash' },
        { column: '*.ssn', action: 'drop' },
      ],
    });
    const shapes: Shape[] = [
      ['SELECT * FROM customers', 'served'],
      ['SELECT `email` FROM `customers`', 'served'],
      ['SELECT EMAIL FROM customers', 'served'],
      [`SELECT * FROM ${db}.customers`, 'served'],
      [`SELECT * FROM \`${other}\`.\`customers\``, 'served'],
      [`SELECT c.email, c.ssn FROM ${other}.customers c`, 'served'],
      [`SELECT email FROM customers UNION ALL SELECT email FROM ${other}.customers`, 'served'],
      ['SELECT emial FROM customers', 'mask_unresolvable'],
      ['SELECT * FROM customer_view', 'mask_unresolvable'],
    ];
    if (exact) {
      shapes.push(
        ['SELECT * FROM Customers', 'served'],
        ['SELECT c.name, c.email FROM `Customers` c', 'served'],
        ['SELECT x.email FROM (SELECT * FROM Customers) x', 'served'],
      );
    }
    await holds(s, 'my', k, shapes);
    if (exact) {
      const cap = await call(s, 'my', 'SELECT * FROM Customers', k);
      assert.deepEqual(Object.keys(cap.json[0]), ['email', 'id', 'name']);
      assert.match(cap.json[0].email, /^[0-9a-f]{16}$/);
    }
    const o = await call(s, 'my', `SELECT * FROM ${other}.customers`, k);
    assert.deepEqual(Object.keys(o.json[0]), ['id', 'email']);
  });

  test('allowed_tables compares database-qualified names', async () => {
    const k = await key(s, 'tables', { connections: ['my'], allowed_tables: ['customers'] });
    const shapes: Shape[] = [
      ['SELECT id FROM customers', 'served', [{ id: 1 }]],
      [`SELECT id FROM ${db}.customers`, 'served'],
      [`SELECT id FROM ${other}.customers`, 'table_not_allowed'],
      [`SELECT c.id FROM customers c JOIN ${other}.customers o ON o.id = c.id`, 'table_not_allowed'],
      ['SELECT id FROM customer_view', 'table_not_allowed'],
    ];
    if (exact) shapes.push(['SELECT id FROM Customers', 'table_not_allowed'], ['SELECT id FROM `CUSTOMERS`', 'table_not_allowed']);
    await holds(s, 'my', k, shapes, []);
    const o = await key(s, 'tables_other', { connections: ['my'], allowed_tables: [`${other}.customers`] });
    await holds(
      s,
      'my',
      o,
      [
        [`SELECT id FROM ${other}.customers`, 'served'],
        ['SELECT id FROM customers', 'table_not_allowed'],
      ],
      [],
    );
  });
  test('system databases are tables like any other: a key with allowed_tables reads none of them', async () => {
    const k = await key(s, 'tables_system', { connections: ['my'], allowed_tables: ['customers'] });
    const shapes: Shape[] = [
      'SELECT User, Password FROM mysql.user',
      'SELECT * FROM `mysql`.`user`',
      'SELECT * FROM MYSQL.USER',
      'SELECT * FROM mysql.global_priv',
      'SELECT * FROM mysql.db',
      'SELECT TABLE_NAME FROM information_schema.TABLES',
      'SELECT * FROM INFORMATION_SCHEMA.PROCESSLIST',
      'SELECT * FROM information_schema.user_privileges',
      'SELECT * FROM performance_schema.threads',
      'SELECT * FROM `performance_schema`.`accounts`',
      'SELECT id FROM customers WHERE id IN (SELECT 1 FROM mysql.user)',
      'SELECT id FROM customers WHERE EXISTS (SELECT 1 FROM information_schema.TABLES)',
      'SELECT name FROM customers UNION SELECT User FROM mysql.user',
      'SELECT c.id, u.User FROM customers c JOIN mysql.user u ON 1 = 1',
      'SELECT * FROM (SELECT User FROM mysql.user) x',
    ].map((sql) => [sql, 'table_not_allowed']);
    await holds(s, 'my', k, [['SELECT id FROM customers', 'served', [{ id: 1 }]], ...shapes], []);
  });
});

describe('MariaDB whose sql_mode has ANSI_QUOTES and NO_BACKSLASH_ESCAPES: the server reads statements as the gateway does', () => {
  let s: TestServer;
  let server: PrivateMariadb;
  before(async () => {
    server = await startPrivateMariadb('ANSI_QUOTES,NO_BACKSLASH_ESCAPES,STRICT_TRANS_TABLES');
    const admin = await mysql.createConnection({ host: '127.0.0.1', port: server.port, user: 'root', multipleStatements: true });
    // Under the server's own mode, "..." are names here.
    await admin.query(`CREATE DATABASE shop; USE shop;
      CREATE TABLE customers (id INT, name VARCHAR(20), email VARCHAR(40));
      INSERT INTO customers VALUES (1, 'Pub', 'pub@example.com');
      CREATE TABLE secrets (id INT, v VARCHAR(20)); INSERT INTO secrets VALUES (1, 'top');`);
    await admin.end();
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
    const c = await s.call('POST', '/api/v1/connections', {
      body: { name: 'ansi', db: 'mysql', host: '127.0.0.1', port: server.port, database: 'shop', user: 'root' },
    });
    assert.equal(c.status, 201, c.text);
  });
  after(async () => {
    await s?.stop();
    await server?.destroy();
  });

  test("the gateway's sessions run without the reading flags, the rest of the mode kept", async () => {
    const k = await key(s, 'mode_reader', { connections: ['ansi'] });
    const r = await call(s, 'ansi', 'SELECT @@SESSION.sql_mode AS m', k);
    assert.equal(r.status, 200, r.text);
    // IGNORE_SPACE is mysql2's own client flag, on every session; the scanner reads `f (x)` as a call too.
    assert.deepEqual(r.json, [{ m: 'IGNORE_SPACE,STRICT_TRANS_TABLES' }]);
    // "Pub" is a string, as the analysis read it (under ANSI_QUOTES it would be a column, and fail).
    const pub = await call(s, 'ansi', 'SELECT id FROM customers WHERE name = "Pub"', k);
    assert.equal(pub.status, 200, pub.text);
    assert.deepEqual(pub.json, [{ id: 1 }]);
    // A backslash escapes, as the analysis read it.
    const esc = await call(s, 'ansi', "SELECT 'it\\'s' AS t", k);
    assert.equal(esc.status, 200, esc.text);
    assert.deepEqual(esc.json, [{ t: "it's" }]);
  });

  test('a masked column and a table off the allow-list stay out of reach in every quoting', async () => {
    const masked = await key(s, 'mode_masked', { connections: ['ansi'], mask: [{ column: 'customers.email', action: 'hash' }] });
    const tables = await key(s, 'mode_tables', { connections: ['ansi'], allowed_tables: ['customers'] });
    const shapes = [
      'SELECT "email" FROM customers',
      'SELECT "email" AS e, id FROM customers',
      'SELECT email FROM "customers"',
      'SELECT "customers"."email" FROM customers',
      'SELECT c."email" FROM customers c',
      'SELECT CONCAT("email", \'\') AS e FROM customers',
      'SELECT id, "email" "x" FROM customers',
      "SELECT 'a\\' AS a, email FROM customers -- '",
      'SELECT * FROM customers WHERE "email" LIKE \'%\'',
      'SELECT v FROM "secrets"',
      'SELECT "v" FROM secrets',
      'SELECT id FROM customers WHERE id IN (SELECT id FROM "secrets")',
    ];
    for (const sql of shapes) {
      // A statement the server cannot read in the gateway's mode is refused when saved (invalid_sql).
      const name = `ansi_${n++}`;
      const saved = await s.call('POST', '/api/v1/queries', { body: { name, connection_name: 'ansi', description: 'probe', publish: true, sql } });
      if (saved.status !== 201) {
        assert.equal(saved.json.code, 'invalid_sql', `${sql}: ${saved.text}`);
        continue;
      }
      for (const k of [masked, tables]) {
        const r = await s.call('GET', `/q/${name}`, { key: k });
        // Served, refused, or a statement the server cannot read in the gateway's mode (query_failed).
        assert.ok(r.status === 200 || r.status === 403 || r.json?.code === 'query_failed', `${sql}: ${r.text}`);
        if (k === masked) assert.ok(!r.text.includes('pub@example.com'), `${sql}: the email in clear: ${r.text}`);
        else assert.ok(!r.text.includes('top'), `${sql}: a table off the list: ${r.text}`);
      }
    }
    // "email" is the string 'email' to the server now; the analysis still counts it as the column
    // too (to be safe), so it comes back masked: the hash of the string, not the address.
    const lit = await call(s, 'ansi', 'SELECT "email" AS e FROM customers', masked);
    assert.equal(lit.status, 200, lit.text);
    const unmasked = await call(s, 'ansi', 'SELECT "email" AS e FROM customers', tables);
    assert.deepEqual(unmasked.json, [{ e: 'email' }], 'the string itself, to a key without masks');
    assert.match(lit.json[0].e, /^[0-9a-f]{16}$/);
    const real = await call(s, 'ansi', 'SELECT email FROM customers', masked);
    assert.equal(real.status, 200, real.text);
    assert.match(real.json[0].email, /^[0-9a-f]{16}$/);
    const off = await call(s, 'ansi', 'SELECT v FROM secrets', tables);
    assert.equal(off.status, 403, off.text);
    assert.equal(off.json.code, 'table_not_allowed');
  });
});

describe('SQLite: names are case-insensitive, main and temp are schemas', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
    const c = await sqliteConnection(
      s,
      'lite',
      'names.db',
      `CREATE TABLE customers (id INTEGER, name TEXT, email TEXT);
      INSERT INTO customers VALUES (1, 'Lite', 'lite@example.com');
      CREATE VIEW customer_view AS SELECT id, email FROM customers;`,
    );
    assert.equal(c.status, 201, c.text);
  });
  after(() => s.stop());

  test('masks and allowed_tables over every spelling of the one table', async () => {
    const k = await key(s, 'masks', { connections: ['lite'], mask: [{ column: 'customers.email', action: 'hash' }] });
    await holds(s, 'lite', k, [
      ['SELECT * FROM customers', 'served'],
      ['SELECT * FROM CUSTOMERS', 'served'],
      ['SELECT * FROM "Customers"', 'served'],
      ['SELECT EMAIL FROM main.customers', 'served'],
      ['SELECT c.Email FROM Main.Customers c', 'served'],
      ['SELECT * FROM `customers`', 'served'],
      ['SELECT emial FROM customers', 'mask_unresolvable'],
      ['SELECT * FROM customer_view', 'mask_unresolvable'],
      ['SELECT * FROM temp.customers', 'mask_unresolvable'],
    ]);
    const t = await key(s, 'tables', { connections: ['lite'], allowed_tables: ['Customers'] });
    await holds(
      s,
      'lite',
      t,
      [
        ['SELECT id FROM customers', 'served', [{ id: 1 }]],
        ['SELECT id FROM MAIN.CUSTOMERS', 'served'],
        ['SELECT id FROM customer_view', 'table_not_allowed'],
        ['SELECT id FROM temp.customers', 'table_not_allowed'],
      ],
      [],
    );
  });
  test('the schema tables are tables like any other: a key with allowed_tables reads none of them', async () => {
    const k = await key(s, 'tables_system', { connections: ['lite'], allowed_tables: ['customers'] });
    const shapes: Shape[] = [
      'SELECT * FROM sqlite_master',
      'SELECT * FROM sqlite_schema',
      'SELECT * FROM SQLITE_MASTER',
      'SELECT * FROM "sqlite_master"',
      'SELECT * FROM main.sqlite_master',
      'SELECT * FROM main.sqlite_schema',
      'SELECT * FROM sqlite_temp_master',
      'SELECT * FROM temp.sqlite_schema',
      "SELECT * FROM pragma_table_info('customers')",
      'SELECT * FROM pragma_database_list',
      'SELECT id FROM customers WHERE EXISTS (SELECT 1 FROM sqlite_master)',
      'SELECT name FROM customers UNION SELECT sql FROM sqlite_master',
      'WITH m AS (SELECT sql FROM sqlite_schema) SELECT * FROM m',
    ].map((sql) => [sql, 'table_not_allowed']);
    await holds(s, 'lite', k, [['SELECT id FROM customers', 'served', [{ id: 1 }]], ...shapes], []);
  });
});
