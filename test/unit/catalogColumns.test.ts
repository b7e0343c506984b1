// Tests for the catalog's reading of a statement's output columns: which ones hand a table column on
// unchanged (and so get its type), per dialect, with `*` expanded from the schema; and the JSON types
// of the values as the gateway renders them. No server, no database.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { outputColumns, valueSchema } from '../../src/catalog/columns.js';
import { analyzeStatement, type SqlDialect } from '../../src/governance/analysis.js';
import { emptySchema, type Schema, schemaOf } from '../../src/governance/names.js';

const TYPES: Record<string, Record<string, string>> = {
  film: { film_id: 'integer', title: 'text', length: 'smallint' },
  rental: { rental_id: 'bigint', film_id: 'integer', rental_date: 'timestamp without time zone' },
};

/** The two tables in the dialect's default schema, with their types. */
function typedSchema(dialect: SqlDialect): Schema {
  const s = schemaOf(dialect, Object.fromEntries(Object.entries(TYPES).map(([t, cols]) => [t, Object.keys(cols)])));
  for (const r of s.relations.values()) r.types = Object.values(TYPES[r.name]);
  return s;
}

/** name:type per column ('?' untyped), or null when the columns can't be listed. */
function columns(sql: string, dialect: SqlDialect = 'postgres', schema = typedSchema(dialect)): string[] | null {
  const cols = outputColumns(analyzeStatement(sql, dialect), schema, dialect);
  return cols?.map((c) => `${c.name}:${c.dataType ?? '?'}`) ?? null;
}

const CASES: Array<[string, string[] | null]> = [
  ['SELECT film_id, title FROM film WHERE film_id = :id', ['film_id:integer', 'title:text']],
  ['SELECT f.title AS name, length FROM film f', ['name:text', 'length:smallint']],
  // computed columns keep their names but no type: a type would be a guess
  ['SELECT length(title) AS title, film_id + 1 AS next, film_id::text AS id, count(*) FROM film GROUP BY 1, 2, 3', ['title:?', 'next:?', 'id:?', 'count:?']],
  ['SELECT * FROM film', ['film_id:integer', 'title:text', 'length:smallint']],
  [
    'SELECT r.*, f.title FROM rental r JOIN film f USING (film_id)',
    ['rental_id:bigint', 'film_id:integer', 'rental_date:timestamp without time zone', 'title:text'],
  ],
  // an unqualified name resolved with the schema, through a derived table and a CTE
  ['SELECT title, rental_date FROM film JOIN rental ON rental.film_id = film.film_id', ['title:text', 'rental_date:timestamp without time zone']],
  ['SELECT t FROM (SELECT title AS t FROM film) s', ['t:text']],
  ['SELECT t FROM (SELECT upper(title) AS t FROM film) s', ['t:?']],
  ['WITH f AS (SELECT film_id, title FROM film) SELECT f.title FROM f', ['title:text']],
  // a union: typed only when every branch hands on columns of one type
  ['SELECT film_id FROM film UNION SELECT film_id FROM rental', ['film_id:integer']],
  ['SELECT film_id FROM film UNION SELECT rental_id FROM rental', ['film_id:?']],
  ['SELECT film_id FROM film UNION SELECT 1', ['film_id:?']],
  // repeated names as the answer names them
  ['SELECT f.film_id, r.film_id FROM film f JOIN rental r USING (film_id)', ['film_id:integer', 'film_id_2:integer']],
  // nothing to describe, or a star nobody can expand
  ["UPDATE film SET title = 'x' WHERE film_id = 1", []],
  ["UPDATE film SET title = 'x' WHERE film_id = 1 RETURNING film_id", ['film_id:integer']],
  ['SELECT * FROM unknown_table', null],
  ['EXPLAIN SELECT 1', null],
];

test('output columns and the types the schema gives them', () => {
  for (const [sql, want] of CASES) assert.deepEqual(columns(sql), want, sql);
});

test('output columns on MySQL and SQLite', () => {
  assert.deepEqual(columns('SELECT film_id, `title` FROM film', 'mysql'), ['film_id:integer', 'title:text']);
  assert.deepEqual(columns('SELECT CONCAT(title, "!") AS t FROM film', 'mysql'), ['t:?']);
  assert.deepEqual(columns('SELECT * FROM film', 'sqlite'), ['film_id:integer', 'title:text', 'length:smallint']);
  // without a schema, named columns are still listed, untyped
  assert.deepEqual(columns('SELECT film_id, title FROM film', 'sqlite', emptySchema('sqlite')), ['film_id:?', 'title:?']);
});

test('value schemas follow what the gateway answers', () => {
  const types = (d: SqlDialect, t: string) => valueSchema(d, t).type;
  assert.deepEqual(types('postgres', 'integer'), ['integer', 'null']);
  assert.deepEqual(types('postgres', 'bigint'), ['integer', 'string', 'null']); // exact digits beyond 2^53
  assert.deepEqual(types('postgres', 'numeric'), ['number', 'null']);
  assert.deepEqual(types('postgres', 'jsonb'), ['string', 'null']); // JSON as text
  assert.deepEqual(types('postgres', 'ARRAY'), ['string', 'null']);
  assert.deepEqual(valueSchema('postgres', 'date'), { type: ['string', 'null'], format: 'date' });
  assert.deepEqual(types('postgres', 'timestamp with time zone'), ['string', 'null']);
  assert.deepEqual(valueSchema('postgres', 'USER-DEFINED'), {});
  assert.deepEqual(types('mysql', 'tinyint'), ['integer', 'null']);
  assert.deepEqual(types('mysql', 'decimal'), ['number', 'null']);
  assert.deepEqual(types('mysql', 'datetime'), ['string', 'null']);
  assert.deepEqual(types('sqlite', 'VARCHAR(20)'), ['string', 'null']);
  assert.deepEqual(types('sqlite', 'INTEGER'), ['integer', 'string', 'null']);
  assert.deepEqual(valueSchema('sqlite', 'BOOLEAN'), {}); // NUMERIC affinity: not plain to see
});

test('column names as the database answers them (checked against MariaDB 10.11 and SQLite 3)', () => {
  const named = (sql: string, dialect: SqlDialect) =>
    outputColumns(analyzeStatement(sql, dialect), schemaOf(dialect, { film: ['film_id', 'Title', 'length'] }), dialect, sql)?.map((c) => c.name);
  const sql = 'SELECT TITLE, f.Length AS Len, f.FILM_ID, upper(title) Up FROM film f WHERE title <> :t';
  // MySQL: as the statement spells it
  assert.deepEqual(named(sql, 'mysql'), ['TITLE', 'Len', 'FILM_ID', 'Up']);
  // SQLite: an alias as written, a bare column as its table declares it
  assert.deepEqual(named(sql, 'sqlite'), ['Title', 'Len', 'film_id', 'Up']);
  // PostgreSQL folds unquoted names
  assert.deepEqual(named(sql, 'postgres'), ['title', 'len', 'film_id', 'up']);
  // the outer select list, not a CTE's; `*` keeps the schema's own names
  assert.deepEqual(named('WITH x AS (SELECT TITLE AS T FROM film) SELECT t AS tT FROM x', 'mysql'), ['tT']);
  assert.deepEqual(named('SELECT * FROM film', 'mysql'), ['film_id', 'Title', 'length']);
});
