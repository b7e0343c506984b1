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

function verdict(sql: string, dialect: SqlDialect): string {
  try {
    checkPredicates(analyzeStatement(sql, dialect), schemaOf(dialect, TABLES), RULES);
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
];

const ALLOWED = [
  'SELECT email FROM customers WHERE id = :id',
  'SELECT name FROM customers WHERE name LIKE :p ORDER BY id',
  'SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.total > 1',
  'SELECT email FROM customers ORDER BY id',
  'SELECT id, email FROM contacts WHERE email LIKE :p',
  'SELECT count(*) AS n FROM customers GROUP BY name',
];

for (const dialect of ['postgres', 'mysql', 'sqlite'] as SqlDialect[]) {
  test(`${dialect}: a masked column that filters, joins, groups or sorts is refused`, async (t) => {
    for (const sql of REFUSED) await t.test(sql, () => assert.equal(verdict(sql, dialect), 'mask_predicate'));
  });
  test(`${dialect}: masked columns in the output only, and other columns anywhere, are allowed`, async (t) => {
    for (const sql of ALLOWED) await t.test(sql, () => assert.equal(verdict(sql, dialect), 'ok'));
  });
}

test('postgres and mysql: JOIN ... USING a masked column is refused', () => {
  for (const dialect of ['postgres', 'mysql'] as SqlDialect[]) {
    assert.equal(verdict('SELECT name FROM customers JOIN contacts USING (email)', dialect), 'mask_predicate', dialect);
    assert.equal(verdict('SELECT name FROM customers JOIN contacts USING (id)', dialect), 'ok', dialect);
  }
});

test('without rules nothing is refused', () => {
  checkPredicates(analyzeStatement('SELECT name FROM customers WHERE email LIKE :p', 'postgres'), schemaOf('postgres', TABLES), []);
});
