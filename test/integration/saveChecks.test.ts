// Mistakes caught when they are made, not at call time: what a saved query and a key must pass when
// saved (on PostgreSQL, MariaDB and SQLite connections), POST /api/v1/queries/validate, the 403 for a
// query a key is not granted, readable body messages, and the start-up warning about unknown variables.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import { ADMIN_KEY, type Reply, request, scratchDatabase, startProcess, startTestServer, type TestServer } from '../helpers.js';

const MY_HOST = process.env.QUERYAPIGATE_TEST_MYSQL_HOST ?? '127.0.0.1';
const MY_PORT = Number(process.env.QUERYAPIGATE_TEST_MYSQL_PORT ?? 3306);
const MY_USER = process.env.QUERYAPIGATE_TEST_MYSQL_USER ?? 'root';
const MY_DB = `qag_savechecks_${process.pid}`;

/** One data source and the statements that show each check in its own lexis. */
interface Dialect {
  conn: string;
  /** What the database calls a statement it cannot parse. */
  syntaxError: RegExp;
  /** Valid SQL the gateway's parsers cannot read (so the database is asked), with its parameters and one call. */
  parserCannotRead: { sql: string; parameters: Record<string, unknown>; call: string };
  /** A ':word' the dialect's lexis hides (so it is no marker) before a real :id. */
  hiddenMarker: string;
  /** A ';' the dialect's lexis hides, so this is one statement. */
  oneStatement: string;
  write: { sql: string; parameters: Record<string, unknown> };
}

const DIALECTS: Dialect[] = [
  {
    conn: 'pg',
    syntaxError: /^syntax error at or near "SELEC"$/,
    parserCannotRead: {
      sql: 'SELECT name, count(*) AS n FROM items GROUP BY GROUPING SETS ((name), ()) ORDER BY name',
      parameters: {},
      call: '',
    },
    hiddenMarker: "SELECT $$it's :not_a_marker$$ AS a, id FROM items WHERE id = :id",
    oneStatement: 'SELECT $$a;b$$ AS s',
    write: { sql: 'UPDATE items SET name = :name WHERE id = :id', parameters: { id: 'int', name: 'str' } },
  },
  {
    conn: 'my',
    syntaxError: /You have an error in your SQL syntax.*near 'SELEC/,
    parserCannotRead: { sql: 'SELECT id, name FROM items FORCE INDEX (PRIMARY) WHERE id = :id', parameters: { id: 'int' }, call: '?id=1' },
    hiddenMarker: "SELECT id, 'x' AS a FROM items WHERE name <> 'it\\'s :not_a_marker' AND id = :id",
    oneStatement: "SELECT 'a\\';b' AS s",
    write: { sql: 'INSERT INTO items (id, name) VALUES (:id, :name)', parameters: { id: 'int', name: 'str' } },
  },
  {
    conn: 'lite',
    syntaxError: /^near "SELEC": syntax error$/,
    parserCannotRead: { sql: 'SELECT id, name FROM items WHERE name = :name COLLATE NOCASE', parameters: { name: 'str' }, call: '?name=ANN' },
    hiddenMarker: 'SELECT id AS [a:not_a_marker], id FROM items WHERE id = :id',
    oneStatement: "SELECT 'a;b' AS s",
    write: { sql: 'DELETE FROM items WHERE id = :id', parameters: { id: 'int' } },
  },
];

describe('save-time checks', () => {
  let s: TestServer;
  let pg: Awaited<ReturnType<typeof scratchDatabase>>;
  let my: mysql.Connection;
  const post = (path: string, body: unknown) => s.call('POST', path, { body });
  const created = async (path: string, body: unknown): Promise<Reply> => {
    const r = await post(path, body);
    assert.equal(r.status, 201, `${path}: ${r.text}`);
    return r;
  };
  const refused = async (path: string, body: unknown, status: number, code: string): Promise<Reply> => {
    const r = await post(path, body);
    assert.equal(r.status, status, `${path} ${JSON.stringify(body)}: ${r.text}`);
    assert.equal(r.json.code, code, r.text);
    assert.doesNotMatch(r.text, /\n\s+at |\.js:\d+/, 'no stack trace');
    return r;
  };
  const query = (name: string, conn: string | null, sql: string, parameters: Record<string, unknown> = {}) => ({
    name,
    description: name,
    ...(conn === null ? {} : { connection_name: conn }),
    sql,
    parameters,
    publish: true,
  });

  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
    pg = await scratchDatabase('qag_savechecks');
    await pg.sql.unsafe("CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'Ann'), (2, 'Bob');");
    my = await mysql.createConnection({ host: MY_HOST, port: MY_PORT, user: MY_USER, multipleStatements: true });
    await my.query(`CREATE DATABASE ${MY_DB}; USE ${MY_DB};
      CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40)); INSERT INTO items VALUES (1, 'Ann'), (2, 'Bob');`);
    const lite = new Database(join(s.home, 'items.db'));
    lite.exec("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO items VALUES (1, 'Ann'), (2, 'Bob');");
    lite.close();
    await created('/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' });
    await created('/api/v1/connections', { name: 'my', db: 'mysql', host: MY_HOST, port: MY_PORT, database: MY_DB, user: MY_USER });
    await created('/api/v1/connections', { name: 'lite', db: 'sqlite', database: 'items.db' });
    await created('/api/v1/connections', { name: 'off', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres', active: false });
    await created('/api/v1/connections', { name: 'dead', db: 'postgres', host: '127.0.0.1', port: 1, database: 'x', user: 'postgres' });
  });
  after(async () => {
    await s?.stop();
    await pg?.drop();
    await my?.query(`DROP DATABASE IF EXISTS ${MY_DB}`);
    await my?.end();
  });

  for (const d of DIALECTS) {
    describe(`on ${d.conn}`, () => {
      const name = (what: string) => `${what}_${d.conn}`;

      test("SQL its database cannot parse is 400 invalid_sql, with the database's words as detail", async () => {
        const typo = await refused('/api/v1/queries', query(name('typo'), d.conn, 'SELEC id FROM items'), 400, 'invalid_sql');
        assert.match(typo.json.error, /^The SQL is not valid (PostgreSQL|MySQL\/MariaDB|SQLite): the database cannot parse it$/);
        assert.match(typo.json.detail, d.syntaxError);
        await refused('/api/v1/queries', query(name('cut'), d.conn, 'SELECT id FROM items WHERE'), 400, 'invalid_sql');
        const empty = await refused('/api/v1/queries', query(name('empty'), d.conn, '-- nothing here\n;'), 400, 'invalid_sql');
        assert.equal(empty.json.error, 'The SQL holds no statement, only comments or semicolons');
        assert.equal((await s.call('GET', `/api/v1/queries/${name('typo')}`)).status, 404, 'nothing saved');
        // a new version is checked the same way, in the connection it keeps
        await created('/api/v1/queries', query(name('versioned'), d.conn, 'SELECT id FROM items ORDER BY id'));
        const v2 = await refused(`/api/v1/queries/${name('versioned')}/versions`, { description: 'v2', sql: 'SELEC id FROM items' }, 400, 'invalid_sql');
        assert.match(v2.json.detail, d.syntaxError);
      });

      test('valid SQL the gateway cannot read is saved when its database parses it, and runs', async () => {
        const { sql, parameters, call } = d.parserCannotRead;
        const r = await created('/api/v1/queries', query(name('exotic'), d.conn, sql, parameters));
        assert.equal(r.json.versions[0].writes, false);
        const run = await s.call('GET', `/q/${name('exotic')}${call}`);
        assert.equal(run.status, 200, run.text);
        assert.ok(Array.isArray(run.json) && run.json.length > 0, run.text);
      });

      test("markers are read in the connection's dialect: a :word its lexis hides is no marker", async () => {
        const r = await created('/api/v1/queries', query(name('lexis'), d.conn, d.hiddenMarker, { id: 'int' }));
        assert.deepEqual(r.json.versions[0].placeholders, ['id']);
        const run = await s.call('GET', `/q/${name('lexis')}?id=2`);
        assert.equal(run.status, 200, run.text);
        assert.equal(run.json[0].id, 2);
        const got = await s.call('GET', `/api/v1/queries/${name('lexis')}`);
        assert.deepEqual(got.json.versions[0].placeholders, ['id'], 'as GET shows it too');
      });

      test('one statement: a second is multiple_statements, a ; the lexis hides is not', async () => {
        const two = await refused('/api/v1/queries', query(name('two'), d.conn, 'SELECT 1; SELECT 2'), 400, 'multiple_statements');
        assert.equal(two.json.error, 'Only one SQL statement is allowed');
        await created('/api/v1/queries', query(name('one'), d.conn, d.oneStatement));
      });

      test('a write is saved and flagged "writes": true; whether it may run is decided when called', async () => {
        const r = await created('/api/v1/queries', query(name('write'), d.conn, d.write.sql, d.write.parameters));
        assert.equal(r.json.versions[0].writes, true);
        const run = await s.call('GET', `/q/${name('write')}?id=9&name=x`);
        assert.equal(run.status, 403, run.text);
        assert.equal(run.json.code, 'read_only');
        const read = await created('/api/v1/queries', query(name('read'), d.conn, 'SELECT id FROM items WHERE id = :id', { id: 'int' }));
        assert.equal(read.json.versions[0].writes, false);
      });

      test('every :marker declared (did you mean the declared one?) and every declared parameter used', async () => {
        const undeclared = await refused(
          '/api/v1/queries',
          query(name('undeclared'), d.conn, 'SELECT id FROM items WHERE id = :aid', { id: 'int' }),
          400,
          'param_undeclared',
        );
        assert.equal(
          undeclared.json.error,
          'The SQL uses :aid but "parameters" does not declare it (declared: \'id\'). "parameters" declares \'id\', which the SQL does not use (its markers: :aid)',
        );
        assert.deepEqual(undeclared.json.errors, {
          id: 'is declared but not used in the SQL',
          aid: 'is used in the SQL but not declared in "parameters" (did you mean the declared \'id\'?)',
        });
        const none = await refused(
          '/api/v1/queries',
          query(name('none'), d.conn, 'SELECT id FROM items WHERE id = :id AND name = :n'),
          400,
          'param_undeclared',
        );
        assert.deepEqual(Object.keys(none.json.errors), ['id', 'n']);
        const unused = await refused('/api/v1/queries', query(name('unused'), d.conn, 'SELECT id FROM items', { id: 'int' }), 400, 'param_unused');
        assert.equal(unused.json.error, '"parameters" declares \'id\', which the SQL does not use (its markers: none)');
        const rule = await refused(
          '/api/v1/queries',
          query(name('rule'), d.conn, 'SELECT id FROM items WHERE id = :id', { id: { type: 'int', min: 'one' } }),
          400,
          'invalid_body',
        );
        assert.deepEqual(rule.json.errors, { id: "'min' must be a number" });
      });

      test('a connection that does not exist is 404 connection_not_found naming the close one and listing them all', async () => {
        const r = await refused('/api/v1/queries', query(name('lost'), `${d.conn}x`, 'SELECT 1'), 404, 'connection_not_found');
        assert.equal(r.json.error, `Connection '${d.conn}x' not found (did you mean '${d.conn}'?); the connections are 'dead', 'lite', 'my', 'off' and 'pg'`);
      });
    });
  }

  test('when the database cannot be asked, a statement the parser rejects is refused, and says why', async () => {
    const off = await refused('/api/v1/queries', query('typo_off', 'off', 'SELEC 1'), 400, 'invalid_sql');
    assert.equal(
      off.json.error,
      "The SQL is not valid PostgreSQL: the gateway's parser cannot read it (the connection is not active, so its database was not asked)",
    );
    assert.match(off.json.detail, /^could not parse the statement: Syntax error/);
    const dead = await refused('/api/v1/queries', query('typo_dead', 'dead', 'SELEC 1'), 400, 'invalid_sql');
    assert.match(dead.json.error, /cannot read it \(the database could not be asked\)$/);
    // what the parser reads needs no database
    await created('/api/v1/queries', query('fine_off', 'off', 'SELECT id FROM items'));
    // nor does a statement the parser declines to read rather than rejects (here: a dollar-quoted string)
    await created('/api/v1/queries', query('dollars_off', 'off', 'SELECT $$a$$ AS a'));
  });

  test('without a connection the SQL must parse in one of the dialects', async () => {
    const r = await refused('/api/v1/queries', query('typo_none', null, 'SELEC 1'), 400, 'invalid_sql');
    assert.equal(r.json.error, 'The SQL parses in none of PostgreSQL, MySQL/MariaDB, SQLite');
    const ok = await created('/api/v1/queries', query('floating', null, 'SELECT :x AS x', { x: 'int' }));
    assert.equal(ok.json.versions[0].connection_name, null);
  });

  test("a key's queries and connections must exist: 400 unknown_grant, with the close names and the real ones", async () => {
    await created('/api/v1/queries', query('account', 'pg', 'SELECT id, name FROM items WHERE id = :id', { id: 'int' }));
    const r = await refused(
      '/api/v1/api-keys',
      { name: 'typos', queries: ['acount', { name: 'account', allow_writes: true }], connections: ['pgg', 'my'] },
      400,
      'unknown_grant',
    );
    assert.deepEqual(r.json.errors, { queries: "no saved query 'acount' (did you mean 'account'?)", connections: "no connection 'pgg' (did you mean 'pg'?)" });
    assert.match(r.json.error, /^This key grants what does not exist: no saved query 'acount' \(did you mean 'account'\?\); the saved queries are 'account', /);
    assert.match(r.json.error, /\. no connection 'pgg' \(did you mean 'pg'\?\); the connections are 'dead', 'lite', 'my', 'off' and 'pg'$/);
    assert.equal((await s.call('GET', '/api/v1/api-keys/typos')).status, 404, 'nothing saved');
    const nowhere = await refused('/api/v1/api-keys', { name: 'far', queries: ['zzzzzzzz'], connections: [] }, 400, 'unknown_grant');
    assert.deepEqual(nowhere.json.errors, { queries: "no saved query 'zzzzzzzz'" });
    // "*" names nothing; real names pass; a PATCH is checked the same way
    const key = await created('/api/v1/api-keys', { name: 'reader', queries: ['account'], connections: [] });
    await created('/api/v1/api-keys', { name: 'everything', queries: '*', connections: '*' });
    const patch = await s.call('PATCH', '/api/v1/api-keys/reader', { body: { queries: ['account', 'acount'] } });
    assert.equal(patch.status, 400, patch.text);
    assert.equal(patch.json.code, 'unknown_grant');
    assert.equal((await s.call('PATCH', '/api/v1/api-keys/reader', { body: { connections: ['my'] } })).status, 200);
    assert.equal((await s.call('PATCH', '/api/v1/api-keys/reader', { body: { connections: [] } })).status, 200);

    // at call time: a query the key does not grant is 403 query_forbidden, a connection it may not use connection_forbidden
    const other = await s.call('GET', '/q/read_pg?id=1', { key: key.json.secret });
    assert.equal(other.status, 403, other.text);
    assert.equal(other.json.code, 'query_forbidden');
    assert.equal(other.json.error, "This API key is not granted the query 'read_pg'");
    const mine = await s.call('GET', '/q/account?id=1', { key: key.json.secret });
    assert.equal(mine.status, 200, mine.text);
    const elsewhere = await s.call('GET', '/q/account?id=1&connection_name=my', { key: key.json.secret });
    assert.equal(elsewhere.status, 403, elsewhere.text);
    assert.equal(elsewhere.json.code, 'connection_forbidden');
    assert.equal(elsewhere.json.error, "This API key is not permitted to use the connection 'my'");
  });

  test('POST /api/v1/queries/validate runs the same checks without saving', async () => {
    const ok = await post('/api/v1/queries/validate', {
      description: 'd',
      connection_name: 'pg',
      sql: 'SELECT i.name FROM items i WHERE i.id = :id',
      parameters: { id: 'int' },
    });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json, {
      valid: true,
      errors: [],
      connection_name: 'pg',
      dialect: 'postgres',
      placeholders: ['id'],
      parameters: { id: { type: 'integer', required: true } },
      writes: false,
      tables: ['items'],
      analysed: true,
      analysis_problem: null,
    });
    const write = await post('/api/v1/queries/validate', {
      description: 'd',
      connection_name: 'my',
      sql: 'DELETE FROM items WHERE id = :id',
      parameters: { id: 'int' },
    });
    assert.equal(write.json.valid, true);
    assert.equal(write.json.writes, true);
    assert.deepEqual(write.json.tables, ['items']);
    // read by the database, not by the gateway: valid, with the reason it cannot be analysed
    const { sql, parameters } = DIALECTS[2].parserCannotRead;
    const exotic = await post('/api/v1/queries/validate', { description: 'd', connection_name: 'lite', sql, parameters });
    assert.equal(exotic.json.valid, true, exotic.text);
    assert.equal(exotic.json.analysed, false);
    assert.match(exotic.json.analysis_problem, /could not parse the statement/);
    // every problem at once, each with the code a save would answer
    const bad = await post('/api/v1/queries/validate', {
      name: 'nothing_saved',
      connection_name: 'pgg',
      sql: 'SELECT id FROM items WHERE id = :aid',
      parameters: { id: 'int' },
      colour: 1,
    });
    assert.equal(bad.status, 200, bad.text);
    assert.equal(bad.json.valid, false);
    assert.deepEqual(
      bad.json.errors.map((e: { code: string; field: string }) => [e.code, e.field]),
      [
        ['unknown_field', 'colour'],
        ['invalid_body', 'description'],
        ['connection_not_found', 'connection_name'],
        ['param_undeclared', 'parameters'],
      ],
    );
    assert.equal(bad.json.errors[1].message, 'description is required');
    assert.deepEqual(bad.json.errors[3].parameters, {
      id: 'is declared but not used in the SQL',
      aid: 'is used in the SQL but not declared in "parameters" (did you mean the declared \'id\'?)',
    });
    const typo = await post('/api/v1/queries/validate', { description: 'd', connection_name: 'my', sql: 'SELEC 1' });
    assert.deepEqual(
      typo.json.errors.map((e: { code: string }) => e.code),
      ['invalid_sql'],
    );
    assert.match(typo.json.errors[0].detail, DIALECTS[1].syntaxError);
    // a body naming an existing query is read as its next version, on the connection it keeps
    const next = await post('/api/v1/queries/validate', { name: 'account', description: 'v2', sql: "SELECT $$it's$$ AS a" });
    assert.equal(next.json.connection_name, 'pg');
    assert.equal(next.json.valid, true, next.text);
    assert.equal((await s.call('GET', '/api/v1/queries/nothing_saved')).status, 404, 'validate saves nothing');
    assert.equal((await post('/api/v1/queries/validate', '[1]')).json.code, 'invalid_body');
  });
});

test('an unknown QUERYAPIGATE_* variable is one warning line on stderr naming the closest setting; the server still starts', async () => {
  const home = mkdtempSync(join(tmpdir(), 'qag-vars-'));
  const p = startProcess({
    QUERYAPIGATE_HOME: home,
    QUERYAPIGATE_PORT: '0',
    QUERYAPIGATE_API_KEY: ADMIN_KEY,
    QUERYAPIGATE_WORKER: '0', // QUERYAPIGATE_WORKERS misspelt
    QUERYAPIGATE_HISTROY_LIMIT: 'secret-looking-value',
    QUERYAPIGATE_ZZZZ_NOTHING_LIKE_IT: '1',
  });
  let stderr = '';
  p.child.stderr.on('data', (d) => (stderr += d));
  try {
    const url = await p.listening;
    assert.equal((await request(url, 'GET', '/health')).status, 200);
    const lines = stderr.split('\n').filter((l) => l.startsWith('warning:'));
    assert.deepEqual(lines, [
      'warning: QUERYAPIGATE_HISTROY_LIMIT is not a QueryAPIGate setting and is ignored; did you mean QUERYAPIGATE_HISTORY_LIMIT?',
      'warning: QUERYAPIGATE_WORKER is not a QueryAPIGate setting and is ignored; did you mean QUERYAPIGATE_WORKERS?',
      'warning: QUERYAPIGATE_ZZZZ_NOTHING_LIKE_IT is not a QueryAPIGate setting and is ignored',
    ]);
    assert.doesNotMatch(stderr, /secret-looking-value/, 'a value is never shown');
  } finally {
    p.child.kill('SIGTERM');
    await p.exited;
    rmSync(home, { recursive: true, force: true });
  }
});

test('body problems are told in words a user reads, field first, every one at once', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  try {
    const cases: Array<[string, string, unknown, string, Record<string, string>]> = [
      ['POST', '/api/v1/queries', { name: 'q', sql: 'SELECT 1' }, 'description is required', { description: 'is required' }],
      ['POST', '/api/v1/queries', { name: 5, description: 'd', sql: 'SELECT 1' }, 'name must be text', { name: 'must be text' }],
      [
        'POST',
        '/api/v1/queries',
        { description: null, sql: '', tags: ['a', 2], cache_ttl: -1 },
        'name is required; description must be text; tags[1] must be text; sql is required; cache_ttl must be at least 0',
        { name: 'is required', description: 'must be text', sql: 'is required', 'tags[1]': 'must be text', cache_ttl: 'must be at least 0' },
      ],
      [
        'POST',
        '/api/v1/api-keys',
        { name: 'k', allow_writes: 'yes', mask: [{ column: '', action: 'blur' }] },
        'allow_writes must be true or false; mask[0].column must not be empty; mask[0].action must be hash, mask, null or drop',
        { allow_writes: 'must be true or false', 'mask[0].column': 'must not be empty', 'mask[0].action': 'must be hash, mask, null or drop' },
      ],
      ['POST', '/api/v1/connections', { name: 'c' }, 'db is required', { db: 'is required' }],
      ['POST', '/api/v1/queries/q/publish', { version: 1.5 }, 'version must be an integer', { version: 'must be an integer' }],
    ];
    for (const [method, path, body, error, errors] of cases) {
      const r = await s.call(method, path, { body });
      assert.equal(r.status, 400, `${path} ${r.text}`);
      assert.equal(r.json.code, 'invalid_body');
      assert.equal(r.json.error, error);
      assert.deepEqual(r.json.errors, errors);
      assert.doesNotMatch(r.text, /Invalid (key|type)|Expected|received/, "none of valibot's own wording");
    }
  } finally {
    await s.stop();
  }
});
