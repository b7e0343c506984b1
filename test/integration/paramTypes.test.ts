// A value PostgreSQL cannot read as the type it infers for its parameter (`id > $1` makes $1 an
// integer, so 0.5 fails there) is the caller's: 400 param_invalid naming the parameter, never a 500.
// Found by the property suite (properties.test.ts). A failure of the statement's own data stays 500.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

let s: TestServer;
let pg: Awaited<ReturnType<typeof scratchDatabase>>;
let key = '';

before(async () => {
  pg = await scratchDatabase('qag_param_types');
  await pg.sql.unsafe(`CREATE TABLE t (id int PRIMARY KEY, d date); INSERT INTO t VALUES (1, '2026-01-01'), (2, '2026-01-02'), (3, '2026-01-03');`);
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '1' });
  const post = async (path: string, body: unknown) => {
    const r = await s.call('POST', path, { body });
    assert.equal(r.status, 201, `${path}: ${r.text}`);
    return r.json;
  };
  await post('/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' });
  for (const [name, sql, parameters] of [
    ['above', 'SELECT id FROM t WHERE id > :threshold ORDER BY id', { threshold: 'float' }],
    ['by_id', 'SELECT id FROM t WHERE id = :v', { v: {} }],
    ['on_day', 'SELECT id FROM t WHERE d = :day AND id >= :min', { day: {}, min: 'int' }],
    ['bad_data', "SELECT x::int AS x FROM (VALUES ('abc')) s(x) WHERE 1 = :one", { one: 'int' }],
  ] as const) {
    await post('/api/v1/queries', { name, connection_name: 'pg', description: name, publish: true, sql, parameters });
  }
  key = (await post('/api/v1/api-keys', { name: 'reader', queries: [], connections: ['pg'] })).secret;
});

after(async () => {
  await s?.stop();
  await pg?.drop();
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
    const data = await s.call('GET', '/q/bad_data?one=1', { key });
    assert.equal(data.status, 500, data.text);
    assert.equal(data.json.code, 'query_failed');
  });
});
