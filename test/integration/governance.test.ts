// Governance end to end: the seeds' governed key on the examples, masking in every format and page,
// table allow-lists, the write policy with the seeds' deposit, hidden writes, and MySQL syntax.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import mysql from 'mysql2/promise';
import { scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const HEX16 = /^[0-9a-f]{16}$/;

describe('governance on the examples (SQLite)', () => {
  let s: TestServer;
  let governed = '';
  let plain = '';
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_LOAD_EXAMPLES: '1' });
    // The queries first: a key may only be granted queries that exist.
    for (const [name, sql] of [
      ['titles', "SELECT f.film_id, upper(f.title) AS loud, f.title || '!' AS shout, f.rating FROM film f ORDER BY f.film_id LIMIT 25"],
      ['films_and_customers', 'SELECT c.first_name FROM customer c'],
    ]) {
      const r = await s.call('POST', '/api/v1/queries', { body: { name, sql, description: name, connection_name: 'examples', publish: true } });
      assert.equal(r.status, 201, r.text);
    }
    // As in the seed's walkthrough.
    const g = await s.call('POST', '/api/v1/api-keys', {
      body: {
        name: 'bench-governed',
        queries: ['example_film_lookup', 'titles', 'films_and_customers'],
        connections: [],
        allowed_tables: ['film', 'rental'],
        mask: [{ column: '*.title', action: 'hash' }],
      },
    });
    assert.equal(g.status, 201, g.text);
    governed = g.json.secret;
    plain = (await s.call('POST', '/api/v1/api-keys', { body: { name: 'plain', queries: ['example_film_lookup', 'titles'], connections: [] } })).json.secret;
  });
  after(() => s.stop());

  test("the seed's governed key gets example_film_lookup with hashed titles", async () => {
    const clear = await s.call('GET', '/q/example_film_lookup?film_id=7', { key: plain });
    const hidden = await s.call('GET', '/q/example_film_lookup?film_id=7', { key: governed });
    assert.equal(hidden.status, 200, hidden.text);
    assert.match(hidden.json[0].title, HEX16);
    assert.notEqual(hidden.json[0].title, clear.json[0].title);
    const { title: _a, ...restHidden } = hidden.json[0];
    const { title: _b, ...restClear } = clear.json[0];
    assert.deepEqual(restHidden, restClear, 'other columns are untouched');
    const again = await s.call('GET', '/q/example_film_lookup?film_id=7', { key: governed });
    assert.equal(again.json[0].title, hidden.json[0].title, 'hashing is deterministic');
  });

  test('a masked value never appears raw, in any format or page', async () => {
    const clear = await s.call('GET', '/q/titles?page_size=25', { key: plain });
    const raw = clear.json.map((r: { loud: string }) => r.loud.toLowerCase());
    for (const format of ['json', 'ndjson', 'csv', 'tsv']) {
      for (const page of [1, 2, 3]) {
        const r = await s.call('GET', `/q/titles?format=${format}&page=${page}&page_size=10`, { key: governed });
        assert.equal(r.status, 200, r.text);
        const text = r.text.toLowerCase();
        for (const t of raw) assert.ok(!text.includes(t), `${format} page ${page} leaks ${t}`);
        if (format === 'json') {
          for (const row of r.json) {
            assert.match(row.loud, HEX16, 'computed from a masked source: masked as a whole');
            assert.match(row.shout, HEX16);
            assert.equal(typeof row.film_id, 'number');
          }
        }
      }
    }
    const history = await s.call('GET', '/api/v1/queries/titles/history?key=bench-governed&limit=1');
    assert.deepEqual(history.json.items[0].masked.map((m: { column: string }) => m.column).sort(), ['loud', 'shout']);
  });

  test('a table outside the allow-list is refused, naming it', async () => {
    const r = await s.call('GET', '/q/films_and_customers', { key: governed });
    assert.equal(r.status, 403);
    assert.equal(r.json.code, 'table_not_allowed');
    assert.match(r.json.error, /customer/);
  });
});

describe('governance on PostgreSQL: writes and hidden writes', () => {
  let s: TestServer;
  let data: Awaited<ReturnType<typeof scratchDatabase>>;
  const secrets: Record<string, string> = {};
  before(async () => {
    data = await scratchDatabase('qag_gov');
    await data.sql.unsafe(`CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84));
      INSERT INTO pgbench_accounts SELECT i, 1, 0, '' FROM generate_series(1, 1000) i;
      CREATE TABLE secrets (id int, s text); INSERT INTO secrets VALUES (1, 'top');
      CREATE SEQUENCE ids START 100;
      CREATE TABLE parents (id int PRIMARY KEY); INSERT INTO parents VALUES (1);
      CREATE TABLE children (parent int REFERENCES parents (id)); INSERT INTO children VALUES (1);
      CREATE FUNCTION purge_accounts() RETURNS int LANGUAGE plpgsql AS $$
        BEGIN DELETE FROM pgbench_accounts WHERE aid > 990; RETURN 0; END $$;`);
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_ALLOW_WRITES: '1' });
    const post = async (path: string, body: unknown) => {
      const r = await s.call('POST', path, { body });
      assert.ok(r.status < 300, r.text);
      return r.json;
    };
    await post('/api/v1/connections', { name: 'oltp', db: 'postgres', host: '127.0.0.1', port: 5432, database: data.name, user: 'postgres' });
    const q = (name: string, sql: string, parameters = {}) =>
      post('/api/v1/queries', { name, sql, parameters, connection_name: 'oltp', description: name, publish: true });
    await q('deposit', 'UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid', { aid: 'int', delta: 'int' });
    await q('wipe', 'DELETE FROM pgbench_accounts WHERE aid = :aid', { aid: 'int' });
    await q('sneaky', 'WITH x AS (UPDATE pgbench_accounts SET abalance = 0 RETURNING aid) SELECT count(*) AS n FROM x');
    // An UPDATE whose function deletes, a SELECT that moves a sequence back, a server signal: writes no verb names.
    await q('purge', 'UPDATE pgbench_accounts SET abalance = purge_accounts() WHERE aid = :aid', { aid: 'int' });
    await q('resequence', "SELECT setval('ids', 1) AS v");
    await q('signal', 'SELECT pg_cancel_backend(0) AS c');
    await q('empty_parents', 'TRUNCATE parents CASCADE');
    await q('stamp', 'UPDATE pgbench_accounts SET abalance = abs(:delta) + length(now()::text) * 0 WHERE aid = :aid', { aid: 'int', delta: 'int' });
    await q('peek', 'SELECT aid, abalance FROM pgbench_accounts WHERE aid = :aid', { aid: 'int' });
    await q('leak', 'SELECT a.aid, s.s FROM pgbench_accounts a, secrets s WHERE a.aid = 1');
    secrets.writer = (
      await post('/api/v1/api-keys', {
        name: 'writer',
        queries: ['deposit', 'wipe', 'purge', 'resequence', 'signal', 'stamp'],
        connections: [],
        allow_writes: true,
        allowed_write_ops: ['update'],
      })
    ).secret;
    secrets.reader = (await post('/api/v1/api-keys', { name: 'reader', queries: ['deposit', 'sneaky', 'peek', 'leak'], connections: [] })).secret;
    secrets.governed = (
      await post('/api/v1/api-keys', {
        name: 'governed',
        queries: ['peek', 'leak'],
        connections: [],
        allowed_tables: ['pgbench_accounts', 'pgbench_branches'],
        mask: [{ column: '*.abalance', action: 'hash' }],
      })
    ).secret;
  });
  after(async () => {
    await s.stop();
    await data.drop();
  });

  test("the seed's deposit lands through the writer key, with X-Rows-Affected", async () => {
    const r = await s.call('GET', '/q/deposit?aid=5&delta=7', { key: secrets.writer });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('x-rows-affected'), '1');
    assert.deepEqual(r.json, { message: 'No results returned' });
    assert.equal((await data.sql`SELECT abalance FROM pgbench_accounts WHERE aid = 5`)[0].abalance, 7);
  });

  test('write verbs outside allowed_write_ops, and writes without permission, are refused', async () => {
    const del = await s.call('GET', '/q/wipe?aid=6', { key: secrets.writer });
    assert.equal(del.status, 403);
    assert.equal(del.json.code, 'write_op_not_allowed');
    const noWrite = await s.call('GET', '/q/deposit?aid=5&delta=1', { key: secrets.reader });
    assert.equal(noWrite.json.code, 'read_only');
    const hidden = await s.call('GET', '/q/sneaky', { key: secrets.reader });
    assert.equal(hidden.status, 403);
    assert.equal(hidden.json.code, 'read_only');
    assert.equal((await data.sql`SELECT count(*)::int AS n FROM pgbench_accounts WHERE aid = 6`)[0].n, 1);
    assert.equal((await data.sql`SELECT abalance FROM pgbench_accounts WHERE aid = 5`)[0].abalance, 7);
  });

  test('a key allowed some write verbs writes nothing else through a function: its own, a sequence, a signal', async () => {
    for (const [path, fn] of [
      ['/q/purge?aid=5', /purge_accounts\(\)/],
      ['/q/resequence', /setval\(\)/],
      ['/q/signal', /pg_cancel_backend\(\)/],
    ] as const) {
      const r = await s.call('GET', path, { key: secrets.writer });
      assert.equal(r.status, 403, `${path}: ${r.text}`);
      assert.equal(r.json.code, 'write_op_not_allowed');
      assert.match(r.json.error, /may only perform these write operations: update\./);
      assert.match(r.json.error, fn);
    }
    assert.equal((await data.sql`SELECT count(*)::int AS n FROM pgbench_accounts WHERE aid > 990`)[0].n, 10);
    assert.equal((await data.sql`SELECT last_value::int AS v FROM ids`)[0].v, 100);
    // Functions that change nothing stay the key's to call.
    const stamp = await s.call('GET', '/q/stamp?aid=9&delta=-4', { key: secrets.writer });
    assert.equal(stamp.status, 200, stamp.text);
    assert.equal((await data.sql`SELECT abalance FROM pgbench_accounts WHERE aid = 9`)[0].abalance, 4);
  });

  test('a key allowed some tables truncates no other through CASCADE (it empties the tables that refer to them)', async () => {
    const r = await s.call('POST', '/api/v1/api-keys', {
      body: { name: 'parents-only', queries: ['empty_parents'], connections: [], allow_writes: true, allowed_tables: ['parents'] },
    });
    assert.equal(r.status, 201, r.text);
    const cut = await s.call('GET', '/q/empty_parents', { key: r.json.secret });
    assert.equal(cut.status, 403, cut.text);
    assert.equal(cut.json.code, 'table_not_allowed');
    assert.match(cut.json.error, /CASCADE/);
    assert.equal((await data.sql`SELECT count(*)::int AS n FROM children`)[0].n, 1);
  });

  test('the governed pgbench key: hashed abalance, tables enforced', async () => {
    const r = await s.call('GET', '/q/peek?aid=5', { key: secrets.governed });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json[0].aid, 5);
    assert.match(r.json[0].abalance, HEX16);
    const leak = await s.call('GET', '/q/leak', { key: secrets.governed });
    assert.equal(leak.json.code, 'table_not_allowed');
    assert.match(leak.json.error, /secrets/);
    assert.doesNotMatch(leak.text, /top/);
  });
});

describe('governance on MariaDB syntax', () => {
  let s: TestServer;
  const db = `qag_gov_my_${process.pid}`;
  let conn: mysql.Connection;
  before(async () => {
    conn = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
    await conn.query(`CREATE DATABASE ${db}; USE ${db};
      CREATE TABLE customer (c_id INT PRIMARY KEY, c_last VARCHAR(20), c_email VARCHAR(40));
      INSERT INTO customer VALUES (1, 'ABLE', 'jo@example.com'), (2, 'BAKER', 'al@example.com'), (3, 'CHASE', 'x@example.com');
      CREATE TABLE secret (id INT); INSERT INTO secret VALUES (7);
      CREATE SEQUENCE ids START WITH 100;
      CREATE FUNCTION wipe_last() RETURNS INT MODIFIES SQL DATA BEGIN DELETE FROM secret; RETURN 1; END;`);
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1' });
    await s.call('POST', '/api/v1/connections', { body: { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: db, user: 'root' } });
    await s.call('POST', '/api/v1/queries', {
      body: {
        name: 'people',
        connection_name: 'my',
        description: 'p',
        publish: true,
        sql: 'SELECT `c`.`c_id`, `c`.`c_last`, c.c_email FROM `customer` AS `c` ORDER BY c_id LIMIT 1, 2',
      },
    });
    await s.call('POST', '/api/v1/queries', {
      body: {
        name: 'both',
        connection_name: 'my',
        description: 'b',
        publish: true,
        sql: 'SELECT c_id FROM customer JOIN `secret` ON secret.id = customer.c_id',
      },
    });
  });
  after(async () => {
    await s.stop();
    await conn.query(`DROP DATABASE ${db}`);
    await conn.end();
  });

  test('backticks and LIMIT m,n: masks and the table check apply', async () => {
    const key = (
      await s.call('POST', '/api/v1/api-keys', {
        body: {
          name: 'm',
          queries: ['people', 'both'],
          connections: [],
          allowed_tables: ['customer'],
          mask: [
            { column: 'customer.c_email', action: 'mask' },
            { column: '*.c_last', action: 'drop' },
          ],
        },
      })
    ).json.secret;
    const r = await s.call('GET', '/q/people', { key });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, [
      { c_id: 2, c_email: 'a*@example.com' },
      { c_id: 3, c_email: 'x@example.com' },
    ]);
    const both = await s.call('GET', '/q/both', { key });
    assert.equal(both.json.code, 'table_not_allowed');
  });

  /** The statements published on `my`, and the secret of a key that may call them and write only `ops`. */
  async function writerOf(name: string, ops: string[], statements: Record<string, string>): Promise<string> {
    for (const [query, sql] of Object.entries(statements)) {
      const r = await s.call('POST', '/api/v1/queries', { body: { name: query, connection_name: 'my', description: query, publish: true, sql } });
      assert.ok(r.status < 300, r.text);
    }
    const r = await s.call('POST', '/api/v1/api-keys', {
      body: { name, queries: Object.keys(statements), connections: [], allow_writes: true, allowed_write_ops: ops },
    });
    assert.equal(r.status, 201, r.text);
    return r.json.secret;
  }

  test('a key allowed some write verbs writes nothing else through a function: a stored one, a sequence', async () => {
    const statements = {
      my_purge: 'UPDATE customer SET c_last = c_last WHERE c_id = wipe_last()',
      my_setval: 'SELECT SETVAL(ids, 1) AS v',
      my_next: 'SELECT NEXT VALUE FOR ids AS v',
      my_rename: "UPDATE customer SET c_last = CONCAT('Z', SUBSTRING(c_last, 2)) WHERE c_id = 1",
    };
    const key = await writerOf('updater', ['update'], statements);
    for (const [name, fn] of [
      ['my_purge', /wipe_last\(\)/],
      ['my_setval', /setval\(\)/],
      ['my_next', /nextval\(\)/],
    ] as const) {
      const r = await s.call('GET', `/q/${name}`, { key });
      assert.equal(r.status, 403, `${name}: ${r.text}`);
      assert.equal(r.json.code, 'write_op_not_allowed');
      assert.match(r.json.error, fn);
    }
    const [[left]] = await conn.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${db}.secret`);
    assert.equal(left.n, 1);
    const [[seq]] = await conn.query<mysql.RowDataPacket[]>(`SELECT next_not_cached_value AS v FROM ${db}.ids`);
    assert.equal(Number(seq.v), 100);
    // Built-in functions that change nothing stay the key's to call.
    const ok = await s.call('GET', '/q/my_rename', { key });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.headers.get('x-rows-affected'), '1');
  });

  test("ON DUPLICATE KEY UPDATE is an update, as PostgreSQL's ON CONFLICT DO UPDATE is", async () => {
    const statements = {
      my_upsert: "INSERT INTO customer (c_id, c_last) VALUES (2, 'TAKEN') ON DUPLICATE KEY UPDATE c_last = 'TAKEN'",
      my_add: "INSERT INTO customer (c_id, c_last) VALUES (4, 'DAVIS')",
    };
    const key = await writerOf('inserter', ['insert'], statements);
    const upsert = await s.call('GET', '/q/my_upsert', { key });
    assert.equal(upsert.status, 403, upsert.text);
    assert.equal(upsert.json.code, 'write_op_not_allowed');
    const [[row]] = await conn.query<mysql.RowDataPacket[]>(`SELECT c_last FROM ${db}.customer WHERE c_id = 2`);
    assert.equal(row.c_last, 'BAKER');
    const add = await s.call('GET', '/q/my_add', { key });
    assert.equal(add.status, 200, add.text);
    assert.equal(add.headers.get('x-rows-affected'), '1');
  });
});
