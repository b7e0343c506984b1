// GET /api/v1/connections/{name}/schema and POST /api/v1/connections/{name}/test on real PostgreSQL,
// MariaDB and SQLite: tables and views with their columns, types, nullability and primary keys; the
// probe's version and read-only session as the database reports them; administrators only.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import { scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const SETUP = `CREATE TABLE orders (order_id INT NOT NULL, line INT NOT NULL, Note VARCHAR(30), PRIMARY KEY (order_id, line));
  CREATE VIEW order_notes AS SELECT order_id, Note FROM orders;
  CREATE TABLE shipments (shipment_id INT PRIMARY KEY, order_id INT NOT NULL, order_line INT NOT NULL,
    CONSTRAINT shipments_order FOREIGN KEY (order_id, order_line) REFERENCES orders (order_id, line));
  CREATE TABLE returns (return_id INT PRIMARY KEY, shipment INT, FOREIGN KEY (shipment) REFERENCES shipments (shipment_id));`;

let s: TestServer;
let pg: Awaited<ReturnType<typeof scratchDatabase>>;
let my: mysql.Connection;
const myDb = `qag_schema_${process.pid}`;
let scoped = '';
let mariaVersion = '';

before(async () => {
  pg = await scratchDatabase('qag_schema');
  await pg.sql.unsafe(SETUP);
  my = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
  await my.query(`CREATE DATABASE ${myDb}; USE ${myDb}; ${SETUP}`);
  const [rows] = await my.query('SELECT VERSION() AS v');
  mariaVersion = (rows as Array<{ v: string }>)[0].v;
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  const lite = new Database(join(s.home, 'orders.db'));
  lite.exec(SETUP);
  lite.exec('CREATE TABLE claims (claim_id INT PRIMARY KEY, shipment INT REFERENCES shipments)'); // SQLite: no referenced column
  lite.close();
  for (const body of [
    { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' },
    { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: myDb, user: 'root' },
    { name: 'lite', db: 'sqlite', database: 'orders.db' },
    { name: 'down', db: 'postgres', host: '127.0.0.1', port: 1, database: 'x', user: 'postgres', password: 'hunter2' },
  ]) {
    const r = await s.call('POST', '/api/v1/connections', { body });
    assert.equal(r.status, 201, r.text);
  }
  scoped = (await s.call('POST', '/api/v1/api-keys', { body: { name: 'k', connections: '*' } })).json.secret;
});

after(async () => {
  await s?.stop();
  await pg?.drop();
  await my?.query(`DROP DATABASE IF EXISTS ${myDb}`);
  await my?.end();
});

const TYPES: Record<string, [string, string]> = { pg: ['integer', 'character varying'], my: ['int(11)', 'varchar(30)'], lite: ['INT', 'VARCHAR(30)'] };

for (const name of ['pg', 'my', 'lite']) {
  describe(`connection ${name}`, () => {
    test('the schema lists tables and views, columns in order with types, nullability and primary keys', async () => {
      const r = await s.call('GET', `/api/v1/connections/${name}/schema`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.truncated, false);
      const byName = Object.fromEntries(r.json.tables.map((t: { name: string }) => [t.name, t]));
      const [int, varchar] = TYPES[name];
      assert.equal(byName.orders.type, 'table');
      assert.deepEqual(byName.orders.columns, [
        { name: 'order_id', type: int, nullable: false, position: 1, primary_key: true },
        { name: 'line', type: int, nullable: false, position: 2, primary_key: true },
        { name: name === 'pg' ? 'note' : 'Note', type: varchar, nullable: true, position: 3, primary_key: false },
      ]);
      assert.equal(byName.order_notes.type, 'view');
      assert.deepEqual(
        byName.order_notes.columns.map((c: { name: string; primary_key: boolean }) => [c.name.toLowerCase(), c.primary_key]),
        [
          ['order_id', false],
          ['note', false],
        ],
      );
    });

    test('foreign keys are listed with their columns in order and what they reference', async () => {
      const r = await s.call('GET', `/api/v1/connections/${name}/schema`);
      assert.equal(r.status, 200, r.text);
      const byName = Object.fromEntries(r.json.tables.map((t: { name: string }) => [t.name, t]));
      const schema = byName.orders.schema;
      assert.deepEqual(byName.orders.foreign_keys, []);
      assert.deepEqual(byName.shipments.foreign_keys, [
        {
          name: name === 'lite' ? null : 'shipments_order',
          columns: ['order_id', 'order_line'],
          references: { schema, table: 'orders', columns: ['order_id', 'line'] },
        },
      ]);
      const [returns] = byName.returns.foreign_keys;
      assert.deepEqual([returns.columns, returns.references], [['shipment'], { schema, table: 'shipments', columns: ['shipment_id'] }]);
      if (name === 'lite') {
        // A key naming only the table references its primary key.
        assert.deepEqual(byName.claims.foreign_keys, [
          { name: null, columns: ['shipment'], references: { schema, table: 'shipments', columns: ['shipment_id'] } },
        ]);
      }
    });

    test('the probe says the database answers, its version, and that read sessions are read-only', async () => {
      const r = await s.call('POST', `/api/v1/connections/${name}/test`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.reachable, true);
      assert.equal(r.json.read_only, true);
      assert.equal(typeof r.json.elapsed_ms, 'number');
      if (name === 'pg') assert.match(r.json.version, /^\d+(\.\d+)?/);
      if (name === 'my') assert.equal(r.json.version, mariaVersion);
      if (name === 'lite') assert.match(r.json.version, /^3\.\d+\.\d+$/);
    });
  });
}

describe('schema and probe refusals', () => {
  test('an unknown connection is 404, a scoped key 403, an unreachable database 502 without its password', async () => {
    assert.equal((await s.call('GET', '/api/v1/connections/nope/schema')).json.code, 'connection_not_found');
    assert.equal((await s.call('POST', '/api/v1/connections/nope/test')).json.code, 'connection_not_found');
    const refused = await s.call('GET', '/api/v1/connections/pg/schema', { key: scoped });
    assert.equal(refused.status, 403);
    assert.equal(refused.json.code, 'admin_only');
    const down = await s.call('POST', '/api/v1/connections/down/test');
    assert.equal(down.status, 502, down.text);
    assert.equal(down.json.code, 'connection_failed');
    assert.doesNotMatch(down.text, /hunter2/);
    assert.equal((await s.call('GET', '/api/v1/connections/down/schema')).status, 502);
  });
});
