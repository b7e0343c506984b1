// Noninterference for a key with allowed_tables: whatever such a key is served must not depend on a table outside its
// list. Each statement is judged as the gateway judges an ad-hoc statement from a scoped key (analysis, outside reads,
// the table check, against the schema the gateway reads from the database itself) and, when served, run twice on a real
// database: once as it is, once with every table the key may not read (secrets, and customers of another schema or
// database) holding other rows. The answers, or the failures, must be the same. Statements that read only the allowed
// tables must be served, so refusing everything would not pass.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import { GatewayError } from '../../src/contract/errors.js';
import { analyzeStatement, type SqlDialect } from '../../src/governance/analysis.js';
import type { Schema } from '../../src/governance/names.js';
import { checkOutsideReads, checkTables } from '../../src/governance/policy.js';
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
}

/** The key's verdict, as the gateway gives it for ad-hoc SQL from a key with allowed_tables. */
function served(sql: string, dialect: SqlDialect, schema: Schema): boolean {
  try {
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

async function holds(engine: Engine): Promise<void> {
  const schema = toSchema(engine.dialect, await Promise.all(schemaQueries(engine.dialect).map((q) => engine.rows(q))));
  const name = (sql: string) => sql.replaceAll('{other}', engine.other).replaceAll('{own}', engine.own);
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

const refill = (secrets: string, other: string, otherName: string) =>
  `DELETE FROM secrets; INSERT INTO secrets VALUES ${secrets}; DELETE FROM ${otherName}.customers; INSERT INTO ${otherName}.customers VALUES ${other};`;

describe(`a key with allowed_tables is served nothing that depends on another table (seed ${SEED})`, () => {
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

  test('PostgreSQL', () =>
    holds({
      dialect: 'postgres',
      other: 'vault',
      own: 'public',
      rows: (sql) => pg.sql.unsafe(sql).values() as Promise<unknown[][]>,
      fill: async (w) => void (await pg.sql.unsafe(refill(w.secrets, w.other, 'vault'))),
    }));
  test('MariaDB', () =>
    holds({
      dialect: 'mysql',
      other: `${myDb}_other`,
      own: myDb,
      rows: async (sql) => (await my.query(sql))[0] as unknown[][],
      fill: async (w) => void (await my.query(refill(w.secrets, w.other, `${myDb}_other`))),
    }));
  test('SQLite', () =>
    holds({
      dialect: 'sqlite',
      other: 'vault',
      own: 'main',
      rows: async (sql) => lite.prepare(sql).raw().all() as unknown[][],
      fill: async (w) => void lite.exec(refill(w.secrets, w.other, 'vault')),
    }));
});
