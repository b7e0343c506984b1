// Inference through predicates: with masks on, `WHERE email LIKE :p` tells a caller, one character at
// a time, what the masked email is. For a key that refuses it, a masked column may appear in the
// output (masked) but must not decide which rows come back or their order, anywhere in the statement.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../src/contract/errors.js';
import { analyzeStatement, type SqlDialect } from '../../src/governance/analysis.js';
import { checkPredicates, type MaskRule } from '../../src/governance/masking.js';
import { schemaOf } from '../../src/governance/names.js';

const TABLES = new Map<string, string[]>([
  ['customers', ['id', 'name', 'email']],
  ['orders', ['id', 'customer_id', 'total', 'status']],
  ['contacts', ['id', 'email']],
]);
const RULES: MaskRule[] = [{ column: 'customers.email', action: 'hash' }];

function verdict(sql: string, dialect: SqlDialect, rules = RULES): string {
  try {
    checkPredicates(analyzeStatement(sql, dialect), schemaOf(dialect, TABLES), rules);
    return 'ok';
  } catch (e) {
    if (e instanceof GatewayError) return e.code;
    throw e;
  }
}

const REFUSED = [
  'SELECT name FROM customers WHERE email LIKE :p',
  "SELECT name FROM customers WHERE lower(email) = 'a'",
  "SELECT name FROM customers c WHERE c.email > 'm'",
  'SELECT name FROM customers ORDER BY email',
  'SELECT count(*) AS n FROM customers GROUP BY email',
  "SELECT name FROM customers GROUP BY name HAVING max(email) > 'a'",
  'SELECT o.id FROM orders o JOIN customers c ON c.email = o.status',
  "SELECT name FROM customers WHERE id IN (SELECT id FROM customers WHERE email LIKE 'a%')",
  "SELECT name FROM customers WHERE EXISTS (SELECT 1 FROM customers c2 WHERE c2.email = 'x')",
  "SELECT (SELECT count(*) FROM customers WHERE email LIKE 'a%') AS n FROM orders",
  "WITH x AS (SELECT * FROM customers WHERE email LIKE 'a%') SELECT name FROM x",
  "SELECT name FROM customers WHERE CASE WHEN email LIKE 'a%' THEN 1 ELSE 0 END = 1",
  'SELECT name FROM customers WHERE email = :p UNION SELECT name FROM customers',
  'SELECT c.name FROM customers c JOIN contacts k ON k.email = c.email',
  'SELECT name FROM customers WHERE id IN (SELECT customer_id FROM orders) AND email IS NOT NULL',
  'SELECT DISTINCT email FROM customers',
  'SELECT DISTINCT * FROM customers',
  'SELECT id FROM (SELECT DISTINCT email AS e, id FROM customers) AS t',
];

const ALLOWED = [
  'SELECT email FROM customers WHERE id = :id',
  'SELECT name FROM customers WHERE name LIKE :p ORDER BY id',
  'SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.total > 1',
  'SELECT email FROM customers ORDER BY id',
  'SELECT id, email FROM contacts WHERE email LIKE :p',
  'SELECT count(*) AS n FROM customers GROUP BY name',
  'SELECT DISTINCT name FROM customers',
];

for (const dialect of ['postgres', 'mysql', 'sqlite'] as SqlDialect[]) {
  test(`${dialect}: a masked column that filters, joins, groups or sorts is refused`, async (t) => {
    for (const sql of REFUSED) await t.test(sql, () => assert.equal(verdict(sql, dialect), 'mask_predicate'));
  });
  test(`${dialect}: masked columns in the output only, and other columns anywhere, are allowed`, async (t) => {
    for (const sql of ALLOWED) await t.test(sql, () => assert.equal(verdict(sql, dialect), 'ok'));
  });
}

// Whether computing a value fails (`1 / (id - id)` under a CASE on email), or how many rows a generator makes from it,
// answers a predicate on the masked column wherever the value is computed, shown or not, nulled or dropped or hashed.
const COMPUTED = [
  'SELECT id, upper(email) AS u FROM customers',
  'SELECT id FROM (SELECT id, upper(email) AS u FROM customers) AS t',
  "SELECT id, CASE WHEN email LIKE 'a%' THEN 1 / (id - id) ELSE 1 END AS x FROM customers",
  "SELECT id FROM (SELECT id, CASE WHEN email LIKE 'a%' THEN 1 / (id - id) END AS x FROM customers) AS t",
  'WITH t AS (SELECT id, length(email) AS n FROM customers) SELECT id FROM t',
  'SELECT id, (SELECT length(c2.email) FROM customers c2 WHERE c2.id = customers.id) AS n FROM customers',
  "SELECT n FROM (SELECT COALESCE(email, 'x') AS n FROM customers) AS t",
  'SELECT count(email) AS n FROM customers',
  'SELECT id FROM (SELECT id, email AS e FROM customers) AS t1, (SELECT length(e) AS n FROM (SELECT email AS e FROM customers) AS t2) AS t3',
];
const PG_GENERATORS = [
  'SELECT id FROM customers, generate_series(1, length(customers.email)) AS g',
  "SELECT id FROM customers CROSS JOIN LATERAL unnest(string_to_array(email, 'a')) AS u",
  "SELECT id FROM customers, LATERAL regexp_matches(email, '^a') AS m",
  'SELECT id FROM (SELECT id, generate_series(1, length(email)) AS z FROM customers) AS t',
  'SELECT id FROM customers CROSS JOIN LATERAL (SELECT 1 / (length(email) - 15) AS z) AS x',
  'SELECT g FROM customers, generate_series(1, length(email)) AS g',
];
const OWN_VALUES = [
  'SELECT id, email FROM customers',
  'SELECT e FROM (SELECT id, email AS e FROM customers) AS t',
  'WITH t AS (SELECT id, email FROM customers) SELECT email FROM t',
  'SELECT count(*) AS n FROM customers',
  'SELECT id, upper(name) AS u FROM customers',
  'SELECT id FROM (SELECT id, upper(name) AS u FROM customers) AS t',
];

for (const action of ['hash', 'mask', 'null', 'drop']) {
  const rules = [{ column: 'customers.email', action }];
  for (const dialect of ['postgres', 'mysql', 'sqlite'] as SqlDialect[]) {
    test(`${dialect}, ${action}: a value computed from a masked column, shown or not, is refused; its own values are not`, async (t) => {
      for (const sql of [...COMPUTED, ...(dialect === 'postgres' ? PG_GENERATORS : [])]) {
        await t.test(sql, () => assert.equal(verdict(sql, dialect, rules), 'mask_predicate'));
      }
      for (const sql of [...OWN_VALUES, ...(dialect === 'postgres' ? ['SELECT id FROM customers, generate_series(1, 3) AS g'] : [])]) {
        await t.test(sql, () => assert.equal(verdict(sql, dialect, rules), 'ok'));
      }
    });
  }
}

test('postgres and mysql: JOIN ... USING a masked column is refused', () => {
  for (const dialect of ['postgres', 'mysql'] as SqlDialect[]) {
    assert.equal(verdict('SELECT name FROM customers JOIN contacts USING (email)', dialect), 'mask_predicate', dialect);
    assert.equal(verdict('SELECT name FROM customers JOIN contacts USING (id)', dialect), 'ok', dialect);
  }
});

test('postgres and sqlite: NATURAL JOIN matches rows by the columns both sides share, a masked one among them', () => {
  for (const dialect of ['postgres', 'sqlite'] as SqlDialect[]) {
    for (const sql of [
      'SELECT name FROM customers NATURAL JOIN contacts',
      'SELECT customers.name FROM customers NATURAL LEFT JOIN contacts',
      "SELECT id FROM customers NATURAL JOIN (SELECT 1 AS id, 'a@example.com' AS email) AS guess",
    ]) {
      assert.equal(verdict(sql, dialect), 'mask_predicate', `${dialect}: ${sql}`);
    }
    assert.equal(verdict('SELECT total FROM orders NATURAL JOIN contacts', dialect), 'ok', dialect);
  }
});

// ORDER BY and GROUP BY (MySQL's and SQLite's HAVING, SQLite's WHERE) may name an output by its alias or position; a set
// operation's ORDER BY, which the parsers hang on its last part, sorts every part's column.
const BY_OUTPUT = [
  'SELECT email AS e FROM customers ORDER BY e',
  'SELECT email AS id FROM customers ORDER BY id',
  'SELECT id, email AS e FROM customers GROUP BY id, e',
  'SELECT id, email FROM customers ORDER BY 2',
  'SELECT id, email FROM customers GROUP BY 1, 2',
  'SELECT email FROM customers UNION ALL SELECT name FROM customers ORDER BY 1',
  'SELECT name AS x FROM customers UNION ALL SELECT email AS x FROM customers ORDER BY x',
  'SELECT email, id FROM customers UNION ALL SELECT name, id FROM customers ORDER BY name',
  'SELECT * FROM customers ORDER BY 3',
];
const BY_OTHER_OUTPUT = [
  'SELECT id, email FROM customers ORDER BY 1',
  'SELECT name AS n, email FROM customers ORDER BY n',
  'SELECT count(*) AS n, name FROM customers GROUP BY 2 ORDER BY 1',
  'SELECT 1 AS k FROM customers ORDER BY k',
  'SELECT id, name FROM customers UNION ALL SELECT id, email FROM customers ORDER BY 1',
  'SELECT * FROM orders ORDER BY 2',
];
for (const dialect of ['postgres', 'mysql', 'sqlite'] as SqlDialect[]) {
  test(`${dialect}: an output named by alias or position sorts or groups by what it shows`, async (t) => {
    for (const sql of BY_OUTPUT) await t.test(sql, () => assert.equal(verdict(sql, dialect), 'mask_predicate'));
    for (const sql of BY_OTHER_OUTPUT) await t.test(sql, () => assert.equal(verdict(sql, dialect), 'ok'));
  });
}

test('postgres: DISTINCT ON a position; mysql and sqlite: HAVING an alias; sqlite: WHERE an alias', () => {
  assert.equal(verdict('SELECT DISTINCT ON (2) id, email FROM customers', 'postgres'), 'mask_predicate');
  assert.equal(verdict("SELECT email AS e FROM customers HAVING e > 'm'", 'mysql'), 'mask_predicate');
  assert.equal(verdict("SELECT email AS e FROM customers WHERE e > 'm'", 'sqlite'), 'mask_predicate');
});

test('without rules nothing is refused', () => {
  checkPredicates(analyzeStatement('SELECT name FROM customers WHERE email LIKE :p', 'postgres'), schemaOf('postgres', TABLES), []);
});
