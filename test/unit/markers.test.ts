// Tests for the SQL scanner: marker scanning, positional rewriting, statement splitting, first keyword.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { countStatements, firstKeyword, scanMarkers, splitsIntoMultipleStatements, toPositional, type MarkerDialect } from '../../src/governance/markers.js';

test('scanMarkers: which markers count', async (t) => {
  const cases: { sql: string; dialect?: MarkerDialect; want: string[] }[] = [
    { sql: 'SELECT * FROM film WHERE film_id = :id', want: ['id'] },
    { sql: 'SELECT :a, :b, :a, :_c9', want: ['a', 'b', '_c9'] },
    { sql: 'SELECT :b, :a', want: ['b', 'a'] },
    { sql: "SELECT ':x', 'it''s :y', :z", want: ['z'] },
    { sql: 'SELECT ":x", `:y`, :z', want: ['z'] },
    { sql: 'SELECT 1 -- :x\n, :y', want: ['y'] },
    { sql: 'SELECT /* :x */ :y /* :z', want: ['y'] },
    { sql: 'SELECT x::int, :a::text, y :: int', want: ['a'] },
    { sql: 'SELECT :1, : a, :', want: [] },
    { sql: 'SELECT :a1b2_c, :A', want: ['a1b2_c', 'A'] },
    { sql: "SELECT '12:30', :t", want: ['t'] },
    { sql: "SELECT 'unterminated :x", want: [] },
    { sql: 'SET @v := 1; SELECT :a', want: ['a'] },
    { sql: 'SELECT arr[1:2], arr[:lo]', want: ['lo'] },
    // dollar quotes: postgres only
    { sql: 'SELECT $$ :x $$, :y', dialect: 'postgres', want: ['y'] },
    { sql: 'SELECT $fn$ :x $notend$ :x $fn$, :y', dialect: 'postgres', want: ['y'] },
    { sql: 'SELECT $1, :y, $2', dialect: 'postgres', want: ['y'] },
    { sql: 'SELECT a$b$ + :y, c$', dialect: 'postgres', want: ['y'] },
    { sql: 'SELECT $$ :x $$, :y', dialect: 'mysql', want: ['x', 'y'] },
    { sql: 'SELECT $$ :x $$, :y', want: ['x', 'y'] },
    // backslash escapes: mysql strings, postgres E'' strings
    // 'a\' ends the string in postgres; in mysql the string runs on to the next quote
    { sql: "SELECT 'a\\' , :x, ':y'", dialect: 'mysql', want: ['y'] },
    { sql: "SELECT 'a\\' , :x, ':y'", dialect: 'postgres', want: ['x'] },
    { sql: "SELECT E'a\\' :x', :y", dialect: 'postgres', want: ['y'] },
    { sql: "SELECT CASE WHEN x THEN 'a\\' :x' END", dialect: 'postgres', want: ['x'] },
    { sql: 'SELECT "a\\" :x", :y', dialect: 'mysql', want: ['y'] },
    // -- needs a following space in mysql/generic, not in postgres/sqlite
    { sql: 'SELECT 1 --:x\n', dialect: 'postgres', want: [] },
    { sql: 'SELECT 1 --:x\n', dialect: 'sqlite', want: [] },
    { sql: 'SELECT 1 --:x\n', dialect: 'mysql', want: ['x'] },
    { sql: 'SELECT 1 --\t:x\n, :y', dialect: 'mysql', want: ['y'] },
    { sql: 'SELECT 1 --', want: [] },
    { sql: 'SELECT 1 # :x\n, :y', dialect: 'mysql', want: ['y'] },
    { sql: 'SELECT 1 # :x\n, :y', dialect: 'postgres', want: ['x', 'y'] },
    // nested block comments in postgres only
    { sql: 'SELECT /* a /* b */ :x */ :y', dialect: 'postgres', want: ['y'] },
    { sql: 'SELECT /* a /* b */ :x */ :y', dialect: 'sqlite', want: ['x', 'y'] },
    // sqlite bracket identifiers
    { sql: 'SELECT [a:b], :y', dialect: 'sqlite', want: ['y'] },
  ];
  for (const c of cases) {
    await t.test(`${c.dialect ?? 'generic'}: ${JSON.stringify(c.sql)}`, () => {
      assert.deepEqual(scanMarkers(c.sql, c.dialect).placeholders, c.want);
    });
  }
});

test('scanMarkers: pieces and refs rebuild the statement', () => {
  const sql = "SELECT :a, ':a', :b, x::int, :a";
  const { placeholders, pieces, refs } = scanMarkers(sql);
  assert.deepEqual(placeholders, ['a', 'b']);
  assert.deepEqual(refs, [0, 1, 0]);
  assert.deepEqual(pieces, ['SELECT ', ", ':a', ", ', x::int, ', '']);
  let rebuilt = pieces[0];
  refs.forEach((k, m) => {
    rebuilt += `:${placeholders[k]}${pieces[m + 1]}`;
  });
  assert.equal(rebuilt, sql);
});

test('toPositional: postgres numbers names, sqlite/mysql one ? per occurrence', async (t) => {
  const sql = "SELECT * FROM t WHERE a = :x AND b = :y AND c = :x AND d = ':z' AND e = x::int";
  await t.test('postgres', () => {
    const p = toPositional(sql, 'postgres');
    assert.equal(p.text, "SELECT * FROM t WHERE a = $1 AND b = $2 AND c = $1 AND d = ':z' AND e = x::int");
    assert.deepEqual(p.placeholders, ['x', 'y']);
    assert.deepEqual(p.order, [0, 1]);
  });
  for (const dialect of ['sqlite', 'mysql'] as const) {
    await t.test(dialect, () => {
      const p = toPositional(sql, dialect);
      assert.equal(p.text, "SELECT * FROM t WHERE a = ? AND b = ? AND c = ? AND d = ':z' AND e = x::int");
      assert.deepEqual(p.placeholders, ['x', 'y']);
      assert.deepEqual(p.order, [0, 1, 0]);
      const values = ['X', 'Y'];
      assert.deepEqual(
        p.order.map((i) => values[i]),
        ['X', 'Y', 'X'],
      );
    });
  }
  await t.test('no markers', () => {
    assert.deepEqual(toPositional('SELECT 1', 'postgres'), { text: 'SELECT 1', order: [], placeholders: [] });
    assert.deepEqual(toPositional('SELECT 1', 'sqlite'), { text: 'SELECT 1', order: [], placeholders: [] });
  });
  await t.test('a marker right after another token and at the end', () => {
    assert.equal(toPositional('SELECT (:a)||:b', 'postgres').text, 'SELECT ($1)||$2');
    assert.equal(toPositional('SELECT :a', 'mysql').text, 'SELECT ?');
  });
  await t.test('dollar-quoted body keeps its markers in postgres', () => {
    const p = toPositional('SELECT $q$:a$q$, :b', 'postgres');
    assert.equal(p.text, 'SELECT $q$:a$q$, $1');
    assert.deepEqual(p.placeholders, ['b']);
  });
});

test('splitsIntoMultipleStatements and countStatements', async (t) => {
  const cases: { sql: string; dialect?: MarkerDialect; split: boolean; count: number }[] = [
    { sql: 'SELECT 1', split: false, count: 1 },
    { sql: 'SELECT 1;', split: false, count: 1 },
    { sql: 'SELECT 1;;  \n', split: false, count: 1 },
    { sql: 'SELECT 1; -- done', split: false, count: 1 },
    { sql: 'SELECT 1; /* done */', split: false, count: 1 },
    { sql: 'SELECT 1; SELECT 2', split: true, count: 2 },
    { sql: 'SELECT 1;SELECT 2;', split: true, count: 2 },
    { sql: '; SELECT 1', split: true, count: 1 },
    { sql: "SELECT ';' || 'a;b'", split: false, count: 1 },
    { sql: 'SELECT ";", `;`', split: false, count: 1 },
    { sql: 'SELECT 1 -- ; DROP TABLE x', split: false, count: 1 },
    { sql: 'SELECT 1 /* ; */ + 2', split: false, count: 1 },
    { sql: "SELECT 1; 'x'", split: true, count: 2 },
    { sql: '', split: false, count: 0 },
    { sql: ' ; ; ', split: false, count: 0 },
    // dialect-specific hiding places
    { sql: 'SELECT $$;$$', dialect: 'postgres', split: false, count: 1 },
    { sql: 'SELECT $a$; DROP TABLE t; $a$', dialect: 'mysql', split: true, count: 3 },
    { sql: 'SELECT $a$; DROP TABLE t; $a$', split: true, count: 3 },
    { sql: "SELECT 'a\\'; DROP TABLE t; '", dialect: 'mysql', split: false, count: 1 },
    { sql: "SELECT 'a\\'; DROP TABLE t; '", dialect: 'postgres', split: true, count: 3 },
    { sql: 'SELECT 1 --x; DROP TABLE t', dialect: 'mysql', split: true, count: 2 },
    { sql: 'SELECT 1 --x; DROP TABLE t', split: true, count: 2 },
    { sql: 'SELECT 1 --x; DROP TABLE t', dialect: 'postgres', split: false, count: 1 },
    { sql: 'SELECT 1 # ; DROP TABLE t', dialect: 'mysql', split: false, count: 1 },
    { sql: 'SELECT 1 # ; DROP TABLE t', dialect: 'postgres', split: true, count: 2 },
  ];
  for (const c of cases) {
    await t.test(`${c.dialect ?? 'generic'}: ${JSON.stringify(c.sql)}`, () => {
      assert.equal(splitsIntoMultipleStatements(c.sql, c.dialect), c.split);
      assert.equal(countStatements(c.sql, c.dialect), c.count);
    });
  }
});

test('firstKeyword', async (t) => {
  const cases: [string, string][] = [
    ['SELECT 1', 'select'],
    ['  \n\tselect 1', 'select'],
    ['((SELECT 1))', 'select'],
    ['-- note\nWITH x AS (SELECT 1) SELECT * FROM x', 'with'],
    ['/* a */ /* b */ ( Delete FROM t', 'delete'],
    ['INSERT INTO t VALUES (1)', 'insert'],
    ['explain analyze delete from t', 'explain'],
    ['select1', 'select'],
    ['', ''],
    ['   ', ''],
    ['123', ''],
    ["'DELETE' FROM t", ''],
    ['"select" FROM t', ''],
    ['/* unterminated', ''],
  ];
  for (const [sql, want] of cases) {
    await t.test(JSON.stringify(sql), () => assert.equal(firstKeyword(sql), want));
  }
  await t.test('mysql # comment is skipped only in mysql', () => {
    assert.equal(firstKeyword('# c\nSHOW TABLES', 'mysql'), 'show');
    assert.equal(firstKeyword('# c\nSHOW TABLES', 'postgres'), '');
  });
});
