import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { buildExamplesDb, EXAMPLES_DB_FILE, formatLocal, mulberry32 } from '../../src/examples/dataset.js';
import { EXAMPLE_CONNECTION, exampleKeys, exampleQueries, exampleRoles, type ExampleQuery } from '../../src/examples/catalog.js';

const TODAY = new Date(2025, 5, 15, 14, 30, 0); // local time

function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'qag-examples-'));
}

function checksum(file: string): Record<string, string | number> {
  const db = new Database(file, { readonly: true });
  try {
    const out: Record<string, string | number> = {};
    for (const t of ['category', 'film', 'customer', 'address', 'store', 'staff', 'rental', 'payment']) {
      out[`${t}_count`] = (db.prepare(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n;
    }
    for (const t of ['film', 'customer', 'rental', 'payment']) {
      const rows = db.prepare(`SELECT * FROM ${t} ORDER BY 1`).raw().all();
      out[`${t}_sha`] = crypto.createHash('sha256').update(JSON.stringify(rows)).digest('hex');
    }
    return out;
  } finally {
    db.close();
  }
}

/** Sample values: each declared parameter's default, or a chosen value. */
const SAMPLES: Record<string, Record<string, unknown>> = {
  example_top_films: { top_n: 10, category: null },
  example_film_lookup: { film_id: 7 },
  example_film_search: { text: 'ar' },
};

function bindings(q: ExampleQuery): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, rules] of Object.entries(q.parameters)) {
    const r = rules as { default?: unknown };
    out[name] = SAMPLES[q.name]?.[name] ?? r.default ?? null;
  }
  return out;
}

const EXPECTED_COLUMNS: Record<string, string[]> = {
  example_monthly_revenue: ['month', 'rentals', 'revenue'],
  example_top_films: ['film_id', 'title', 'category', 'rating', 'rentals', 'revenue'],
  example_revenue_by_category: ['category', 'rentals', 'revenue'],
  example_kpi_rentals_today: ['rentals_today', 'revenue_today'],
  example_kpi_active_rentals: ['active_rentals'],
  example_kpi_overdue: ['overdue_rentals', 'oldest_rental_date'],
  example_recent_rentals: ['rental_id', 'rental_date', 'title', 'customer_name', 'amount', 'currently_rented'],
  example_all_rentals: [
    'rental_id',
    'rental_date',
    'return_date',
    'film_id',
    'title',
    'category',
    'rating',
    'customer_id',
    'customer_name',
    'email',
    'country',
    'payment_id',
    'amount',
    'payment_date',
    'staff_id',
    'staff_name',
    'store_id',
    'store_name',
  ],
  example_film_lookup: ['film_id', 'title', 'category', 'rating', 'length', 'rentals_last_30_days', 'currently_rented'],
  example_film_search: ['film_id', 'title', 'category', 'rating', 'length', 'rental_rate'],
};
EXPECTED_COLUMNS.example_rentals_since = EXPECTED_COLUMNS.example_all_rentals!;

test('mulberry32 is deterministic', () => {
  const a = mulberry32(42);
  const b = mulberry32(42);
  const c = mulberry32(43);
  const xs = [a(), a(), a()];
  assert.deepEqual(xs, [b(), b(), b()]);
  assert.notDeepEqual(xs, [c(), c(), c()]);
  for (const x of xs) assert.ok(x >= 0 && x < 1);
});

test('same seed and day give identical data; another seed differs', () => {
  const dir = tmpDir();
  try {
    const f1 = path.join(dir, 'a', EXAMPLES_DB_FILE);
    const f2 = path.join(dir, 'b.db');
    const f3 = path.join(dir, 'c.db');
    buildExamplesDb(f1, { seed: 42, today: TODAY });
    buildExamplesDb(f2, { seed: 42, today: new Date(TODAY) });
    buildExamplesDb(f3, { seed: 7, today: TODAY });
    assert.ok(!fs.existsSync(`${f1}.tmp`), 'temporary file renamed away');

    const c1 = checksum(f1);
    const c2 = checksum(f2);
    const c3 = checksum(f3);
    assert.equal(c1.film_count, 60);
    assert.equal(c1.customer_count, 200);
    assert.equal(c1.rental_count, 20000);
    assert.equal(c1.payment_count, 20000);
    assert.equal(c1.store_count, 2);
    assert.ok((c1.category_count as number) >= 6);
    assert.deepEqual(c1, c2);
    assert.notEqual(c1.film_sha, c3.film_sha);
    assert.notEqual(c1.rental_sha, c3.rental_sha);

    // Rebuilding over an existing file replaces it.
    buildExamplesDb(f2, { seed: 7, today: TODAY });
    assert.deepEqual(checksum(f2), c3);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('dataset shape: categories, ratings, dates before today, payments 1:1', () => {
  const dir = tmpDir();
  try {
    const file = path.join(dir, EXAMPLES_DB_FILE);
    buildExamplesDb(file, { today: TODAY });
    const db = new Database(file, { readonly: true });
    try {
      const cats = (db.prepare('SELECT name FROM category').pluck().all() as string[]).sort();
      for (const c of ['Action', 'Comedy', 'Documentary', 'Drama', 'Family', 'Sci-Fi']) assert.ok(cats.includes(c), c);
      const ratings = db.prepare('SELECT DISTINCT rating FROM film').pluck().all() as string[];
      for (const r of ratings) assert.ok(['G', 'PG', 'PG-13', 'R', 'NC-17'].includes(r), r);
      assert.equal(db.prepare('SELECT COUNT(DISTINCT title) FROM film').pluck().get(), 60);
      for (const t of db.prepare('SELECT title FROM film').pluck().all() as string[]) {
        assert.match(t, /^[A-Z][a-z]+ [A-Z][a-z]+$/);
      }
      const { lo, hi } = db.prepare('SELECT MIN(rental_date) AS lo, MAX(rental_date) AS hi FROM rental').get() as {
        lo: string;
        hi: string;
      };
      assert.match(lo, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
      const now = formatLocal(TODAY);
      const yearAgo = formatLocal(new Date(TODAY.getTime() - 366 * 86_400_000));
      assert.ok(hi <= now && lo >= yearAgo, `${lo} .. ${hi}`);
      assert.equal(db.prepare('SELECT COUNT(*) FROM rental r JOIN payment p ON p.rental_id = r.rental_id AND p.amount = r.amount').pluck().get(), 20000);
      assert.equal(db.prepare('SELECT COUNT(*) FROM rental WHERE return_date < rental_date').pluck().get(), 0);
      assert.equal(db.prepare('SELECT COUNT(*) FROM rental WHERE return_date > ?').pluck().get(now), 0);
    } finally {
      db.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('catalog: collections, keys, parameter declarations', () => {
  assert.equal(EXAMPLE_CONNECTION, 'examples');
  assert.equal(exampleQueries.length, 11);
  assert.equal(new Set(exampleQueries.map((q) => q.name)).size, exampleQueries.length);
  const byCollection = (c: string) => exampleQueries.filter((q) => q.collection === c).map((q) => q.name);
  assert.deepEqual(
    exampleKeys.map((k) => [k.name, k.collection, k.rate_limit]),
    [
      ['example-reporting', 'examples-reporting', '200/hour'],
      ['example-dashboard', 'examples-dashboard', '600/minute'],
      ['example-export', 'examples-export', '20/hour'],
      ['example-partner', 'examples-partner', '60/minute'],
    ],
  );
  for (const k of exampleKeys) assert.deepEqual(k.queries, byCollection(k.collection));
  assert.deepEqual(byCollection('examples-dashboard').sort(), [
    'example_kpi_active_rentals',
    'example_kpi_overdue',
    'example_kpi_rentals_today',
    'example_recent_rentals',
  ]);
  for (const q of exampleQueries) {
    assert.equal(q.cache_ttl, q.collection === 'examples-dashboard' ? 30 : undefined, q.name);
    // Every declared parameter is used in the SQL and every marker is declared.
    const markers = new Set([...q.sql.matchAll(/(?<!:):([A-Za-z_]\w*)/g)].map((m) => m[1]));
    assert.deepEqual([...markers].sort(), Object.keys(q.parameters).sort(), q.name);
    for (const name of Object.keys(q.parameters)) assert.match(name, /^[A-Za-z_]\w*$/);
    // No ':' inside string literals (would confuse a bind-marker scanner).
    for (const lit of q.sql.match(/'[^']*'/g) ?? []) assert.ok(!lit.includes(':'), `${q.name}: ${lit}`);
  }
  const p = (name: string) => exampleQueries.find((q) => q.name === name)!.parameters;
  assert.deepEqual(p('example_film_lookup'), {
    film_id: { type: 'integer', min: 1, required: true, description: 'The film id' },
  });
  assert.deepEqual((p('example_top_films').category as { enum: string[] }).enum, ['Action', 'Comedy', 'Documentary', 'Drama', 'Family', 'Sci-Fi']);
  const since = p('example_rentals_since').since as { pattern: string; default: string };
  assert.ok(new RegExp(`^(?:${since.pattern})$`).test(since.default));
  assert.equal(exampleRoles[0]!.name, 'example-executive');
});

test('every example query runs against the dataset with the expected columns', () => {
  const dir = tmpDir();
  try {
    const file = path.join(dir, EXAMPLES_DB_FILE);
    buildExamplesDb(file); // today = now, so the relative-date queries find rows
    const db = new Database(file, { readonly: true });
    try {
      for (const q of exampleQueries) {
        const stmt = db.prepare(q.sql);
        const cols = stmt.columns().map((c) => c.name);
        assert.deepEqual(cols, EXPECTED_COLUMNS[q.name], q.name);
        const rows = stmt.all(bindings(q)) as Record<string, unknown>[];
        assert.ok(rows.length > 0, `${q.name} returned rows`);
        assert.deepEqual(Object.keys(rows[0]!), EXPECTED_COLUMNS[q.name], q.name);
      }

      const run = (name: string, params: Record<string, unknown>) =>
        db.prepare(exampleQueries.find((q) => q.name === name)!.sql).all(params) as Record<string, unknown>[];

      assert.equal(run('example_all_rentals', {}).length, 20000);
      assert.equal(run('example_rentals_since', { since: '2000-01-01' }).length, 20000);
      assert.ok(run('example_rentals_since', { since: formatLocal(new Date(Date.now() - 10 * 86_400_000)).slice(0, 10) }).length < 20000);
      assert.equal(run('example_monthly_revenue', { months: 6 }).length, 6);
      assert.equal(run('example_top_films', { top_n: 3, category: null }).length, 3);
      for (const r of run('example_top_films', { top_n: 50, category: 'Drama' })) assert.equal(r.category, 'Drama');
      assert.ok(run('example_recent_rentals', { hours: 24 }).length > 0);
      assert.ok((run('example_kpi_active_rentals', {})[0]!.active_rentals as number) > 0);
      assert.ok((run('example_kpi_overdue', {})[0]!.overdue_rentals as number) > 0);
      for (const r of run('example_film_search', { text: 'har' })) assert.match(r.title as string, /har/i);

      const lookup = run('example_film_lookup', { film_id: 7 });
      assert.equal(lookup.length, 1);
      assert.equal(Object.keys(lookup[0]!).length, 7);
      assert.equal(lookup[0]!.film_id, 7);
      assert.equal(run('example_film_lookup', { film_id: 9999 }).length, 0);

      let recent = 0;
      let rented = 0;
      for (let id = 1; id <= 60; id++) {
        const row = run('example_film_lookup', { film_id: id })[0]!;
        recent = Math.max(recent, row.rentals_last_30_days as number);
        rented = Math.max(rented, row.currently_rented as number);
      }
      assert.ok(recent > 0, 'some film has rentals in the last 30 days');
      assert.ok(rented > 0, 'some film is currently rented');
    } finally {
      db.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
