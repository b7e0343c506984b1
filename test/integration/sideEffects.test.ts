// A call that may not write runs only functions PostgreSQL's own catalog says cannot change anything:
// side effects outside the statement (another session through dblink-like functions, locks that stay
// on the pooled session, large objects, notifications on the gateway's own channel, statistics,
// other backends, the session's random seed) are refused before the statement reaches the database,
// however the function's name is spelled or wherever in the statement it hides.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

let s: TestServer;
let data: Awaited<ReturnType<typeof scratchDatabase>>;
let reader = '';
let writer = '';
const ROLE = `qag_fn_owner_${process.pid}`;
let n = 0;

before(async () => {
  data = await scratchDatabase('qag_side');
  await data.sql.unsafe(`
    CREATE TABLE customers (id int PRIMARY KEY, name text);
    INSERT INTO customers VALUES (1, 'Ann'), (2, 'Bob');
    CREATE FUNCTION my_volatile() RETURNS int LANGUAGE sql AS 'SELECT 1';
    CREATE FUNCTION my_immutable(x int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT x + 1';
    CREATE ROLE ${ROLE};
    CREATE FUNCTION my_wrapper() RETURNS boolean LANGUAGE sql STABLE AS 'SELECT pg_try_advisory_lock(99)';
    ALTER FUNCTION my_wrapper() OWNER TO ${ROLE};
    CREATE FUNCTION my_plpgsql_stable() RETURNS int LANGUAGE plpgsql STABLE AS 'BEGIN PERFORM pg_advisory_lock(77); RETURN 1; END';
    CREATE FUNCTION my_plpgsql_dynamic() RETURNS int LANGUAGE plpgsql STABLE AS $f$BEGIN EXECUTE 'SELECT pg_advisory_lock(78)'; RETURN 1; END$f$;
    CREATE FUNCTION my_plpgsql_writer() RETURNS int LANGUAGE plpgsql AS 'BEGIN DELETE FROM customers; RETURN 1; END';
    CREATE FUNCTION my_sql_stable_lock() RETURNS boolean LANGUAGE sql STABLE AS 'SELECT pg_try_advisory_lock(79)';
    CREATE FUNCTION my_sql_quoted_lock() RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT "pg_try_advisory_lock"(80)';
    CREATE FUNCTION my_sql_nested() RETURNS boolean LANGUAGE sql STABLE AS 'SELECT my_sql_stable_lock()';
    CREATE FUNCTION my_sql_atomic() RETURNS boolean LANGUAGE sql STABLE BEGIN ATOMIC SELECT pg_try_advisory_lock(81); END;
    CREATE FUNCTION my_sql_upper(t text) RETURNS text LANGUAGE sql IMMUTABLE AS 'SELECT upper(coalesce(t, ''''))';
    CREATE TABLE orders (id serial PRIMARY KEY, amount int);
    CREATE FUNCTION create_order(a int) RETURNS int LANGUAGE sql AS 'INSERT INTO orders (amount) VALUES (a) RETURNING id';
    CREATE SEQUENCE order_numbers;`);
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1' });
  const created = await s.call('POST', '/api/v1/connections', {
    body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: data.name, user: 'postgres' },
  });
  assert.equal(created.status, 201, created.text);
  reader = (await s.call('POST', '/api/v1/api-keys', { body: { name: 'reader', queries: [], connections: ['pg'] } })).json.secret;
  writer = (await s.call('POST', '/api/v1/api-keys', { body: { name: 'writer', queries: [], connections: ['pg'], allow_writes: true } })).json.secret;
});

after(async () => {
  await s.stop();
  await data.drop();
  await data.sql.unsafe(`DROP ROLE IF EXISTS ${ROLE}`).catch(() => undefined);
});

/** Saves `sql` as a query on the connection and calls it with `key`. */
async function call(sql: string, key: string) {
  const name = `probe_${n++}`;
  const saved = await s.call('POST', '/api/v1/queries', { body: { name, connection_name: 'pg', description: 'probe', publish: true, sql } });
  assert.equal(saved.status, 201, saved.text);
  return s.call('GET', `/q/${name}`, { key });
}

const SIDE_EFFECTS = [
  'SELECT pg_advisory_lock(1)',
  'SELECT pg_try_advisory_lock(42) AS got',
  'SELECT pg_catalog.pg_advisory_lock(7)',
  'SELECT "pg_advisory_lock"(8)',
  'SELECT PG_ADVISORY_LOCK(9)',
  'SELECT pg_advisory_lock /* spaced */ (10)',
  'SELECT lo_create(0)',
  'SELECT pg_stat_reset()',
  "SELECT pg_notify('queryapigate_changes', '{}')",
  'SELECT pg_terminate_backend(0)',
  'SELECT pg_cancel_backend(0)',
  'SELECT setseed(0.5)',
  "SELECT nextval('no_such_seq')",
  'SELECT name FROM customers WHERE pg_try_advisory_lock(id)',
  'WITH x AS (SELECT pg_advisory_lock(3) AS l) SELECT * FROM x',
  "SELECT * FROM (SELECT pg_notify('a', 'b') AS n) s",
  'SELECT name FROM customers ORDER BY pg_try_advisory_lock(id)',
  'SELECT my_volatile()',
  'SELECT my_wrapper()',
  // Functions whose body the gateway does not analyse (PL/pgSQL), or whose SQL body calls a volatile
  // or user function, however non-volatile they are declared and whoever owns them.
  'SELECT my_plpgsql_stable()',
  'SELECT my_plpgsql_dynamic()',
  'SELECT my_plpgsql_writer()',
  'SELECT my_sql_stable_lock()',
  'SELECT my_sql_quoted_lock()',
  'SELECT my_sql_nested()',
  'SELECT my_sql_atomic()',
  'SELECT name FROM customers WHERE my_plpgsql_stable() = 1',
  'SELECT * FROM my_plpgsql_stable()',
  'SELECT public.my_sql_stable_lock()',
  // Prepared statements and DO blocks: the statement that would run is not the one analysed.
  'PREPARE p AS DELETE FROM customers',
  'PREPARE q(int) AS SELECT $1',
  'prepare r as select pg_advisory_lock(1)',
  '/* first */ PREPARE s AS SELECT 1',
  'EXECUTE p',
  'EXECUTE q(1)',
  'DEALLOCATE p',
  'DEALLOCATE ALL',
  'DO $$ BEGIN DELETE FROM customers; END $$',
  "DO LANGUAGE plpgsql 'BEGIN PERFORM pg_advisory_lock(2); END'",
  'DO $body$ BEGIN EXECUTE $q$DELETE FROM customers$q$; END $body$',
  "do 'begin null; end'",
  "DO 'BEGIN NULL; END' LANGUAGE plpgsql",
  'EXPLAIN ANALYZE SELECT my_plpgsql_writer()',
  'EXPLAIN ANALYZE SELECT pg_try_advisory_lock(4)',
];

test('a key that may not write: every function that could change something is refused', async () => {
  for (const sql of SIDE_EFFECTS) {
    const r = await call(sql, reader);
    assert.equal(r.status, 403, `${sql}: ${r.text}`);
    assert.equal(r.json.code, 'read_only', sql);
  }
  // Nothing ran: no advisory lock is held, no large object exists.
  const [locks] = await data.sql`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'`;
  assert.equal(locks.n, 0);
  const [objects] = await data.sql`SELECT count(*)::int AS n FROM pg_largeobject_metadata`;
  assert.equal(objects.n, 0);
  const [rows] = await data.sql`SELECT count(*)::int AS n FROM customers`;
  assert.equal(rows.n, 2, 'no row deleted');
});

test('a key that may not write: functions that change nothing run', async () => {
  for (const [sql, rows] of [
    ['SELECT pg_sleep(0)::text AS s, random() < 2 AS r, now() IS NOT NULL AS n, clock_timestamp() IS NOT NULL AS c', [{ s: '', r: true, n: true, c: true }]],
    [
      'SELECT upper(name) AS u, count(*)::int AS c FROM customers GROUP BY name ORDER BY 1',
      [
        { u: 'ANN', c: 1 },
        { u: 'BOB', c: 1 },
      ],
    ],
    ['SELECT my_immutable(id) AS x FROM customers ORDER BY id', [{ x: 2 }, { x: 3 }]],
    // An SQL function whose body calls only built-in functions that change nothing is analysed and runs.
    ['SELECT my_sql_upper(name) AS u FROM customers ORDER BY id', [{ u: 'ANN' }, { u: 'BOB' }]],
    ["SELECT coalesce(name, 'x') AS n FROM customers WHERE id IN (1) AND left(name, 1) = 'A'", [{ n: 'Ann' }]],
    ['SELECT name FROM customers WHERE EXISTS (SELECT 1) ORDER BY id LIMIT 1', [{ name: 'Ann' }]],
  ] as const) {
    const r = await call(sql, reader);
    assert.equal(r.status, 200, `${sql}: ${r.text}`);
    assert.deepEqual(r.json, rows, sql);
  }
});

test('a key that may write is not held to the read-only rule', async () => {
  const r = await call('SELECT pg_try_advisory_xact_lock(5) AS got', writer);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json, [{ got: true }]);
});

test("a key that may write runs a SELECT as a writer: a function that writes does, saved or ad hoc; a reader's is refused", async () => {
  const made = await call('SELECT create_order(5) AS id', writer);
  assert.equal(made.status, 200, made.text);
  assert.deepEqual(made.json, [{ id: 1 }]);
  const numbered = await call("SELECT nextval('order_numbers')::int AS n", writer);
  assert.equal(numbered.status, 200, numbered.text);
  assert.deepEqual(numbered.json, [{ n: 1 }]);
  const adhoc = await s.call('POST', '/execute_sql', { key: writer, body: { connection_name: 'pg', sql: 'SELECT create_order(6) AS id' } });
  assert.equal(adhoc.status, 200, adhoc.text);
  assert.deepEqual(adhoc.json, [{ id: 2 }]);
  for (const sql of ['SELECT create_order(7) AS id', "SELECT nextval('order_numbers')::int AS n"]) {
    const r = await call(sql, reader);
    assert.equal(r.status, 403, `${sql}: ${r.text}`);
    assert.equal(r.json.code, 'read_only', sql);
  }
  assert.deepEqual(
    [...(await data.sql`SELECT id, amount FROM orders ORDER BY id`)],
    [
      { id: 1, amount: 5 },
      { id: 2, amount: 6 },
    ],
  );
  const [sequence] = await data.sql`SELECT last_value::int AS n FROM order_numbers`;
  assert.equal(sequence.n, 1, "the reader's nextval did not run");
});
