// Tests for the govern stage: a caller's grants held against a planned statement (read-only, the
// server's write ceiling, write verbs, tables), and the mask plan for its output traced over a real
// SQLite connection's schema, cached per plan, rules and schema, and refused when it can't be traced.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { LRUCache } from 'lru-cache';
import { ADMIN, OPEN, type Caller } from '../../src/auth/keys.js';
import { governCall, mayWrite, type Governance, type Governed } from '../../src/call/govern.js';
import { planCall } from '../../src/call/plan.js';
import { SchemaCache } from '../../src/call/schemaCache.js';
import { GatewayError, statusOf } from '../../src/contract/errors.js';
import { hashValue } from '../../src/governance/masking.js';
import { openSource } from '../../src/sources/index.js';
import type { Dialect, Source } from '../../src/sources/types.js';
import type { ConnectionRow, KeyRow, VersionRow } from '../../src/store/types.js';
import mysql from 'mysql2/promise';
import { keyRow } from '../fixtures.js';
import { scratchDatabase } from '../helpers.js';

const KEY: KeyRow = keyRow({ queries: ['q'] });

function key(fields: Partial<KeyRow>): Caller {
  return { kind: 'key', name: 'k', key: { ...KEY, ...fields } };
}

let planned = 0;
function version(sql: string): VersionRow {
  return {
    version: 1,
    uuid: `uuid-${++planned}`,
    was_published: true,
    created_at: '',
    last_modified_at: '',
    sql,
    connection_name: 'lite',
    parameters: {},
    description: '',
    author: null,
    tags: [],
    cache_ttl: null,
  };
}

const SECRET = Buffer.from('a mask secret of some length', 'utf8');

/** A Governance as an executor builds it, counting how often the mask secret is asked for. */
function governance(allowWrites: boolean): Governance & { secretReads: number } {
  const g = {
    allowWrites,
    schemas: new SchemaCache(),
    traces: new LRUCache<string, Governed>({ max: 100 }),
    secretReads: 0,
    async maskSecret() {
      g.secretReads++;
      return SECRET;
    },
  };
  return g;
}

// Real connections with the tables the statements name: customers (id, name), orders (id, customer_id, total).
const TABLES_SQL = 'CREATE TABLE customers (id int PRIMARY KEY, name text); CREATE TABLE orders (id int PRIMARY KEY, customer_id int, total int)';
const sources = new Map<Dialect, { conn: ConnectionRow; source: Source }>();
let dropPg: (() => Promise<void>) | null = null;
let dropMy: (() => Promise<void>) | null = null;
let liteDir = '';

const NO_CONNECTION: ConnectionRow = {
  name: 'pg',
  db: 'postgres',
  active: true,
  host: null,
  port: null,
  database: null,
  user: null,
  password: null,
  options: null,
  example: false,
  created_at: '',
  updated_at: '',
};

before(async () => {
  const pg = await scratchDatabase('qag_govern');
  await pg.sql.unsafe(TABLES_SQL);
  dropPg = pg.drop;
  const pgConn: ConnectionRow = { ...NO_CONNECTION, name: 'pg', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' };
  sources.set('postgres', { conn: pgConn, source: openSource(pgConn, { poolSize: 1, home: tmpdir() }) });
  const db = `qag_govern_${process.pid}`;
  const admin = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root', multipleStatements: true });
  await admin.query(`DROP DATABASE IF EXISTS ${db}; CREATE DATABASE ${db}; USE ${db}; ${TABLES_SQL.replaceAll(' text', ' varchar(50)')}`);
  dropMy = async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${db}`);
    await admin.end();
  };
  const myConn: ConnectionRow = { ...NO_CONNECTION, name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: db, user: 'root' };
  sources.set('mysql', { conn: myConn, source: openSource(myConn, { poolSize: 1, home: tmpdir() }) });
  liteDir = mkdtempSync(join(tmpdir(), 'qag-govern-decide-'));
  const lite = new Database(join(liteDir, 'shop.db'));
  lite.exec(TABLES_SQL);
  lite.close();
  const liteConn: ConnectionRow = { ...NO_CONNECTION, name: 'lite', db: 'sqlite', database: 'shop.db' };
  sources.set('sqlite', { conn: liteConn, source: openSource(liteConn, { poolSize: 1, home: liteDir }) });
});

after(async () => {
  for (const { source } of sources.values()) await source.close();
  await dropPg?.();
  await dropMy?.();
  rmSync(liteDir, { recursive: true, force: true });
});

/** 'allowed' or the refusal's code. */
async function decide(caller: Caller, sql: string, dialect: Dialect, allowWrites: boolean, queryName = 'q'): Promise<string> {
  const plan = planCall('p', version(sql), dialect);
  const { conn, source } = sources.get(dialect)!;
  try {
    const governed = await governCall(governance(allowWrites), plan, caller, queryName, conn, source);
    assert.equal(governed.masker, null, 'no mask rules, no masker');
    return 'allowed';
  } catch (e) {
    assert.ok(e instanceof GatewayError, String(e));
    assert.equal(statusOf(e.code), e.code === 'multiple_statements' ? 400 : 403);
    return e.code;
  }
}

const UPDATE = 'UPDATE customers SET name = :n WHERE id = :id';
const INSERT = 'INSERT INTO orders (customer_id, total) VALUES (:c, :t)';
const WRITE_CTE = 'WITH gone AS (DELETE FROM orders WHERE id = 1 RETURNING id) SELECT id FROM gone';
const INSERT_AND_DELETE = 'WITH gone AS (DELETE FROM orders WHERE id = 1 RETURNING customer_id) INSERT INTO orders (customer_id) SELECT customer_id FROM gone';
const SELECT_INTO = 'SELECT * INTO backup FROM customers';
const READ = 'SELECT id, name FROM customers WHERE id = :id';
const JOIN = 'SELECT c.name, o.total FROM customers c JOIN orders o ON o.customer_id = c.id';

test('governCall: (caller grants, statement, dialect, server ceiling) -> allowed or refusal', async (t) => {
  const reader = key({});
  const writer = key({ allow_writes: true });
  // [label, caller, statement, dialect, QUERYAPIGATE_ALLOW_WRITES, want]
  const cases: Array<[string, Caller, string, Dialect, boolean, string]> = [
    ['a read by a read-only key', reader, READ, 'postgres', true, 'allowed'],
    ['a read with the ceiling down', reader, READ, 'mysql', false, 'allowed'],
    // a key without allow_writes never writes, however the write is dressed up
    ['an UPDATE by a read-only key', reader, UPDATE, 'postgres', true, 'read_only'],
    ['an UPDATE by a read-only key (mysql)', reader, UPDATE, 'mysql', true, 'read_only'],
    ['an UPDATE by a read-only key (sqlite)', reader, UPDATE, 'sqlite', true, 'read_only'],
    ['a write CTE by a read-only key', reader, WRITE_CTE, 'postgres', true, 'read_only'],
    ['SELECT INTO by a read-only key', reader, SELECT_INTO, 'postgres', true, 'read_only'],
    ['a session-changing function by a read-only key', reader, "SELECT set_config('search_path', 'x', false)", 'postgres', true, 'read_only'],
    ['a queries "*" grant does not carry writes', key({ queries: '*' }), UPDATE, 'postgres', true, 'read_only'],
    // writes: the key's allow_writes or a per-query grant, under the server's ceiling
    ['an UPDATE by a writer', writer, UPDATE, 'postgres', true, 'allowed'],
    ['a write CTE by a writer', writer, WRITE_CTE, 'postgres', true, 'allowed'],
    ['a per-query allow_writes grant', key({ queries: [{ name: 'q', allow_writes: true }] }), UPDATE, 'postgres', true, 'allowed'],
    ['a per-query grant for another query', key({ queries: [{ name: 'other', allow_writes: true }, 'q'] }), UPDATE, 'postgres', true, 'read_only'],
    ['a per-query grant without allow_writes', key({ queries: [{ name: 'q', allow_writes: false }] }), UPDATE, 'postgres', true, 'read_only'],
    // the ceiling holds for everyone, the admin and open mode included
    ['a writer under the ceiling', writer, UPDATE, 'postgres', false, 'read_only'],
    ['a per-query writer under the ceiling', key({ queries: [{ name: 'q', allow_writes: true }] }), INSERT, 'mysql', false, 'read_only'],
    ['the admin under the ceiling', ADMIN, UPDATE, 'postgres', false, 'read_only'],
    ['the admin under the ceiling, SELECT INTO', ADMIN, SELECT_INTO, 'postgres', false, 'read_only'],
    ['open mode under the ceiling', OPEN, INSERT, 'sqlite', false, 'read_only'],
    ['the admin with writes allowed', ADMIN, UPDATE, 'postgres', true, 'allowed'],
    ['open mode with writes allowed', OPEN, INSERT, 'sqlite', true, 'allowed'],
    // allowed_write_ops limits the verbs, hidden ones included
    ['an INSERT within allowed_write_ops', key({ allow_writes: true, allowed_write_ops: ['INSERT'] }), INSERT, 'postgres', true, 'allowed'],
    ['an UPDATE outside allowed_write_ops', key({ allow_writes: true, allowed_write_ops: ['insert'] }), UPDATE, 'postgres', true, 'write_op_not_allowed'],
    [
      'a DELETE hidden in a CTE outside allowed_write_ops',
      key({ allow_writes: true, allowed_write_ops: ['insert'] }),
      INSERT_AND_DELETE,
      'postgres',
      true,
      'write_op_not_allowed',
    ],
    ['both verbs allowed', key({ allow_writes: true, allowed_write_ops: ['insert', 'delete'] }), INSERT_AND_DELETE, 'postgres', true, 'allowed'],
    ['allowed_write_ops [] allows no write', key({ allow_writes: true, allowed_write_ops: [] }), INSERT, 'postgres', true, 'write_op_not_allowed'],
    ['allowed_write_ops does not limit reads', key({ allow_writes: true, allowed_write_ops: [] }), READ, 'postgres', true, 'allowed'],
    // read_only is decided first: a key that may not write is told so, not which verbs it may use
    ['allowed_write_ops on a key that may not write', key({ allowed_write_ops: ['update'] }), UPDATE, 'postgres', true, 'read_only'],
    // allowed_tables: every table read or written
    ['a read inside allowed_tables', key({ allowed_tables: ['customers'] }), READ, 'postgres', true, 'allowed'],
    ['allowed_tables with a schema prefix', key({ allowed_tables: ['public.customers'] }), READ, 'postgres', true, 'allowed'],
    ['allowed_tables in another case, folded as PostgreSQL folds an unquoted name', key({ allowed_tables: ['Customers'] }), READ, 'postgres', true, 'allowed'],
    ['allowed_tables quoted in another case: another table', key({ allowed_tables: ['"Customers"'] }), READ, 'postgres', true, 'table_not_allowed'],
    [
      'allowed_tables in another case on MariaDB (lower_case_table_names 0): another table',
      key({ allowed_tables: ['Customers'] }),
      READ,
      'mysql',
      true,
      'table_not_allowed',
    ],
    ['allowed_tables in another schema', key({ allowed_tables: ['private.customers'] }), READ, 'postgres', true, 'table_not_allowed'],
    ['a join reaching outside allowed_tables', key({ allowed_tables: ['customers'] }), JOIN, 'postgres', true, 'table_not_allowed'],
    ['a join reaching outside allowed_tables (mysql)', key({ allowed_tables: ['customers'] }), JOIN, 'mysql', true, 'table_not_allowed'],
    ['a join reaching outside allowed_tables (sqlite)', key({ allowed_tables: ['customers'] }), JOIN, 'sqlite', true, 'table_not_allowed'],
    ['a join inside allowed_tables', key({ allowed_tables: ['customers', 'orders'] }), JOIN, 'sqlite', true, 'allowed'],
    [
      'a subquery reaching outside',
      key({ allowed_tables: ['orders'] }),
      'SELECT id FROM orders WHERE customer_id IN (SELECT id FROM customers)',
      'postgres',
      true,
      'table_not_allowed',
    ],
    ['a write target outside allowed_tables', key({ allow_writes: true, allowed_tables: ['customers'] }), INSERT, 'postgres', true, 'table_not_allowed'],
    ['allowed_tables [] allows no table', key({ allowed_tables: [] }), READ, 'postgres', true, 'table_not_allowed'],
    ['allowed_tables [] still allows no table at all', key({ allowed_tables: [] }), 'SELECT 1 AS one', 'postgres', true, 'allowed'],
    // a statement that cannot be analysed is refused, never guessed
    [
      'an unanalysable statement under allowed_tables',
      key({ allowed_tables: ['customers'] }),
      'SELECT $$x$$ FROM customers',
      'postgres',
      true,
      'table_check_failed',
    ],
    ['[bracketed] names under allowed_tables', key({ allowed_tables: ['customers'] }), 'SELECT [name] FROM [customers]', 'sqlite', true, 'table_check_failed'],
    // without a table list, the same statement is fine
    ['an unanalysable statement without allowed_tables', reader, 'SELECT $$x$$ FROM customers', 'postgres', true, 'allowed'],
    // the admin is never held to a key's lists
    ['the admin and any table', ADMIN, JOIN, 'postgres', false, 'allowed'],
  ];
  for (const [label, caller, sql, dialect, allowWrites, want] of cases) {
    await t.test(`${label}: ${dialect}`, async () => {
      assert.equal(await decide(caller, sql, dialect, allowWrites), want);
    });
  }
});

test('mayWrite: the ceiling, then the caller', async (t) => {
  const cases: Array<[string, Caller, boolean, string, boolean]> = [
    ['admin, ceiling up', ADMIN, true, 'q', true],
    ['admin, ceiling down', ADMIN, false, 'q', false],
    ['open, ceiling up', OPEN, true, 'q', true],
    ['key with allow_writes', key({ allow_writes: true }), true, 'q', true],
    ['key with allow_writes, ceiling down', key({ allow_writes: true }), false, 'q', false],
    ['key without', key({}), true, 'q', false],
    ['per-query grant', key({ queries: [{ name: 'q', allow_writes: true }] }), true, 'q', true],
    ['per-query grant, other query', key({ queries: [{ name: 'q', allow_writes: true }] }), true, 'r', false],
    ['per-query grant, ceiling down', key({ queries: [{ name: 'q', allow_writes: true }] }), false, 'q', false],
    ['a plain name grant', key({ queries: ['q'] }), true, 'q', false],
  ];
  for (const [label, caller, ceiling, name, want] of cases) {
    await t.test(label, () => assert.equal(mayWrite(caller, name, ceiling), want));
  }
});

describe('masking over a real SQLite connection', () => {
  let dir: string;
  let file: string;
  let source: Source;
  let conn: ConnectionRow;
  const ROWS = [
    [1, 'Ada', 'ada@example.com', '555-0101'],
    [2, 'Grace', 'grace@navy.mil', null],
  ];

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'qag-govern-'));
    file = join(dir, 'shop.db');
    const db = new Database(file);
    db.exec(`CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT, phone TEXT);
      CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total REAL);
      CREATE VIEW customer_emails AS SELECT id, email FROM customers;`);
    const insert = db.prepare('INSERT INTO customers VALUES (?, ?, ?, ?)');
    for (const r of ROWS) insert.run(...r);
    db.prepare('INSERT INTO orders VALUES (1, 1, 9.5)').run();
    db.close();
    conn = { ...NO_CONNECTION, name: 'lite', db: 'sqlite', database: 'shop.db', updated_at: '2026-12-01 10:00:00' };
    source = openSource(conn, { poolSize: 1, home: dir });
  });
  after(async () => {
    await source.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Plans `sql` on the connection, governs it for `caller` and runs it, masked as the shape stage does. */
  async function run(g: Governance, sql: string, caller: Caller) {
    const plan = planCall(`plan:${sql}`, { ...version(sql), uuid: sql }, 'sqlite');
    const governed = await governCall(g, plan, caller, 'q', conn, source);
    const result = await source.run(plan.text, [], { timeoutMs: 5000, readOnly: true });
    const out = governed.masker ? governed.masker(result.columns, result.rows) : result;
    return { governed, columns: out.columns, rows: out.rows, plan };
  }

  test('once the schema is read and the trace kept, a call is governed at once (no promise), with the same masks', async () => {
    const g = governance(false);
    const caller = key({ mask: [{ column: 'customers.email', action: 'drop' }] });
    const plan = planCall('plan:at-once', { ...version('SELECT id, email FROM customers'), uuid: 'at-once' }, 'sqlite');
    const first = governCall(g, plan, caller, 'q', conn, source);
    assert.ok(first instanceof Promise, 'the first call reads the schema and traces the masks');
    const traced = await first;
    const again = governCall(g, plan, caller, 'q', conn, source);
    assert.ok(!(again instanceof Promise));
    assert.equal(again, traced);
    assert.deepEqual(again.masked, [{ column: 'email', action: 'drop' }]);
    // A refusal is thrown at once too, not cached.
    assert.throws(
      () => governCall(g, planCall('plan:w', { ...version(UPDATE), uuid: 'w' }, 'sqlite'), caller, 'q', conn, source),
      (e: unknown) => e instanceof GatewayError && e.code === 'read_only',
    );
  });

  test('hash: the column is replaced by its HMAC, the rest shown as is', async () => {
    const g = governance(false);
    const caller = key({ mask: [{ column: 'customers.email', action: 'hash' }] });
    const r = await run(g, 'SELECT id, name, email FROM customers ORDER BY id', caller);
    assert.deepEqual(r.governed.masked, [{ column: 'email', action: 'hash' }]);
    assert.deepEqual(r.columns, ['id', 'name', 'email']);
    assert.deepEqual(r.rows, [
      [1, 'Ada', hashValue('ada@example.com', SECRET)],
      [2, 'Grace', hashValue('grace@navy.mil', SECRET)],
    ]);
    assert.match(String(r.rows[0][2]), /^[0-9a-f]{16}$/);
    assert.notEqual(r.rows[0][2], r.rows[1][2]);
  });

  test('mask, null and drop, traced through aliases, expressions and SELECT *', async () => {
    const g = governance(false);
    const caller = key({
      mask: [
        { column: '*.email', action: 'mask' },
        { column: 'customers.phone', action: 'drop' },
        { column: 'customers.name', action: 'null' },
      ],
    });
    const star = await run(g, 'SELECT * FROM customers ORDER BY id', caller);
    assert.deepEqual(star.columns, ['id', 'name', 'email']);
    assert.deepEqual(star.rows, [
      [1, null, 'a**@example.com'],
      [2, null, 'g****@navy.mil'],
    ]);
    const alias = await run(
      g,
      "SELECT COALESCE(c.email, 'none') AS contact, upper(c.email) AS shouted, o.total FROM customers c JOIN orders o ON o.customer_id = c.id",
      caller,
    );
    // a value picked unchanged is masked; a computed one shows nothing (mask would keep other characters of it)
    assert.deepEqual(alias.governed.masked, [
      { column: 'contact', action: 'mask' },
      { column: 'shouted', action: 'null' },
    ]);
    assert.deepEqual(alias.rows, [['a**@example.com', null, 9.5]]);
  });

  test('the trace is cached: the same Governed object for the same plan, rules and schema', async () => {
    const g = governance(false);
    const rules = [{ column: 'customers.email', action: 'hash' }];
    const plan = planCall('cached', version('SELECT email FROM customers'), 'sqlite');
    const first = await governCall(g, plan, key({ mask: rules }), 'q', conn, source);
    const second = await governCall(g, plan, key({ mask: rules }), 'q', conn, source);
    assert.ok(first.masker);
    assert.equal(second, first, 'a second call reuses the trace');
    assert.equal(g.secretReads, 1, 'the masker was compiled once');
    assert.equal(g.traces.size, 1);
    // other rules are another trace
    const other = await governCall(g, plan, key({ mask: [{ column: 'customers.email', action: 'drop' }] }), 'q', conn, source);
    assert.notEqual(other, first);
    assert.deepEqual(other.masked, [{ column: 'email', action: 'drop' }]);
    // callers taking turns on one plan each find their own trace again
    for (let i = 0; i < 3; i++) {
      assert.equal(await governCall(g, plan, key({ mask: rules }), 'q', conn, source), first);
      assert.equal(await governCall(g, plan, key({ mask: [{ column: 'customers.email', action: 'drop' }] }), 'q', conn, source), other);
    }
    assert.equal(g.secretReads, 1, 'nothing traced again');
    // and so is another plan with the same rules
    const plan2 = planCall('cached-2', version('SELECT email FROM customers'), 'sqlite');
    assert.notEqual(await governCall(g, plan2, key({ mask: rules }), 'q', conn, source), first);
    assert.equal(g.traces.size, 3);
  });

  test('rules that match no output column leave the answer unmasked', async () => {
    const g = governance(false);
    const r = await run(g, 'SELECT id, total FROM orders', key({ mask: [{ column: 'customers.email', action: 'hash' }] }));
    assert.deepEqual(r.governed, { masker: null, masked: null });
    assert.deepEqual(r.rows, [[1, 9.5]]);
    assert.equal(g.secretReads, 0, 'no secret needed when nothing is hashed');
  });

  test('a key without mask rules, and the admin, are never traced', async () => {
    const g = governance(false);
    const plan = planCall('plain', version('SELECT * FROM customer_emails'), 'sqlite');
    // a view cannot be traced, but without rules nothing needs to be
    assert.deepEqual(await governCall(g, plan, key({}), 'q', conn, source), { masker: null, masked: null });
    assert.deepEqual(await governCall(g, plan, key({ mask: [] }), 'q', conn, source), { masker: null, masked: null });
    assert.deepEqual(await governCall(g, plan, ADMIN, 'q', conn, source), { masker: null, masked: null });
    assert.equal(g.traces.size, 0);
  });

  test('a statement that cannot be traced is refused mask_unresolvable, every time', async (t) => {
    const caller = key({ mask: [{ column: 'customers.email', action: 'hash' }] });
    const cases: Array<[string, string, RegExp]> = [
      // views are not in the schema: their columns' sources are unknown
      ['a view', 'SELECT id, email FROM customer_emails', /'id'/],
      ['a view through *', 'SELECT * FROM customer_emails', /customer_emails/],
      // read by no parser
      ['bracketed names', 'SELECT [email] FROM [customers]', /could not be analysed/],
      // a table the schema does not have
      ['an unknown table', 'SELECT x FROM nowhere', /nowhere/],
    ];
    for (const [label, sql, message] of cases) {
      await t.test(label, async () => {
        const g = governance(false);
        const plan = planCall(`untraced:${sql}`, version(sql), 'sqlite');
        for (let i = 0; i < 2; i++) {
          await assert.rejects(
            async () => governCall(g, plan, caller, 'q', conn, source),
            (e: unknown) => e instanceof GatewayError && e.code === 'mask_unresolvable' && statusOf(e.code) === 403 && message.test(e.message),
          );
        }
        assert.equal(g.traces.size, 0, 'a refusal is not cached');
      });
    }
  });

  test('the statement checks come before the mask trace', async () => {
    const g = governance(false);
    const caller = key({ mask: [{ column: 'customers.email', action: 'hash' }], allowed_tables: ['orders'] });
    const plan = planCall('tables-first', version('SELECT email FROM customers'), 'sqlite');
    await assert.rejects(
      async () => governCall(g, plan, caller, 'q', conn, source),
      (e: unknown) => e instanceof GatewayError && e.code === 'table_not_allowed',
    );
  });

  test('a schema change (a new connection row) is a new trace', async () => {
    const g = governance(false);
    const caller = key({ mask: [{ column: 'customers.secret', action: 'drop' }] });
    const plan = planCall('schema', version('SELECT * FROM customers'), 'sqlite');
    const before = await governCall(g, plan, caller, 'q', conn, source);
    assert.equal(before.masked, null, 'no secret column yet');
    assert.ok(before.masker, 'but SELECT * is checked against the schema it was traced on');
    const db = new Database(file);
    db.exec('ALTER TABLE customers ADD COLUMN secret TEXT');
    db.close();
    // the same row: the cached trace is used, and the result it meets is not the one traced: refused,
    // never shown (the new column would have come back in clear), and the schema is read again
    const stale = await governCall(g, plan, caller, 'q', conn, source);
    assert.equal(stale, before);
    const reader = openSource(conn, { poolSize: 1, home: dir }); // a session that sees the new column
    try {
      const drifted = await reader.run(plan.text, [], { timeoutMs: 5000, readOnly: true });
      assert.equal(drifted.columns.length, 5);
      assert.throws(
        () => stale.masker!(drifted.columns, drifted.rows),
        (e: unknown) => (e as GatewayError).code === 'mask_unresolvable',
      );
    } finally {
      await reader.close();
    }
    const reread = await governCall(g, plan, caller, 'q', conn, source);
    assert.deepEqual(reread.masked, [{ column: 'secret', action: 'drop' }]);
    // the connection's row changed (as the management API stamps it): the schema is read again
    const changed = { ...conn, updated_at: '2026-12-01 11:00:00' };
    const fresh = openSource(changed, { poolSize: 1, home: dir });
    try {
      const after = await governCall(g, plan, caller, 'q', changed, fresh);
      assert.deepEqual(after.masked, [{ column: 'secret', action: 'drop' }]);
      const result = await fresh.run(plan.text, [], { timeoutMs: 5000, readOnly: true });
      const out = after.masker!(result.columns, result.rows);
      assert.deepEqual(out.columns, ['id', 'name', 'email', 'phone']);
    } finally {
      await fresh.close();
    }
  });
});
