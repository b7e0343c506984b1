// Noninterference for a key with allowed_tables: whatever such a key is served must not depend on a table outside its
// list. Each statement is judged as the gateway judges an ad-hoc statement from a scoped key (analysis, outside reads,
// the table check, against the schema the gateway reads from the database itself) and, when served, run twice on a real
// database: once as it is, once with every table the key may not read (secrets, and customers of another schema or
// database) holding other rows. The answers, or the failures, must be the same. Statements that read only the allowed
// tables must be served, so refusing everything would not pass. And a writer with the same list: each write it is served
// runs in a transaction rolled back after it, and the tables outside the list must hold what they held before.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import { GatewayError } from '../../src/contract/errors.js';
import { analyzeStatement, scanStatement, type SqlDialect } from '../../src/governance/analysis.js';
import type { Schema } from '../../src/governance/names.js';
import { checkOutsideReads, checkStatement, checkTables } from '../../src/governance/policy.js';
import { schemaQueries, toSchema } from '../../src/governance/schema.js';
import { scratchDatabase, TEST_RUNS as RUNS, TEST_SEED as SEED } from '../helpers.js';

const ALLOWED = ['customers', 'contacts'];
const SETUP = `CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40));
  INSERT INTO customers VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
  CREATE TABLE contacts (id INT PRIMARY KEY, email VARCHAR(40));
  INSERT INTO contacts VALUES (1, 'ann@example.com'), (2, 'zed@x.io');
  CREATE TABLE secrets (id INT PRIMARY KEY, top VARCHAR(40));`;
/** The tables outside the key's list, as each world fills them: counts, values and order all differ. */
const WORLDS = [
  { secrets: "(1, 'alpha'), (2, 'beta')", other: "(1, 'vault-1')" },
  { secrets: "(3, 'zeta'), (1, 'a much longer secret'), (7, 'x')", other: "(5, 'vault-5'), (1, 'vault-one'), (9, 'z')" },
];

/** Served to the key: each reads only customers and contacts, however named. */
const SERVED = [
  'SELECT id, name FROM customers ORDER BY id',
  'SELECT c.id, k.email FROM customers c JOIN contacts k ON k.id = c.id ORDER BY c.id',
  'SELECT count(*) AS n FROM customers',
  'SELECT id FROM customers WHERE id IN (SELECT id FROM contacts) ORDER BY id',
  'WITH secrets AS (SELECT id, name AS top FROM customers) SELECT top FROM secrets ORDER BY id',
  'SELECT secrets.id FROM customers AS secrets ORDER BY 1',
];

/** Each reads a table outside the list, in a way the key must be refused; {other} is the other schema or database. */
const PROBES = [
  'SELECT id, top FROM secrets ORDER BY id',
  'SELECT id FROM customers WHERE id IN (SELECT id FROM secrets) ORDER BY id',
  'SELECT (SELECT count(*) FROM secrets) AS n FROM customers WHERE id = 1',
  'SELECT c.id, s.top FROM customers c LEFT JOIN secrets s ON s.id = c.id ORDER BY c.id',
  'SELECT id, name FROM customers UNION ALL SELECT id, top FROM secrets ORDER BY 1, 2',
  'WITH customers AS (SELECT id, top AS name FROM secrets) SELECT id, name FROM customers ORDER BY id',
  'SELECT id FROM customers c WHERE EXISTS (SELECT 1 FROM secrets s WHERE s.id = c.id) ORDER BY id',
  'SELECT id, name FROM (SELECT id, top AS name FROM secrets) AS customers ORDER BY id',
  'SELECT id, name FROM {other}.customers ORDER BY id',
  'SELECT id FROM customers WHERE id IN (SELECT id FROM {other}.customers) ORDER BY id',
  'SELECT count(*) AS n FROM customers, secrets',
  'SELECT id FROM customers ORDER BY id LIMIT (SELECT count(*) FROM secrets)',
];
const DIALECT_PROBES: Record<SqlDialect, string[]> = {
  postgres: [
    'TABLE secrets',
    'TABLE customers UNION ALL TABLE {other}.customers',
    'SELECT id, top FROM public.secrets ORDER BY id',
    'SELECT id, top FROM "secrets" ORDER BY id',
    'SELECT id FROM customers c, LATERAL (SELECT top FROM secrets s WHERE s.id = c.id) AS x ORDER BY id',
    'SELECT c.id, s.top FROM (customers c JOIN secrets s ON s.id = c.id) ORDER BY c.id',
    'SELECT id FROM customers TABLESAMPLE BERNOULLI ((SELECT CASE WHEN count(*) = 2 THEN 100 ELSE 0 END FROM secrets)) ORDER BY id',
  ],
  mysql: [
    'SELECT * FROM ((secrets))',
    'SELECT top FROM (customers JOIN secrets) ORDER BY top',
    'SELECT * FROM (customers, secrets) ORDER BY 1, 3',
    'SELECT id, top FROM `secrets` ORDER BY id',
    'SELECT s.top FROM (customers c LEFT JOIN secrets s USING (id)) ORDER BY 1',
  ],
  sqlite: [
    'SELECT id, top FROM main.secrets ORDER BY id',
    'SELECT id, top FROM [secrets] ORDER BY id',
    'SELECT id, top FROM `secrets` ORDER BY id',
    'SELECT id, top FROM "secrets" ORDER BY id',
    'SELECT c.id, s.top FROM (customers c JOIN secrets s ON s.id = c.id) ORDER BY c.id',
  ],
};

/** Writes a writer with the same list must be served: they change customers only. */
const SERVED_WRITES = [
  "UPDATE customers SET name = 'x' WHERE id = 1",
  'DELETE FROM customers WHERE id = 3',
  "INSERT INTO customers (id, name) VALUES (50, 'x')",
  'INSERT INTO customers (id, name) SELECT id + 100, email FROM contacts',
];
/** Writes that change a table outside the list: the key must be refused every one. */
const WRITE_PROBES: Record<SqlDialect, string[]> = {
  postgres: [
    "UPDATE secrets SET top = 'x'",
    'DELETE FROM {other}.customers',
    "WITH d AS (DELETE FROM secrets RETURNING id) UPDATE customers SET name = 'x' WHERE id IN (SELECT id FROM d)",
    'INSERT INTO {other}.customers (id, name) SELECT id + 100, name FROM customers',
    "UPDATE public.secrets SET top = 'x'",
    'DELETE FROM "secrets"',
    "WITH u AS (UPDATE {other}.customers SET name = 'x' RETURNING id) SELECT count(*) FROM u",
  ],
  mysql: [
    "UPDATE secrets SET top = 'x'",
    'DELETE FROM {other}.customers',
    "UPDATE customers c, secrets s SET s.top = 'x' WHERE c.id = s.id",
    "UPDATE (customers c JOIN secrets s ON c.id = s.id) SET s.top = 'x'",
    'DELETE s FROM customers c JOIN secrets s ON c.id = s.id',
    'DELETE customers, secrets FROM customers JOIN secrets ON customers.id = secrets.id',
    'DELETE secrets FROM (customers, secrets) WHERE customers.id = secrets.id',
    'REPLACE INTO secrets (id, top) SELECT id, name FROM customers',
    "INSERT INTO {other}.customers (id, name) VALUES (50, 'x')",
    "UPDATE `secrets` SET top = 'x'",
  ],
  sqlite: [
    "UPDATE secrets SET top = 'x'",
    'DELETE FROM {other}.customers',
    "INSERT OR REPLACE INTO secrets VALUES (1, 'x')",
    "REPLACE INTO {other}.customers VALUES (1, 'x')",
    "UPDATE main.secrets SET top = 'x'",
    "UPDATE [secrets] SET top = 'x'",
    'INSERT INTO secrets (id, top) SELECT id + 100, name FROM customers RETURNING id',
  ],
};

/** Writes put together from parts that change customers, read the other tables, or both. */
function writeGenerator(dialect: SqlDialect): fc.Arbitrary<string> {
  const values = ["'x'", '(SELECT max(top) FROM secrets)', 'name', '(SELECT max(email) FROM contacts)'];
  const conds = ['id = 1', 'id IN (SELECT id FROM secrets)', 'id > 0', 'id IN (SELECT id FROM contacts)', 'EXISTS (SELECT 1 FROM {other}.customers)'];
  const sources = ['customers', 'secrets', 'contacts', '{other}.customers', 'customers AS secrets'];
  const own: Record<SqlDialect, string[]> = {
    postgres: [
      'UPDATE customers SET name = s.top FROM secrets s WHERE s.id = customers.id',
      'DELETE FROM customers USING secrets s WHERE s.id = customers.id',
      "INSERT INTO customers (id, name) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET name = (SELECT max(top) FROM secrets)",
      "UPDATE customers AS secrets SET name = 'x' WHERE secrets.id = 2",
    ],
    mysql: [
      "UPDATE customers c JOIN secrets s ON c.id = s.id SET c.name = 'y'",
      "INSERT INTO customers (id, name) VALUES (1, 'x') ON DUPLICATE KEY UPDATE name = (SELECT max(top) FROM secrets)",
      "UPDATE customers SET name = 'x' WHERE id IN (SELECT id FROM ((secrets)))",
      "UPDATE (customers) SET name = 'x' WHERE id = 2",
    ],
    sqlite: [
      'UPDATE customers SET name = s.top FROM secrets s WHERE s.id = customers.id',
      "INSERT INTO customers (id, name) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET name = (SELECT max(top) FROM secrets)",
      "UPDATE main.customers SET name = 'x' WHERE id = 2",
    ],
  };
  return fc.oneof(
    fc.constantFrom(...own[dialect]),
    fc.record({ v: fc.constantFrom(...values), c: fc.constantFrom(...conds) }).map(({ v, c }) => `UPDATE customers SET name = ${v} WHERE ${c}`),
    fc.constantFrom(...conds).map((c) => `DELETE FROM customers WHERE ${c}`),
    fc
      .record({ v: fc.constantFrom(...values), from: fc.constantFrom(...sources) })
      .map(({ v, from }) => `INSERT INTO customers (id, name) SELECT id + 100, ${v} FROM ${from}`),
  );
}

/** Statements put together from parts that name the allowed tables and the others, under every name and in every clause. */
function generator(dialect: SqlDialect): fc.Arbitrary<string> {
  const quoted = dialect === 'mysql' ? '`secrets`' : dialect === 'sqlite' ? '[secrets]' : '"secrets"';
  const own: Record<SqlDialect, string[]> = {
    postgres: ['ONLY customers', 'customers TABLESAMPLE SYSTEM (100)', 'customers AS c (id, name)', 'ROWS FROM (generate_series(1, 3)) AS customers (id)'],
    mysql: ['customers FORCE INDEX (PRIMARY)', 'customers STRAIGHT_JOIN secrets', '(customers JOIN contacts USING (id))'],
    sqlite: ['main.customers', 'customers NOT INDEXED', '"main"."secrets"', '(customers JOIN contacts USING (id))'],
  };
  const sources = [
    ...own[dialect],
    'customers',
    'customers c',
    'customers AS secrets',
    'secrets AS customers',
    quoted,
    '(customers)',
    '((customers))',
    '(customers, secrets)',
    '(customers JOIN secrets ON secrets.id = customers.id)',
    'customers JOIN contacts USING (id)',
    'customers NATURAL JOIN contacts',
    'customers LEFT JOIN secrets ON secrets.id = customers.id',
    '(SELECT id, top AS name FROM secrets) AS customers',
    '(SELECT id, name FROM customers UNION ALL SELECT id, top FROM secrets) AS customers',
    '{other}.customers',
    '{other}.customers AS customers',
    '{own}.customers',
  ];
  const items = [
    'id',
    'name',
    "'x' AS lit",
    'length(name) AS l',
    '(SELECT max(top) FROM secrets) AS m',
    '(SELECT count(*) FROM secrets) AS n',
    '(SELECT max(name) FROM {other}.customers) AS o',
    '(SELECT count(*) FROM contacts) AS k',
  ];
  const filters = [
    'id > 0',
    'id IN (SELECT id FROM secrets)',
    'EXISTS (SELECT 1 FROM secrets WHERE secrets.id = 3)',
    'id IN (SELECT id FROM {other}.customers)',
    'name IN (SELECT top FROM secrets)',
    'id IN (SELECT id FROM contacts)',
  ];
  return fc
    .record({
      items: fc.uniqueArray(fc.constantFrom(...items), { minLength: 1, maxLength: 2 }),
      from: fc.constantFrom(...sources),
      where: fc.option(fc.constantFrom(...filters), { nil: null, freq: 2 }),
      // Mostly none, so that enough statements read only the allowed tables to be served and compared.
      shadow: fc.constantFrom('', '', '', '', 'customers', 'contacts'),
      wrap: fc.constantFrom('', 'cte', 'derived', 'count', 'union'),
    })
    .map((g) => {
      let sql = `SELECT ${g.items.join(', ')} FROM ${g.from}${g.where ? ` WHERE ${g.where}` : ''}`;
      if (g.wrap === 'union') sql += ` UNION ALL SELECT ${g.items.map(() => 'top').join(', ')} FROM secrets`;
      if (g.wrap === 'cte') sql = `WITH t AS (${sql}) SELECT * FROM t`;
      if (g.wrap === 'derived') sql = `SELECT t.* FROM (${sql}) AS t`;
      if (g.wrap === 'count') sql = `SELECT count(*) AS c FROM (${sql}) AS t`;
      // A CTE named as an allowed table, over a table that is not.
      if (g.shadow) sql = `WITH ${g.shadow} AS (SELECT id, top AS name, top AS email FROM secrets) ${sql}`;
      return `${sql} ORDER BY 1`;
    });
}

type Answer = { rows: string } | { failed: true };
interface Engine {
  dialect: SqlDialect;
  /** The other schema's or database's name, and the key's own (for `{own}.customers`). */
  other: string;
  own: string;
  rows(sql: string): Promise<unknown[][]>;
  fill(world: (typeof WORLDS)[number]): Promise<void>;
  /** Runs `fn` in a transaction rolled back after it, with a way to run statements in it. */
  rolledBack<T>(fn: (run: (sql: string) => Promise<unknown>) => Promise<T>): Promise<T>;
}

/** The key's verdict, as the gateway gives it for ad-hoc SQL from a key with allowed_tables. */
function served(sql: string, dialect: SqlDialect, schema: Schema): boolean {
  try {
    checkStatement(scanStatement(sql, dialect), { mayWrite: true, allowedWriteOps: null });
    const a = analyzeStatement(sql, dialect);
    checkOutsideReads(a);
    checkTables(a, ALLOWED, schema);
    return true;
  } catch (e) {
    if (e instanceof GatewayError || (e as Error).name === 'AnalysisError') return false;
    throw e;
  }
}

async function answer(engine: Engine, sql: string): Promise<Answer> {
  try {
    return { rows: JSON.stringify(await engine.rows(sql)) };
  } catch {
    return { failed: true };
  }
}

/** The schema the gateway reads from the database, as governance checks against it. */
async function schemaRead(engine: Engine): Promise<Schema> {
  return toSchema(engine.dialect, await Promise.all(schemaQueries(engine.dialect).map((q) => engine.rows(q))));
}

/** A statement's {other} and {own} as the engine names them. */
const named = (engine: Engine) => (sql: string) => sql.replaceAll('{other}', engine.other).replaceAll('{own}', engine.own);

async function holds(engine: Engine): Promise<void> {
  const schema = await schemaRead(engine);
  const name = named(engine);
  const probes = [...PROBES, ...DIALECT_PROBES[engine.dialect]].map(name);
  const generated = fc.sample(generator(engine.dialect), { seed: SEED, numRuns: Math.max(1, Math.round(1500 * RUNS)) }).map(name);
  for (const sql of SERVED) assert.ok(served(sql, engine.dialect, schema), `${engine.dialect}: should be served: ${sql}`);
  const all = [...new Set([...SERVED, ...probes, ...generated])];
  const answers: Answer[][] = [];
  for (const world of WORLDS) {
    await engine.fill(world);
    const these: Answer[] = [];
    for (const sql of all) these.push(await answer(engine, sql));
    answers.push(these);
  }
  let differ = 0;
  let ran = 0;
  for (const [i, sql] of all.entries()) {
    const [one, two] = [answers[0][i], answers[1][i]];
    if (probes.includes(sql) && JSON.stringify(one) !== JSON.stringify(two)) differ++;
    if (!served(sql, engine.dialect, schema)) continue;
    if (!('failed' in one)) ran++;
    assert.deepEqual(one, two, `${engine.dialect}: served, and its answer depends on a table the key may not read: ${sql}`);
  }
  // A probe must tell the worlds apart to a key without rules, or it proves nothing.
  assert.ok(differ >= Math.floor(probes.length * 0.85), `${engine.dialect}: only ${differ} of ${probes.length} probes differ between the worlds`);
  assert.ok(ran >= 30, `${engine.dialect}: only ${ran} served statements ran`);
}

/** A writer with the same list changes nothing outside it: what the other tables hold after each write it is served. */
async function holdsWrites(engine: Engine): Promise<void> {
  await engine.fill(WORLDS[1]);
  const schema = await schemaRead(engine);
  const name = named(engine);
  const outside = [`SELECT id, top FROM secrets ORDER BY id`, `SELECT id, name FROM ${engine.other}.customers ORDER BY id`];
  const before = JSON.stringify(await Promise.all(outside.map((q) => engine.rows(q))));
  /** What the other tables hold after the write, in its transaction; 'failed' when the write failed. */
  const after = (sql: string) =>
    engine.rolledBack(async (run) => {
      try {
        await run(sql);
      } catch {
        return 'failed';
      }
      return JSON.stringify([await run(outside[0]), await run(outside[1])]);
    });
  const probes = WRITE_PROBES[engine.dialect].map(name);
  const generated = fc.sample(writeGenerator(engine.dialect), { seed: SEED, numRuns: Math.max(1, Math.round(300 * RUNS)) }).map(name);
  for (const sql of SERVED_WRITES) assert.ok(served(sql, engine.dialect, schema), `${engine.dialect}: should be served: ${sql}`);
  let changed = 0;
  let ran = 0;
  for (const sql of [...new Set([...SERVED_WRITES, ...probes, ...generated])]) {
    const held = await after(sql);
    // A probe must change the other tables when run unguarded, or it proves nothing.
    if (probes.includes(sql) && held !== 'failed' && held !== before) changed++;
    if (!served(sql, engine.dialect, schema)) continue;
    if (held !== 'failed') ran++;
    assert.ok(held === 'failed' || held === before, `${engine.dialect}: served, and it changed a table the key may not write: ${sql}`);
  }
  assert.ok(changed >= Math.floor(probes.length * 0.85), `${engine.dialect}: only ${changed} of ${probes.length} write probes change the other tables`);
  assert.ok(ran >= 10, `${engine.dialect}: only ${ran} served writes ran`);
}

const refill = (secrets: string, other: string, otherName: string) =>
  `DELETE FROM secrets; INSERT INTO secrets VALUES ${secrets}; DELETE FROM ${otherName}.customers; INSERT INTO ${otherName}.customers VALUES ${other};`;

describe(`a key with allowed_tables is served nothing that depends on, or changes, another table (seed ${SEED})`, () => {
  let pg: Awaited<ReturnType<typeof scratchDatabase>>;
  let my: mysql.Connection;
  let lite: Database.Database;
  const myDb = `qag_tni_${process.pid}`;
  before(async () => {
    pg = await scratchDatabase('qag_tni');
    await pg.sql.unsafe(`${SETUP} CREATE SCHEMA vault; CREATE TABLE vault.customers (id INT PRIMARY KEY, name VARCHAR(40));`);
    my = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true, rowsAsArray: true });
    await my.query(`CREATE DATABASE ${myDb}_other; CREATE TABLE ${myDb}_other.customers (id INT PRIMARY KEY, name VARCHAR(40));
      CREATE DATABASE ${myDb}; USE ${myDb}; ${SETUP}`);
    // SQLite's other database is one ATTACHed (a scoped key may not attach one, but the connection may have).
    lite = new Database(':memory:');
    lite.exec(`ATTACH ':memory:' AS vault; ${SETUP} CREATE TABLE vault.customers (id INT PRIMARY KEY, name VARCHAR(40));`);
  });
  after(async () => {
    await pg?.drop();
    lite?.close();
    await my?.query(`DROP DATABASE IF EXISTS ${myDb}; DROP DATABASE IF EXISTS ${myDb}_other`);
    await my?.end();
  });

  const ROLLBACK = new Error('rolled back');
  const engines: Record<string, () => Engine> = {
    PostgreSQL: () => ({
      dialect: 'postgres',
      other: 'vault',
      own: 'public',
      rows: (sql) => pg.sql.unsafe(sql).values() as Promise<unknown[][]>,
      fill: async (w) => void (await pg.sql.unsafe(refill(w.secrets, w.other, 'vault'))),
      async rolledBack(fn) {
        let out: Awaited<ReturnType<typeof fn>> | undefined;
        await pg.sql
          .begin(async (tx) => {
            out = await fn((sql) => tx.unsafe(sql).values());
            throw ROLLBACK;
          })
          .catch((e) => {
            if (e !== ROLLBACK) throw e;
          });
        return out as Awaited<ReturnType<typeof fn>>;
      },
    }),
    MariaDB: () => ({
      dialect: 'mysql',
      other: `${myDb}_other`,
      own: myDb,
      rows: async (sql) => (await my.query(sql))[0] as unknown[][],
      fill: async (w) => void (await my.query(refill(w.secrets, w.other, `${myDb}_other`))),
      async rolledBack(fn) {
        await my.query('START TRANSACTION');
        try {
          return await fn(async (sql) => (await my.query(sql))[0]);
        } finally {
          await my.query('ROLLBACK');
        }
      },
    }),
    SQLite: () => ({
      dialect: 'sqlite',
      other: 'vault',
      own: 'main',
      rows: async (sql) => lite.prepare(sql).raw().all() as unknown[][],
      fill: async (w) => void lite.exec(refill(w.secrets, w.other, 'vault')),
      async rolledBack(fn) {
        lite.exec('BEGIN');
        try {
          return await fn(async (sql) => {
            const statement = lite.prepare(sql);
            return statement.reader ? statement.raw().all() : statement.run();
          });
        } finally {
          lite.exec('ROLLBACK');
        }
      },
    }),
  };
  for (const [name, engine] of Object.entries(engines)) {
    test(name, () => holds(engine()));
    test(`${name}: writes`, () => holdsWrites(engine()));
  }
});
