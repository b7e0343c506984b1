// Tests for governance: the lineage corpus (tables, masks, refusals per dialect), hidden writes, the
// table allow-list, masking application and the seeds' governed examples. No server, no database.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type GatewayError, statusOf } from '../../src/contract/errors.js';
import { analyzeStatement, inspectStatement, scanStatement, type SqlDialect } from '../../src/governance/analysis.js';
import { checkReadOnly, checkStatement, checkTables, checkWriteOps } from '../../src/governance/policy.js';
import { compileMasker, hashValue, maskValue, planMasks, type MaskRule } from '../../src/governance/masking.js';
import { resolveTable, schemaOf } from '../../src/governance/names.js';
import { schemaQueries, toSchema } from '../../src/governance/schema.js';

const TABLES = new Map<string, string[]>([
  ['customers', ['id', 'name', 'email', 'phone', 'national_id', 'created_at']],
  ['orders', ['id', 'customer_id', 'total', 'status', 'created_at']],
  ['employees', ['id', 'manager_id', 'name', 'salary', 'dept']],
  ['film', ['film_id', 'title', 'category', 'rating', 'length']],
  ['rental', ['rental_id', 'film_id', 'customer_id', 'rental_date', 'return_date']],
  ['MixedCase', ['Id', 'Email']],
  ['pgbench_accounts', ['aid', 'bid', 'abalance', 'filler']],
  ['pgbench_branches', ['bid', 'bbalance', 'filler']],
]);
const SCHEMA = schemaOf('postgres', TABLES);
// MySQL's tables in a database named public, so the rule on public.customers.national_id reads the same there.
const schemaFor = (dialect: SqlDialect) => schemaOf(dialect, TABLES, dialect === 'mysql' ? 'public' : undefined);

const RULES: MaskRule[] = [
  { column: 'customers.email', action: 'hash' },
  { column: '*.phone', action: 'mask' },
  { column: 'public.customers.national_id', action: 'drop' },
  { column: 'Employees.Salary', action: 'null' },
  { column: 'mixedcase.email', action: 'mask' },
];

/** Short names for a plan's actions: '-' shown, h hash, m mask, n null, d drop. */
function short(actions: Array<string | null>, width: number): string {
  const out: string[] = [];
  for (let i = 0; i < width; i++) {
    const a = actions[i] ?? null;
    out.push(a === null ? '-' : a === 'hash' ? 'h' : a === 'mask' ? 'm' : a === 'null' ? 'n' : 'd');
  }
  return out.join(' ');
}

interface LineageCase {
  sql: string;
  /** Per dialect text when it differs; a dialect left out of `only` is not run. */
  mysql?: string;
  only?: SqlDialect[];
  tables: string[];
  /** Expected actions per output column (see `short`), or the refusal code. */
  masks: string | { refused: 'mask_unresolvable' };
}

const STAR_CUSTOMERS = '- - h m d -';
const STAR_ORDERS = '- - - - -';

const CORPUS: LineageCase[] = [
  { sql: 'SELECT id, email FROM customers', tables: ['customers'], masks: '- h' },
  { sql: 'SELECT c.email AS contact FROM customers c', tables: ['customers'], masks: 'h' },
  { sql: 'SELECT customers.email FROM customers', tables: ['customers'], masks: 'h' },
  { sql: 'SELECT lower(email) FROM customers', tables: ['customers'], masks: 'h' },
  { sql: 'SELECT concat(c.name, c.email) AS label FROM customers c', tables: ['customers'], masks: 'h' },
  { sql: 'SELECT name, phone FROM customers', tables: ['customers'], masks: '- m' },
  { sql: 'SELECT * FROM customers', tables: ['customers'], masks: STAR_CUSTOMERS },
  { sql: 'TABLE orders ORDER BY id LIMIT 2', tables: ['orders'], masks: STAR_ORDERS },
  { sql: 'SELECT c.* FROM customers c', tables: ['customers'], masks: STAR_CUSTOMERS },
  { sql: 'SELECT o.*, c.email FROM orders o JOIN customers c ON c.id = o.customer_id', tables: ['customers', 'orders'], masks: `${STAR_ORDERS} h` },
  { sql: 'SELECT * FROM customers c JOIN orders o ON o.customer_id = c.id', tables: ['customers', 'orders'], masks: `${STAR_CUSTOMERS} ${STAR_ORDERS}` },
  { sql: "SELECT id, total FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE email = 'x')", tables: ['customers', 'orders'], masks: '- -' },
  { sql: 'SELECT x.e FROM (SELECT email AS e FROM customers) x', tables: ['customers'], masks: 'h' },
  { sql: 'SELECT e FROM (SELECT s.e FROM (SELECT c.email AS e FROM customers c) s) AS t2', tables: ['customers'], masks: 'h' },
  { sql: 'SELECT * FROM (SELECT id, email FROM customers) s', tables: ['customers'], masks: '- h' },
  { sql: 'SELECT * FROM (SELECT * FROM customers) s', tables: ['customers'], masks: STAR_CUSTOMERS },
  { sql: 'SELECT s.phone FROM (SELECT * FROM customers) s', tables: ['customers'], masks: 'm' },
  { sql: 'WITH c AS (SELECT id, email FROM customers) SELECT email FROM c', tables: ['customers'], masks: 'h' },
  { sql: 'WITH a AS (SELECT id, email FROM customers), b AS (SELECT id, email AS mail FROM a) SELECT mail, id FROM b', tables: ['customers'], masks: 'h -' },
  { sql: 'WITH orders AS (SELECT id, name FROM customers) SELECT name FROM orders', tables: ['customers'], masks: '-' },
  { sql: 'SELECT email FROM customers UNION SELECT name FROM customers', tables: ['customers'], masks: 'h' },
  { sql: 'SELECT name FROM customers UNION ALL SELECT email FROM customers', tables: ['customers'], masks: 'h' },
  { sql: 'SELECT name FROM customers INTERSECT SELECT status FROM orders', tables: ['customers', 'orders'], masks: '-' },
  { sql: 'SELECT name FROM customers EXCEPT SELECT status FROM orders', tables: ['customers', 'orders'], masks: '-' },
  { sql: 'SELECT phone FROM customers EXCEPT SELECT status FROM orders', tables: ['customers', 'orders'], masks: 'm' },
  { sql: 'SELECT * FROM customers UNION ALL SELECT * FROM customers', tables: ['customers'], masks: STAR_CUSTOMERS },
  { sql: 'SELECT e.name, m.name AS manager FROM employees e LEFT JOIN employees m ON m.id = e.manager_id', tables: ['employees'], masks: '- -' },
  { sql: 'SELECT e.salary, m.salary AS boss FROM employees e JOIN employees m ON m.id = e.manager_id', tables: ['employees'], masks: 'n n' },
  { sql: 'SELECT name, row_number() OVER (PARTITION BY dept ORDER BY salary DESC) AS rnk FROM employees', tables: ['employees'], masks: '- n' },
  { sql: 'SELECT dept, sum(salary) OVER (PARTITION BY dept) AS s FROM employees', tables: ['employees'], masks: '- n' },
  {
    sql: 'SELECT dept, avg(id) OVER (PARTITION BY dept ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS a FROM employees',
    tables: ['employees'],
    masks: '- -',
  },
  { sql: "SELECT CASE WHEN email LIKE '%@x.com' THEN 'x' ELSE 'other' END AS domain FROM customers", tables: ['customers'], masks: 'h' },
  { sql: 'SELECT CASE WHEN c.id > 10 THEN c.phone ELSE c.name END AS contact FROM customers c', tables: ['customers'], masks: 'm' },
  { sql: 'SELECT COALESCE(phone, email) AS reach FROM customers', tables: ['customers'], masks: 'm' },
  { sql: 'SELECT COALESCE(national_id, email) AS ident FROM customers', tables: ['customers'], masks: 'd' },
  {
    sql: 'SELECT CAST(total AS DECIMAL(10,2)) AS t, CAST(email AS CHAR(20)) AS e FROM orders o JOIN customers c ON c.id = o.customer_id',
    tables: ['customers', 'orders'],
    masks: '- h',
  },
  { sql: 'SELECT national_id, name FROM customers', tables: ['customers'], masks: 'd -' },
  { sql: 'SELECT count(*) AS n FROM customers', tables: ['customers'], masks: '-' },
  { sql: 'SELECT count(email) AS n FROM customers', tables: ['customers'], masks: 'h' },
  { sql: 'SELECT email, count(*) AS n FROM customers GROUP BY email HAVING count(*) > 1', tables: ['customers'], masks: 'h -' },
  { sql: 'SELECT id FROM customers ORDER BY email', tables: ['customers'], masks: '-' },
  { sql: 'SELECT c.id, (SELECT max(o.total) FROM orders o WHERE o.customer_id = c.id) AS top FROM customers c', tables: ['customers', 'orders'], masks: '- -' },
  { sql: 'SELECT (SELECT email FROM customers c WHERE c.id = o.customer_id) AS mail FROM orders o', tables: ['customers', 'orders'], masks: 'h' },
  // `email` is not a column of orders, so it is the outer query's customers.email
  { sql: 'SELECT (SELECT email FROM orders o WHERE o.customer_id = c.id LIMIT 1) AS mail FROM customers c', tables: ['customers', 'orders'], masks: 'h' },
  { sql: 'SELECT c.name FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)', tables: ['customers', 'orders'], masks: '-' },
  { sql: "SELECT id FROM (SELECT id, email FROM customers) s WHERE s.email LIKE 'a%'", tables: ['customers'], masks: '-' },
  { sql: 'SELECT "MixedCase"."Email", "Id" FROM "MixedCase"', mysql: 'SELECT `MixedCase`.`Email`, `Id` FROM `MixedCase`', tables: ['MixedCase'], masks: 'm -' },
  // unquoted names fold on PostgreSQL; MySQL keeps a table's case (lower_case_table_names 0): another table
  { sql: 'SELECT Email AS "E-Mail", ID FROM public.Customers', only: ['postgres'], tables: ['public\u0000customers'], masks: 'h -' },
  { sql: 'SELECT Email AS `E-Mail`, ID FROM public.Customers', only: ['mysql'], tables: ['public\u0000Customers'], masks: { refused: 'mask_unresolvable' } },
  { sql: 'SELECT Email AS `E-Mail`, ID FROM public.customers', only: ['mysql'], tables: ['public\u0000customers'], masks: 'h -' },
  // a quoted name keeps its case on PostgreSQL: "Customers" is not customers
  { sql: 'SELECT email FROM "Customers"', only: ['postgres'], tables: ['Customers'], masks: { refused: 'mask_unresolvable' } },
  { sql: 'SELECT f.title, r.rental_date FROM film f JOIN rental r USING (film_id)', tables: ['film', 'rental'], masks: '- -' },
  // unqualified names over a join: the schema says which table has the column
  { sql: 'SELECT phone, total FROM customers JOIN orders ON orders.customer_id = customers.id', tables: ['customers', 'orders'], masks: 'm -' },
  { sql: 'SELECT id, email FROM customers WHERE id = :id', tables: ['customers'], masks: '- h' },
  { sql: 'SELECT * FROM customers WHERE id > :after ORDER BY id LIMIT :n', tables: ['customers'], masks: STAR_CUSTOMERS },
  {
    sql: 'WITH RECURSIVE chain(id, manager_id, name) AS (SELECT id, manager_id, name FROM employees WHERE id = 1 UNION ALL SELECT e.id, e.manager_id, e.name FROM employees e JOIN chain ch ON e.manager_id = ch.id) SELECT name FROM chain',
    tables: ['employees'],
    masks: '-',
  },
  {
    sql: 'WITH RECURSIVE chain(id, pay) AS (SELECT id, salary FROM employees WHERE id = 1 UNION ALL SELECT e.id, e.salary FROM employees e JOIN chain ch ON e.manager_id = ch.id) SELECT pay FROM chain',
    tables: ['employees'],
    masks: 'n',
  },
  { sql: "SELECT 1 AS one, 'x' AS two", tables: [], masks: '- -' },
  { sql: 'SELECT name FROM customers_view', tables: ['customers_view'], masks: { refused: 'mask_unresolvable' } },
  { sql: 'SELECT v.* FROM customers_view v', tables: ['customers_view'], masks: { refused: 'mask_unresolvable' } },
  {
    sql: 'SELECT c.name, v.x FROM customers c JOIN customers_view v ON v.id = c.id',
    tables: ['customers', 'customers_view'],
    masks: { refused: 'mask_unresolvable' },
  },
  // writes: tables include the target; RETURNING is traced like a select list
  { sql: 'INSERT INTO orders (customer_id, total) VALUES (:c, :t)', tables: ['orders'], masks: '' },
  { sql: 'UPDATE customers SET phone = NULL WHERE id = :id', tables: ['customers'], masks: '' },
  { sql: 'DELETE FROM orders WHERE customer_id IN (SELECT id FROM customers)', tables: ['customers', 'orders'], masks: '' },
  { sql: 'INSERT INTO orders (customer_id) SELECT id FROM customers', tables: ['customers', 'orders'], masks: '' },
  // PostgreSQL only
  { sql: 'INSERT INTO orders (customer_id, total) VALUES (1, 2) RETURNING id, total', only: ['postgres'], tables: ['orders'], masks: '- -' },
  { sql: "UPDATE customers SET name = 'x' WHERE id = 1 RETURNING email", only: ['postgres'], tables: ['customers'], masks: 'h' },
  { sql: 'DELETE FROM customers c WHERE c.id = 1 RETURNING c.*', only: ['postgres'], tables: ['customers'], masks: STAR_CUSTOMERS },
  {
    sql: 'SELECT c.name, o.total FROM customers c CROSS JOIN LATERAL (SELECT total FROM orders WHERE orders.customer_id = c.id ORDER BY total DESC LIMIT 1) o',
    only: ['postgres'],
    tables: ['customers', 'orders'],
    masks: '- -',
  },
  {
    sql: 'SELECT c.name, o.phone FROM customers c CROSS JOIN LATERAL (SELECT phone FROM orders WHERE orders.customer_id = c.id LIMIT 1) o',
    only: ['postgres'],
    tables: ['customers', 'orders'],
    masks: '- m',
  },
  { sql: 'SELECT g FROM generate_series(1, 10) g', only: ['postgres'], tables: [], masks: '-' },
  { sql: 'SELECT * FROM generate_series(1, 10) AS g(n)', only: ['postgres'], tables: [], masks: '-' },
  { sql: 'SELECT u.x FROM customers c, unnest(ARRAY[c.email, c.name]) AS u(x)', only: ['postgres'], tables: ['customers'], masks: 'h' },
  { sql: `SELECT * FROM json_each('{"a":1}')`, only: ['postgres'], tables: [], masks: '- -' },
  { sql: 'SELECT email::text AS e, id::bigint FROM customers', only: ['postgres'], tables: ['customers'], masks: 'h -' },
  { sql: 'SELECT DISTINCT ON (email) email, name FROM customers', only: ['postgres'], tables: ['customers'], masks: 'h -' },
  { sql: 'SELECT row_to_json(c) FROM customers c', only: ['postgres'], tables: ['customers'], masks: 'd' },
  { sql: 'SELECT name FROM customers WHERE id = ANY(:ids)', only: ['postgres'], tables: ['customers'], masks: '-' },
  { sql: "VALUES (1, 'a'), (2, 'b')", only: ['postgres'], tables: [], masks: '- -' },
  { sql: 'TABLE customers', only: ['postgres'], tables: ['customers'], masks: STAR_CUSTOMERS },
  { sql: "SELECT * FROM pg_read_file('/etc/passwd') AS f(line)", only: ['postgres'], tables: [], masks: { refused: 'mask_unresolvable' } },
  { sql: "SELECT query_to_xml('select email from customers', true, false, '') AS x", only: ['postgres'], tables: [], masks: { refused: 'mask_unresolvable' } },
  { sql: 'SELECT * FROM my_function(1) AS f', only: ['postgres'], tables: [], masks: { refused: 'mask_unresolvable' } },
  { sql: 'SHOW search_path', only: ['postgres'], tables: [], masks: { refused: 'mask_unresolvable' } },
  { sql: 'EXPLAIN SELECT email FROM customers', only: ['postgres'], tables: ['customers'], masks: { refused: 'mask_unresolvable' } },
  // MySQL only
  { sql: 'SELECT name FROM customers LIMIT 5, 3', only: ['mysql'], tables: ['customers'], masks: '-' },
  { sql: 'SELECT IF(id > 1, email, name) AS x FROM customers', only: ['mysql'], tables: ['customers'], masks: 'h' },
  { sql: "SELECT GROUP_CONCAT(email SEPARATOR ',') AS all_mail FROM customers", only: ['mysql'], tables: ['customers'], masks: 'h' },
  { sql: 'SELECT IFNULL(phone, name) AS reach FROM `customers` WHERE id = :id', only: ['mysql'], tables: ['customers'], masks: 'm' },
  { sql: 'DESCRIBE customers', only: ['mysql'], tables: ['customers'], masks: { refused: 'mask_unresolvable' } },
  { sql: 'SHOW COLUMNS FROM orders', only: ['mysql'], tables: ['orders'], masks: { refused: 'mask_unresolvable' } },
  {
    sql: 'UPDATE customers c JOIN orders o ON o.customer_id = c.id SET c.name = o.status WHERE o.total > 10',
    only: ['mysql'],
    tables: ['customers', 'orders'],
    masks: '',
  },
  { sql: 'DELETE c FROM customers c JOIN orders o ON o.customer_id = c.id', only: ['mysql'], tables: ['customers', 'orders'], masks: '' },
  { sql: 'REPLACE INTO orders (id, status) VALUES (1, :s)', only: ['mysql'], tables: ['orders'], masks: '' },
];

test('lineage corpus: at least 60 statements in each dialect', () => {
  const pgCount = CORPUS.filter((c) => !c.only || c.only.includes('postgres')).length;
  const myCount = CORPUS.filter((c) => !c.only || c.only.includes('mysql')).length;
  assert.ok(pgCount >= 60, `postgres cases: ${pgCount}`);
  assert.ok(myCount >= 60, `mysql cases: ${myCount}`);
});

for (const dialect of ['postgres', 'mysql'] as SqlDialect[]) {
  test(`lineage corpus (${dialect}): tables and masks`, async (t) => {
    for (const c of CORPUS) {
      if (c.only && !c.only.includes(dialect)) continue;
      const sql = dialect === 'mysql' && c.mysql ? c.mysql : c.sql;
      await t.test(sql, () => {
        const a = analyzeStatement(sql, dialect);
        assert.deepEqual(a.tables, c.tables, 'tables');
        const SCHEMA = schemaFor(dialect);
        if (typeof c.masks === 'string') {
          const plan = planMasks(a, SCHEMA, RULES);
          const width = c.masks === '' ? 0 : c.masks.split(' ').length;
          assert.equal(short(plan.actions, width), c.masks, 'masks');
          // no rule applies beyond the expected columns
          assert.ok(plan.actions.length === 0 || plan.actions.length === width, `plan width ${plan.actions.length}`);
        } else {
          const code = c.masks.refused;
          assert.throws(
            () => planMasks(a, SCHEMA, RULES),
            (e: unknown) => {
              const err = e as GatewayError;
              return err.code === code && statusOf(err.code) === 403;
            },
          );
          // without rules nothing is traced and nothing refused
          assert.deepEqual(planMasks(a, SCHEMA, []), { actions: [], masked: [] });
        }
      });
    }
  });
}

test('sqlite statements: pgsql-ast-parser, with node-sql-parser for SQLite-only syntax', () => {
  const cases: Array<[string, string[], string]> = [
    ["SELECT title FROM film WHERE rating = 'PG' AND length > :len", ['film'], 'pgsql-ast-parser'],
    ["SELECT datetime('now', '-30 days') AS d, strftime('%Y', rental_date) AS y FROM rental", ['rental'], 'pgsql-ast-parser'],
    ['SELECT `title` FROM `film` LIMIT 2, 5', ['film'], 'node-sql-parser'],
    ["SELECT title FROM film WHERE title GLOB 'A*'", ['film'], 'node-sql-parser'],
  ];
  for (const [sql, tables, parser] of cases) {
    const a = analyzeStatement(sql, 'sqlite');
    assert.deepEqual(a.tables, tables, sql);
    assert.equal(a.parser, parser, sql);
  }
  // [bracketed] names are read by neither parser: refused, never guessed
  const r = inspectStatement('SELECT [title] FROM [film]', 'sqlite');
  assert.equal(r.analysis, null);
  assert.throws(
    () => checkTables(r.analysis, ['film'], SCHEMA),
    (e: unknown) => (e as GatewayError).code === 'table_check_failed',
  );
});

test('an inspection says whether the parsers rejected the text or the gateway declined to read it', async (t) => {
  const cases: Array<[SqlDialect, string, 'read' | 'rejected' | 'declined']> = [
    ['postgres', 'SELECT id FROM t WHERE id = :id', 'read'],
    ['postgres', 'SELEC 1', 'rejected'],
    ['mysql', 'SELECT * FROM t WHERE', 'rejected'],
    ['sqlite', 'SELEC 1', 'rejected'],
    ['sqlite', '-- only a comment', 'rejected'],
    // valid SQL the parsers cannot read is rejected too: the database must be asked (save time does)
    ['sqlite', 'SELECT * FROM t WHERE a = :a COLLATE NOCASE', 'rejected'],
    // declined: read differently by the database and the fallback parser, or not read with certainty
    ['mysql', "SELECT 'it\\'s' AND id = :id", 'declined'],
    ['postgres', "SELECT $$it's$$, :x", 'declined'],
    ['postgres', "SELECT U&'d\\0061t'", 'declined'],
    ['mysql', 'SELECT `a``b` FROM t', 'declined'],
    ['postgres', 'SELECT 1; SELECT 2', 'declined'],
    // node-sql-parser reads `FROM ONLY t` as a table `only` named t
    ['postgres', 'SELECT email FROM ONLY customers', 'declined'],
    ['postgres', 'SELECT * FROM ONLY customers c', 'declined'],
  ];
  for (const [dialect, sql, want] of cases) {
    await t.test(`${dialect}: ${sql}`, () => {
      const r = inspectStatement(sql, dialect);
      assert.equal(r.analysis ? 'read' : r.rejectedByParser ? 'rejected' : 'declined', want, r.failure ?? '');
    });
  }
});

test('hidden writes are refused as read_only; reads stay reads', () => {
  const writes: Array<[SqlDialect, string, string]> = [
    ['postgres', 'WITH x AS (UPDATE customers SET name = 1 RETURNING *) SELECT * FROM x', 'update'],
    ['postgres', 'WITH gone AS (DELETE FROM orders RETURNING id) SELECT count(*) FROM gone', 'delete'],
    ['postgres', 'SELECT id INTO backup FROM customers', 'select into'],
    ['postgres', 'EXPLAIN ANALYZE DELETE FROM orders', 'delete'],
    ['postgres', 'EXPLAIN (ANALYZE, BUFFERS) INSERT INTO orders (id) VALUES (1)', 'insert'],
    ['postgres', 'MERGE INTO orders o USING customers c ON o.customer_id = c.id WHEN MATCHED THEN DELETE', 'merge'],
    ['postgres', 'SET statement_timeout = 0', 'set'],
    ['postgres', "SELECT set_config('default_transaction_read_only', 'off', false)", 'set_config()'],
    ['postgres', "SELECT nextval('orders_id_seq')", 'nextval()'],
    ['postgres', 'DELETE FROM orders', 'delete'],
    ['mysql', 'SELECT 1 /*! , (SELECT 1) */', 'an executable comment'],
    ['mysql', 'SELECT id FROM customers INTO OUTFILE :path', 'select into'],
    ['mysql', 'SET SESSION TRANSACTION READ WRITE', 'set'],
    ['sqlite', "SELECT load_extension('x')", 'load_extension()'],
  ];
  for (const [dialect, sql, why] of writes) {
    const r = inspectStatement(sql, dialect);
    assert.throws(
      () => checkReadOnly(r.scan, false),
      (e: unknown) => {
        const err = e as GatewayError;
        return err.code === 'read_only' && statusOf(err.code) === 403 && err.message.includes(why);
      },
      `${sql}`,
    );
    assert.doesNotThrow(() => checkReadOnly(r.scan, true), sql);
  }
  const reads: Array<[SqlDialect, string]> = [
    ['postgres', 'SELECT * FROM orders FOR UPDATE'],
    ['postgres', 'SELECT * FROM orders FOR NO KEY UPDATE'],
    ['postgres', 'SELECT \'delete from x; update y\' AS s, "update" FROM t'],
    ['postgres', 'SELECT 1 -- insert into x\n'],
    ['postgres', "SELECT replace(name, 'a', 'b') FROM customers"],
    ['postgres', 'EXPLAIN ANALYZE SELECT * FROM customers'],
    ['postgres', 'EXPLAIN customers'],
    ['postgres', 'SHOW search_path'],
    ['postgres', 'VALUES (1)'],
    ['postgres', 'SELECT pg_sleep(1)'],
    ['postgres', 'SELECT 1;'],
    ['mysql', 'DESCRIBE customers'],
    ['mysql', 'SELECT /*+ MAX_EXECUTION_TIME(1000) */ id FROM customers'],
  ];
  for (const [dialect, sql] of reads) assert.doesNotThrow(() => checkReadOnly(scanStatement(sql, dialect), false), sql);
});

test('multiple statements: 400 multiple_statements', () => {
  for (const sql of ['SELECT 1; SELECT 2', 'SELECT 1; DELETE FROM t']) {
    const r = inspectStatement(sql, 'postgres');
    assert.equal(r.analysis, null);
    assert.throws(
      () => checkReadOnly(r.scan, true),
      (e: unknown) => {
        const err = e as GatewayError;
        return err.code === 'multiple_statements' && statusOf(err.code) === 400;
      },
    );
  }
  assert.equal(scanStatement("SELECT ';' ; -- done", 'postgres').statements, 1);
});

test('allowed_write_ops counts writes hidden in CTEs', () => {
  const a = analyzeStatement('WITH d AS (DELETE FROM orders RETURNING id) INSERT INTO orders (id) SELECT id FROM d', 'postgres');
  assert.deepEqual(a.writeVerbs, ['delete', 'insert']);
  assert.throws(
    () => checkWriteOps(a, ['insert']),
    (e: unknown) => {
      const err = e as GatewayError;
      return err.code === 'write_op_not_allowed' && err.message.includes('insert');
    },
  );
  assert.doesNotThrow(() => checkWriteOps(a, ['INSERT', 'delete']));
  assert.doesNotThrow(() => checkWriteOps(a, null));
  assert.doesNotThrow(() => checkWriteOps(analyzeStatement('SELECT 1', 'postgres'), []));
  const into = analyzeStatement('SELECT id INTO backup FROM customers', 'postgres');
  assert.throws(
    () => checkWriteOps(into, ['insert']),
    (e: unknown) => (e as GatewayError).code === 'write_op_not_allowed',
  );
  assert.doesNotThrow(() => checkWriteOps(into, ['select into']));
});

test('allowed_tables decisions', () => {
  const decide = (sql: string, allowed: string[] | null, dialect: SqlDialect = 'postgres'): string => {
    const r = inspectStatement(sql, dialect);
    try {
      checkTables(r.analysis, allowed, schemaFor(dialect));
      return 'ok';
    } catch (e) {
      const { code } = e as GatewayError;
      assert.equal(statusOf(code), 403);
      return code;
    }
  };
  assert.equal(decide('SELECT * FROM film', ['film']), 'ok');
  assert.equal(decide('SELECT * FROM film f JOIN rental r ON r.film_id = f.film_id', ['film']), 'table_not_allowed');
  assert.equal(decide('SELECT * FROM film f JOIN rental r ON r.film_id = f.film_id', ['FILM', 'Rental']), 'ok');
  assert.equal(decide('WITH rental AS (SELECT * FROM film) SELECT * FROM rental', ['film']), 'ok');
  assert.equal(decide('SELECT * FROM public.film', ['public.film']), 'ok');
  assert.equal(decide('SELECT title FROM film UNION SELECT name FROM customers', ['film']), 'table_not_allowed');
  assert.equal(decide('SELECT title FROM film WHERE film_id IN (SELECT film_id FROM rental)', ['film']), 'table_not_allowed');
  assert.equal(decide('SELECT (SELECT max(rental_date) FROM rental) AS last FROM film', ['film']), 'table_not_allowed');
  assert.equal(decide('SELECT * FROM (SELECT * FROM (SELECT * FROM secret) a) b', ['film']), 'table_not_allowed');
  assert.equal(decide('DELETE FROM secret', ['film']), 'table_not_allowed');
  assert.equal(decide('UPDATE film SET title = (SELECT pw FROM secret LIMIT 1)', ['film']), 'table_not_allowed');
  assert.equal(decide('INSERT INTO film (title) SELECT pw FROM secret', ['film']), 'table_not_allowed');
  assert.equal(decide('SELECT * FROM generate_series(1, 3) g', []), 'ok');
  assert.equal(decide("SELECT * FROM pg_read_file('/etc/passwd') AS f(x)", ['film']), 'table_not_allowed');
  assert.equal(decide("SELECT pg_read_file('/etc/passwd')", ['film']), 'table_not_allowed');
  assert.equal(decide("SELECT dblink('db', 'select 1')", ['film']), 'table_not_allowed');
  // other sessions' statements, as written: the server's state, not a table
  assert.equal(decide('SELECT pg_stat_get_backend_activity(1) AS q', ['film']), 'table_not_allowed');
  assert.equal(decide('SHOW search_path', ['film']), 'table_not_allowed');
  assert.equal(decide('SHOW FULL PROCESSLIST', ['film'], 'mysql'), 'table_not_allowed');
  assert.equal(decide('SHOW ENGINE INNODB STATUS', ['film'], 'mysql'), 'table_not_allowed');
  assert.equal(decide('SHOW TABLES', ['film'], 'mysql'), 'table_not_allowed');
  assert.equal(decide('SHOW COLUMNS FROM film', ['film'], 'mysql'), 'ok');
  assert.equal(decide('SHOW CREATE TABLE film', ['film'], 'mysql'), 'ok');
  assert.equal(decide('SHOW PROCESSLIST', null, 'mysql'), 'ok');
  // a column definition list is read by neither parser
  assert.equal(decide("SELECT * FROM dblink('db', 'select 1') AS t(a int)", ['film']), 'table_check_failed');
  assert.equal(decide('SELECT * FROM my_rows() r', ['film']), 'table_not_allowed');
  assert.equal(decide('EXPLAIN SELECT * FROM secret', ['film']), 'table_not_allowed');
  assert.equal(decide('SELECT * FROM secret', null), 'ok');
  // cannot be analysed: refused, never guessed
  assert.equal(decide('SELECT $$x$$ FROM film', ['film']), 'table_check_failed');
  assert.equal(decide("SELECT E'it\\'s' FROM film", ['film']), 'table_check_failed');
  assert.equal(decide('SELECT 1 /* a /* b */ c */ FROM film', ['film']), 'table_check_failed');
  assert.equal(decide("SELECT * FROM film WHERE title = 'it\\'s'", ['film'], 'mysql'), 'table_check_failed');
  assert.equal(decide('SELECT 1 /*! , (SELECT pw FROM secret) */ FROM film', ['film'], 'mysql'), 'table_check_failed');
  assert.equal(decide('SELECT 1 --x\n FROM film', ['film'], 'mysql'), 'table_check_failed');
  assert.equal(decide('SELECT `f`.`title` FROM `film` f LIMIT 0, 10', ['film'], 'mysql'), 'ok');
  // an UPDATE's SET value reads tables too, whichever parser reads the statement
  for (const dialect of ['postgres', 'mysql', 'sqlite'] as const) {
    assert.equal(decide('UPDATE film SET title = (SELECT pw FROM secret LIMIT 1)', ['film'], dialect), 'table_not_allowed', dialect);
  }
  assert.equal(
    decide('UPDATE film SET title = (SELECT pw FROM secret LIMIT 1) WHERE film_id IN (SELECT film_id FROM film INTERSECT SELECT 1)', ['film']),
    'table_not_allowed',
  );
  // the message names the allowed and the forbidden tables
  const r = inspectStatement('SELECT * FROM film JOIN rental USING (film_id) JOIN customers USING (customer_id)', 'postgres');
  assert.throws(
    () => checkTables(r.analysis, ['film'], SCHEMA),
    (e: unknown) => {
      const err = e as GatewayError;
      return err.code === 'table_not_allowed' && err.message === 'This API key may only query these tables: film. Forbidden: customers, rental.';
    },
  );
  // a write-op refusal comes before a table refusal
  const w = inspectStatement('DELETE FROM secret', 'postgres');
  assert.throws(
    () => checkStatement(w.scan, { mayWrite: true, allowedWriteOps: ['insert'] }),
    (e: unknown) => (e as GatewayError).code === 'write_op_not_allowed',
  );
});

test('masking application: hash, mask, null, drop', () => {
  const secret = Buffer.from('secret-one');
  const h = hashValue('john@example.com', secret)!;
  assert.match(h, /^[0-9a-f]{16}$/);
  assert.equal(hashValue('john@example.com', secret), h, 'deterministic');
  assert.notEqual(hashValue('john@example.com', Buffer.from('secret-two')), h, 'per secret');
  assert.equal(hashValue(42, secret), hashValue('42', secret), 'text form');
  assert.equal(hashValue(null, secret), null);
  assert.equal(maskValue('john@example.com'), 'j***@example.com');
  assert.equal(maskValue('+4412345678'), '+**********');
  assert.equal(maskValue('Zoë'), 'Z**');
  assert.equal(maskValue(''), '');
  assert.equal(maskValue(12), null);
  assert.equal(maskValue(null), null);

  const a = analyzeStatement('SELECT id, email, phone, national_id, name, lower(email) AS le FROM customers', 'postgres');
  const plan = planMasks(a, SCHEMA, [...RULES, { column: 'customers.name', action: 'null' }]);
  assert.deepEqual(plan.masked, [
    { column: 'email', action: 'hash' },
    { column: 'phone', action: 'mask' },
    { column: 'national_id', action: 'drop' },
    { column: 'name', action: 'null' },
    { column: 'le', action: 'hash' },
  ]);
  const masker = compileMasker(plan, secret);
  const rows = [
    [1, 'john@example.com', '+4412345678', 'X123', 'John', 'john@example.com'],
    [2, null, 5, 'Y', 'Ann', null],
  ];
  const out = masker(['id', 'email', 'phone', 'national_id', 'name', 'le'], rows);
  assert.deepEqual(out.columns, ['id', 'email', 'phone', 'name', 'le']);
  assert.deepEqual(out.rows, [
    [1, h, '+**********', null, h],
    [2, null, null, null, null],
  ]);
  assert.equal(out.rows, rows, 'rows changed in place');
});

test('masking: strictest rule wins, wildcards, case and schema prefixes', () => {
  const a = analyzeStatement('SELECT email, customer_id, id FROM customers c JOIN orders o ON o.customer_id = c.id', 'postgres');
  const rules: MaskRule[] = [
    { column: '*.email', action: 'hash' },
    { column: 'CUSTOMERS.EMAIL', action: 'null' },
    { column: 'shop.customers.email', action: 'mask' },
    { column: 'orders.*_id', action: 'mask' },
  ];
  // `id` is ambiguous between customers and orders (the database would refuse it); both count
  assert.deepEqual(planMasks(a, SCHEMA, rules).actions, ['null', 'mask', null]);
  assert.deepEqual(
    planMasks(a, SCHEMA, [
      { column: 'customers.*', action: 'drop' },
      { column: '*.*', action: 'hash' },
    ]).actions,
    ['drop', 'hash', 'drop'],
  );
});

test('masking: fails closed, naming the column, only when a rule exists', () => {
  const a = analyzeStatement('SELECT v.email AS contact FROM customers_view v', 'postgres');
  assert.throws(
    () => planMasks(a, SCHEMA, RULES),
    (e: unknown) => {
      const err = e as GatewayError;
      return err.code === 'mask_unresolvable' && err.message.includes("'contact'");
    },
  );
  assert.throws(
    () => planMasks(a, SCHEMA, RULES, ['Contact']),
    (e: unknown) => (e as GatewayError).message.includes("'Contact'"),
  );
  assert.deepEqual(planMasks(a, SCHEMA, []).actions, []);
  // the result must line up with the plan
  const b = analyzeStatement('SELECT * FROM customers', 'postgres');
  assert.throws(
    () => planMasks(b, SCHEMA, RULES, ['id', 'name']),
    (e: unknown) => (e as GatewayError).code === 'mask_unresolvable',
  );
  // a statement that can't be analysed
  const r = inspectStatement('SELECT $$x$$', 'postgres');
  assert.throws(
    () => planMasks(r.analysis, SCHEMA, RULES),
    (e: unknown) => (e as GatewayError).code === 'mask_unresolvable',
  );
});

test("seeds' governed examples", () => {
  const film = analyzeStatement(
    "SELECT f.film_id, f.title, f.category, f.rating, f.length, SUM(CASE WHEN r.rental_date >= datetime('now','-30 days') THEN 1 ELSE 0 END) AS rentals_last_30_days, SUM(CASE WHEN r.return_date IS NULL AND r.rental_id IS NOT NULL THEN 1 ELSE 0 END) AS currently_rented FROM film f LEFT JOIN rental r ON r.film_id = f.film_id WHERE f.film_id = :film_id GROUP BY f.film_id",
    'sqlite',
  );
  assert.equal(film.parser, 'pgsql-ast-parser');
  assert.doesNotThrow(() => checkTables(film, ['film', 'rental'], schemaFor('sqlite')));
  assert.throws(
    () => checkTables(film, ['film'], schemaFor('sqlite')),
    (e: unknown) => (e as GatewayError).code === 'table_not_allowed',
  );
  const plan = planMasks(film, schemaFor('sqlite'), [{ column: '*.title', action: 'hash' }]);
  assert.deepEqual(plan.actions, [null, 'hash', null, null, null, null, null]);
  const secret = Buffer.from('k');
  const out = compileMasker(plan, secret)(
    ['film_id', 'title', 'category', 'rating', 'length', 'rentals_last_30_days', 'currently_rented'],
    [[1, 'ACADEMY DINOSAUR', 'Documentary', 'PG', 86, 3, 1]],
  );
  assert.deepEqual(out.rows[0], [1, hashValue('ACADEMY DINOSAUR', secret), 'Documentary', 'PG', 86, 3, 1]);

  const rules = [{ column: '*.abalance', action: 'hash' }];
  const one = analyzeStatement('SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = :aid', 'postgres');
  assert.deepEqual(one.tables, ['pgbench_accounts']);
  assert.deepEqual(planMasks(one, SCHEMA, rules).actions, [null, null, 'hash']);
  const range = analyzeStatement(
    'SELECT a.aid, a.abalance, b.bid, b.bbalance FROM pgbench_accounts a JOIN pgbench_branches b ON b.bid = a.bid WHERE a.aid BETWEEN :start AND :start + 99 ORDER BY a.aid',
    'postgres',
  );
  assert.deepEqual(range.tables, ['pgbench_accounts', 'pgbench_branches']);
  assert.deepEqual(planMasks(range, SCHEMA, rules).actions, [null, 'hash', null, null]);
});

test('schema queries and rows: every relation, the search path, the case rules', () => {
  assert.match(schemaQueries('postgres')[0], /information_schema\.columns/);
  assert.match(schemaQueries('postgres')[2], /current_schemas\(true\)/);
  assert.match(schemaQueries('sqlite')[0], /pragma_table_list/);
  assert.match(schemaQueries('mysql')[1], /lower_case_table_names/);
  const pg = toSchema('postgres', [
    [
      ['archive', 'film', 'other', 'text', 'BASE TABLE'],
      ['public', 'Film', 'film_id', 'integer', 'BASE TABLE'],
      ['public', 'Film', 'Title', 'text', 'BASE TABLE'],
      ['public', 'rental', 'rental_id', 'bigint', 'BASE TABLE'],
      ['public', 'v', 'x', 'integer', 'VIEW'],
    ],
    [
      ['pg_catalog', 'pg_class'],
      ['public', 'Film'],
      ['public', 'mv'],
    ],
    [['pg_catalog'], ['public'], ['archive']],
  ]);
  assert.deepEqual(pg.path, ['pg_catalog', 'public', 'archive']);
  // exact case: "Film" is not film, which the path finds in archive
  assert.deepEqual(resolveTable(pg, 'Film')?.columns, ['film_id', 'Title']);
  assert.deepEqual(resolveTable(pg, 'film')?.columns, ['other']);
  assert.equal(resolveTable(pg, 'public\u0000film'), null);
  assert.equal(resolveTable(pg, 'v')?.columns, null, 'a view is known, not traceable');
  assert.equal(resolveTable(pg, 'mv')?.columns, null, 'a materialized view too');
  assert.equal(resolveTable(pg, 'pg_class')?.schema, 'pg_catalog', 'the catalog is searched first');
  assert.deepEqual(resolveTable(pg, 'rental')?.types, ['bigint']);
  // MySQL: the current database; lower_case_table_names decides case
  const rows = [
    ['shop', 'Orders', 'id', 'int', 'BASE TABLE', null, 'InnoDB'],
    ['other', 'orders', 'secret', 'text', 'BASE TABLE', null, 'InnoDB'],
    // a MERGE table reads the rows of the tables it unions, as a view does
    ['shop', 'merged', 'secret', 'text', 'BASE TABLE', null, 'MRG_MyISAM'],
  ];
  const exact = toSchema('mysql', [rows, [['shop', 0]]]);
  assert.equal(resolveTable(exact, 'orders'), null);
  assert.deepEqual(resolveTable(exact, 'Orders')?.columns, ['id']);
  assert.deepEqual(resolveTable(exact, 'other\u0000orders')?.columns, ['secret']);
  assert.equal(resolveTable(exact, 'merged')?.columns, null);
  const folded = toSchema('mysql', [rows, [['shop', 1]]]);
  assert.deepEqual(resolveTable(folded, 'ORDERS')?.columns, ['id']);
  assert.deepEqual(resolveTable(folded, 'OTHER\u0000Orders')?.columns, ['secret']);
  // SQLite: temp before main, any case
  const lite = toSchema('sqlite', [
    [
      ['main', 't', 'a', 'INTEGER', 'table'],
      ['temp', 'T', 'b', '', 'table'],
    ],
    [['temp'], ['main']],
  ]);
  assert.deepEqual(resolveTable(lite, 't')?.columns, ['b']);
  assert.deepEqual(resolveTable(lite, 'MAIN\u0000t')?.columns, ['a']);
});

test("SQLite's generated columns carry the names their expression reads, from the CREATE text", () => {
  // [CREATE text, the table's columns (a generated one hidden 2 or 3), the generated column, what it carries]
  const cases: Array<[string, string[], string, string[]]> = [
    ['CREATE TABLE t (id INTEGER, email TEXT, low TEXT GENERATED ALWAYS AS (lower(email)) STORED)', ['id', 'email', 'low'], 'low', ['email']],
    ['CREATE TABLE t (id INTEGER, email TEXT, low TEXT AS (lower(email)))', ['id', 'email', 'low'], 'low', ['email']],
    ["CREATE TABLE t (id INTEGER, email TEXT, tag TEXT AS ('email' || id))", ['id', 'email', 'tag'], 'tag', ['id']],
    ['CREATE TABLE t (id INTEGER, email TEXT, "Loud" TEXT AS (upper([email])) VIRTUAL)', ['id', 'email', 'Loud'], 'Loud', ['email']],
    ['CREATE TABLE t (id INTEGER, Email TEXT, n INT AS (length("EMAIL") + id))', ['id', 'Email', 'n'], 'n', ['id', 'Email']],
    [
      "CREATE TABLE t (id INTEGER, email TEXT, d TEXT AS (substr(email, instr(email, '@') + 1)), CHECK (length(email) > 0))",
      ['id', 'email', 'd'],
      'd',
      ['email'],
    ],
    // a CHECK's CAST ... AS in the same definition is not the expression
    ['CREATE TABLE t (id INTEGER, email TEXT, n INT CHECK (CAST(email AS INT) > 0) AS (id * 2))', ['id', 'email', 'n'], 'n', ['id']],
    // another generated column named, carried in turn by masking.ts carry
    ["CREATE TABLE t (email TEXT, a TEXT AS (lower(email)), b TEXT AS (a || '!'))", ['email', 'a', 'b'], 'b', ['a']],
    ["CREATE TABLE t (id INTEGER, email TEXT, late TEXT AS (email || '') /* added by ALTER TABLE */)", ['id', 'email', 'late'], 'late', ['email']],
    // not read as expected: every other column
    ['CREATE TABLE t (id INTEGER, email TEXT, odd TEXT)', ['id', 'email', 'odd'], 'odd', ['id', 'email']],
    ['CREATE TABLE t (id INTEGER, email TEXT, cut TEXT AS (lower(email)', ['id', 'email', 'cut'], 'cut', ['id', 'email']],
  ];
  for (const [create, columns, generated, carried] of cases) {
    const rows = columns.map((c) => ['main', 't', c, 'TEXT', 'table', c === generated ? 2 : 0]);
    const lite = toSchema('sqlite', [rows, [['main']], [['main', 't', create]]]);
    assert.deepEqual(resolveTable(lite, 't')?.generated?.get(generated), carried, create);
  }
  // an attached database's CREATE texts are not read: every other column
  const attached = toSchema('sqlite', [
    [
      ['aux', 't', 'email', 'TEXT', 'table', 0],
      ['aux', 't', 'low', 'TEXT', 'table', 3],
      ['aux', 't', 'id', 'INTEGER', 'table', 0],
    ],
    [['main'], ['aux']],
    [],
  ]);
  assert.deepEqual(resolveTable(attached, 'aux\u0000t')?.generated?.get('low'), ['email', 'id']);
});
