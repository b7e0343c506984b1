// Builds a TPC-C-shaped estate on MySQL/MariaDB with our own deterministic generator (mulberry32
// streams, one per table, so the same warehouses and seed give the same rows whatever the load
// order). Tables, columns and keys follow TPC-C 5.11 §1.3 and go-tpc's layout (the estate the
// seeds' MySQL runs used): the nine tables, their primary keys, orders by customer
// (idx_order: o_w_id, o_d_id, o_c_id, o_id) and customers by name (idx_customer).
//
// Population (TPC-C §4.3.3.1), per warehouse: 10 districts; 3,000 customers per district with one
// history row each; 3,000 orders per district (o_c_id a permutation of the customers, 5-15 lines
// each, orders 2,101-3,000 undelivered and in new_order); 100,000 stock rows. item: 100,000 rows.
// `--small` keeps that shape at a tenth of the counts (10,000 items and stock rows a warehouse, 300
// customers and orders a district), for machines where the full one is too slow to build.
//
// A meta table (qag_tpcc_meta) records what was built; a database that already holds the same
// warehouses, seed, scale and generator version is left as it is.
//
//   node dist/bench/tpcc/generate.js [--warehouses 1] [--seed 42] [--small] [--force]
//        [--host 127.0.0.1] [--port 3306] [--user root] [--password ''] [--database qag_tpcc_bench]
import mysql from 'mysql2/promise';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

export const DATABASE = 'qag_tpcc_bench';
/** Bump when the schema or the generated values change: an older build is then rebuilt. */
const GENERATOR_VERSION = 1;

export interface Scale {
  name: 'full' | 'small';
  items: number;
  /** Customers per district, and orders per district (TPC-C keeps them equal). */
  customers: number;
  districts: number;
}
export const SCALES: Record<Scale['name'], Scale> = {
  full: { name: 'full', items: 100_000, customers: 3000, districts: 10 },
  small: { name: 'small', items: 10_000, customers: 300, districts: 10 },
};

export interface MysqlTarget {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}
export const DEFAULT_TARGET: MysqlTarget = { host: '127.0.0.1', port: 3306, user: 'root', password: '', database: DATABASE };

export interface EstateOptions {
  warehouses: number;
  seed: number;
  scale: Scale;
  force?: boolean;
  target?: MysqlTarget;
  log?: (line: string) => void;
}

export interface Estate {
  warehouses: number;
  seed: number;
  scale: Scale;
  /** False when the database already held this estate. */
  built: boolean;
  build_s: number | null;
  rows: Record<string, number>;
}

// ---------------------------------------------------------------- the schema

const TABLES: Array<[string, string]> = [
  [
    'warehouse',
    `w_id INT NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20),
    w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax DECIMAL(4,4), w_ytd DECIMAL(12,2),
    PRIMARY KEY (w_id)`,
  ],
  [
    'district',
    `d_id INT NOT NULL, d_w_id INT NOT NULL, d_name VARCHAR(10), d_street_1 VARCHAR(20),
    d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax DECIMAL(4,4),
    d_ytd DECIMAL(12,2), d_next_o_id INT, PRIMARY KEY (d_w_id, d_id)`,
  ],
  [
    'customer',
    `c_id INT NOT NULL, c_d_id INT NOT NULL, c_w_id INT NOT NULL, c_first VARCHAR(16),
    c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), c_city VARCHAR(20),
    c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16), c_since DATETIME, c_credit CHAR(2),
    c_credit_lim DECIMAL(12,2), c_discount DECIMAL(4,4), c_balance DECIMAL(12,2), c_ytd_payment DECIMAL(12,2),
    c_payment_cnt INT, c_delivery_cnt INT, c_data VARCHAR(500),
    PRIMARY KEY (c_w_id, c_d_id, c_id), INDEX idx_customer (c_w_id, c_d_id, c_last, c_first)`,
  ],
  [
    'history',
    `h_c_id INT NOT NULL, h_c_d_id INT NOT NULL, h_c_w_id INT NOT NULL, h_d_id INT NOT NULL,
    h_w_id INT NOT NULL, h_date DATETIME, h_amount DECIMAL(6,2), h_data VARCHAR(24),
    INDEX idx_h_w_id (h_w_id, h_d_id), INDEX idx_h_c_w_id (h_c_w_id, h_c_d_id, h_c_id)`,
  ],
  [
    'new_order',
    `no_o_id INT NOT NULL, no_d_id INT NOT NULL, no_w_id INT NOT NULL,
    PRIMARY KEY (no_w_id, no_d_id, no_o_id)`,
  ],
  [
    'orders',
    `o_id INT NOT NULL, o_d_id INT NOT NULL, o_w_id INT NOT NULL, o_c_id INT, o_entry_d DATETIME,
    o_carrier_id INT, o_ol_cnt INT, o_all_local INT,
    PRIMARY KEY (o_w_id, o_d_id, o_id), INDEX idx_order (o_w_id, o_d_id, o_c_id, o_id)`,
  ],
  [
    'order_line',
    `ol_o_id INT NOT NULL, ol_d_id INT NOT NULL, ol_w_id INT NOT NULL, ol_number INT NOT NULL,
    ol_i_id INT NOT NULL, ol_supply_w_id INT, ol_delivery_d DATETIME, ol_quantity INT, ol_amount DECIMAL(6,2),
    ol_dist_info CHAR(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)`,
  ],
  [
    'item',
    `i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5,2), i_data VARCHAR(50),
    PRIMARY KEY (i_id)`,
  ],
  [
    'stock',
    `s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity INT, s_dist_01 CHAR(24), s_dist_02 CHAR(24),
    s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24), s_dist_06 CHAR(24), s_dist_07 CHAR(24),
    s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd INT, s_order_cnt INT, s_remote_cnt INT,
    s_data VARCHAR(50), PRIMARY KEY (s_w_id, s_i_id)`,
  ],
];
export const TABLE_NAMES = TABLES.map(([t]) => t);

// ---------------------------------------------------------------- deterministic values

/** mulberry32: a 32-bit state, full period, good enough for test data; returns [0, 1). */
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

/** One independent stream per (seed, label), so each table's rows don't depend on load order. */
function stream(seed: number, label: string): Rand {
  let h = (seed ^ 0x9e3779b9) >>> 0;
  for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193) >>> 0;
  return new Rand(mulberry32(h));
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const SYLLABLES = ['BAR', 'OUGHT', 'ABLE', 'PRI', 'PRES', 'ESE', 'ANTI', 'CALLY', 'ATION', 'EING'];

class Rand {
  constructor(readonly next: () => number) {}
  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  /** Fixed-point decimal in [lo, hi] with `digits` decimals, as SQL text. */
  dec(lo: number, hi: number, digits: number): string {
    const f = 10 ** digits;
    return (this.int(Math.round(lo * f), Math.round(hi * f)) / f).toFixed(digits);
  }
  /** TPC-C a-string: random alphanumerics, length in [lo, hi] (safe inside a SQL literal). */
  astr(lo: number, hi: number): string {
    const n = this.int(lo, hi);
    let s = '';
    for (let i = 0; i < n; i++) s += ALNUM[Math.floor(this.next() * 62)];
    return s;
  }
  /** TPC-C n-string: random digits. */
  nstr(lo: number, hi: number): string {
    const n = this.int(lo, hi);
    let s = '';
    for (let i = 0; i < n; i++) s += Math.floor(this.next() * 10);
    return s;
  }
  /** NURand(A, x, y) with the run constant C (TPC-C §2.1.6). */
  nurand(a: number, x: number, y: number, c: number): number {
    return (((this.int(0, a) | this.int(x, y)) + c) % (y - x + 1)) + x;
  }
  /** 26-50 characters, 10% of them with ORIGINAL somewhere inside (i_data, s_data). */
  data(): string {
    const s = this.astr(26, 50);
    if (this.next() >= 0.1) return s;
    const at = this.int(0, s.length - 8);
    return `${s.slice(0, at)}ORIGINAL${s.slice(at + 8)}`;
  }
  zip(): string {
    return `${this.nstr(4, 4)}11111`;
  }
}

/** c_last for a number 0-999: three syllables (TPC-C §4.3.2.3). */
export function lastName(n: number): string {
  return SYLLABLES[Math.floor(n / 100)] + SYLLABLES[Math.floor(n / 10) % 10] + SYLLABLES[n % 10];
}

const q = (s: string) => `'${s}'`; // generated text is [A-Za-z0-9 ] only: no escaping needed
/** All dates are relative to one fixed instant, so the estate is the same whatever day it's built. */
const BASE_MS = Date.UTC(2026, 0, 1);
const datetime = (offsetS: number) => q(new Date(BASE_MS + offsetS * 1000).toISOString().slice(0, 19).replace('T', ' '));
const address = (r: Rand) => [q(r.astr(10, 20)), q(r.astr(10, 20)), q(r.astr(10, 20)), q(r.astr(2, 2).toUpperCase()), q(r.zip())];

// ---------------------------------------------------------------- loading

/** Multi-row INSERTs of about BATCH_BYTES each (max_allowed_packet is 16 MB by default). */
const BATCH_BYTES = 2_000_000;

class Inserter {
  rows = 0;
  #parts: string[] = [];
  #bytes = 0;
  #pending: Promise<unknown> = Promise.resolve();
  constructor(
    private conn: mysql.Connection,
    private table: string,
  ) {}
  /** Adds one row (its values already as SQL literals); sends a batch when it is full. */
  async add(values: string): Promise<void> {
    this.#parts.push(`(${values})`);
    this.#bytes += values.length + 3;
    this.rows++;
    if (this.#bytes >= BATCH_BYTES) await this.#send();
  }
  async #send(): Promise<void> {
    if (!this.#parts.length) return;
    const sql = `INSERT INTO ${this.table} VALUES ${this.#parts.join(',')}`;
    this.#parts = [];
    this.#bytes = 0;
    // one batch in flight while the next is generated
    await this.#pending;
    this.#pending = this.conn.query(sql);
    this.#pending.catch(() => {}); // awaited at the next send or at end(); not unhandled meanwhile
  }
  async end(): Promise<void> {
    await this.#send();
    await this.#pending;
  }
}

type Loader = (conns: mysql.Connection[], o: Required<Pick<EstateOptions, 'warehouses' | 'seed' | 'scale'>>) => Promise<Record<string, number>>;

const loadItems: Loader = async ([conn], { seed, scale }) => {
  const r = stream(seed, 'item');
  const ins = new Inserter(conn, 'item');
  for (let i = 1; i <= scale.items; i++) {
    await ins.add(`${i},${r.int(1, 10000)},${q(r.astr(14, 24))},${r.dec(1, 100, 2)},${q(r.data())}`);
  }
  await ins.end();
  return { item: ins.rows };
};

const loadStock: Loader = async ([conn], { warehouses, seed, scale }) => {
  const ins = new Inserter(conn, 'stock');
  for (let w = 1; w <= warehouses; w++) {
    const r = stream(seed, `stock/${w}`);
    for (let i = 1; i <= scale.items; i++) {
      const dist: string[] = [];
      for (let d = 0; d < 10; d++) dist.push(q(r.astr(24, 24)));
      await ins.add(`${i},${w},${r.int(10, 100)},${dist.join(',')},0,0,0,${q(r.data())}`);
    }
  }
  await ins.end();
  return { stock: ins.rows };
};

const loadDistricts: Loader = async ([conn], { warehouses, seed, scale }) => {
  const wh = new Inserter(conn, 'warehouse');
  const di = new Inserter(conn, 'district');
  for (let w = 1; w <= warehouses; w++) {
    const r = stream(seed, `warehouse/${w}`);
    await wh.add([w, q(r.astr(6, 10)), ...address(r), r.dec(0, 0.2, 4), '300000.00'].join(','));
    for (let d = 1; d <= scale.districts; d++) {
      await di.add([d, w, q(r.astr(6, 10)), ...address(r), r.dec(0, 0.2, 4), '30000.00', scale.customers + 1].join(','));
    }
  }
  await wh.end();
  await di.end();
  return { warehouse: wh.rows, district: di.rows };
};

const loadCustomers: Loader = async ([conn], { warehouses, seed, scale }) => {
  const cu = new Inserter(conn, 'customer');
  const hi = new Inserter(conn, 'history');
  const cLoad = stream(seed, 'c_load').int(0, 255); // C for c_last at load time
  for (let w = 1; w <= warehouses; w++) {
    for (let d = 1; d <= scale.districts; d++) {
      const r = stream(seed, `customer/${w}/${d}`);
      for (let c = 1; c <= scale.customers; c++) {
        const last = lastName(c <= 1000 ? c - 1 : r.nurand(255, 0, 999, cLoad));
        const since = datetime(-86400 + c);
        await cu.add(
          [
            c,
            d,
            w,
            q(r.astr(8, 16)),
            q('OE'),
            q(last),
            ...address(r),
            q(r.nstr(16, 16)),
            since,
            q(r.next() < 0.1 ? 'BC' : 'GC'),
            '50000.00',
            r.dec(0, 0.5, 4),
            '-10.00',
            '10.00',
            1,
            0,
            q(r.astr(300, 500)),
          ].join(','),
        );
        await hi.add([c, d, w, d, w, since, '10.00', q(r.astr(12, 24))].join(','));
      }
    }
  }
  await cu.end();
  await hi.end();
  return { customer: cu.rows, history: hi.rows };
};

const loadOrders: Loader = async ([conn], { warehouses, seed, scale }) => {
  const or = new Inserter(conn, 'orders');
  const ol = new Inserter(conn, 'order_line');
  const no = new Inserter(conn, 'new_order');
  const n = scale.customers;
  const delivered = Math.round(n * 0.7); // 2,100 of 3,000
  for (let w = 1; w <= warehouses; w++) {
    for (let d = 1; d <= scale.districts; d++) {
      const r = stream(seed, `orders/${w}/${d}`);
      const cust = Array.from({ length: n }, (_, i) => i + 1);
      for (let i = n - 1; i > 0; i--) {
        const j = r.int(0, i);
        [cust[i], cust[j]] = [cust[j], cust[i]];
      }
      for (let o = 1; o <= n; o++) {
        const lines = r.int(5, 15);
        const entry = datetime(o * 60);
        const done = o <= delivered;
        await or.add([o, d, w, cust[o - 1], entry, done ? r.int(1, 10) : 'NULL', lines, 1].join(','));
        for (let l = 1; l <= lines; l++) {
          await ol.add([o, d, w, l, r.int(1, scale.items), w, done ? entry : 'NULL', 5, done ? '0.00' : r.dec(0.01, 9999.99, 2), q(r.astr(24, 24))].join(','));
        }
        if (!done) await no.add(`${o},${d},${w}`);
      }
    }
  }
  await or.end();
  await ol.end();
  await no.end();
  return { orders: or.rows, order_line: ol.rows, new_order: no.rows };
};

async function readMeta(conn: mysql.Connection, database: string): Promise<Record<string, unknown> | null> {
  const [t] = await conn.query<mysql.RowDataPacket[]>('SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = ?', [
    database,
    'qag_tpcc_meta',
  ]);
  if (!t.length) return null;
  const [rows] = await conn.query<mysql.RowDataPacket[]>(`SELECT * FROM \`${database}\`.qag_tpcc_meta WHERE complete = 1`);
  return rows[0] ?? null;
}

/** Makes sure the estate exists as asked: builds it (dropping any other) or leaves a matching one. */
export async function ensureEstate(opts: EstateOptions): Promise<Estate> {
  const target = opts.target ?? DEFAULT_TARGET;
  const log = opts.log ?? ((l: string) => console.error(l));
  const { warehouses, seed, scale } = opts;
  if (!(Number.isInteger(warehouses) && warehouses >= 1)) throw new RangeError(`warehouses: expected a whole number >= 1, got ${warehouses}`);
  const connect = () =>
    mysql.createConnection({
      host: target.host,
      port: target.port,
      user: target.user,
      password: target.password,
      multipleStatements: false,
    });
  const admin = await connect();
  try {
    const meta = await readMeta(admin, target.database);
    if (
      !opts.force &&
      meta &&
      meta.warehouses === warehouses &&
      meta.seed === seed &&
      meta.scale === scale.name &&
      meta.generator_version === GENERATOR_VERSION
    ) {
      log(`tpcc: ${target.database} already holds ${warehouses} warehouse(s), seed ${seed}, ${scale.name} scale: kept`);
      return { warehouses, seed, scale, built: false, build_s: Number(meta.build_s), rows: JSON.parse(String(meta.rows_json)) };
    }
    log(`tpcc: building ${target.database}: ${warehouses} warehouse(s), seed ${seed}, ${scale.name} scale`);
    const t0 = performance.now();
    await admin.query(`DROP DATABASE IF EXISTS \`${target.database}\``);
    await admin.query(`CREATE DATABASE \`${target.database}\` CHARACTER SET utf8mb4`);
    await admin.query(`USE \`${target.database}\``);
    for (const [name, cols] of TABLES) await admin.query(`CREATE TABLE ${name} (${cols}) ENGINE=InnoDB`);
    await admin.query(`CREATE TABLE qag_tpcc_meta (warehouses INT NOT NULL, seed BIGINT NOT NULL, scale VARCHAR(10) NOT NULL,
      generator_version INT NOT NULL, complete INT NOT NULL, build_s DOUBLE, rows_json TEXT, built_at DATETIME)`);

    // Two sessions load at once: item+stock on one, the district tree on the other, so the
    // database inserts one batch while this process generates the next.
    const sessions = await Promise.all([connect(), connect()]);
    try {
      for (const s of sessions) {
        await s.query(`USE \`${target.database}\``);
        await s.query('SET SESSION unique_checks = 0, foreign_key_checks = 0');
      }
      const o = { warehouses, seed, scale };
      const chains: Loader[][] = [
        [loadItems, loadStock],
        [loadDistricts, loadCustomers, loadOrders],
      ];
      const counts = await Promise.all(
        chains.map(async (chain, i) => {
          const out: Record<string, number> = {};
          for (const load of chain) {
            const t = performance.now();
            const c = await load([sessions[i]], o);
            log(
              `tpcc:   ${Object.entries(c)
                .map(([k, n]) => `${k} ${n.toLocaleString('en-US')}`)
                .join(', ')} (${((performance.now() - t) / 1000).toFixed(1)} s)`,
            );
            Object.assign(out, c);
          }
          return out;
        }),
      );
      const rows = Object.assign({}, ...counts) as Record<string, number>;
      await admin.query(`ANALYZE TABLE ${TABLE_NAMES.join(', ')}`);
      const build_s = Number(((performance.now() - t0) / 1000).toFixed(1));
      await admin.query('INSERT INTO qag_tpcc_meta VALUES (?, ?, ?, ?, 1, ?, ?, NOW())', [
        warehouses,
        seed,
        scale.name,
        GENERATOR_VERSION,
        build_s,
        JSON.stringify(rows),
      ]);
      log(`tpcc: built in ${build_s} s`);
      return { warehouses, seed, scale, built: true, build_s, rows };
    } finally {
      await Promise.all(sessions.map((s) => s.end()));
    }
  } finally {
    await admin.end();
  }
}

// ---------------------------------------------------------------- CLI

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      warehouses: { type: 'string', default: '1' },
      seed: { type: 'string', default: '42' },
      small: { type: 'boolean', default: false },
      force: { type: 'boolean', default: false },
      host: { type: 'string', default: DEFAULT_TARGET.host },
      port: { type: 'string', default: String(DEFAULT_TARGET.port) },
      user: { type: 'string', default: DEFAULT_TARGET.user },
      password: { type: 'string', default: DEFAULT_TARGET.password },
      database: { type: 'string', default: DEFAULT_TARGET.database },
    },
  });
  ensureEstate({
    warehouses: Number(values.warehouses),
    seed: Number(values.seed),
    scale: values.small ? SCALES.small : SCALES.full,
    force: values.force,
    target: { host: values.host!, port: Number(values.port), user: values.user!, password: values.password!, database: values.database! },
  }).then(
    (e) => console.log(JSON.stringify(e)),
    (e: unknown) => {
      console.error(e instanceof Error ? e.message : e);
      process.exitCode = 1;
    },
  );
}
