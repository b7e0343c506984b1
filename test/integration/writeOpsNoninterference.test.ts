// Noninterference for a key with allowed_write_ops: whatever such a key is served may change the database only as its
// verbs allow. Each statement goes through the gateway as the key, as its ad-hoc SQL and as a saved query, on a real
// PostgreSQL and MariaDB, and what the tables and the sequence hold after it is compared with what they held before:
//   - a key that may not delete or update leaves every row it found (it may add rows);
//   - a key that may not insert or update adds no row (it may remove rows);
//   - a key that may not insert ends with no more rows in a table, one that may not delete with no fewer;
//   - no key limited to some verbs moves the sequence (nextval and setval change state no verb names);
//   - a statement not served (any status but 200) changed nothing at all.
// An UPDATE that rewrites a row and a DELETE followed by an INSERT of the changed row look the same from outside, so
// what is compared is what the rows hold, not how they came to hold it. Statements each key must be served are in the
// corpus, so refusing everything would not pass, and the probes, run by the administrator, must change the tables in a
// way at least one of the keys may not, or they prove nothing. SQLite connections are read-only: no writes to judge.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import { scratchDatabase, startTestServer, TEST_RUNS as RUNS, TEST_SEED as SEED, type TestServer } from '../helpers.js';

type Verb = 'insert' | 'update' | 'delete';
type Way = 'adhoc' | 'saved';
const WAYS: Way[] = ['adhoc', 'saved'];
const VERB_SETS: Verb[][] = [['insert'], ['update'], ['delete'], ['insert', 'update'], ['update', 'delete']];

/** Statements a key with the verb is served, on both engines. */
const SERVED: Record<Verb, string> = {
  insert: "INSERT INTO customers (id, name) VALUES (50, 'x')",
  update: "UPDATE customers SET name = 'x' WHERE id = 1",
  delete: 'DELETE FROM customers WHERE id = 3',
};

const TABLES = `CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40));
  CREATE TABLE contacts (id INT PRIMARY KEY, email VARCHAR(40));`;
const FILL = `DELETE FROM customers; INSERT INTO customers VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
  DELETE FROM contacts; INSERT INTO contacts VALUES (1, 'ann@example.com'), (2, 'zed@x.io');`;

/** Each changes the tables or the sequence beyond some key's verbs when run unguarded. */
const PROBES: Record<'postgres' | 'mysql', string[]> = {
  postgres: [
    "INSERT INTO customers (id, name) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET name = 'x'",
    "WITH d AS (DELETE FROM contacts RETURNING id) INSERT INTO customers (id, name) SELECT id + 100, 'x' FROM d",
    "WITH u AS (UPDATE contacts SET email = 'x' RETURNING id) DELETE FROM customers WHERE id IN (SELECT id FROM u)",
    "WITH i AS (INSERT INTO contacts VALUES (7, 'x') RETURNING id) UPDATE customers SET name = 'x' WHERE id = 1",
    "UPDATE customers SET name = 'x' WHERE id = purge_contacts()",
    "INSERT INTO customers (id, name) VALUES (60, 'x'), (rename_contact() + 60, 'y')",
    'DELETE FROM customers WHERE id = add_contact()',
    'SELECT purge_contacts()',
    "UPDATE customers SET name = 'x' WHERE id = 1 + 0 * nextval('ids')",
    "UPDATE customers SET name = setval('ids', 500)::text WHERE id = 1",
    'MERGE INTO customers c USING contacts k ON c.id = k.id WHEN MATCHED THEN DELETE',
    'MERGE INTO customers c USING contacts k ON c.id = k.id WHEN MATCHED THEN UPDATE SET name = k.email',
    'EXPLAIN ANALYZE DELETE FROM customers',
    'UPDATE customers SET id = id + 10',
    'TRUNCATE contacts',
    'CALL wipe_contacts()',
    "INSERT INTO customers (id, name) VALUES (nextval('ids'), 'x')",
    // Run by the administrator, whose SELECTs run read-write, these write; a key limited to some verbs runs its read-only.
    "SELECT nextval('ids')",
    "SELECT setval('ids', 500)",
    'SELECT rename_contact() AS r',
    'SELECT name FROM customers WHERE id = add_contact()',
    'WITH x AS (SELECT purge_contacts() AS v) SELECT v FROM x',
    "VALUES (nextval('ids'))",
    // What the statement does not show: a view's functions (an operator's: below).
    'SELECT x FROM purging',
    'SELECT * FROM renaming',
    "INSERT INTO customers (id, name) SELECT x + 80, 'v' FROM purging",
    'UPDATE customers SET name = (SELECT x::text FROM renaming) WHERE id = 2',
  ],
  mysql: [
    "INSERT INTO customers (id, name) VALUES (1, 'x') ON DUPLICATE KEY UPDATE name = 'x'",
    "REPLACE INTO customers (id, name) VALUES (1, 'x')",
    "UPDATE customers c JOIN contacts k ON c.id = k.id SET k.email = 'x'",
    'DELETE c, k FROM customers c JOIN contacts k ON c.id = k.id',
    "UPDATE customers SET name = 'x' WHERE id = purge_contacts()",
    "INSERT INTO customers (id, name) VALUES (60, 'x'), (rename_contact() + 60, 'y')",
    'DELETE FROM customers WHERE id = add_contact()',
    'DO purge_contacts()',
    "UPDATE customers SET name = 'x' WHERE id = 1 + 0 * (NEXT VALUE FOR ids)",
    'DELETE FROM customers WHERE id = 40 + 0 * NEXTVAL(ids)',
    'UPDATE customers SET name = SETVAL(ids, 500) WHERE id = 1',
    'INSERT INTO customers SELECT id + 200, email FROM contacts ON DUPLICATE KEY UPDATE name = VALUES(name)',
    'UPDATE customers SET id = id + 10',
    'TRUNCATE contacts',
    'CALL wipe_contacts()',
    "INSERT INTO customers (id, name) VALUES (NEXT VALUE FOR ids, 'x')",
    'SELECT purge_contacts()',
    'SELECT NEXT VALUE FOR ids',
    'SELECT NEXTVAL(ids) AS n',
    'SELECT SETVAL(ids, 500) AS n',
    'SELECT rename_contact() AS r',
    'SELECT name FROM customers WHERE id = add_contact()',
    'VALUES (NEXTVAL(ids))',
    'SELECT x FROM purging',
    'SELECT * FROM renaming',
    "INSERT INTO customers (id, name) SELECT x + 80, 'v' FROM purging",
    'UPDATE customers SET name = (SELECT x FROM renaming) WHERE id = 2',
  ],
};

/** Writes put together from heads of each verb and values that read, write through a function, or take a sequence's next value. */
function generator(dialect: 'postgres' | 'mysql'): fc.Arbitrary<string> {
  const pg = dialect === 'postgres';
  const next = pg ? "nextval('ids')" : 'NEXT VALUE FOR ids';
  const quoted = pg ? '"purge_contacts"()' : '`purge_contacts`()';
  const qualified = pg ? 'public.rename_contact()' : '{db}.rename_contact()';
  const value = fc.constantFrom(
    '1',
    '2',
    'abs(-2)',
    'purge_contacts()',
    'rename_contact()',
    'add_contact()',
    next,
    '(SELECT max(id) FROM contacts)',
    quoted,
    qualified,
    'abs(add_contact())',
    'CASE WHEN purge_contacts() = 1 THEN 1 END',
    '(SELECT rename_contact())',
    'coalesce(NULL, add_contact())',
  );
  const upsert =
    dialect === 'postgres'
      ? (v: string) => `ON CONFLICT (id) DO UPDATE SET name = 'g${v.length}'`
      : (v: string) => `ON DUPLICATE KEY UPDATE name = 'g${v.length}'`;
  const heads = [
    (v: string) => `INSERT INTO customers (id, name) VALUES (80 + ${v}, 'g')`,
    (v: string) => `INSERT INTO customers (id, name) VALUES (${v}, 'g') ${upsert(v)}`,
    (v: string) => `INSERT INTO customers (id, name) SELECT id + 90, email FROM contacts WHERE id = ${v}`,
    (v: string) => `UPDATE customers SET name = 'g' WHERE id = ${v}`,
    (v: string) => `UPDATE contacts SET email = 'g' WHERE id = ${v}`,
    (v: string) => `DELETE FROM customers WHERE id = ${v}`,
    (v: string) => `DELETE FROM contacts WHERE id = ${v}`,
    (v: string) => `SELECT ${v} AS v`,
    (v: string) => `UPDATE customers SET name = 'g' WHERE id = 1 RETURNING ${v}`,
    (v: string) => `DELETE FROM customers WHERE id = 3 RETURNING id, ${v}`,
    (v: string) => `INSERT INTO customers (id, name) VALUES (85, 'g') RETURNING ${v}`,
  ];
  const own =
    dialect === 'postgres'
      ? [
          (v: string) => `WITH w AS (DELETE FROM contacts WHERE id = ${v} RETURNING id) SELECT count(*) FROM w`,
          (v: string) => `WITH w AS (UPDATE contacts SET email = 'g' WHERE id = ${v} RETURNING id) INSERT INTO customers (id, name) SELECT id + 70, 'g' FROM w`,
          (v: string) => `WITH w AS (INSERT INTO contacts VALUES (${v} + 20, 'g') RETURNING id) DELETE FROM customers WHERE id IN (SELECT id - 20 FROM w)`,
          (v: string) => `MERGE INTO customers c USING contacts k ON c.id = k.id AND k.id = ${v} WHEN MATCHED THEN UPDATE SET name = 'g'`,
          (v: string) => `SELECT * FROM customers, LATERAL (SELECT ${v} AS v) x`,
          (v: string) => `VALUES (${v})`,
          (v: string) => `UPDATE customers SET name = 'g' FROM (SELECT ${v} AS v) x WHERE id = x.v`,
        ]
      : [
          (v: string) => `UPDATE customers c JOIN contacts k ON c.id = k.id SET c.name = 'g' WHERE k.id = ${v}`,
          (v: string) => `DELETE k FROM customers c JOIN contacts k ON c.id = k.id WHERE c.id = ${v}`,
          (v: string) => `REPLACE INTO customers (id, name) VALUES (${v}, 'g')`,
          (v: string) => `INSERT IGNORE INTO customers (id, name) VALUES (${v}, 'g')`,
          (v: string) => `UPDATE customers SET name = 'g' WHERE id = 2 ORDER BY ${v} LIMIT 1`,
          (v: string) => `INSERT INTO customers (id, name) SELECT ${v} + 300, 'g' FROM DUAL`,
          (v: string) => `UPDATE customers c, (SELECT ${v} AS v) x SET c.name = 'g' WHERE c.id = x.v`,
        ];
  return fc.record({ head: fc.constantFrom(...heads, ...own), v: value }).map(({ head, v }) => head(v));
}

/** What the tables hold, each as its rows' JSON, and the sequence's state. */
interface State {
  tables: Record<'customers' | 'contacts', string[]>;
  sequence: string;
}

/** Why `after` is not a change a key with `verbs` may make from `before`; null when it is. */
function overstep(verbs: Verb[], before: State, after: State): string | null {
  if (after.sequence !== before.sequence) return `the sequence moved (${before.sequence} -> ${after.sequence})`;
  for (const table of ['customers', 'contacts'] as const) {
    const [was, is] = [before.tables[table], after.tables[table]];
    const kept = new Map<string, number>();
    for (const row of is) kept.set(row, (kept.get(row) ?? 0) + 1);
    let removed = 0;
    for (const row of was) {
      const n = kept.get(row) ?? 0;
      if (n > 0) kept.set(row, n - 1);
      else removed++;
    }
    const added = is.length - (was.length - removed);
    const may = (v: Verb) => verbs.includes(v);
    if (removed > 0 && !may('update') && !may('delete')) return `${table}: ${removed} row(s) removed or changed`;
    if (added > 0 && !may('update') && !may('insert')) return `${table}: ${added} row(s) added or changed`;
    if (is.length > was.length && !may('insert')) return `${table}: ${is.length - was.length} more row(s)`;
    if (is.length < was.length && !may('delete')) return `${table}: ${was.length - is.length} fewer row(s)`;
  }
  return null;
}

interface Engine {
  dialect: 'postgres' | 'mysql';
  connection: string;
  state(): Promise<State>;
  /** The tables and the sequence as FILL and the start leave them. */
  reset(): Promise<void>;
}

describe(`a key with allowed_write_ops changes the database only as its verbs allow (seed ${SEED})`, () => {
  let s: TestServer;
  let pg: Awaited<ReturnType<typeof scratchDatabase>>;
  let my: mysql.Connection;
  const myDb = `qag_woni_${process.pid}`;
  const keys = new Map<Verb[], string>();

  before(async () => {
    pg = await scratchDatabase('qag_woni');
    await pg.sql.unsafe(`${TABLES} CREATE SEQUENCE ids START 100;
      CREATE FUNCTION purge_contacts() RETURNS int LANGUAGE plpgsql AS $$ BEGIN DELETE FROM contacts WHERE id = 2; RETURN 1; END $$;
      CREATE FUNCTION rename_contact() RETURNS int LANGUAGE plpgsql AS $$ BEGIN UPDATE contacts SET email = 'changed' WHERE id = 1; RETURN 1; END $$;
      CREATE FUNCTION add_contact() RETURNS int LANGUAGE plpgsql AS $$ BEGIN INSERT INTO contacts VALUES (9, 'new') ON CONFLICT DO NOTHING; RETURN 1; END $$;
      CREATE PROCEDURE wipe_contacts() LANGUAGE sql AS $$ DELETE FROM contacts $$;
      CREATE VIEW purging AS SELECT purge_contacts() AS x;
      CREATE VIEW renaming AS SELECT rename_contact() AS x;`);
    my = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true, rowsAsArray: true });
    await my.query(`CREATE DATABASE ${myDb}; USE ${myDb}; ${TABLES} CREATE SEQUENCE ids START WITH 100;
      CREATE FUNCTION purge_contacts() RETURNS INT MODIFIES SQL DATA BEGIN DELETE FROM contacts WHERE id = 2; RETURN 1; END;
      CREATE FUNCTION rename_contact() RETURNS INT MODIFIES SQL DATA BEGIN UPDATE contacts SET email = 'changed' WHERE id = 1; RETURN 1; END;
      CREATE FUNCTION add_contact() RETURNS INT MODIFIES SQL DATA BEGIN INSERT IGNORE INTO contacts VALUES (9, 'new'); RETURN 1; END;
      CREATE PROCEDURE wipe_contacts() MODIFIES SQL DATA DELETE FROM contacts;
      CREATE VIEW purging AS SELECT purge_contacts() AS x;
      CREATE VIEW renaming AS SELECT rename_contact() AS x;`);
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1' });
    for (const body of [
      { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' },
      { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: myDb, user: 'root' },
    ]) {
      const r = await s.call('POST', '/api/v1/connections', { body });
      assert.ok(r.status < 300, r.text);
    }
    for (const verbs of VERB_SETS) {
      const r = await s.call('POST', '/api/v1/api-keys', {
        body: { name: `writes-${verbs.join('-')}`, connections: ['pg', 'my'], queries: '*', allow_writes: true, allowed_write_ops: verbs },
      });
      assert.equal(r.status, 201, r.text);
      keys.set(verbs, r.json.secret);
    }
  });
  after(async () => {
    await s?.stop();
    await pg?.drop();
    await my?.query(`DROP DATABASE IF EXISTS ${myDb}`);
    await my?.end();
  });

  const rowsJson = (rows: unknown[][]) => rows.map((r) => JSON.stringify(r));
  const engines: Record<string, () => Engine> = {
    PostgreSQL: () => ({
      dialect: 'postgres',
      connection: 'pg',
      state: async () => ({
        tables: {
          customers: rowsJson(await pg.sql`SELECT id, name FROM customers ORDER BY id, name`.values()),
          contacts: rowsJson(await pg.sql`SELECT id, email FROM contacts ORDER BY id, email`.values()),
        },
        sequence: JSON.stringify(await pg.sql`SELECT last_value, is_called FROM ids`.values()),
      }),
      reset: async () => void (await pg.sql.unsafe(`${FILL} SELECT setval('ids', 100, false);`)),
    }),
    MariaDB: () => ({
      dialect: 'mysql',
      connection: 'my',
      state: async () => {
        const [[customers], [contacts], [sequence]] = await Promise.all([
          my.query(`SELECT id, name FROM ${myDb}.customers ORDER BY id, name`),
          my.query(`SELECT id, email FROM ${myDb}.contacts ORDER BY id, email`),
          my.query(`SELECT next_not_cached_value FROM ${myDb}.ids`),
        ]);
        return { tables: { customers: rowsJson(customers as unknown[][]), contacts: rowsJson(contacts as unknown[][]) }, sequence: JSON.stringify(sequence) };
      },
      reset: async () => void (await my.query(`USE ${myDb}; ${FILL} ALTER SEQUENCE ids RESTART WITH 100;`)),
    }),
  };

  for (const [name, make] of Object.entries(engines)) {
    test(name, async () => {
      const engine = make();
      await engine.reset();
      const start = await engine.state();
      const probes = PROBES[engine.dialect];
      const generated = fc
        .sample(generator(engine.dialect), { seed: SEED, numRuns: Math.max(1, Math.round(300 * RUNS)) })
        .map((sql) => sql.replaceAll('{db}', myDb));
      const corpus = [...new Set([...Object.values(SERVED), ...probes, ...generated])];
      // Each statement both ways a key reaches it: as its own ad-hoc SQL, and as a saved query of the administrator's
      // (one the parsers cannot read is then judged by the lexical guard alone, not refused outright).
      const saved = new Map<string, string>();
      for (const [i, sql] of corpus.entries()) {
        const queryName = `w_${engine.connection}_${i}`;
        const r = await s.call('POST', '/api/v1/queries', {
          body: { name: queryName, connection_name: engine.connection, description: 'w', publish: true, sql },
        });
        if (r.status < 300) saved.set(sql, queryName);
      }
      assert.ok(saved.size >= corpus.length * 0.9, `${engine.dialect}: only ${saved.size} of ${corpus.length} statements could be saved`);
      /** Runs `sql` as `key` (the administrator when undefined): its status and the state after it, then puts the start back. */
      const run = async (way: Way, sql: string, key?: string) => {
        const r =
          way === 'adhoc'
            ? await s.call('POST', '/execute_sql', { body: { connection_name: engine.connection, sql }, key })
            : await s.call('POST', `/q/${saved.get(sql)}`, { key });
        const state = await engine.state();
        if (JSON.stringify(state) !== JSON.stringify(start)) await engine.reset();
        return { status: r.status, text: r.text, state };
      };

      let meaningful = 0;
      for (const sql of probes) {
        const { state } = await run('saved', sql);
        if (VERB_SETS.some((verbs) => overstep(verbs, start, state) !== null)) meaningful++;
      }
      assert.ok(meaningful >= Math.floor(probes.length * 0.85), `${engine.dialect}: only ${meaningful} of ${probes.length} probes overstep some key's verbs`);

      let servedWrites = 0;
      for (const verbs of VERB_SETS) {
        const key = keys.get(verbs);
        for (const verb of verbs) {
          for (const way of WAYS) {
            const r = await run(way, SERVED[verb], key);
            assert.equal(r.status, 200, `${engine.dialect} ${verbs} ${way}: should be served: ${SERVED[verb]}: ${r.text}`);
          }
        }
        for (const sql of corpus) {
          for (const way of WAYS) {
            if (way === 'saved' && !saved.has(sql)) continue;
            const r = await run(way, sql, key);
            if (r.status !== 200) {
              assert.deepEqual(r.state, start, `${engine.dialect} ${verbs} ${way}: not served (${r.status}), yet it changed the database: ${sql}`);
              continue;
            }
            if (JSON.stringify(r.state) !== JSON.stringify(start)) servedWrites++;
            const why = overstep(verbs, start, r.state);
            assert.equal(why, null, `${engine.dialect} ${verbs} ${way}: served, and ${why}: ${sql}`);
          }
        }
      }
      assert.ok(servedWrites >= 40, `${engine.dialect}: only ${servedWrites} served statements changed anything`);
    });
  }

  test('a MERGE the parsers cannot read is served to a key allowed its verbs, unless it names a view', async () => {
    await engines.PostgreSQL().reset();
    const k = await s.call('POST', '/api/v1/api-keys', {
      body: { name: 'merges', connections: ['pg'], queries: '*', allow_writes: true, allowed_write_ops: ['merge', 'insert', 'update'] },
    });
    assert.equal(k.status, 201, k.text);
    const call = async (sql: string) => {
      const name = `merge_${savedMerges++}`;
      const saved = await s.call('POST', '/api/v1/queries', { body: { name, connection_name: 'pg', description: 'm', publish: true, sql } });
      assert.equal(saved.status, 201, saved.text);
      return s.call('POST', `/q/${name}`, { key: k.json.secret, body: {} });
    };
    const plain = await call('MERGE INTO customers c USING contacts k ON c.id = k.id + 10 WHEN NOT MATCHED THEN INSERT VALUES (k.id + 10, k.email)');
    assert.equal(plain.status, 200, plain.text);
    const viewed = await call('MERGE INTO customers c USING (SELECT x AS id FROM purging) k ON c.id = k.id WHEN MATCHED THEN UPDATE SET name = 2');
    assert.equal(viewed.status, 403, viewed.text);
    assert.equal(viewed.json.code, 'write_op_not_allowed');
    assert.match(viewed.json.error, /view purging/);
    const ids = async (rows: Promise<unknown[][]>) => JSON.stringify(await rows);
    assert.equal(await ids(pg.sql`SELECT id FROM contacts ORDER BY id`.values()), '[[1],[2]]', "the view's DELETE did not run");
    assert.equal(await ids(pg.sql`SELECT id FROM customers WHERE id > 10 ORDER BY id`.values()), '[[11],[12]]', 'the plain MERGE inserted');
  });
});
let savedMerges = 0;

// An operator runs its function wherever the values' types fit it, with no call naming it: on a database that defines
// one whose function the catalog cannot vouch for, a key limited to some verbs is refused every write (as keys with mask
// rules or allowed_tables are every statement), and its SELECTs meet the read-only session.
describe('a key with allowed_write_ops, on a database with an operator whose function deletes', () => {
  let s: TestServer;
  let pg: Awaited<ReturnType<typeof scratchDatabase>>;
  let inserter = '';
  before(async () => {
    pg = await scratchDatabase('qag_woop');
    await pg.sql.unsafe(`${TABLES} ${FILL}
      CREATE FUNCTION purge_plus(a int, b int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN DELETE FROM contacts WHERE id = 2; RETURN a + b; END $$;
      CREATE OPERATOR ### (LEFTARG = int, RIGHTARG = int, FUNCTION = purge_plus);`);
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1' });
    const c = await s.call('POST', '/api/v1/connections', {
      body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' },
    });
    assert.equal(c.status, 201, c.text);
    const k = await s.call('POST', '/api/v1/api-keys', {
      body: { name: 'inserts', connections: ['pg'], queries: '*', allow_writes: true, allowed_write_ops: ['insert'] },
    });
    inserter = k.json.secret;
  });
  after(async () => {
    await s?.stop();
    await pg?.drop();
  });

  test('its writes are refused, its SELECTs run read-only, and the administrator shows the operator deletes', async () => {
    const contacts = async () => (await pg.sql`SELECT id FROM contacts ORDER BY id`.values()).map((r) => r[0]);
    // Ad hoc, the statement with the operator is refused sooner: the parsers cannot read it (a scoped key's own text).
    for (const [sql, adhocCode] of [
      ["INSERT INTO customers (id, name) VALUES (70 ### 0, 'x')", 'table_check_failed'],
      ["INSERT INTO customers (id, name) VALUES (71, 'y')", 'write_op_not_allowed'],
    ]) {
      const adhoc = await s.call('POST', '/execute_sql', { key: inserter, body: { connection_name: 'pg', sql } });
      assert.equal(adhoc.status, 403, `${sql}: ${adhoc.text}`);
      assert.equal(adhoc.json.code, adhocCode, `${sql}: ${adhoc.text}`);
      const saved = await saveAndCall(s, sql, inserter);
      assert.equal(saved.status, 403, `${sql}: ${saved.text}`);
      assert.equal(saved.json.code, 'write_op_not_allowed', `${sql}: ${saved.text}`);
      assert.match(saved.json.error, /operator ###/);
    }
    const read = await saveAndCall(s, 'SELECT 1 ### 2 AS n', inserter);
    assert.equal(read.status, 403, read.text);
    assert.equal(read.json.code, 'read_only', read.text);
    assert.deepEqual(await contacts(), [1, 2], 'no contact deleted');
    const [{ n }] = await pg.sql`SELECT count(*)::int AS n FROM customers`;
    assert.equal(n, 3, 'no customer added');
    const admin = await saveAndCall(s, "INSERT INTO customers (id, name) VALUES (70 ### 0, 'x')", undefined);
    assert.equal(admin.status, 200, admin.text);
    assert.deepEqual(await contacts(), [1], "the administrator's insert ran the operator's DELETE");
  });
});

let savedCount = 0;
/** Saves `sql` as a published query on 'pg' and calls it with `key` (undefined: the administrator). */
async function saveAndCall(s: TestServer, sql: string, key: string | undefined) {
  const name = `op_${savedCount++}`;
  const saved = await s.call('POST', '/api/v1/queries', { body: { name, connection_name: 'pg', description: 'op', publish: true, sql } });
  assert.equal(saved.status, 201, saved.text);
  return s.call('POST', `/q/${name}`, { key, body: {} });
}
