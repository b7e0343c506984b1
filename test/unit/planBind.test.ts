// Tests for the plan and bind stages end to end: a saved version planned per dialect (positional
// text, value order, paging window, write detection, one statement only), the plan cache, and the
// caller's values going through the version's binder into the values a driver receives. The fine
// coercion rules are params.test.ts's; here the point is that text and values line up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { LRUCache } from 'lru-cache';
import type { ParamSource } from '../../src/call/binder.js';
import { normalizeParameters } from '../../src/call/paramRules.js';
import { fillValues, pagedStatement, planCall, planFor, type CallPlan } from '../../src/call/plan.js';
import { GatewayError } from '../../src/contract/errors.js';
import { scanMarkers } from '../../src/governance/markers.js';
import type { Dialect } from '../../src/sources/types.js';
import type { VersionRow } from '../../src/store/types.js';

const DIALECTS: Dialect[] = ['postgres', 'mysql', 'sqlite'];

function version(sql: string, parameters: Record<string, unknown> = {}, uuid = 'v-1'): VersionRow {
  return {
    version: 1,
    uuid,
    was_published: true,
    created_at: '',
    last_modified_at: '',
    sql,
    connection_name: 'db',
    parameters,
    description: '',
    author: null,
    tags: [],
    cache_ttl: null,
  };
}

/**
 * Rules as the store keeps them: normalised at save time. A save now refuses undeclared markers,
 * but versions saved before that still hold them, so the binder keeps passing them through.
 */
function rules(sql: string, definitions: Record<string, unknown>): Record<string, unknown> {
  const { rules: normal, errors, undeclared } = normalizeParameters(definitions, scanMarkers(sql).placeholders);
  for (const name of undeclared) delete errors[name];
  assert.deepEqual(errors, {}, 'the definitions are valid');
  return normal;
}

test('planCall: positional text and value order per dialect', async (t) => {
  const cases: Array<{ sql: string; postgres: string; other: string; pgOrder: number[]; order: number[] }> = [
    {
      sql: 'SELECT * FROM film WHERE film_id = :id',
      postgres: 'SELECT * FROM film WHERE film_id = $1',
      other: 'SELECT * FROM film WHERE film_id = ?',
      pgOrder: [0],
      order: [0],
    },
    // names are numbered in order of first use; postgres reuses a number, ? needs one value per use
    {
      sql: 'SELECT :b AS b, :a AS a, :b AS again',
      postgres: 'SELECT $1 AS b, $2 AS a, $1 AS again',
      other: 'SELECT ? AS b, ? AS a, ? AS again',
      pgOrder: [0, 1],
      order: [0, 1, 0],
    },
    // markers in strings, comments and casts are not markers
    {
      sql: "SELECT ':no', x::int /* :no */ FROM t WHERE y = :yes",
      postgres: "SELECT ':no', x::int /* :no */ FROM t WHERE y = $1",
      other: "SELECT ':no', x::int /* :no */ FROM t WHERE y = ?",
      pgOrder: [0],
      order: [0],
    },
    // a trailing ; and whitespace are dropped before anything else
    { sql: 'SELECT 1 AS one ;  \n', postgres: 'SELECT 1 AS one', other: 'SELECT 1 AS one', pgOrder: [], order: [] },
  ];
  for (const c of cases) {
    for (const dialect of DIALECTS) {
      await t.test(`${dialect}: ${JSON.stringify(c.sql)}`, () => {
        const plan = planCall('id', version(c.sql), dialect);
        assert.equal(plan.text, dialect === 'postgres' ? c.postgres : c.other);
        assert.deepEqual(plan.order, dialect === 'postgres' ? c.pgOrder : c.order);
      });
    }
  }
});

test('planCall: what pages in the database, what writes', async (t) => {
  // [sql, dialects, pageable, write]
  const cases: Array<[string, Dialect[], boolean, boolean]> = [
    ['SELECT id FROM t', DIALECTS, true, false],
    ['select id from t order by id limit 5', DIALECTS, true, false],
    ['WITH x AS (SELECT 1 AS n) SELECT n FROM x', DIALECTS, true, false],
    // reads that cannot be a subquery are sliced after the fact
    ['SHOW search_path', ['postgres'], false, false],
    ['SHOW TABLES', ['mysql'], false, false],
    ['EXPLAIN SELECT id FROM t', DIALECTS, false, false],
    ["VALUES (1, 'a')", ['postgres', 'sqlite'], false, false],
    // writes: never paged
    ['UPDATE t SET a = 1 WHERE id = :id', DIALECTS, false, true],
    ['INSERT INTO t (a) VALUES (:a)', DIALECTS, false, true],
    ['DELETE FROM t WHERE id = 1', DIALECTS, false, true],
    // a write hidden in a CTE, and SELECT ... INTO, are writes whatever the first keyword says
    ['WITH gone AS (DELETE FROM t WHERE id = 1 RETURNING id) SELECT id FROM gone', ['postgres'], false, true],
    ['WITH n AS (SELECT 1 AS a) INSERT INTO t (a) SELECT a FROM n', DIALECTS, false, true],
    ['SELECT * INTO backup FROM t', ['postgres'], false, true],
  ];
  for (const [sql, dialects, pageable, write] of cases) {
    for (const dialect of dialects) {
      await t.test(`${dialect}: ${sql}`, () => {
        const plan = planCall('id', version(sql), dialect);
        assert.equal(plan.pageable, pageable, 'pageable');
        assert.equal(plan.write, write, 'write');
      });
    }
  }
});

test('planCall: more than one statement is refused before anything runs', async (t) => {
  const cases: Array<[string, Dialect[]]> = [
    ['SELECT 1; SELECT 2', DIALECTS],
    ['SELECT 1; DROP TABLE t', DIALECTS],
    ["SELECT ';'; DELETE FROM t", DIALECTS],
    // in MySQL `--` needs a space after it to start a comment, so this ; is not hidden
    ['SELECT 1 --; DELETE FROM t', ['mysql']],
    // in MySQL `$a$` is a name, not a quote
    ['SELECT $a$; DELETE FROM t; $a$', ['mysql']],
  ];
  for (const [sql, dialects] of cases) {
    for (const dialect of dialects) {
      await t.test(`${dialect}: ${JSON.stringify(sql)}`, () => {
        assert.throws(
          () => planCall('id', version(sql), dialect),
          (e: unknown) => e instanceof GatewayError && e.code === 'multiple_statements',
        );
      });
    }
  }
  // a ; inside a string or a trailing one is not a second statement
  for (const dialect of DIALECTS) {
    assert.doesNotThrow(() => planCall('id', version("SELECT ';' AS semi;"), dialect));
  }
  // and the same texts are one statement where the dialect hides the ; (a comment, a dollar quote)
  assert.doesNotThrow(() => planCall('id', version('SELECT 1 --; DELETE FROM t'), 'postgres'));
  assert.doesNotThrow(() => planCall('id', version('SELECT $a$; DELETE FROM t; $a$ AS s'), 'postgres'));
});

test('planCall: the paging window wraps the statement and numbers past its own values', () => {
  const sql = 'SELECT id FROM t WHERE a = :a AND b = :b AND c = :a ORDER BY id LIMIT 50';
  const pg = planCall('id', version(sql), 'postgres');
  assert.equal(pg.pagedText, 'SELECT * FROM (\nSELECT id FROM t WHERE a = $1 AND b = $2 AND c = $1 ORDER BY id LIMIT 50\n) AS _qag_page LIMIT $3 OFFSET $4');
  const my = planCall('id', version(sql), 'mysql');
  assert.equal(my.pagedText, 'SELECT * FROM (\nSELECT id FROM t WHERE a = ? AND b = ? AND c = ? ORDER BY id LIMIT 50\n) AS _qag_page LIMIT ? OFFSET ?');
  // the first page has no OFFSET (PostgreSQL then keeps a generic plan for the prepared statement)
  assert.equal(pg.firstPageText, 'SELECT * FROM (\nSELECT id FROM t WHERE a = $1 AND b = $2 AND c = $1 ORDER BY id LIMIT 50\n) AS _qag_page LIMIT $3');
  assert.equal(my.firstPageText, 'SELECT * FROM (\nSELECT id FROM t WHERE a = ? AND b = ? AND c = ? ORDER BY id LIMIT 50\n) AS _qag_page LIMIT ?');
  // the window starts on its own line, so a trailing -- comment cannot swallow it
  const commented = planCall('id', version('SELECT 1 AS one -- the end'), 'sqlite');
  assert.match(commented.pagedText, /-- the end\n\) AS _qag_page LIMIT \? OFFSET \?$/);
});

test('fillValues: limit and offset are appended only when the call is paged', async (t) => {
  const read = 'SELECT :b AS b, :a AS a, :b AS again';
  const write = 'UPDATE t SET a = :a WHERE b = :b OR c = :b';
  // [sql, dialect, bound (in placeholder order), default fill, unpaged fill]
  const cases: Array<[string, Dialect, unknown[], unknown[], unknown[]]> = [
    [read, 'postgres', ['B', 'A'], ['B', 'A', 11, 20], ['B', 'A']],
    [read, 'mysql', ['B', 'A'], ['B', 'A', 'B', 11, 20], ['B', 'A', 'B']],
    [read, 'sqlite', ['B', 'A'], ['B', 'A', 'B', 11, 20], ['B', 'A', 'B']],
    // a write is never paged, whatever limit and offset the call computed
    [write, 'postgres', ['A', 'B'], ['A', 'B'], ['A', 'B']],
    [write, 'mysql', ['A', 'B'], ['A', 'B', 'B'], ['A', 'B', 'B']],
    // a read that is not pageable (SHOW) neither
    ['SHOW search_path', 'postgres', [], [], []],
  ];
  for (const [sql, dialect, bound, paged, unpaged] of cases) {
    await t.test(`${dialect}: ${sql}`, () => {
      const plan = planCall('id', version(sql), dialect);
      assert.deepEqual(fillValues(plan, bound, 11, 20), paged);
      assert.deepEqual(fillValues(plan, bound, 11, 20, false), unpaged);
      // the first page: the limit without the offset, when paged
      const first = fillValues(plan, bound, 11, 0);
      assert.deepEqual(first, plan.pageable ? paged.slice(0, -1) : paged);
      // as many values as the text they go with has placeholders
      const slots = (text: string) => (dialect === 'postgres' ? new Set(text.match(/\$\d+/g) ?? []).size : (text.match(/\?/g) ?? []).length);
      assert.equal(paged.length, slots(pagedStatement(plan, 20)));
      assert.equal(first.length, slots(pagedStatement(plan, 0)));
    });
  }
});

test('planFor: one plan per version, connection and dialect', () => {
  const plans = new LRUCache<string, CallPlan>({ max: 10 });
  const v1 = version('SELECT :a AS a', {}, 'uuid-1');
  const first = planFor(plans, v1, 'pg', 'postgres');
  // the same version on the same connection: the cached object, even from another copy of the row
  assert.equal(planFor(plans, v1, 'pg', 'postgres'), first);
  assert.equal(planFor(plans, { ...v1 }, 'pg', 'postgres'), first);
  // anything else is planned afresh
  const others = [
    planFor(plans, version('SELECT :a AS a', {}, 'uuid-2'), 'pg', 'postgres'),
    planFor(plans, v1, 'replica', 'postgres'),
    planFor(plans, v1, 'pg', 'mysql'),
  ];
  for (const p of others) assert.notEqual(p, first);
  assert.equal(new Set([first, ...others]).size, 4);
  assert.equal(plans.size, 4);
  // the id names the plan in the caches built on it (mask traces), so it differs with the key
  assert.equal(new Set([first, ...others].map((p) => p.id)).size, 4);
  // the dialect is in the text: a mysql plan of the same version binds with ?
  assert.equal(others[2].text, 'SELECT ? AS a');
  assert.equal(first.text, 'SELECT $1 AS a');
});

function fromQuery(values: Record<string, string>): ParamSource {
  return { kind: 'query', get: (n) => (Object.hasOwn(values, n) ? values[n] : undefined) };
}

function fromJson(values: Record<string, unknown>): ParamSource {
  return { kind: 'json', get: (n) => (Object.hasOwn(values, n) ? values[n] : undefined) };
}

interface BindCase {
  label: string;
  sql: string;
  definitions: Record<string, unknown>;
  source: ParamSource;
  /** What each dialect's driver receives (page_size 10 on page 3: limit 11, offset 20), or the code. */
  postgres: unknown[] | string;
  /** The ? dialects, when they differ from postgres (repeated markers). */
  other?: unknown[];
  /** For refusals: the names the error lists. */
  names?: string[];
}

test('bind: (rules, source) -> the values a driver receives, or the refusal', async (t) => {
  const cases: BindCase[] = [
    {
      label: 'query-string text is coerced to the declared type',
      sql: 'SELECT * FROM t WHERE id = :id',
      definitions: { id: 'int' },
      source: fromQuery({ id: '7' }),
      postgres: [7, 11, 20],
    },
    {
      label: 'JSON values arrive typed',
      sql: 'SELECT * FROM t WHERE id = :id',
      definitions: { id: 'int' },
      source: fromJson({ id: 7 }),
      postgres: [7, 11, 20],
    },
    {
      label: 'a JSON value must already have its type',
      sql: 'SELECT * FROM t WHERE id = :id',
      definitions: { id: 'int' },
      source: fromJson({ id: '7' }),
      postgres: 'param_invalid',
      names: ['id'],
    },
    {
      label: 'a missing required value',
      sql: 'SELECT * FROM t WHERE id = :id',
      definitions: { id: 'int' },
      source: fromQuery({}),
      postgres: 'param_required',
      names: ['id'],
    },
    {
      label: 'an explicit JSON null for a required value',
      sql: 'SELECT * FROM t WHERE id = :id',
      definitions: { id: 'int' },
      source: fromJson({ id: null }),
      postgres: 'param_required',
      names: ['id'],
    },
    {
      label: 'an optional value left out binds its default',
      sql: 'SELECT * FROM t LIMIT :n',
      definitions: { n: { type: 'int', required: false, default: 5 } },
      source: fromQuery({}),
      postgres: [5, 11, 20],
    },
    {
      label: 'an optional value without a default binds NULL',
      sql: 'SELECT * FROM t WHERE :q IS NULL OR name = :q',
      definitions: { q: { type: 'str', required: false } },
      source: fromQuery({}),
      postgres: [null, 11, 20],
      other: [null, null, 11, 20],
    },
    // one value per distinct name, repeated where the ? dialects use it again
    {
      label: 'a repeated marker is bound once',
      sql: 'SELECT * FROM t WHERE a = :a OR b = :b OR c = :a',
      definitions: { a: 'int', b: 'str' },
      source: fromQuery({ a: '1', b: 'x' }),
      postgres: [1, 'x', 11, 20],
      other: [1, 'x', 1, 11, 20],
    },
    // placeholders without a rule pass through as sent, and are required
    {
      label: 'an undeclared placeholder passes text through',
      sql: 'SELECT * FROM t WHERE code = :code',
      definitions: {},
      source: fromQuery({ code: '007' }),
      postgres: ['007', 11, 20],
    },
    {
      label: 'an undeclared placeholder is required',
      sql: 'SELECT * FROM t WHERE code = :code',
      definitions: {},
      source: fromQuery({}),
      postgres: 'param_required',
      names: ['code'],
    },
    // parameters the caller sends that the statement does not use are ignored
    {
      label: 'extra values are ignored',
      sql: 'SELECT * FROM t WHERE id = :id',
      definitions: { id: 'int' },
      source: fromQuery({ id: '1', other: 'x', format: 'csv' }),
      postgres: [1, 11, 20],
    },
    // every problem at once; one broken rule makes it param_invalid
    {
      label: 'every problem is reported at once',
      sql: 'SELECT * FROM t WHERE a = :a AND b = :b AND c = :c',
      definitions: { a: 'int', b: { type: 'int', min: 1 } },
      source: fromQuery({ b: '0' }),
      postgres: 'param_invalid',
      names: ['a', 'b', 'c'],
    },
    {
      label: 'only missing values: param_required',
      sql: 'SELECT * FROM t WHERE a = :a AND c = :c',
      definitions: { a: 'int' },
      source: fromQuery({}),
      postgres: 'param_required',
      names: ['a', 'c'],
    },
    {
      label: 'an integer beyond 2^53 is bound exactly',
      sql: 'SELECT * FROM t WHERE big = :big',
      definitions: { big: 'int' },
      source: fromQuery({ big: '9007199254740993' }),
      postgres: [9007199254740993n, 11, 20],
    },
    {
      label: 'booleans from text',
      sql: 'SELECT * FROM t WHERE on_sale = :s',
      definitions: { s: 'bool' },
      source: fromQuery({ s: 'YES' }),
      postgres: [true, 11, 20],
    },
    {
      label: 'an enum is checked on the way',
      sql: 'SELECT * FROM t WHERE rating = :r',
      definitions: { r: { type: 'str', enum: ['G', 'PG'] } },
      source: fromQuery({ r: 'R' }),
      postgres: 'param_invalid',
      names: ['r'],
    },
  ];
  for (const c of cases) {
    for (const dialect of DIALECTS) {
      await t.test(`${dialect}: ${c.label}`, () => {
        const plan = planCall('id', version(c.sql, rules(c.sql, c.definitions)), dialect);
        let got: unknown;
        try {
          got = fillValues(plan, plan.bind(c.source), 11, 20);
        } catch (e) {
          assert.ok(e instanceof GatewayError, String(e));
          got = e.code;
          assert.deepEqual(Object.keys(e.extras?.errors ?? {}), c.names);
          for (const n of c.names ?? []) assert.ok(e.message.includes(n), `the message names ${n}: ${e.message}`);
        }
        const want = typeof c.postgres === 'string' || dialect === 'postgres' ? c.postgres : (c.other ?? c.postgres);
        assert.deepEqual(got, want);
      });
    }
  }
});

test('bind: stored rules in short form are read leniently', () => {
  // a row saved before normalisation, or written by hand: "int" still types the value
  const plan = planCall('id', version('SELECT * FROM t WHERE id = :id', { id: 'int' }), 'sqlite');
  assert.deepEqual(plan.bind(fromQuery({ id: '42' })), [42]);
  assert.throws(
    () => plan.bind(fromQuery({ id: 'x' })),
    (e: unknown) => e instanceof GatewayError && e.code === 'param_invalid',
  );
});

test('plan and bind against a real SQLite database: text and values line up, pages are cut', () => {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, kind TEXT)');
  const insert = db.prepare('INSERT INTO t VALUES (?, ?)');
  for (let i = 1; i <= 25; i++) insert.run(i, i % 2 ? 'odd' : 'even');
  const sql = 'SELECT id FROM t WHERE kind = :kind AND id >= :min OR (kind = :kind AND id = 0) ORDER BY id';
  const plan = planCall('id', version(sql, rules(sql, { kind: 'str', min: 'int' })), 'sqlite');
  const bound = plan.bind(fromQuery({ kind: 'odd', min: '3' }));
  const page = (n: number, size: number) =>
    (
      db
        .prepare(pagedStatement(plan, (n - 1) * size))
        .raw()
        .all(...fillValues(plan, bound, size + 1, (n - 1) * size)) as number[][]
    ).map((r) => r[0]);
  // odd ids from 3: 3, 5, ..., 25 (12 rows); one row more than the page tells there is more
  assert.deepEqual(page(1, 5), [3, 5, 7, 9, 11, 13]);
  assert.deepEqual(page(3, 5), [23, 25]);
  assert.deepEqual(
    (
      db
        .prepare(plan.text)
        .raw()
        .all(...fillValues(plan, bound, 0, 0, false)) as number[][]
    ).length,
    12,
  );
  db.close();
});
