// The class "every identifier form the database accepts reaches the analysis as the name the database
// resolves, or the statement is refused": PostgreSQL's Unicode escapes (U&"..." and U&'...', with or
// without UESCAPE), doubled quotes inside quoted names, and doubled backticks in MySQL and SQLite.
// Each shape is held against the three policies that depend on names: the read-only guard of a key
// that may not write, a table allow-list, and a mask rule.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../src/contract/errors.js';
import { inspectStatement, type SqlDialect } from '../../src/governance/analysis.js';
import { planMasks } from '../../src/governance/masking.js';
import { schemaOf } from '../../src/governance/names.js';
import { checkStatement, checkTables } from '../../src/governance/policy.js';

const TABLES = new Map<string, string[]>([
  ['customers', ['id', 'name', 'email', 'e"mail', 'e`mail']],
  ['orders', ['id', 'customer_id', 'total']],
]);
const MASK = [
  { column: 'customers.email', action: 'hash' },
  { column: 'customers.e"mail', action: 'hash' },
  { column: 'customers.e`mail', action: 'hash' },
];

/** What each policy answers: 'ok', or the error code. */
interface Verdicts {
  readOnlyKey: string;
  tableKey: string;
  maskKey: string;
}

function verdicts(sql: string, dialect: SqlDialect): Verdicts {
  const { scan, analysis } = inspectStatement(sql, dialect);
  const SCHEMA = schemaOf(dialect, TABLES);
  const run = (f: () => void) => {
    try {
      f();
      return 'ok';
    } catch (e) {
      if (e instanceof GatewayError) return e.code;
      throw e;
    }
  };
  return {
    readOnlyKey: run(() => checkStatement(scan, { mayWrite: false, allowedWriteOps: null })),
    tableKey: run(() => {
      checkStatement(scan, { mayWrite: true, allowedWriteOps: null });
      checkTables(analysis, ['customers'], SCHEMA);
    }),
    maskKey: run(() => {
      checkStatement(scan, { mayWrite: false, allowedWriteOps: null });
      planMasks(analysis, SCHEMA, MASK);
    }),
  };
}

// PostgreSQL reads each of these as a Unicode-escaped name or string; the parsers read `U & "..."`.
const UNICODE_ESCAPES = [
  'SELECT U&"\\0065mail" FROM customers',
  'SELECT u&"\\0065mail" FROM customers',
  'SELECT U&"\\+000065mail" FROM customers',
  'SELECT U&"!0065mail" UESCAPE \'!\' FROM customers',
  'SELECT c.U&"\\0065mail" FROM customers c',
  'SELECT * FROM U&"\\006frders"',
  'SELECT name FROM public.U&"\\006frders"',
  "SELECT * FROM U&\"\\0071uery_to_xml\"('select email from customers', true, false, '') AS x",
  'SELECT * FROM U&"pg_read_file"(\'/etc/passwd\') AS f(line)',
  "SELECT U&\"\\0073et_config\"('search_path', 'private', false) AS s",
  "SELECT name FROM customers WHERE name = U&'\\0041'",
  'SELECT name AS U&"\\0065mail" FROM customers',
  'WITH x AS (SELECT U&"\\0065mail" AS e FROM customers) SELECT e FROM x',
  'SELECT name FROM customers WHERE id IN (SELECT U&"id" FROM orders)',
  'EXPLAIN SELECT U&"\\0065mail" FROM customers',
  'SELECT name FROM customers UNION SELECT U&"\\0065mail" FROM customers',
];

test('postgres: a Unicode-escaped name or string is refused by every policy that reads names', async (t) => {
  for (const sql of UNICODE_ESCAPES) {
    await t.test(sql, () => {
      assert.deepEqual(verdicts(sql, 'postgres'), { readOnlyKey: 'read_only', tableKey: 'table_check_failed', maskKey: 'read_only' });
    });
  }
});

// Look-alikes that are not Unicode escapes: a string or a comment holding the text, `&` with spaces.
const NOT_ESCAPES = [
  'SELECT \'U&"x"\' AS s FROM customers',
  'SELECT name FROM customers -- U&"x"',
  'SELECT name FROM customers /* U&"x" */',
  'SELECT id & 1 AS b FROM customers',
  'SELECT u & 1 AS b FROM (SELECT id AS u FROM customers) s',
  'SELECT "name" AS u FROM customers',
];

test('postgres: look-alikes of a Unicode escape are read as usual', async (t) => {
  for (const sql of NOT_ESCAPES) {
    await t.test(sql, () => {
      assert.deepEqual(verdicts(sql, 'postgres'), { readOnlyKey: 'ok', tableKey: 'ok', maskKey: 'ok' });
    });
  }
});

test('mysql and sqlite: U& has no meaning there and is read as the bitwise and it is', () => {
  assert.deepEqual(verdicts("SELECT U&'x' AS b FROM (SELECT id AS u FROM customers) s", 'mysql'), { readOnlyKey: 'ok', tableKey: 'ok', maskKey: 'ok' });
  assert.deepEqual(verdicts('SELECT id&1 AS b FROM customers', 'sqlite'), { readOnlyKey: 'ok', tableKey: 'ok', maskKey: 'ok' });
});

test('postgres and sqlite: a doubled quote inside a quoted name is the name the database resolves', async (t) => {
  for (const dialect of ['postgres', 'sqlite'] as const) {
    for (const sql of [
      'SELECT "e""mail" FROM customers',
      'SELECT c."e""mail" AS x FROM customers c',
      'SELECT x FROM (SELECT "e""mail" AS x FROM customers) s',
    ]) {
      await t.test(`${dialect}: ${sql}`, () => {
        const { analysis } = inspectStatement(sql, dialect);
        assert.ok(analysis, 'analysed');
        const plan = planMasks(analysis, schemaOf(dialect, TABLES), MASK);
        assert.deepEqual(plan.actions, ['hash'], 'the rule on customers.e"mail applies');
      });
    }
  }
});

test('mysql and sqlite: a doubled backtick inside a name is refused where names matter', async (t) => {
  for (const dialect of ['mysql', 'sqlite'] as const) {
    for (const sql of [
      'SELECT `e``mail` FROM customers',
      'SELECT c.`e``mail` FROM customers c',
      'SELECT name FROM `cust``omers`',
      'SELECT `x``` FROM customers',
    ]) {
      await t.test(`${dialect}: ${sql}`, () => {
        // A key without table or mask rules needs no names; the others fail closed.
        assert.deepEqual(verdicts(sql, dialect), { readOnlyKey: 'ok', tableKey: 'table_check_failed', maskKey: 'mask_unresolvable' });
      });
    }
  }
});
