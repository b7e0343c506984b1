// A value PostgreSQL cannot read as the type it infers for its parameter (`id > $1` makes $1 an
// integer, so 0.5 fails there) is the caller's: 400 param_invalid naming the parameter, never a 500.
// Found by the property suite (properties.test.ts). A failure of the statement's own data stays 500.
// So is a value the database cannot use as a pattern or a row count (a LIKE pattern ending in `\`, a regular expression
// that does not compile, a negative LIMIT): 400 value_rejected, on PostgreSQL and MariaDB.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import mysql from 'mysql2/promise';
import { scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

let s: TestServer;
let pg: Awaited<ReturnType<typeof scratchDatabase>>;
let key = '';
let my: mysql.Connection;
const MY_DB = `qag_param_types_${process.pid}`;

before(async () => {
  pg = await scratchDatabase('qag_param_types');
  await pg.sql.unsafe(`CREATE TABLE t (id int PRIMARY KEY, d date); INSERT INTO t VALUES (1, '2026-01-01'), (2, '2026-01-02'), (3, '2026-01-03');`);
  my = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
  await my.query(`CREATE DATABASE ${MY_DB}`);
  await my.query(`CREATE TABLE ${MY_DB}.t (id int PRIMARY KEY, name varchar(20))`);
  await my.query(`INSERT INTO ${MY_DB}.t VALUES (1, 'ann'), (2, 'bob')`);
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '1' });
  const post = async (path: string, body: unknown) => {
    const r = await s.call('POST', path, { body });
    assert.equal(r.status, 201, `${path}: ${r.text}`);
    return r.json;
  };
  await post('/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' });
  await post('/api/v1/connections', { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: MY_DB, user: 'root' });
  for (const [name, sql, parameters] of [
    ['named_my', 'SELECT id FROM t WHERE name REGEXP :re ORDER BY id', { re: 'str' }],
    ['liked_my', 'SELECT id FROM t WHERE name LIKE :p ORDER BY id', { p: 'str' }],
  ] as const) {
    await post('/api/v1/queries', { name, connection_name: 'my', description: name, publish: true, sql, parameters });
  }
  for (const [name, sql, parameters] of [
    ['above', 'SELECT id FROM t WHERE id > :threshold ORDER BY id', { threshold: 'float' }],
    ['by_id', 'SELECT id FROM t WHERE id = :v', { v: {} }],
    ['on_day', 'SELECT id FROM t WHERE d = :day AND id >= :min', { day: {}, min: 'int' }],
    ['bad_data', "SELECT x::int AS x FROM (VALUES ('abc')) s(x) WHERE 1 = :one", { one: 'int' }],
    ['zero', 'SELECT id / (id - id) AS x FROM t WHERE id = :one', { one: 'int' }],
    ['liked', 'SELECT id FROM t WHERE d::text LIKE :p ORDER BY id', { p: 'str' }],
    ['matched', 'SELECT id FROM t WHERE d::text ~ :re ORDER BY id', { re: 'str' }],
    ['first', 'SELECT id FROM t ORDER BY id LIMIT :n OFFSET :skip', { n: 'int', skip: { type: 'int', default: 0 } }],
  ] as const) {
    await post('/api/v1/queries', { name, connection_name: 'pg', description: name, publish: true, sql, parameters });
  }
  key = (await post('/api/v1/api-keys', { name: 'reader', queries: [], connections: ['pg', 'my'] })).secret;
});

after(async () => {
  await s?.stop();
  await pg?.drop();
  await my?.query(`DROP DATABASE IF EXISTS ${MY_DB}`);
  await my?.end();
});

describe('postgres: a value that does not fit its parameter inferred type', () => {
  const refused = [
    ['above', 'threshold', '0.5', /integer/],
    ['above', 'threshold', '-5e-324', /integer/],
    ['above', 'threshold', '1e300', /integer/],
    ['by_id', 'v', 'abc', /integer/],
    ['by_id', 'v', '99999999999', /integer/],
    ['by_id', 'v', '1.5', /integer/],
    ['on_day', 'day', 'tomorrow-ish', /date/],
  ] as const;

  test('is 400 param_invalid naming the parameter, by GET, POST and stream, for a key and the admin', async () => {
    for (const [query, param, value, type] of refused) {
      const extra = query === 'on_day' ? '&min=1' : '';
      const calls = [
        s.call('GET', `/q/${query}?${param}=${encodeURIComponent(value)}${extra}`, { key }),
        s.call('POST', `/q/${query}`, {
          key,
          body: { params: { [param]: Number.isNaN(Number(value)) ? value : Number(value), ...(extra ? { min: 1 } : {}) } },
        }),
        s.call('GET', `/q/${query}?${param}=${encodeURIComponent(value)}${extra}&stream=true&format=csv`, { key }),
        s.call('GET', `/q/${query}?${param}=${encodeURIComponent(value)}${extra}`),
      ];
      for (const r of await Promise.all(calls)) {
        assert.equal(r.status, 400, `${query} ${param}=${value}: ${r.text}`);
        assert.equal(r.json.code, 'param_invalid');
        assert.deepEqual(Object.keys(r.json.errors), [param], r.text);
        assert.match(r.json.errors[param], type);
        assert.match(r.json.error, new RegExp(param));
      }
      assert.equal((await calls[0]).json.detail, undefined, 'a key gets no database text');
      assert.match((await calls[3]).json.detail, /invalid input|out of range/, 'the admin does');
    }
  });

  test('values that fit still answer, and a failure of the statement itself stays query_failed', async () => {
    const fits = await s.call('GET', '/q/above?threshold=1', { key });
    assert.equal(fits.status, 200, fits.text);
    assert.deepEqual(fits.json, [{ id: 2 }, { id: 3 }]);
    assert.deepEqual((await s.call('GET', '/q/by_id?v=2', { key })).json, [{ id: 2 }]);
    assert.deepEqual((await s.call('GET', '/q/on_day?day=2026-01-03&min=1', { key })).json, [{ id: 3 }]);
    for (const failing of ['/q/bad_data?one=1', '/q/zero?one=1']) {
      const data = await s.call('GET', failing, { key });
      assert.equal(data.status, 500, `${failing}: ${data.text}`);
      assert.equal(data.json.code, 'query_failed', failing);
    }
  });
});

describe('a value the database cannot use as a pattern or a row count', () => {
  const refused = [
    ['/q/liked?p=2026%5C', /escape character/],
    ['/q/liked?p=%5C', /escape character/],
    ['/q/matched?re=(', /regular expression/],
    ['/q/matched?re=a%7B2%2C1%7D', /regular expression/],
    ['/q/first?n=-1', /LIMIT/],
    ['/q/first?n=1&skip=-2', /OFFSET/],
    ['/q/named_my?re=(', /Regex|regexp/i],
    ['/q/named_my?re=%5B', /Regex|regexp/i],
  ] as const;

  test('is 400 value_rejected, by GET, POST and stream, the database text for the admin only', async () => {
    for (const [path, why] of refused) {
      const [route, query] = path.split('?') as [string, string];
      const params = Object.fromEntries(new URLSearchParams(query));
      const typed = Object.fromEntries(Object.entries(params).map(([k, v]) => [k, ['n', 'skip'].includes(k) ? Number(v) : v]));
      const calls = [
        s.call('GET', path, { key }),
        s.call('POST', route, { key, body: { params: typed } }),
        s.call('GET', `${path}&stream=true&format=csv`, { key }),
        s.call('GET', path),
      ];
      for (const r of await Promise.all(calls)) {
        assert.equal(r.status, 400, `${path}: ${r.text}`);
        assert.equal(r.json.code, 'value_rejected', `${path}: ${r.text}`);
      }
      assert.equal((await calls[0]).json.detail, undefined, 'a key gets no database text');
      assert.match((await calls[3]).json.detail, why, 'the admin does');
    }
  });

  test('the same statements answer usable values', async () => {
    const answers: Array<[string, unknown]> = [
      ['/q/liked?p=2026-01-0_', [{ id: 1 }, { id: 2 }, { id: 3 }]],
      ['/q/liked?p=2026-01-0%5C3', [{ id: 3 }]],
      ['/q/matched?re=03%24', [{ id: 3 }]],
      ['/q/first?n=2&skip=1', [{ id: 2 }, { id: 3 }]],
      ['/q/named_my?re=%5Eb', [{ id: 2 }]],
      // MariaDB reads a LIKE pattern's last `\` as itself: no error, and here no row
      ['/q/liked_my?p=%5C', { message: 'No results returned' }],
    ];
    for (const [path, rows] of answers) {
      const r = await s.call('GET', path, { key });
      assert.equal(r.status, 200, `${path}: ${r.text}`);
      assert.deepEqual(r.json, rows, path);
    }
  });
});
