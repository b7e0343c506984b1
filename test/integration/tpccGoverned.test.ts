// The TPC-C estate's governed key on MariaDB, as the bench uses it: the customer lookup, order_status
// and stock_level statements answer with c_last hashed and c_data masked, and a table outside the
// allow-list is refused.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import mysql from 'mysql2/promise';
import { startTestServer, type TestServer } from '../helpers.js';

const DB = `qag_tpcc_test_${process.pid}`;
const SQL = {
  customer: `SELECT c_id, c_d_id, c_w_id, c_first, c_last, c_balance, c_data
FROM customer WHERE c_w_id = :w_id AND c_d_id = :d_id AND c_id = :c_id`,
  order_status: `SELECT c.c_first, c.c_middle, c.c_last, c.c_balance, o.o_id, o.o_entry_d, ol.ol_number, ol.ol_i_id, ol.ol_quantity, ol.ol_amount
FROM orders o
JOIN customer c ON c.c_w_id = o.o_w_id AND c.c_d_id = o.o_d_id AND c.c_id = o.o_c_id
JOIN order_line ol ON ol.ol_w_id = o.o_w_id AND ol.ol_d_id = o.o_d_id AND ol.ol_o_id = o.o_id
WHERE o.o_w_id = :w_id AND o.o_d_id = :d_id
  AND o.o_id = (SELECT MAX(o2.o_id) FROM orders o2 WHERE o2.o_w_id = :w_id AND o2.o_d_id = :d_id AND o2.o_c_id = :c_id)
ORDER BY ol.ol_number`,
  stock_level: `SELECT COUNT(DISTINCT s.s_i_id) AS low_stock
FROM district d
JOIN order_line ol ON ol.ol_w_id = d.d_w_id AND ol.ol_d_id = d.d_id AND ol.ol_o_id < d.d_next_o_id AND ol.ol_o_id >= d.d_next_o_id - 20
JOIN stock s ON s.s_w_id = ol.ol_w_id AND s.s_i_id = ol.ol_i_id
WHERE d.d_w_id = :w_id AND d.d_id = :d_id AND s.s_quantity < :threshold`,
  item_probe: 'SELECT i_id, i_name FROM item WHERE i_id = :i_id',
};

let conn: mysql.Connection;
let s: TestServer;
let governed = '';

before(async () => {
  conn = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
  await conn.query(`CREATE DATABASE ${DB}; USE ${DB};
    CREATE TABLE district (d_w_id INT, d_id INT, d_next_o_id INT, PRIMARY KEY (d_w_id, d_id));
    CREATE TABLE customer (c_w_id INT, c_d_id INT, c_id INT, c_first VARCHAR(16), c_middle CHAR(2), c_last VARCHAR(16),
      c_balance DECIMAL(12,2), c_data VARCHAR(500), PRIMARY KEY (c_w_id, c_d_id, c_id));
    CREATE TABLE orders (o_w_id INT, o_d_id INT, o_id INT, o_c_id INT, o_entry_d DATETIME, PRIMARY KEY (o_w_id, o_d_id, o_id));
    CREATE TABLE order_line (ol_w_id INT, ol_d_id INT, ol_o_id INT, ol_number INT, ol_i_id INT, ol_quantity INT, ol_amount DECIMAL(6,2),
      PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number));
    CREATE TABLE stock (s_w_id INT, s_i_id INT, s_quantity INT, PRIMARY KEY (s_w_id, s_i_id));
    CREATE TABLE item (i_id INT PRIMARY KEY, i_name VARCHAR(24));
    INSERT INTO district VALUES (1, 1, 4);
    INSERT INTO customer VALUES (1, 1, 7, 'Ann', 'OE', 'BARBARABLE', -10.00, 'secret customer data'), (1, 1, 8, 'Bo', 'OE', 'OUGHTPRES', 5.00, 'more data');
    INSERT INTO orders VALUES (1, 1, 1, 7, '2026-01-01 10:00:00'), (1, 1, 2, 8, '2026-01-02 10:00:00'), (1, 1, 3, 7, '2026-01-03 10:00:00');
    INSERT INTO order_line VALUES (1, 1, 1, 1, 10, 5, 1.50), (1, 1, 3, 1, 11, 2, 3.00), (1, 1, 3, 2, 12, 1, 9.99), (1, 1, 2, 1, 13, 4, 2.00);
    INSERT INTO stock VALUES (1, 10, 5), (1, 11, 50), (1, 12, 8), (1, 13, 9);
    INSERT INTO item VALUES (10, 'widget');`);
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '1' });
  const ok = async (path: string, body: unknown) => {
    const r = await s.call('POST', path, { body });
    assert.ok(r.status < 300, r.text);
    return r.json;
  };
  await ok('/api/v1/connections', { name: 'tpcc', db: 'mysql', host: '127.0.0.1', port: 3306, database: DB, user: 'root' });
  // Every marker declared, as a save requires and the bench does (all integers).
  const parameters = (sql: string) => Object.fromEntries([...sql.matchAll(/:(\w+)/g)].map((m) => [m[1], { type: 'int' }]));
  for (const [name, sql] of Object.entries(SQL)) {
    await ok('/api/v1/queries', { name, sql, parameters: parameters(sql), connection_name: 'tpcc', description: name, publish: true });
  }
  governed = (
    await ok('/api/v1/api-keys', {
      name: 'tpcc-governed',
      queries: Object.keys(SQL),
      connections: [],
      allowed_tables: ['customer', 'district', 'order_line', 'orders', 'stock'],
      mask: [
        { column: 'customer.c_last', action: 'hash' },
        { column: '*.c_data', action: 'mask' },
      ],
    })
  ).secret;
});

after(async () => {
  await s.stop();
  await conn.query(`DROP DATABASE ${DB}`);
  await conn.end();
});

test('customer lookup: c_last hashed, c_data masked, the rest as stored', async () => {
  const r = await s.call('GET', '/q/customer?w_id=1&d_id=1&c_id=7', { key: governed });
  assert.equal(r.status, 200, r.text);
  const [row] = r.json;
  assert.match(row.c_last, /^[0-9a-f]{16}$/);
  assert.equal(row.c_data, 's*******************');
  assert.deepEqual([row.c_id, row.c_first, row.c_balance], [7, 'Ann', -10]);
});

test("order_status: the newest order's lines, each with the same hashed c_last", async () => {
  const lookup = (await s.call('GET', '/q/customer?w_id=1&d_id=1&c_id=7', { key: governed })).json[0];
  const r = await s.call('GET', '/q/order_status?w_id=1&d_id=1&c_id=7', { key: governed });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(
    r.json.map((l: { o_id: number; ol_number: number }) => [l.o_id, l.ol_number]),
    [
      [3, 1],
      [3, 2],
    ],
  );
  for (const line of r.json) assert.equal(line.c_last, lookup.c_last);
  assert.doesNotMatch(r.text, /BARBARABLE/);
});

test('stock_level counts as the database does; item is outside the allow-list', async () => {
  const r = await s.call('GET', '/q/stock_level?w_id=1&d_id=1&threshold=10', { key: governed });
  assert.deepEqual(r.json, [{ low_stock: 3 }]);
  const probe = await s.call('GET', '/q/item_probe?i_id=10', { key: governed });
  assert.equal(probe.status, 403);
  assert.equal(probe.json.code, 'table_not_allowed');
});
