// Plans are made before the first call: each executor plans every published version when it starts
// and again after each change, off the calls' path (src/call/planWarmer.ts), and fills the metadata
// cache the change cleared with the rows calls read. Seen from outside in queryapigate_cache_entries
// ({cache="plan"}, {cache="metadata"}), inline and with an executor thread. A PostgreSQL connection
// a published query uses gets a connection opened (queryapigate_pool_idle_connections) and its schema read
// (queryapigate_cache_entries{cache="schema"}) before its first call; its statements are described
// (PostgreSQL) or prepared (MySQL) on the open sessions as they are published, and governed for the
// keys with rules that may call them (queryapigate_cache_entries{cache="trace"}).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import mysql from 'mysql2/promise';
import { eventually, pgConnection, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const entries = async (s: TestServer, cache: string): Promise<number> => {
  const text = (await s.call('GET', '/metrics', { key: null })).text;
  return Number(text.match(new RegExp(`^queryapigate_cache_entries\\{cache="${cache}"\\} (\\d+)`, 'm'))?.[1] ?? Number.NaN);
};
const planned = (s: TestServer) => entries(s, 'plan');

for (const workers of ['0', '1']) {
  test(`published versions are planned before their first call (QUERYAPIGATE_WORKERS=${workers})`, async () => {
    const s = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: workers });
    try {
      const list = await s.call('GET', '/api/v1/queries?status=published');
      assert.equal(list.status, 200);
      const published = list.json.items.length;
      assert.ok(published > 5, `the examples publish queries (${published})`);
      // Nothing has been called yet: every plan held was made by the warmer.
      assert.equal(
        await eventually(
          () => planned(s),
          (n) => n === published,
        ),
        published,
      );

      // A version published later is planned after the change reaches the executor, still before a call.
      const saved = await s.call('POST', '/api/v1/queries', {
        body: {
          name: 'film_title',
          connection_name: 'examples',
          description: 'a film by id',
          publish: true,
          sql: 'SELECT title FROM film WHERE film_id = :id',
          parameters: { id: { type: 'int', required: true } },
        },
      });
      assert.equal(saved.status, 201, saved.text);
      assert.equal(
        await eventually(
          () => planned(s),
          (n) => n === published + 1,
        ),
        published + 1,
      );

      // A draft is not published: nothing to plan for it.
      const draft = await s.call('POST', '/api/v1/queries', {
        body: { name: 'film_draft', connection_name: 'examples', description: 'draft', publish: false, sql: 'SELECT 1 AS one' },
      });
      assert.equal(draft.status, 201, draft.text);
      const called = await s.call('GET', '/q/film_title?id=1');
      assert.equal(called.status, 200, called.text);
      assert.equal(called.json[0].title.length > 0, true);
      // The call found its plan: none was added.
      assert.equal(await planned(s), published + 1);
    } finally {
      await s.stop();
    }
  });
}

for (const workers of ['0', '1']) {
  test(`after a change, the rows calls read are cached again before any call (QUERYAPIGATE_WORKERS=${workers})`, async () => {
    const s = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: workers, QUERYAPIGATE_METADATA_CACHE_TTL: '60' });
    try {
      const key = (await s.call('POST', '/api/v1/api-keys', { body: { name: 'reader', queries: '*', connections: [] } })).json.secret;
      const old = (await s.call('POST', '/api/v1/api-keys', { body: { name: 'rotated', queries: '*', connections: [] } })).json.secret;
      const rotated = await s.call('POST', '/api/v1/api-keys/rotated/rotate', { body: { grace_seconds: 600 } });
      assert.equal(rotated.status, 200, rotated.text);
      const count = async (path: string) => (await s.call('GET', path)).json.items.length;
      const queries = await count('/api/v1/queries');
      const connections = await count('/api/v1/connections');
      // Every key under its hash, the rotated one under its old hash too; each query and connection.
      const rows = 3 + queries + connections;
      // The rotation was a change: the cache was cleared, then filled, and no call has been made since.
      const held = await eventually(
        () => entries(s, 'metadata'),
        (n) => n >= rows,
      );
      assert.ok(held >= rows, `${held} rows cached, ${rows} expected`);
      // The rows are the store's: the old secret still works in its grace, and a revoked key is refused at once.
      assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=1', { key: old })).status, 200);
      assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=1', { key })).status, 200);
      assert.equal((await s.call('PATCH', '/api/v1/api-keys/reader', { body: { active: false } })).status, 200);
      assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=1', { key })).status, 401);
    } finally {
      await s.stop();
    }
  });
}

for (const workers of ['0', '1']) {
  test(`a PostgreSQL connection a published query uses is opened and its schema read before its first call (QUERYAPIGATE_WORKERS=${workers})`, async () => {
    const s = await startTestServer({ QUERYAPIGATE_WORKERS: workers });
    const idle = async (name: string): Promise<number> => {
      const text = (await s.call('GET', '/metrics', { key: null })).text;
      return Number(text.match(new RegExp(`^queryapigate_pool_idle_connections\\{connection="${name}"\\} (\\d+)`, 'm'))?.[1] ?? 0);
    };
    try {
      for (const name of ['warm_used', 'warm_unused']) {
        const made = await s.call('POST', '/api/v1/connections', { body: pgConnection(name) });
        assert.equal(made.status, 201, made.text);
      }
      const saved = await s.call('POST', '/api/v1/queries', {
        body: { name: 'warm_one', connection_name: 'warm_used', description: 'one', publish: true, sql: 'SELECT 1 AS one' },
      });
      assert.equal(saved.status, 201, saved.text);
      // No call yet: the connections open and the schema held are the warmer's.
      assert.equal(
        await eventually(
          () => entries(s, 'schema'),
          (n) => n === 1,
        ),
        1,
      );
      // One at least (the schema's statements may open more), then no more while nothing calls.
      await eventually(
        () => idle('warm_used'),
        (n) => n >= 1,
      );
      await new Promise((r) => setTimeout(r, 300));
      const opened = await idle('warm_used');
      assert.ok(opened >= 1, `${opened} idle connections`);
      // A connection no published query uses is left alone; a draft does not count.
      const draft = await s.call('POST', '/api/v1/queries', {
        body: { name: 'warm_draft', connection_name: 'warm_unused', description: 'draft', publish: false, sql: 'SELECT 2 AS two' },
      });
      assert.equal(draft.status, 201, draft.text);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(await idle('warm_unused'), 0);
      // The first call goes to an open connection, and finds the schema read.
      const called = await s.call('GET', '/q/warm_one');
      assert.equal(called.status, 200, called.text);
      assert.deepEqual(called.json, [{ one: 1 }]);
      assert.equal(await idle('warm_used'), opened);
      assert.equal(await entries(s, 'schema'), 1);
    } finally {
      await s.stop();
    }
  });
}

test('a MySQL connection a published query uses has its schema read before its first call', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  try {
    const before = await entries(s, 'schema');
    const made = await s.call('POST', '/api/v1/connections', {
      body: { name: 'warm_my', db: 'mysql', host: '127.0.0.1', port: 3306, database: 'test', user: 'root' },
    });
    assert.equal(made.status, 201, made.text);
    const saved = await s.call('POST', '/api/v1/queries', {
      body: { name: 'warm_my_one', connection_name: 'warm_my', description: 'one', publish: true, sql: 'SELECT 1 AS one' },
    });
    assert.equal(saved.status, 201, saved.text);
    assert.equal(
      await eventually(
        () => entries(s, 'schema'),
        (n) => n === before + 1,
      ),
      before + 1,
    );
    const called = await s.call('GET', '/q/warm_my_one');
    assert.equal(called.status, 200, called.text);
    assert.deepEqual(called.json, [{ one: 1 }]);
    assert.equal(await entries(s, 'schema'), before + 1);
  } finally {
    await s.stop();
  }
});

test('a MySQL statement is prepared on the open sessions as it is published: its first call prepares nothing', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  const my = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
  // The server's count of statements prepared, by every session; this one only queries. Read once the
  // count has held still for a while, so no prepare of an earlier step is still on its way.
  const prepares = async () => {
    const [rows] = (await my.query("SHOW GLOBAL STATUS LIKE 'Com_stmt_prepare'")) as unknown as [Array<{ Value: string }>];
    return Number(rows[0].Value);
  };
  const settled = async () => {
    let last = await prepares();
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const now = await prepares();
      if (now === last) return now;
      last = now;
    }
    throw new Error(`the server's prepares did not settle: ${last}`);
  };
  try {
    const made = await s.call('POST', '/api/v1/connections', {
      body: { name: 'ahead_my', db: 'mysql', host: '127.0.0.1', port: 3306, database: 'test', user: 'root' },
    });
    assert.equal(made.status, 201, made.text);
    const publish = async (name: string, sql: string) => {
      const saved = await s.call('POST', '/api/v1/queries', {
        body: { name, connection_name: 'ahead_my', description: name, publish: true, sql, parameters: { n: { type: 'integer' } } },
      });
      assert.equal(saved.status, 201, saved.text);
    };
    // A first version opens the session (its schema read, a call); then each new version is prepared
    // on it ahead, and its calls find it there.
    await publish('ahead_my_a', 'SELECT :n + 1 AS a');
    assert.deepEqual((await s.call('GET', '/q/ahead_my_a?n=1')).json, [{ a: 2 }]);
    for (const [i, sql] of ['SELECT :n + 2 AS b', 'SELECT :n * 3 AS c, :n AS n'].entries()) {
      const before = await settled();
      await publish(`ahead_my_${i}`, sql);
      const ahead = await settled();
      assert.ok(ahead > before, `version ${i}: nothing was prepared ahead (${before} prepares before the publish, ${ahead} after)`);
      const called = await s.call('GET', `/q/ahead_my_${i}?n=4`);
      assert.equal(called.status, 200, called.text);
      assert.deepEqual(called.json, [i === 0 ? { b: 6 } : { c: 12, n: 4 }]);
      assert.equal(await prepares(), ahead, `version ${i}: its first call prepared the statement itself`);
    }
  } finally {
    await my.end();
    await s.stop();
  }
});

for (const workers of ['0', '1']) {
  test(`the keys with rules that may call a published statement are governed before its first call (QUERYAPIGATE_WORKERS=${workers})`, async () => {
    const db = await scratchDatabase('qag_govern_ahead');
    await db.sql`CREATE TABLE people (id int PRIMARY KEY, email text, city text)`;
    await db.sql`INSERT INTO people VALUES (1, 'ann@example.com', 'Oslo')`;
    const s = await startTestServer({ QUERYAPIGATE_WORKERS: workers });
    const key = async (body: Record<string, unknown>) => {
      const made = await s.call('POST', '/api/v1/api-keys', { body: { connections: [], ...body } });
      assert.equal(made.status, 201, made.text);
      return (made.json as { secret: string }).secret;
    };
    try {
      assert.equal((await s.call('POST', '/api/v1/connections', { body: { ...pgConnection('ahead_pg'), database: db.name } })).status, 201);
      // A draft first, so keys can be granted it before it is published.
      const saved = await s.call('POST', '/api/v1/queries', {
        body: {
          name: 'people_one',
          connection_name: 'ahead_pg',
          description: 'one person',
          publish: false,
          sql: 'SELECT id, email, city FROM people WHERE id = :id',
          parameters: { id: { type: 'integer', required: true } },
        },
      });
      assert.equal(saved.status, 201, saved.text);
      const other = await s.call('POST', '/api/v1/queries', {
        body: { name: 'people_two', connection_name: 'ahead_pg', description: 'another', publish: false, sql: 'SELECT 2 AS two' },
      });
      assert.equal(other.status, 201, other.text);
      // Two policies that may call it, one key that has no rules, one with rules that is not granted it.
      const hashed = await key({ name: 'ahead_hash', queries: '*', mask: [{ column: 'people.email', action: 'hash' }] });
      const tabled = await key({ name: 'ahead_tables', queries: ['people_one'], allowed_tables: ['people'] });
      await key({ name: 'ahead_plain', queries: '*' });
      await key({ name: 'ahead_elsewhere', queries: ['people_two'], mask: [{ column: '*.city', action: 'null' }] });
      // An executor thread's gauges join the scrape once it has answered one.
      const before = await eventually(
        () => entries(s, 'trace'),
        (n) => !Number.isNaN(n),
      );
      const published = await s.call('POST', '/api/v1/queries/people_one/publish', { body: { version: 1 } });
      assert.equal(published.status, 200, published.text);
      // No call yet: one trace for each policy that may call it.
      assert.equal(
        await eventually(
          () => entries(s, 'trace'),
          (n) => n === before + 2,
        ),
        before + 2,
      );
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(await entries(s, 'trace'), before + 2);
      // The calls find them: answered as governed, nothing traced on their path.
      const masked = await s.call('GET', '/q/people_one?id=1', { key: hashed });
      assert.equal(masked.status, 200, masked.text);
      const [row] = masked.json as Array<{ id: number; email: string; city: string }>;
      assert.equal(row.city, 'Oslo');
      assert.notEqual(row.email, 'ann@example.com');
      assert.ok(row.email.length > 0);
      const plain = await s.call('GET', '/q/people_one?id=1', { key: tabled });
      assert.deepEqual(plain.json, [{ id: 1, email: 'ann@example.com', city: 'Oslo' }]);
      assert.equal(await entries(s, 'trace'), before + 2);
    } finally {
      await s.stop();
      await db.drop();
    }
  });
}
