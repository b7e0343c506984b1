/**
 * The bundled example APIs (contract §8.2) as plain data: the saved queries
 * (SQLite SQL over the dataset built by ./dataset.ts, `:name` bind markers
 * only), their collections, and one API key per collection.
 *
 * Dates in the dataset are local-time TEXT 'YYYY-MM-DD HH:MM:SS', so "now"
 * in SQL is always `datetime('now', 'localtime', ...)`. The SQL deliberately
 * contains no ':' inside string literals, so a `:name` scanner never sees a
 * false bind marker.
 */

export interface ExampleQuery {
  name: string;
  collection: string;
  description: string;
  sql: string;
  parameters: Record<string, unknown>;
  cache_ttl?: number;
}

export interface ExampleKey {
  name: string;
  collection: string;
  rate_limit: string;
  queries: string[];
}

export interface ExampleRole {
  name: string;
  rate_limit: string;
  collections: string[];
}

export const EXAMPLE_CONNECTION = 'examples';

export const EXAMPLE_COLLECTIONS = {
  reporting: 'examples-reporting',
  dashboard: 'examples-dashboard',
  export: 'examples-export',
  partner: 'examples-partner',
} as const;

export const EXAMPLE_FILM_CATEGORIES = ['Action', 'Comedy', 'Documentary', 'Drama', 'Family', 'Sci-Fi'];

const sql = (s: string) =>
  s
    .trim()
    .split('\n')
    .map((l) => l.replace(/^ {4}/, '').trimEnd())
    .join('\n');

const ALL_RENTALS_SELECT = `
    SELECT r.rental_id, r.rental_date, r.return_date,
           f.film_id, f.title, f.category, f.rating,
           c.customer_id, c.first_name || ' ' || c.last_name AS customer_name, c.email, c.country,
           p.payment_id, p.amount, p.payment_date,
           s.staff_id, s.first_name || ' ' || s.last_name AS staff_name,
           st.store_id, st.name AS store_name
    FROM rental r
    JOIN film f ON f.film_id = r.film_id
    JOIN customer c ON c.customer_id = r.customer_id
    JOIN payment p ON p.rental_id = r.rental_id
    JOIN staff s ON s.staff_id = r.staff_id
    JOIN store st ON st.store_id = s.store_id`;

export const exampleQueries: ExampleQuery[] = [
  // ---- examples-reporting -------------------------------------------------
  {
    name: 'example_monthly_revenue',
    collection: EXAMPLE_COLLECTIONS.reporting,
    description: 'Rentals and revenue per calendar month, for the last N months (including the current one).',
    sql: sql(`
    SELECT strftime('%Y-%m', p.payment_date) AS month,
           COUNT(*) AS rentals,
           ROUND(SUM(p.amount), 2) AS revenue
    FROM payment p
    WHERE p.payment_date >= date('now', 'localtime', 'start of month', '-' || (:months - 1) || ' months')
    GROUP BY month
    ORDER BY month`),
    parameters: {
      months: { type: 'integer', min: 1, max: 24, default: 6, description: 'How many months back, 1-24' },
    },
  },
  {
    name: 'example_top_films',
    collection: EXAMPLE_COLLECTIONS.reporting,
    description: 'The most rented films of all time, optionally within one category.',
    sql: sql(`
    SELECT f.film_id, f.title, f.category, f.rating,
           COUNT(r.rental_id) AS rentals,
           ROUND(SUM(r.amount), 2) AS revenue
    FROM film f
    JOIN rental r ON r.film_id = f.film_id
    WHERE (:category IS NULL OR f.category = :category)
    GROUP BY f.film_id, f.title, f.category, f.rating
    ORDER BY rentals DESC, f.film_id
    LIMIT :top_n`),
    parameters: {
      top_n: { type: 'integer', min: 1, max: 50, default: 10, description: 'How many films, 1-50' },
      category: {
        type: 'string',
        enum: EXAMPLE_FILM_CATEGORIES,
        required: false,
        description: 'Only films in this category',
      },
    },
  },
  {
    name: 'example_revenue_by_category',
    collection: EXAMPLE_COLLECTIONS.reporting,
    description: 'Rentals and revenue per film category over the last N days.',
    sql: sql(`
    SELECT f.category,
           COUNT(*) AS rentals,
           ROUND(SUM(p.amount), 2) AS revenue
    FROM payment p
    JOIN rental r ON r.rental_id = p.rental_id
    JOIN film f ON f.film_id = r.film_id
    WHERE p.payment_date >= datetime('now', 'localtime', '-' || :days || ' days')
    GROUP BY f.category
    ORDER BY revenue DESC, f.category`),
    parameters: {
      days: { type: 'integer', min: 1, max: 120, default: 30, description: 'How many days back, 1-120' },
    },
  },

  // ---- examples-dashboard (all cached 30 s) --------------------------------
  {
    name: 'example_kpi_rentals_today',
    collection: EXAMPLE_COLLECTIONS.dashboard,
    description: 'Number of rentals and revenue since midnight today.',
    sql: sql(`
    SELECT COUNT(*) AS rentals_today,
           ROUND(COALESCE(SUM(r.amount), 0), 2) AS revenue_today
    FROM rental r
    WHERE r.rental_date >= date('now', 'localtime')`),
    parameters: {},
    cache_ttl: 30,
  },
  {
    name: 'example_kpi_active_rentals',
    collection: EXAMPLE_COLLECTIONS.dashboard,
    description: 'Number of films currently rented out (not yet returned).',
    sql: sql(`
    SELECT COUNT(*) AS active_rentals
    FROM rental r
    WHERE r.return_date IS NULL`),
    parameters: {},
    cache_ttl: 30,
  },
  {
    name: 'example_kpi_overdue',
    collection: EXAMPLE_COLLECTIONS.dashboard,
    description: "Rentals not returned within the film's rental duration.",
    sql: sql(`
    SELECT COUNT(*) AS overdue_rentals,
           MIN(r.rental_date) AS oldest_rental_date
    FROM rental r
    JOIN film f ON f.film_id = r.film_id
    WHERE r.return_date IS NULL
      AND r.rental_date < datetime('now', 'localtime', '-' || f.rental_duration || ' days')`),
    parameters: {},
    cache_ttl: 30,
  },
  {
    name: 'example_recent_rentals',
    collection: EXAMPLE_COLLECTIONS.dashboard,
    description: 'Rentals made in the last N hours, newest first.',
    sql: sql(`
    SELECT r.rental_id, r.rental_date, f.title,
           c.first_name || ' ' || c.last_name AS customer_name,
           r.amount,
           r.return_date IS NULL AS currently_rented
    FROM rental r
    JOIN film f ON f.film_id = r.film_id
    JOIN customer c ON c.customer_id = r.customer_id
    WHERE r.rental_date >= datetime('now', 'localtime', '-' || :hours || ' hours')
    ORDER BY r.rental_date DESC, r.rental_id DESC`),
    parameters: {
      hours: { type: 'integer', min: 1, max: 168, default: 24, description: 'How many hours back, 1-168' },
    },
    cache_ttl: 30,
  },

  // ---- examples-export ---------------------------------------------------
  {
    name: 'example_all_rentals',
    collection: EXAMPLE_COLLECTIONS.export,
    description: 'Every rental with its film, customer, payment, staff member and store (about 20,000 rows).',
    sql: sql(`${ALL_RENTALS_SELECT}
    ORDER BY r.rental_id`),
    parameters: {},
  },
  {
    name: 'example_rentals_since',
    collection: EXAMPLE_COLLECTIONS.export,
    description: 'Every rental made on or after a date (YYYY-MM-DD).',
    sql: sql(`${ALL_RENTALS_SELECT}
    WHERE r.rental_date >= :since
    ORDER BY r.rental_id`),
    parameters: {
      since: {
        type: 'string',
        pattern: '\\d{4}-\\d{2}-\\d{2}',
        default: '2000-01-01',
        description: 'First day to include, YYYY-MM-DD',
      },
    },
  },

  // ---- examples-partner ------------------------------------------------
  {
    name: 'example_film_lookup',
    collection: EXAMPLE_COLLECTIONS.partner,
    description: 'One film by id, with its rentals in the last 30 days and how many copies are rented out now.',
    sql: sql(`
    SELECT f.film_id, f.title, f.category, f.rating, f.length,
           COALESCE(SUM(r.rental_date >= datetime('now', 'localtime', '-30 days')), 0) AS rentals_last_30_days,
           COALESCE(SUM(r.return_date IS NULL), 0) AS currently_rented
    FROM film f
    LEFT JOIN rental r ON r.film_id = f.film_id
    WHERE f.film_id = :film_id
    GROUP BY f.film_id, f.title, f.category, f.rating, f.length`),
    parameters: {
      film_id: { type: 'integer', min: 1, required: true, description: 'The film id' },
    },
  },
  {
    name: 'example_film_search',
    collection: EXAMPLE_COLLECTIONS.partner,
    description: 'Films whose title contains the given text (case-insensitive).',
    sql: sql(`
    SELECT f.film_id, f.title, f.category, f.rating, f.length, f.rental_rate
    FROM film f
    WHERE f.title LIKE '%' || :text || '%'
    ORDER BY f.title`),
    parameters: {
      text: {
        type: 'string',
        min_length: 2,
        max_length: 30,
        pattern: '[A-Za-z ]+',
        required: true,
        description: 'Part of a film title, letters and spaces only',
      },
    },
  },
];

const queriesIn = (collection: string) => exampleQueries.filter((q) => q.collection === collection).map((q) => q.name);

export const exampleKeys: ExampleKey[] = [
  { name: 'example-reporting', collection: EXAMPLE_COLLECTIONS.reporting, rate_limit: '200/hour' },
  { name: 'example-dashboard', collection: EXAMPLE_COLLECTIONS.dashboard, rate_limit: '600/minute' },
  { name: 'example-export', collection: EXAMPLE_COLLECTIONS.export, rate_limit: '20/hour' },
  { name: 'example-partner', collection: EXAMPLE_COLLECTIONS.partner, rate_limit: '60/minute' },
].map((k) => ({ ...k, queries: queriesIn(k.collection) }));

/**
 * The role with no key of its own (§8.2): granted the reporting and
 * dashboard collections. Provided for loaders that also install roles.
 */
export const exampleRoles: ExampleRole[] = [
  {
    name: 'example-executive',
    rate_limit: '300/hour',
    collections: [EXAMPLE_COLLECTIONS.reporting, EXAMPLE_COLLECTIONS.dashboard],
  },
];
