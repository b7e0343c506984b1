/**
 * The bundled example dataset (contract §8.2): a small DVD-rental style
 * SQLite database generated locally from a fixed seed, with dates relative
 * to the load day. Nothing is downloaded.
 *
 * Determinism: every random draw (which film, customer, staff, amounts and
 * the *offset in seconds back from "today"*) depends only on the seed, so
 * the same seed and the same `today` give byte-for-byte the same rows, and
 * the same seed on another day gives the same data shifted in time.
 *
 * Dates are TEXT 'YYYY-MM-DD HH:MM:SS' in the process's local time, so the
 * example SQL compares them against `datetime('now', 'localtime', ...)`.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { localTimestamp } from '../store/store.js';

export const EXAMPLES_DB_FILE = 'examples.db';

export const EXAMPLE_CATEGORIES = ['Action', 'Comedy', 'Documentary', 'Drama', 'Family', 'Sci-Fi', 'Horror', 'Animation'] as const;

export const EXAMPLE_RATINGS = ['G', 'PG', 'PG-13', 'R', 'NC-17'] as const;

export const EXAMPLE_COUNTS = {
  film: 60,
  customer: 200,
  rental: 20_000,
  store: 2,
  staff: 4,
} as const;

/** mulberry32: a tiny, fast, deterministic 32-bit PRNG returning [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ADJECTIVES = [
  'Broken',
  'Silent',
  'Golden',
  'Hidden',
  'Crimson',
  'Frozen',
  'Midnight',
  'Wild',
  'Hollow',
  'Electric',
  'Lost',
  'Burning',
  'Distant',
  'Velvet',
  'Iron',
  'Paper',
  'Restless',
  'Savage',
  'Lucky',
  'Secret',
  'Shattered',
  'Northern',
  'Lonely',
  'Cosmic',
];
const NOUNS = [
  'Harbor',
  'Empire',
  'Garden',
  'Horizon',
  'Orchard',
  'Signal',
  'Canyon',
  'River',
  'Kingdom',
  'Station',
  'Mirror',
  'Frontier',
  'Lantern',
  'Voyage',
  'Compass',
  'Island',
  'Thunder',
  'Parade',
  'Circus',
  'Meadow',
  'Galaxy',
  'Fortress',
  'Melody',
  'Shadow',
];
const FIRST_NAMES = [
  'Mary',
  'Patricia',
  'Linda',
  'Barbara',
  'Elizabeth',
  'Jennifer',
  'Maria',
  'Susan',
  'Margaret',
  'Dorothy',
  'Lisa',
  'Nancy',
  'Karen',
  'Betty',
  'Helen',
  'Sandra',
  'James',
  'John',
  'Robert',
  'Michael',
  'William',
  'David',
  'Richard',
  'Charles',
  'Joseph',
  'Thomas',
  'Daniel',
  'Paul',
  'Mark',
  'George',
  'Kenneth',
  'Steven',
  'Aiko',
  'Lucas',
  'Sofia',
  'Mateo',
  'Amara',
  'Noah',
  'Ingrid',
  'Ravi',
];
const LAST_NAMES = [
  'Smith',
  'Johnson',
  'Williams',
  'Brown',
  'Jones',
  'Miller',
  'Davis',
  'Garcia',
  'Rodriguez',
  'Wilson',
  'Martinez',
  'Anderson',
  'Taylor',
  'Thomas',
  'Hernandez',
  'Moore',
  'Martin',
  'Jackson',
  'Thompson',
  'White',
  'Lopez',
  'Lee',
  'Gonzalez',
  'Harris',
  'Clark',
  'Lewis',
  'Robinson',
  'Walker',
  'Perez',
  'Hall',
  'Young',
  'Allen',
  'Nakamura',
  'Silva',
  'Rossi',
  'Novak',
  'Okafor',
  'Larsen',
  'Patel',
  'Dubois',
];
const PLACES: Array<[city: string, country: string]> = [
  ['Lisbon', 'Portugal'],
  ['Porto', 'Portugal'],
  ['Madrid', 'Spain'],
  ['Seville', 'Spain'],
  ['Lyon', 'France'],
  ['Paris', 'France'],
  ['Berlin', 'Germany'],
  ['Hamburg', 'Germany'],
  ['Milan', 'Italy'],
  ['Rome', 'Italy'],
  ['Leeds', 'United Kingdom'],
  ['London', 'United Kingdom'],
  ['Austin', 'United States'],
  ['Denver', 'United States'],
  ['Toronto', 'Canada'],
  ['Osaka', 'Japan'],
  ['Sao Paulo', 'Brazil'],
  ['Lagos', 'Nigeria'],
  ['Pune', 'India'],
  ['Oslo', 'Norway'],
  ['Prague', 'Czechia'],
  ['Melbourne', 'Australia'],
];
const STREETS = ['Main St', 'Oak Ave', 'Harbor Rd', 'Station Sq', 'Mill Lane', 'Park Blvd', 'River Walk', 'High St'];
const RENTAL_RATES = [0.99, 2.99, 4.99];

/** Local-time 'YYYY-MM-DD HH:MM:SS', as the store writes times. */
export { localTimestamp as formatLocal };

const round2 = (x: number) => Math.round(x * 100) / 100;

const SCHEMA = `
CREATE TABLE category (
  category_id INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE
);
CREATE TABLE film (
  film_id         INTEGER PRIMARY KEY,
  title           TEXT NOT NULL,
  category        TEXT NOT NULL REFERENCES category(name),
  rating          TEXT NOT NULL,
  length          INTEGER NOT NULL,
  rental_rate     REAL NOT NULL,
  rental_duration INTEGER NOT NULL,
  release_year    INTEGER NOT NULL
);
CREATE TABLE address (
  address_id  INTEGER PRIMARY KEY,
  address     TEXT NOT NULL,
  city        TEXT NOT NULL,
  country     TEXT NOT NULL,
  postal_code TEXT NOT NULL,
  phone       TEXT NOT NULL
);
CREATE TABLE store (
  store_id         INTEGER PRIMARY KEY,
  name             TEXT NOT NULL,
  address_id       INTEGER NOT NULL REFERENCES address(address_id),
  manager_staff_id INTEGER
);
CREATE TABLE staff (
  staff_id   INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name  TEXT NOT NULL,
  email      TEXT NOT NULL,
  store_id   INTEGER NOT NULL REFERENCES store(store_id),
  address_id INTEGER NOT NULL REFERENCES address(address_id),
  active     INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE customer (
  customer_id INTEGER PRIMARY KEY,
  store_id    INTEGER NOT NULL REFERENCES store(store_id),
  first_name  TEXT NOT NULL,
  last_name   TEXT NOT NULL,
  email       TEXT NOT NULL UNIQUE,
  country     TEXT NOT NULL,
  address_id  INTEGER NOT NULL REFERENCES address(address_id),
  created_at  TEXT NOT NULL
);
CREATE TABLE rental (
  rental_id   INTEGER PRIMARY KEY,
  film_id     INTEGER NOT NULL REFERENCES film(film_id),
  customer_id INTEGER NOT NULL REFERENCES customer(customer_id),
  staff_id    INTEGER NOT NULL REFERENCES staff(staff_id),
  rental_date TEXT NOT NULL,
  return_date TEXT,
  amount      REAL NOT NULL
);
CREATE TABLE payment (
  payment_id   INTEGER PRIMARY KEY,
  rental_id    INTEGER NOT NULL UNIQUE REFERENCES rental(rental_id),
  customer_id  INTEGER NOT NULL REFERENCES customer(customer_id),
  amount       REAL NOT NULL,
  payment_date TEXT NOT NULL
);
`;

const INDEXES = `
CREATE INDEX film_category ON film(category);
CREATE INDEX rental_film_date ON rental(film_id, rental_date);
CREATE INDEX rental_customer ON rental(customer_id);
CREATE INDEX rental_date ON rental(rental_date);
CREATE INDEX rental_active ON rental(rental_date) WHERE return_date IS NULL;
CREATE INDEX payment_date ON payment(payment_date);
CREATE INDEX payment_customer ON payment(customer_id);
`;

/**
 * Build the example database at `file` (atomically: written to
 * `file + '.tmp'` and renamed into place). Defaults: seed 42, today = now.
 */
export function buildExamplesDb(file: string, opts: { seed?: number; today?: Date } = {}): void {
  const seed = opts.seed ?? 42;
  const today = new Date(opts.today ?? Date.now());
  today.setMilliseconds(0);
  const nowMs = today.getTime();
  const rand = mulberry32(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const at = (secondsAgo: number) => localTimestamp(new Date(nowMs - secondsAgo * 1000));
  const DAY = 86_400;

  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const tmp = `${file}.tmp`;
  fs.rmSync(tmp, { force: true });
  fs.rmSync(`${tmp}-journal`, { force: true });

  const db = new Database(tmp);
  try {
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.exec(SCHEMA);

    db.transaction(() => {
      // category
      const insCategory = db.prepare('INSERT INTO category (category_id, name) VALUES (?, ?)');
      EXAMPLE_CATEGORIES.forEach((name, i) => {
        insCategory.run(i + 1, name);
      });

      // film: unique two-word titles; a popularity weight per film so that
      // "top films" has a clear ranking.
      const insFilm = db.prepare(
        'INSERT INTO film (film_id, title, category, rating, length, rental_rate, rental_duration, release_year) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      );
      const titles = new Set<string>();
      const filmRate: number[] = [0];
      const filmDuration: number[] = [0];
      const filmWeight: number[] = [];
      // The six contract categories get most films; every category gets some.
      for (let id = 1; id <= EXAMPLE_COUNTS.film; id++) {
        let title: string;
        do title = `${pick(ADJECTIVES)} ${pick(NOUNS)}`;
        while (titles.has(title));
        titles.add(title);
        const category = id <= EXAMPLE_CATEGORIES.length ? EXAMPLE_CATEGORIES[id - 1]! : pick(EXAMPLE_CATEGORIES);
        const rate = pick(RENTAL_RATES);
        const duration = int(3, 7);
        filmRate.push(rate);
        filmDuration.push(duration);
        filmWeight.push(0.2 + rand() ** 2 * 3);
        insFilm.run(id, title, category, pick(EXAMPLE_RATINGS), int(46, 185), rate, duration, int(1985, 2024));
      }
      const cumulative: number[] = [];
      let total = 0;
      for (const w of filmWeight) {
        total += w;
        cumulative.push(total);
      }
      const pickFilm = () => {
        const x = rand() * total;
        let lo = 0;
        let hi = cumulative.length - 1;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (cumulative[mid]! > x) hi = mid;
          else lo = mid + 1;
        }
        return lo + 1;
      };

      // address: stores, staff and customers each get one.
      const insAddress = db.prepare('INSERT INTO address (address_id, address, city, country, postal_code, phone) VALUES (?, ?, ?, ?, ?, ?)');
      let addressId = 0;
      const newAddress = (place?: [string, string]): [number, string] => {
        const [city, country] = place ?? pick(PLACES);
        addressId++;
        insAddress.run(
          addressId,
          `${int(1, 999)} ${pick(STREETS)}`,
          city,
          country,
          String(int(10000, 99999)),
          `+1-555-${String(int(0, 9999)).padStart(4, '0')}`,
        );
        return [addressId, country];
      };

      // store + staff (two per store, the first one manages it)
      const insStore = db.prepare('INSERT INTO store (store_id, name, address_id, manager_staff_id) VALUES (?, ?, ?, ?)');
      const insStaff = db.prepare('INSERT INTO staff (staff_id, first_name, last_name, email, store_id, address_id, active) VALUES (?, ?, ?, ?, ?, ?, 1)');
      const storePlaces: Array<[string, string]> = [
        ['Lisbon', 'Portugal'],
        ['Austin', 'United States'],
      ];
      const staffPerStore = EXAMPLE_COUNTS.staff / EXAMPLE_COUNTS.store;
      const staffByStore: number[][] = [];
      let staffId = 0;
      for (let s = 1; s <= EXAMPLE_COUNTS.store; s++) {
        const [addr] = newAddress(storePlaces[s - 1]);
        const [city] = storePlaces[s - 1]!;
        insStore.run(s, `${city} Video`, addr, s * staffPerStore - staffPerStore + 1);
        staffByStore[s] = [];
        for (let k = 0; k < staffPerStore; k++) {
          staffId++;
          const first = pick(FIRST_NAMES);
          const last = pick(LAST_NAMES);
          const [staffAddr] = newAddress(storePlaces[s - 1]);
          insStaff.run(staffId, first, last, `${first}.${last}@store${s}.example.com`.toLowerCase(), s, staffAddr);
          staffByStore[s]!.push(staffId);
        }
      }

      // customer
      const insCustomer = db.prepare(
        'INSERT INTO customer (customer_id, store_id, first_name, last_name, email, country, address_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      );
      const customerStore: number[] = [0];
      for (let id = 1; id <= EXAMPLE_COUNTS.customer; id++) {
        const first = pick(FIRST_NAMES);
        const last = pick(LAST_NAMES);
        const [addr, country] = newAddress();
        const store = int(1, EXAMPLE_COUNTS.store);
        customerStore.push(store);
        insCustomer.run(id, store, first, last, `${first}.${last}${id}@example.com`.toLowerCase(), country, addr, at(int(366, 900) * DAY + int(0, DAY - 1)));
      }

      // rental + payment, generated in chronological order (oldest first),
      // spread over the 365 days before `today`.
      const offsets: number[] = [];
      for (let i = 0; i < EXAMPLE_COUNTS.rental; i++) offsets.push(int(60, 365 * DAY));
      offsets.sort((a, b) => b - a);

      const insRental = db.prepare(
        'INSERT INTO rental (rental_id, film_id, customer_id, staff_id, rental_date, return_date, amount) VALUES (?, ?, ?, ?, ?, ?, ?)',
      );
      const insPayment = db.prepare('INSERT INTO payment (payment_id, rental_id, customer_id, amount, payment_date) VALUES (?, ?, ?, ?, ?)');
      for (let i = 0; i < offsets.length; i++) {
        const id = i + 1;
        const ago = offsets[i]!;
        const film = pickFilm();
        const customer = int(1, EXAMPLE_COUNTS.customer);
        const store = rand() < 0.85 ? customerStore[customer]! : int(1, EXAMPLE_COUNTS.store);
        const staff = pick(staffByStore[store]!);
        // Kept days: usually around the film's rental duration, sometimes
        // late; 0.5% are never returned (long overdue).
        const lost = rand() < 0.005;
        const keptSeconds = int(4 * 3600, (filmDuration[film]! + 4) * DAY);
        const returned = !lost && keptSeconds < ago;
        const lateDays = returned ? Math.max(0, Math.ceil(keptSeconds / DAY) - filmDuration[film]!) : 0;
        const amount = round2(filmRate[film]! + lateDays);
        const rentalDate = at(ago);
        insRental.run(id, film, customer, staff, rentalDate, returned ? at(ago - keptSeconds) : null, amount);
        insPayment.run(id, id, customer, amount, rentalDate);
      }
    })();

    db.exec(INDEXES);
    db.exec('ANALYZE');
  } catch (err) {
    db.close();
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  db.close();
  fs.renameSync(tmp, file);
}
