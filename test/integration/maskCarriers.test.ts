// The class "a masked value leaves through another shape": a key hashes customers.email, and the caller's statement
// carries the email out by some other road: an expression of it (an encoding, a reversal, a digest, a cast, a
// concatenation), an aggregate, a JSON or array built around it, the whole row (PostgreSQL's composite values), a
// renamed column (a table's or a CTE's column list), a subquery, or an error that would quote it. Against real
// databases in the three dialects, every shape asserts its concrete outcome: served with each value the hash mask's 16
// hexadecimal characters (or null), or refused with its code, or failed with the generic query_failed; and the
// address itself appears in no answer. A key that may write must not store it where no rule masks it (another table,
// another column, through a function, a trigger, a rule, or a default, CHECK, policy or domain that calls a function,
// in the table written or one the write reaches) and read it back: such writes are refused (mask_write),
// other writes served.
import assert from 'node:assert/strict';
import mysql from 'mysql2/promise';
import { after, before, describe, test } from 'node:test';
import { pgConnection, scratchDatabase, sqliteConnection, startTestServer, type TestServer } from '../helpers.js';

const EMAIL = 'carrier@example.com';
const HASH = /^[0-9a-f]{16}$/;
/** What the mask action shows of EMAIL: its first character and its domain. */
const MASKED = /^c\*+@example\.com$/;

/**
 * [statement, outcome]: 'hashed', 'masked' or 'nulled' (served, every value hashed, masked or null; null allowed in
 * the first two), 'served' (whatever it shows, not the address), 'failed' (query_failed) or a refusal's code.
 */
type Shape = [string, string];
const SERVED: Record<string, RegExp | null> = { hashed: HASH, masked: MASKED, nulled: null };

let n = 0;
async function holds(s: TestServer, conn: string, key: string, shapes: Shape[]): Promise<void> {
  for (const [sql, want] of shapes) {
    const name = `carrier_${n++}`;
    const saved = await s.call('POST', '/api/v1/queries', { body: { name, connection_name: conn, description: 'probe', publish: true, sql } });
    assert.equal(saved.status, 201, `${sql}: ${saved.text}`);
    const r = await s.call('GET', `/q/${name}`, { key });
    assert.ok(!r.text.includes(EMAIL), `${sql}: the address in clear: ${r.text}`);
    if (want === 'served') assert.equal(r.status, 200, `${sql}: ${r.text}`);
    else if (want in SERVED) {
      assert.equal(r.status, 200, `${sql}: ${r.text}`);
      const rows = r.json as Record<string, unknown>[];
      assert.ok(rows.length > 0, `${sql}: no rows`);
      const shown = SERVED[want];
      for (const row of rows) {
        for (const [column, v] of Object.entries(row)) {
          assert.ok(v === null || (shown !== null && typeof v === 'string' && shown.test(v)), `${sql}: ${column} is ${JSON.stringify(v)}, not ${want}`);
        }
      }
    } else if (want === 'failed') {
      assert.equal(r.status, 500, `${sql}: ${r.text}`);
      assert.equal(r.json.code, 'query_failed', `${sql}: ${r.text}`);
    } else {
      assert.equal(r.status, 403, `${sql}: ${r.text}`);
      assert.equal(r.json.code, want, `${sql}: ${r.text}`);
    }
  }
}

/**
 * Ad-hoc SQL that fails on the value itself. Its author sees the database's text, which quotes the value, only when the
 * key masks nothing (`plain`); the hashing key gets the generic query_failed, nothing of the database's text.
 */
async function adhocFails(s: TestServer, conn: string, keys: { hashing: string; plain: string }, statements: string[]): Promise<void> {
  for (const sql of statements) {
    const masked = await s.call('POST', '/execute_sql', { key: keys.hashing, body: { sql, connection_name: conn } });
    assert.equal(masked.status, 500, `${sql}: ${masked.text}`);
    assert.equal(masked.json.code, 'query_failed', `${sql}: ${masked.text}`);
    assert.equal(masked.json.detail, undefined, `${sql}: ${masked.text}`);
    assert.ok(!masked.text.includes(EMAIL), `${sql}: the address in clear: ${masked.text}`);
    const plain = await s.call('POST', '/execute_sql', { key: keys.plain, body: { sql, connection_name: conn } });
    assert.equal(plain.status, 500, `${sql}: ${plain.text}`);
    assert.equal(typeof plain.json.detail, 'string', `${sql}: ${plain.text}`);
  }
}

/**
 * A writing key that hashes customers.email: each of `laundering` is refused (mask_write, or the code given: DDL has no
 * rows to trace, so a masking key is refused it outright), each of `served` runs; then nothing the key reads from notes
 * or customers holds the address in clear.
 */
async function writes(s: TestServer, conn: string, laundering: Array<string | [string, string]>, served: string[]): Promise<void> {
  const key = await newKey(s, conn, { ...HASH_EMAIL, allow_writes: true });
  const run = (sql: string) => s.call('POST', '/execute_sql', { key, body: { sql, connection_name: conn } });
  for (const entry of laundering) {
    const [sql, code] = typeof entry === 'string' ? [entry, 'mask_write'] : entry;
    const a = await run(sql);
    assert.equal(a.status, 403, `${sql}: ${a.text}`);
    assert.equal(a.json.code, code, `${sql}: ${a.text}`);
  }
  for (const sql of [...served, 'SELECT body FROM notes', 'SELECT name FROM customers']) {
    const a = await run(sql);
    assert.equal(a.status, 200, `${sql}: ${a.text}`);
    assert.ok(!a.text.includes(EMAIL), `${sql}: the address in clear: ${a.text}`);
  }
}

const HASH_EMAIL = { mask: [{ column: 'customers.email', action: 'hash' }] };
const MASK_EMAIL = { mask: [{ column: 'customers.email', action: 'mask' }] };
const HASH_REFUSING = { ...HASH_EMAIL, mask_predicates: 'refuse' };

/** A new key reaching connection `conn` with `grants` (say HASH_EMAIL); its secret. */
async function newKey(s: TestServer, conn: string, grants: object = {}): Promise<string> {
  const r = await s.call('POST', '/api/v1/api-keys', { body: { name: `key_${conn}_${n++}`, queries: [], connections: [conn], ...grants } });
  assert.equal(r.status, 201, r.text);
  return r.json.secret;
}

/** Shapes every dialect reads alike: expressions, aggregates, subqueries, CTEs with a column list. */
const COMMON: Shape[] = [
  ['SELECT email FROM customers', 'hashed'],
  ['SELECT lower(email) AS e FROM customers', 'hashed'],
  ['SELECT upper(email) AS e FROM customers', 'hashed'],
  ['SELECT substr(email, 1, 8) AS e FROM customers', 'hashed'],
  ['SELECT length(email) AS e FROM customers', 'hashed'],
  ["SELECT replace(email, '@', ' at ') AS e FROM customers", 'hashed'],
  ['SELECT CASE WHEN id > 0 THEN email END AS e FROM customers', 'hashed'],
  ['SELECT COALESCE(email, name) AS e FROM customers', 'hashed'],
  ['SELECT min(email) AS e FROM customers', 'hashed'],
  ['SELECT max(email) AS e FROM customers GROUP BY id', 'hashed'],
  ['SELECT (SELECT email FROM customers LIMIT 1) AS e', 'hashed'],
  ['SELECT x.e FROM (SELECT email AS e FROM customers) x', 'hashed'],
  ['SELECT DISTINCT email FROM customers', 'hashed'],
  ['WITH t(x) AS (SELECT email FROM customers) SELECT x FROM t', 'hashed'],
  ['SELECT email FROM customers UNION SELECT email FROM customers', 'hashed'],
];

/**
 * The mask action keeps a value's first character and an email's domain. Of a value picked unchanged (a CASE's result,
 * COALESCE, NULLIF) that is what it keeps of the column; of a computed one those are other characters (`reverse(email)`
 * kept the local part, `substr(email, k)` the k-th character), so a computed value shows nothing.
 */
const MASK_COMMON: Shape[] = [
  ['SELECT email FROM customers', 'masked'],
  ['SELECT x.e FROM (SELECT email AS e FROM customers) x', 'masked'],
  ['SELECT CASE WHEN id > 0 THEN email END AS e FROM customers', 'masked'],
  ["SELECT CASE WHEN id > 0 THEN email ELSE 'none' END AS e FROM customers", 'masked'],
  ["SELECT COALESCE(email, 'none') AS e FROM customers", 'masked'],
  ["SELECT NULLIF(email, 'x') AS e FROM customers", 'masked'],
  ['SELECT email FROM customers UNION ALL SELECT email FROM customers', 'masked'],
  ['SELECT substr(email, 3) AS e FROM customers', 'nulled'],
  ['SELECT lower(email) AS e FROM customers', 'nulled'],
  ["SELECT replace(email, 'c', 'x') AS e FROM customers", 'nulled'],
  ['SELECT x.e FROM (SELECT substr(email, 2) AS e FROM customers) x', 'nulled'],
  ['SELECT COALESCE(substr(email, 2), email) AS e FROM customers', 'nulled'],
  ['SELECT (SELECT email FROM customers LIMIT 1) AS e', 'nulled'],
];

/**
 * A key that refuses inference through predicates sees a masked column's own values only: a value computed from it or
 * picked by a condition on it answers a predicate (rows whose hashes match share the property; `CASE WHEN email LIKE
 * 'c%' THEN email END` is null where the LIKE fails), and so does a set operation that matches rows (INTERSECT is empty
 * unless an email is some name), a DISTINCT (how many rows it keeps) and a value computed from it that is not shown
 * (whether computing it fails).
 */
const REFUSING_COMMON: Shape[] = [
  ['SELECT email FROM customers', 'hashed'],
  ['SELECT x.e FROM (SELECT email AS e FROM customers) x', 'hashed'],
  ['SELECT email FROM customers UNION ALL SELECT email FROM customers', 'hashed'],
  ["SELECT CASE WHEN email LIKE 'c%' THEN email END AS e FROM customers", 'mask_predicate'],
  ["SELECT CASE WHEN email LIKE 'c%' THEN 'yes' ELSE name END AS e FROM customers", 'mask_predicate'],
  ["SELECT NULLIF(email, 'guess@example.com') AS e FROM customers", 'mask_predicate'],
  ['SELECT COALESCE(email, name) AS e FROM customers', 'mask_predicate'],
  ['SELECT substr(email, 1, 1) AS e FROM customers', 'mask_predicate'],
  ['SELECT length(email) AS e FROM customers', 'mask_predicate'],
  ['SELECT min(email) AS e FROM customers', 'mask_predicate'],
  ['SELECT count(DISTINCT email) AS e FROM customers', 'mask_predicate'],
  ['SELECT x.e FROM (SELECT lower(email) AS e FROM customers) x', 'mask_predicate'],
  ['SELECT id, row_number() OVER (ORDER BY email) AS r FROM customers', 'mask_predicate'],
  ['SELECT id, count(*) OVER (PARTITION BY email) AS r FROM customers', 'mask_predicate'],
  ['SELECT id, (SELECT count(*) FROM customers d WHERE d.email < c.email) AS r FROM customers c', 'mask_predicate'],
  ['SELECT email FROM customers UNION SELECT name FROM customers', 'mask_predicate'],
  ["SELECT email FROM customers UNION SELECT 'guess@example.com'", 'mask_predicate'],
  ['SELECT DISTINCT email FROM customers', 'mask_predicate'],
  ['SELECT id FROM customers, (SELECT 1 / (length(email) - 15) AS z FROM customers WHERE id = 1) AS x', 'mask_predicate'],
];
/** INTERSECT and EXCEPT as PostgreSQL and MariaDB read them (SQLite's are not analysed here: mask_unresolvable). */
const INTERSECT_EXCEPT: Shape[] = [
  ['SELECT email FROM customers INTERSECT SELECT name FROM customers', 'mask_predicate'],
  ['SELECT email FROM customers EXCEPT SELECT name FROM customers', 'mask_predicate'],
];

/** The two lists above for one connection, each with the dialect's own shapes added. */
async function masksAndRefusals(s: TestServer, conn: string, masks: Shape[], refusing: Shape[]): Promise<void> {
  await holds(s, conn, await newKey(s, conn, MASK_EMAIL), [...MASK_COMMON, ...masks]);
  await holds(s, conn, await newKey(s, conn, HASH_REFUSING), [...REFUSING_COMMON, ...refusing]);
  const maskRefusing = await newKey(s, conn, { ...MASK_EMAIL, mask_predicates: 'refuse' });
  await holds(s, conn, maskRefusing, [
    ['SELECT email FROM customers', 'masked'],
    ['SELECT CASE WHEN id > 0 THEN email END AS e FROM customers', 'mask_predicate'],
  ]);
}

/**
 * A function's body reads tables the statement does not name (the gateway does not follow it), so what it answers
 * carries no trace: a key hashing customers.email is refused it (mask_unresolvable), a key allowed only the notes table
 * too (table_not_allowed); a function whose body reads no table is served to both.
 */
async function functionBodies(s: TestServer, conn: string, reading: string, pure: string): Promise<void> {
  await holds(s, conn, await newKey(s, conn, HASH_EMAIL), [
    [reading, 'mask_unresolvable'],
    [pure, 'served'],
  ]);
  await holds(s, conn, await newKey(s, conn, { allowed_tables: ['notes'] }), [
    [reading, 'table_not_allowed'],
    [pure, 'served'],
  ]);
}

/** Rules on the tables of derivedColumns' shapes. */
const MEMBERS = (action: string) => ({
  mask: [
    { column: 'members.email', action },
    { column: 'events.email', action },
  ],
});

/**
 * Columns the database fills from a masked one carry its rules though no statement names it: a generated column
 * computed from members.email (`lower(email)` stored is the address), and on PostgreSQL the same column of a table
 * inheriting from it or of a partition, whose rows are the parent's. Each list is a key's: hashing, masking, hashing and
 * refusing predicates; `laundering` a hashing writer's, each refused (mask_write).
 */
async function derivedColumns(
  s: TestServer,
  conn: string,
  lists: { hashed: Shape[]; masked: Shape[]; refusing: Shape[]; laundering: string[] },
): Promise<void> {
  await holds(s, conn, await newKey(s, conn, MEMBERS('hash')), lists.hashed);
  await holds(s, conn, await newKey(s, conn, MEMBERS('mask')), lists.masked);
  await holds(s, conn, await newKey(s, conn, { ...MEMBERS('hash'), mask_predicates: 'refuse' }), lists.refusing);
  const writer = await newKey(s, conn, { ...MEMBERS('hash'), allow_writes: true });
  for (const sql of lists.laundering) {
    const a = await s.call('POST', '/execute_sql', { key: writer, body: { sql, connection_name: conn } });
    assert.equal(a.status, 403, `${sql}: ${a.text}`);
    assert.equal(a.json.code, 'mask_write', `${sql}: ${a.text}`);
  }
}

/** The shapes every dialect with generated columns reads alike (members: id, email, email_lower, domain, id2). */
const DERIVED_HASHED: Shape[] = [
  ['SELECT email_lower FROM members', 'hashed'],
  ['SELECT domain FROM members', 'hashed'],
  ['SELECT email, email_lower, domain FROM members', 'hashed'],
  ['SELECT upper(email_lower) AS e FROM members', 'hashed'],
  ['SELECT x.d FROM (SELECT domain AS d FROM members) x', 'hashed'],
  ['SELECT id2 FROM members', 'served'],
];
const DERIVED_MASKED: Shape[] = [
  ['SELECT email FROM members', 'masked'],
  ['SELECT email_lower FROM members', 'nulled'],
  ['SELECT domain FROM members', 'nulled'],
];
const DERIVED_REFUSING: Shape[] = [
  ['SELECT email FROM members', 'hashed'],
  ['SELECT email_lower FROM members', 'mask_predicate'],
  ["SELECT id FROM members WHERE domain = 'example.com'", 'mask_predicate'],
  ['SELECT id FROM members ORDER BY email_lower', 'mask_predicate'],
  ['SELECT id2 FROM members WHERE id2 > 0', 'served'],
];
const DERIVED_LAUNDERING = ['INSERT INTO notes (body) SELECT email_lower FROM members', 'INSERT INTO notes (body) SELECT domain FROM members'];

/** A scratch PostgreSQL database made by `sql` (given the database's name), and a server, inline and allowing writes, with connection `conn` to it. */
async function pgCell(prefix: string, conn: string, sql: (db: string) => string): Promise<{ s: TestServer; data: ScratchDatabase }> {
  const data = await scratchDatabase(prefix);
  await data.sql.unsafe(sql(data.name));
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1' });
  const c = await s.call('POST', '/api/v1/connections', { body: { ...pgConnection(conn), database: data.name } });
  assert.equal(c.status, 201, c.text);
  return { s, data };
}
type ScratchDatabase = Awaited<ReturnType<typeof scratchDatabase>>;

describe('PostgreSQL: a hashed column leaves only hashed', () => {
  let s: TestServer;
  let data: ScratchDatabase;
  before(async () => {
    ({ s, data } = await pgCell(
      'qag_carriers',
      'pg',
      (db) => `CREATE TABLE customers (id int, name text, email text);
      INSERT INTO customers VALUES (1, 'Carrier', '${EMAIL}');
      CREATE TABLE notes (id serial PRIMARY KEY, body text);
      CREATE FUNCTION email_of(i int) RETURNS text LANGUAGE sql STABLE AS 'SELECT email FROM customers WHERE id = i';
      CREATE FUNCTION plus_one(i int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT i + 1';
      -- not built in on PostgreSQL: a user's ifnull computes, whatever MySQL's and SQLite's do
      CREATE FUNCTION ifnull(a text, b text) RETURNS text LANGUAGE sql IMMUTABLE AS 'SELECT reverse(a)';
      CREATE FUNCTION gather(s text, v text) RETURNS text LANGUAGE plpgsql AS
        $$ BEGIN INSERT INTO notes (body) SELECT email FROM customers; RETURN v; END $$;
      CREATE AGGREGATE gathered(text) (SFUNC = gather, STYPE = text);
      CREATE FUNCTION copy_emails() RETURNS int LANGUAGE plpgsql AS
        $$ BEGIN INSERT INTO notes (body) SELECT email FROM customers; RETURN 1; END $$;
      CREATE TABLE orders (id serial PRIMARY KEY, customer_id int);
      CREATE FUNCTION order_note() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN INSERT INTO notes (body) SELECT email FROM customers WHERE id = NEW.customer_id; RETURN NEW; END $$;
      CREATE TRIGGER order_note AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION order_note();
      CREATE VIEW orders_view AS SELECT id, customer_id FROM orders;
      CREATE TABLE inbox (body text);
      CREATE RULE inbox_copy AS ON INSERT TO inbox DO ALSO INSERT INTO notes (body) SELECT email FROM customers;
      -- the same function reached through what a write evaluates: a default, a CHECK, a domain, a policy
      CREATE TABLE defaulted (id int, n int DEFAULT copy_emails());
      CREATE TABLE checked (id int, n int CHECK (copy_emails() > 0));
      CREATE DOMAIN copying AS int CHECK (copy_emails() > 0);
      CREATE DOMAIN copying_too AS copying;
      CREATE TYPE pair AS (a int, b copying);
      CREATE TABLE in_domain (id int, n copying);
      CREATE TABLE in_array (id int, n copying_too[]);
      CREATE TABLE in_composite (id int, p pair);
      CREATE TABLE policed (id int);
      ALTER TABLE policed ENABLE ROW LEVEL SECURITY;
      ALTER TABLE policed FORCE ROW LEVEL SECURITY;
      CREATE POLICY copy_on_write ON policed WITH CHECK (copy_emails() > 0);
      CREATE POLICY read_all ON policed FOR SELECT USING (true);
      -- and through the tables a write reaches: a partition, an inheriting table, a cascading foreign key
      CREATE TABLE parted (id int, n int) PARTITION BY RANGE (id);
      CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (10);
      CREATE TABLE parted_high PARTITION OF parted (CHECK (copy_emails() > 0)) FOR VALUES FROM (10) TO (20);
      CREATE TABLE parent (id int);
      CREATE TABLE child (n int DEFAULT copy_emails()) INHERITS (parent);
      CREATE TABLE referred (id int PRIMARY KEY);
      INSERT INTO referred VALUES (1);
      CREATE TABLE referring (id int REFERENCES referred ON UPDATE CASCADE, n int CHECK (copy_emails() > 0));
      -- what vouched functions evaluate is served: built-in defaults and checks, a foreign key that does not cascade
      CREATE TABLE stamped (id serial PRIMARY KEY, at timestamptz DEFAULT now(), tag uuid DEFAULT gen_random_uuid(),
        body text CHECK (length(body) < 100), ref int REFERENCES referred);
      -- a user's namesake of a function vouched for by name (random) is not that function
      CREATE FUNCTION random(t text) RETURNS int LANGUAGE plpgsql AS
        $$ BEGIN INSERT INTO notes (body) SELECT email FROM customers; RETURN 1; END $$;
      -- columns the database fills from members.email and events.email (derivedColumns)
      CREATE TABLE members (id int, email text, email_lower text GENERATED ALWAYS AS (lower(email)) STORED,
        domain text GENERATED ALWAYS AS (split_part(email, '@', 2)) STORED, id2 int GENERATED ALWAYS AS (id * 2) STORED);
      INSERT INTO members (id, email) VALUES (1, '${EMAIL}');
      CREATE TABLE vip_members (tier int) INHERITS (members);
      INSERT INTO vip_members (id, email, tier) VALUES (2, '${EMAIL}', 1);
      CREATE TABLE events (id int, email text) PARTITION BY RANGE (id);
      CREATE TABLE events_low PARTITION OF events FOR VALUES FROM (0) TO (10);
      CREATE TABLE events_high PARTITION OF events FOR VALUES FROM (10) TO (20) PARTITION BY RANGE (id);
      CREATE TABLE events_high_a PARTITION OF events_high FOR VALUES FROM (10) TO (15);
      INSERT INTO events VALUES (1, '${EMAIL}'), (11, '${EMAIL}');
      CREATE FUNCTION shout(t text) RETURNS text LANGUAGE sql IMMUTABLE AS 'SELECT upper(t)';
      -- a user's operator over an SQL function that reads no table and calls only vouched ones: computes, as upper does
      CREATE FUNCTION twice(t text, i int) RETURNS text LANGUAGE sql IMMUTABLE AS 'SELECT repeat(t, i)';
      CREATE OPERATOR * (LEFTARG = text, RIGHTARG = int, FUNCTION = twice);
      CREATE TABLE shouted (id int, loud text GENERATED ALWAYS AS (shout(name)) STORED, name text);
      INSERT INTO shouted (id, name) VALUES (1, 'x');
      CREATE TABLE vip_only (id int, email text);
      CREATE TABLE vip_only_child () INHERITS (vip_only);
      INSERT INTO vip_only VALUES (1, 'plain@example.net');
      INSERT INTO vip_only_child VALUES (2, '${EMAIL}');
      -- a foreign table reads the rows of the table it names, here customers itself
      CREATE EXTENSION postgres_fdw;
      CREATE SERVER loopback FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', dbname '${db}');
      CREATE USER MAPPING FOR CURRENT_USER SERVER loopback OPTIONS (user 'postgres');
      CREATE FOREIGN TABLE far_customers (id int, email text) SERVER loopback OPTIONS (table_name 'customers');`,
    ));
  });
  after(async () => {
    await s.stop();
    await data.drop();
  });

  test('expressions, encodings, whole rows, column lists, errors', async () => {
    const k = await newKey(s, 'pg', HASH_EMAIL);
    await holds(s, 'pg', k, [
      ...COMMON,
      // encodings and digests of it
      ["SELECT encode(convert_to(email, 'UTF8'), 'base64') AS e FROM customers", 'hashed'],
      ["SELECT encode(email::bytea, 'hex') AS e FROM customers", 'hashed'],
      ['SELECT email * 2 AS e FROM customers', 'hashed'],
      ['SELECT email::bytea AS e FROM customers', 'hashed'],
      ['SELECT reverse(email) AS e FROM customers', 'hashed'],
      ['SELECT md5(email) AS e FROM customers', 'hashed'],
      ["SELECT translate(email, 'abcdefghijklmnopqrstuvwxyz', 'bcdefghijklmnopqrstuvwxyza') AS e FROM customers", 'hashed'],
      ["SELECT format('%s', email) AS e FROM customers", 'hashed'],
      ["SELECT email || '' AS e FROM customers", 'hashed'],
      ['SELECT email::text AS e FROM customers', 'hashed'],
      ['SELECT email COLLATE "C" AS e FROM customers', 'mask_unresolvable'],
      // built around it
      ['SELECT ARRAY[email] AS e FROM customers', 'hashed'],
      ['SELECT unnest(ARRAY[email]) AS e FROM customers', 'hashed'],
      ['SELECT (array_agg(email))[1] AS e FROM customers', 'hashed'],
      ["SELECT string_agg(email, ',') AS e FROM customers", 'hashed'],
      ["SELECT jsonb_build_object('e', email) AS e FROM customers", 'hashed'],
      ['SELECT json_agg(email) AS e FROM customers', 'hashed'],
      ['SELECT xmlelement(name e, email) AS e FROM customers', 'mask_unresolvable'],
      // the whole row
      ['SELECT c FROM customers c', 'hashed'],
      ['SELECT c::text AS e FROM customers c', 'hashed'],
      ['SELECT ROW(c.*)::text AS e FROM customers c', 'hashed'],
      ['SELECT to_jsonb(c) AS e FROM customers c', 'hashed'],
      ['SELECT row_to_json(c) AS e FROM customers c', 'hashed'],
      ['SELECT json_agg(c) AS e FROM customers c', 'hashed'],
      ['SELECT array_agg(c) AS e FROM customers c', 'hashed'],
      ['SELECT customers FROM customers', 'hashed'],
      ['SELECT customers.*::text AS e FROM customers', 'hashed'],
      ['SELECT (c).email FROM customers c', 'mask_unresolvable'],
      ['SELECT (customers).email FROM customers', 'mask_unresolvable'],
      // renamed by a column list
      ['SELECT t.x FROM customers AS t(a, b, x)', 'hashed'],
      ['SELECT * FROM customers AS t(a, b, x)', 'mask_unresolvable'],
      ['SELECT x FROM (SELECT email FROM customers) AS t(x)', 'hashed'],
      ['SELECT * FROM (VALUES ((SELECT email FROM customers LIMIT 1))) v(e)', 'hashed'],
      ['SELECT e FROM customers CROSS JOIN LATERAL (VALUES (email)) v(e)', 'mask_unresolvable'],
      // an error that would quote it
      ['SELECT email::int AS e FROM customers', 'failed'],
      ['SELECT email::json AS e FROM customers', 'failed'],
      ['SELECT email::uuid AS e FROM customers', 'failed'],
      ['SELECT email::inet AS e FROM customers', 'failed'],
      ['SELECT id FROM customers WHERE email::numeric > 0', 'failed'],
      ['SELECT id FROM customers ORDER BY email::date', 'failed'],
    ]);
  });
  test('mask shows only values picked unchanged; a key refusing predicates sees only the column itself', async () => {
    await masksAndRefusals(
      s,
      'pg',
      [
        ['SELECT reverse(email) AS e FROM customers', 'nulled'],
        ["SELECT email || '' AS e FROM customers", 'nulled'],
        ['SELECT email::text AS e FROM customers', 'nulled'],
        ['SELECT greatest(email, name) AS e FROM customers', 'masked'],
        ["SELECT ifnull(email, 'none') AS e FROM customers", 'nulled'],
        ['SELECT c FROM customers c', 'nulled'],
      ],
      [
        ...INTERSECT_EXCEPT,
        ['SELECT c FROM customers c', 'mask_predicate'],
        ["SELECT email FROM customers INTERSECT ALL SELECT 'guess@example.com'", 'mask_unresolvable'],
      ],
    );
  });
  test("a function's body reading a table: refused to keys whose rules follow columns or tables", async () => {
    await functionBodies(s, 'pg', 'SELECT email_of(1) AS e', 'SELECT plus_one(1) AS n');
    await holds(s, 'pg', await newKey(s, 'pg', HASH_EMAIL), [['SELECT * FROM email_of(1) AS e', 'mask_unresolvable']]);
    // a user's aggregate runs its transition function (PL/pgSQL here), whatever pg_proc says of the aggregate itself
    await holds(s, 'pg', await newKey(s, 'pg'), [['SELECT gathered(name) AS n FROM customers', 'read_only']]);
  });
  test('a generated column, an inheriting table, a partition: each carries the rules of the column it is filled from', async () => {
    await derivedColumns(s, 'pg', {
      hashed: [
        ...DERIVED_HASHED,
        ['SELECT email, email_lower FROM vip_members', 'hashed'],
        // ONLY, which the fallback parser took for a table's name (a table "only" would have been traced instead): unread
        ['SELECT email FROM ONLY members', 'mask_unresolvable'],
        ['SELECT email FROM events_low', 'hashed'],
        ['SELECT email FROM events_high', 'hashed'],
        ['SELECT email FROM events_high_a', 'hashed'],
        ['SELECT e.email FROM events_high_a e JOIN members m ON m.id = e.id', 'served'],
        // an expression calling a user's function, which could read any table: untraced
        ['SELECT loud FROM shouted', 'mask_unresolvable'],
        ['SELECT * FROM shouted', 'mask_unresolvable'],
        ['SELECT id FROM shouted', 'served'],
      ],
      masked: [...DERIVED_MASKED, ['SELECT email FROM vip_members', 'masked'], ['SELECT email FROM events_high_a', 'masked']],
      refusing: [...DERIVED_REFUSING, ["SELECT id FROM events_low WHERE email LIKE 'c%'", 'mask_predicate']],
      laundering: [...DERIVED_LAUNDERING, 'INSERT INTO notes (body) SELECT email FROM vip_members', 'INSERT INTO notes (body) SELECT email FROM events_low'],
    });
    // a relation that reads another's rows, as a view does, is untraced
    await holds(s, 'pg', await newKey(s, 'pg', HASH_EMAIL), [
      ['SELECT email FROM far_customers', 'mask_unresolvable'],
      ['SELECT * FROM far_customers', 'mask_unresolvable'],
    ]);
    // a rule on a child covers its parent's scan, which reads the child's rows
    await holds(s, 'pg', await newKey(s, 'pg', { mask: [{ column: 'vip_only_child.email', action: 'hash' }] }), [
      ['SELECT email FROM vip_only', 'hashed'],
      ['SELECT email FROM vip_only_child', 'hashed'],
    ]);
  });
  test('ad-hoc SQL: an error that quotes the value reaches only a key that masks nothing', async () => {
    const keys = { hashing: await newKey(s, 'pg', HASH_EMAIL), plain: await newKey(s, 'pg') };
    const statements = [
      'SELECT email::int AS e FROM customers',
      'SELECT id FROM customers WHERE email::uuid IS NOT NULL',
      'SELECT email::json AS e FROM customers',
      "SELECT to_date(email, 'YYYY-MM-DD') AS e FROM customers",
    ];
    await adhocFails(s, 'pg', keys, statements);
    const plain = await s.call('POST', '/execute_sql', { key: keys.plain, body: { sql: statements[0], connection_name: 'pg' } });
    assert.ok(plain.json.detail.includes(EMAIL), plain.text); // the class: the database's text quotes the value
  });
  test('writes: a masked value stored where no rule masks it is refused', async () => {
    await writes(
      s,
      'pg',
      [
        'INSERT INTO notes (body) SELECT email FROM customers',
        'INSERT INTO notes (body) SELECT lower(email) FROM customers',
        'INSERT INTO notes (body) SELECT c.email FROM customers c',
        'INSERT INTO notes (body) SELECT x FROM (SELECT email AS x FROM customers) s',
        'INSERT INTO notes (body) SELECT name FROM customers UNION SELECT email FROM customers',
        'INSERT INTO notes (body) VALUES ((SELECT email FROM customers LIMIT 1))',
        'INSERT INTO notes (body) SELECT email FROM customers RETURNING body',
        'INSERT INTO notes (body) SELECT c::text FROM customers c',
        "INSERT INTO notes (id, body) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET body = (SELECT email FROM customers LIMIT 1)",
        'WITH x AS (INSERT INTO notes (body) SELECT email FROM customers RETURNING id) SELECT id FROM x',
        'UPDATE notes SET body = (SELECT email FROM customers LIMIT 1)',
        'UPDATE customers SET name = email',
        'UPDATE customers SET name = upper(email) WHERE id = 1',
        'UPDATE notes n SET body = c.email FROM customers c WHERE c.id = n.id',
        'SELECT copy_emails() AS n',
        'SELECT gathered(name) AS n FROM customers',
        'SELECT email INTO leak FROM customers',
        // the database's own code on a table written: a trigger, a rule
        'INSERT INTO orders (customer_id) VALUES (1)',
        "INSERT INTO inbox (body) VALUES ('x')",
        // a view's tables (with their triggers), a table the schema does not know: not checked, not written
        'INSERT INTO orders_view (customer_id) VALUES (1)',
        'INSERT INTO made_since (body) VALUES (1)',
        'INSERT INTO defaulted (id) VALUES (1)',
        'INSERT INTO checked (id, n) VALUES (1, 1)',
        'INSERT INTO in_domain (id, n) VALUES (1, 1)',
        "INSERT INTO in_array (id, n) VALUES (1, '{1}')",
        'INSERT INTO in_composite (id) VALUES (1)',
        'INSERT INTO policed (id) VALUES (1)',
        'INSERT INTO parted (id, n) VALUES (15, 1)',
        'INSERT INTO parted (id, n) VALUES (5, 1)',
        'INSERT INTO parent (id) VALUES (1)',
        'INSERT INTO child (id, n) VALUES (1, 1)',
        'UPDATE parent SET id = 2',
        'UPDATE referred SET id = 2',
        // calls are judged by name, so once a user's overload exists, random() is refused too
        "SELECT random('x') AS n",
        'SELECT random() AS n',
        ['CREATE TABLE leak AS SELECT email FROM customers', 'table_check_failed'],
        ['CREATE VIEW leak AS SELECT email FROM customers', 'mask_unresolvable'],
        ['ALTER TABLE customers RENAME COLUMN email TO contact', 'mask_unresolvable'],
      ],
      [
        "INSERT INTO notes (body) VALUES ('plain')",
        'INSERT INTO notes (body) SELECT name FROM customers',
        "UPDATE customers SET name = 'Carrier' WHERE id = 1",
        // a masked column deciding which rows change is a predicate (mask_predicates decides), not a value stored
        "UPDATE customers SET name = 'Carrier' WHERE email IS NOT NULL",
        "UPDATE notes SET body = 'again' WHERE body = 'plain'",
        "DELETE FROM notes WHERE body = 'again'",
        "INSERT INTO stamped (body, ref) VALUES ('plain', 1)",
        'INSERT INTO parted_low (id, n) VALUES (5, 1)',
      ],
    );
  });
});

describe("PostgreSQL: a user's operator or cast runs a function no statement names", () => {
  let s: TestServer;
  let data: ScratchDatabase;
  before(async () => {
    ({ s, data } = await pgCell(
      'qag_operators',
      'ops',
      () => `CREATE TABLE customers (id int, name text, email text);
      INSERT INTO customers VALUES (1, 'Carrier', '${EMAIL}');
      CREATE TABLE notes (id serial PRIMARY KEY, body text);
      CREATE FUNCTION noted(t text, i int) RETURNS text LANGUAGE plpgsql AS
        $$ BEGIN INSERT INTO notes (body) VALUES (t); RETURN t; END $$;
      CREATE OPERATOR + (LEFTARG = text, RIGHTARG = int, FUNCTION = noted);
      CREATE FUNCTION noted_cast(t text) RETURNS bigint LANGUAGE plpgsql AS
        $$ BEGIN INSERT INTO notes (body) VALUES (t); RETURN 1; END $$;
      CREATE CAST (text AS bigint) WITH FUNCTION noted_cast(text);
      CREATE FUNCTION peek(t text, i int) RETURNS text LANGUAGE sql STABLE AS 'SELECT email FROM customers LIMIT 1';
      CREATE OPERATOR - (LEFTARG = text, RIGHTARG = int, FUNCTION = peek);`,
    ));
  });
  after(async () => {
    await s.stop();
    await data.drop();
  });

  test('keys whose rules follow columns or tables are refused every statement there; a key without rules runs them', async () => {
    // `name - 1` answers an address no statement names; `email + 1` writes it to notes (in a read-only transaction the
    // database refuses that); the database picks either by the values' types, so no statement is safe to analyse.
    const shapes = (code: string): Shape[] => [
      ['SELECT name - 1 AS e FROM customers', code],
      ['SELECT email + 1 AS e FROM customers', code],
      ['SELECT id FROM customers WHERE email::bigint > 0', code],
      ['SELECT name FROM customers', code],
    ];
    for (const grants of [HASH_EMAIL, { ...HASH_EMAIL, allow_writes: true }])
      await holds(s, 'ops', await newKey(s, 'ops', grants), shapes('mask_unresolvable'));
    await holds(s, 'ops', await newKey(s, 'ops', { allowed_tables: ['customers', 'notes'] }), shapes('table_not_allowed'));
    const writer = await newKey(s, 'ops', { ...HASH_EMAIL, allow_writes: true });
    for (const sql of ["INSERT INTO notes (body) SELECT name FROM customers WHERE email + 1 = 'x'", "INSERT INTO notes (body) VALUES ('plain')"]) {
      const a = await s.call('POST', '/execute_sql', { key: writer, body: { sql, connection_name: 'ops' } });
      assert.equal(a.status, 403, `${sql}: ${a.text}`);
      assert.equal(a.json.code, 'mask_unresolvable', `${sql}: ${a.text}`);
    }
    // a key without rules reads and writes there, and the operators run
    const plain = await newKey(s, 'ops', { allow_writes: true });
    const peeked = await s.call('POST', '/execute_sql', { key: plain, body: { sql: 'SELECT name - 1 AS e FROM customers', connection_name: 'ops' } });
    assert.deepEqual(peeked.json, [{ e: EMAIL }]);
    const a = await s.call('POST', '/execute_sql', {
      key: plain,
      body: { sql: 'INSERT INTO notes (body) SELECT name + 1 FROM customers', connection_name: 'ops' },
    });
    assert.equal(a.status, 200, a.text);
    assert.deepEqual(
      (await data.sql`SELECT body FROM notes ORDER BY id`).map((r) => r.body),
      ['Carrier', 'Carrier'], // the operator's own row, and the statement's
    );
  });
});

describe('MariaDB: a hashed column leaves only hashed', () => {
  let s: TestServer;
  let admin: mysql.Connection;
  const db = `qag_carriers_${process.pid}`;
  before(async () => {
    admin = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
    await admin.query(`CREATE DATABASE ${db}; USE ${db};
      CREATE TABLE customers (id INT, name VARCHAR(40), email VARCHAR(40));
      INSERT INTO customers VALUES (1, 'Carrier', '${EMAIL}');
      CREATE TABLE notes (id INT AUTO_INCREMENT PRIMARY KEY, body VARCHAR(40));
      CREATE FUNCTION email_of(i INT) RETURNS VARCHAR(40) READS SQL DATA RETURN (SELECT email FROM customers WHERE id = i);
      CREATE FUNCTION copy_emails() RETURNS INT MODIFIES SQL DATA
        BEGIN INSERT INTO notes (body) SELECT email FROM customers; RETURN 1; END;
      CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT);
      CREATE TRIGGER order_note AFTER INSERT ON orders FOR EACH ROW
        INSERT INTO notes (body) SELECT email FROM customers WHERE id = NEW.customer_id;
      CREATE VIEW orders_view AS SELECT id, customer_id FROM orders;
      CREATE TABLE members (id INT, email VARCHAR(40), email_lower VARCHAR(40) AS (lower(email)) VIRTUAL,
        domain VARCHAR(40) AS (substring_index(email, '@', -1)) PERSISTENT, id2 INT AS (id * 2) VIRTUAL);
      INSERT INTO members (id, email) VALUES (1, '${EMAIL}');
      CREATE TABLE legacy (id INT, email VARCHAR(40)) ENGINE=MyISAM;
      INSERT INTO legacy VALUES (1, '${EMAIL}');
      CREATE TABLE merged (id INT, email VARCHAR(40)) ENGINE=MERGE UNION=(legacy);
      CREATE TABLE hidden (email VARCHAR(40), secret VARCHAR(40) INVISIBLE);
      INSERT INTO hidden (email, secret) VALUES ('${EMAIL}', '${EMAIL}');`);
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_ALLOW_WRITES: '1' });
    const c = await s.call('POST', '/api/v1/connections', { body: { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: db, user: 'root' } });
    assert.equal(c.status, 201, c.text);
  });
  after(async () => {
    await s.stop();
    await admin.query(`DROP DATABASE ${db}`);
    await admin.end();
  });

  test('expressions, encodings, JSON, column lists, errors', async () => {
    const k = await newKey(s, 'my', HASH_EMAIL);
    await holds(s, 'my', k, [
      ...COMMON,
      ['SELECT TO_BASE64(email) AS e FROM customers', 'hashed'],
      ['SELECT HEX(email) AS e FROM customers', 'hashed'],
      ['SELECT REVERSE(email) AS e FROM customers', 'hashed'],
      ['SELECT MD5(email) AS e FROM customers', 'hashed'],
      ['SELECT SHA2(email, 256) AS e FROM customers', 'hashed'],
      ["SELECT CONCAT(email, '') AS e FROM customers", 'hashed'],
      ["SELECT CONCAT_WS('-', email, '') AS e FROM customers", 'hashed'],
      ['SELECT CAST(email AS BINARY) AS e FROM customers', 'hashed'],
      ['SELECT CONVERT(email USING utf8mb4) AS e FROM customers', 'hashed'],
      ['SELECT IF(id > 0, email, NULL) AS e FROM customers', 'hashed'],
      ["SELECT GROUP_CONCAT(email SEPARATOR ',') AS e FROM customers", 'hashed'],
      ["SELECT JSON_OBJECT('e', email) AS e FROM customers", 'hashed'],
      ['SELECT JSON_ARRAY(email) AS e FROM customers', 'hashed'],
      ['SELECT JSON_ARRAYAGG(email) AS e FROM customers', 'hashed'],
      // the string function INSERT() reads as the verb to the keyword guard: refused, on the safe side
      ["SELECT INSERT(email, 1, 0, '') AS e FROM customers", 'read_only'],
      ["SELECT LPAD(email, 30, ' ') AS e FROM customers", 'hashed'],
    ]);
  });
  test('mask shows only values picked unchanged; a key refusing predicates sees only the column itself', async () => {
    await masksAndRefusals(
      s,
      'my',
      [
        ['SELECT REVERSE(email) AS e FROM customers', 'nulled'],
        ["SELECT CONCAT(email, '') AS e FROM customers", 'nulled'],
        ["SELECT IF(id > 0, email, 'none') AS e FROM customers", 'masked'],
        ["SELECT IFNULL(email, 'none') AS e FROM customers", 'masked'],
        ['SELECT IF(id > 0, REVERSE(email), NULL) AS e FROM customers', 'nulled'],
      ],
      [
        ["SELECT IF(email LIKE 'c%', email, NULL) AS e FROM customers", 'mask_predicate'],
        ...INTERSECT_EXCEPT,
        ['SELECT email FROM customers UNION DISTINCT SELECT name FROM customers', 'mask_predicate'],
      ],
    );
  });
  test('a generated column carries the rules of the columns it is computed from', async () => {
    await derivedColumns(s, 'my', { hashed: DERIVED_HASHED, masked: DERIVED_MASKED, refusing: DERIVED_REFUSING, laundering: DERIVED_LAUNDERING });
  });
  test('`*` leaves out an INVISIBLE column, as the database does, and the column is masked where it is named', async () => {
    const hashing = {
      mask: [
        { column: 'hidden.email', action: 'hash' },
        { column: 'hidden.secret', action: 'hash' },
      ],
    };
    await holds(s, 'my', await newKey(s, 'my', hashing), [
      ['SELECT * FROM hidden', 'hashed'],
      ['SELECT h.*, secret FROM hidden h', 'hashed'],
      ['SELECT x.* FROM (SELECT * FROM hidden) x', 'hashed'],
      ['SELECT secret FROM hidden', 'hashed'],
    ]);
  });
  test("a table of an engine that reads another table's rows (MERGE) is untraced", async () => {
    await holds(s, 'my', await newKey(s, 'my', { mask: [{ column: 'legacy.email', action: 'hash' }] }), [
      ['SELECT email FROM legacy', 'hashed'],
      ['SELECT email FROM merged', 'mask_unresolvable'],
      ['SELECT * FROM merged', 'mask_unresolvable'],
    ]);
  });
  test("a function's body reading a table: refused to keys whose rules follow columns or tables", async () => {
    await functionBodies(s, 'my', 'SELECT email_of(1) AS e', 'SELECT ABS(-1) AS n');
  });
  test('ad-hoc SQL: an error that quotes the value reaches only a key that masks nothing', async () => {
    const keys = { hashing: await newKey(s, 'my', HASH_EMAIL), plain: await newKey(s, 'my') };
    // MySQL's EXTRACTVALUE and UPDATEXML quote a value in their XPATH error; MariaDB evaluates only constant XPATH
    // and says so instead. Either way a hashing key gets none of the database's text.
    await adhocFails(s, 'my', keys, [
      'SELECT EXTRACTVALUE(1, CONCAT(0x7e, email)) AS e FROM customers',
      'SELECT UPDATEXML(1, CONCAT(0x7e, email), 1) AS e FROM customers',
    ]);
  });
  test('writes: a masked value stored where no rule masks it is refused', async () => {
    await writes(
      s,
      'my',
      [
        'INSERT INTO notes (body) SELECT email FROM customers',
        'INSERT INTO notes (body) SELECT LOWER(email) FROM customers',
        'INSERT INTO notes (body) VALUES ((SELECT email FROM customers LIMIT 1))',
        'REPLACE INTO notes (id, body) SELECT id, email FROM customers',
        "INSERT INTO notes (id, body) VALUES (1, 'x') ON DUPLICATE KEY UPDATE body = (SELECT email FROM customers LIMIT 1)",
        'UPDATE customers SET name = email',
        "UPDATE customers SET name = CONCAT(email, '') WHERE id = 1",
        'UPDATE notes n JOIN customers c ON c.id = n.id SET n.body = c.email',
        'SELECT copy_emails() AS n',
        'INSERT INTO orders (customer_id) VALUES (1)',
        'INSERT INTO orders_view (customer_id) VALUES (1)',
        'INSERT INTO made_since (body) VALUES (1)',
      ],
      [
        "INSERT INTO notes (body) VALUES ('plain')",
        'INSERT INTO notes (body) SELECT name FROM customers',
        "UPDATE customers SET name = 'Carrier' WHERE id = 1",
        "UPDATE customers SET name = 'Carrier' WHERE email IS NOT NULL",
        "DELETE FROM notes WHERE body = 'plain'",
      ],
    );
  });
});

describe('SQLite: a hashed column leaves only hashed', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
    const c = await sqliteConnection(
      s,
      'lite',
      'carriers.db',
      `CREATE TABLE customers (id INTEGER, name TEXT, email TEXT);
      INSERT INTO customers VALUES (1, 'Carrier', '${EMAIL}');
      CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
      CREATE INDEX customers_email ON customers (email);
      ANALYZE;
      CREATE TABLE members (id INTEGER, email TEXT, email_lower TEXT GENERATED ALWAYS AS (lower(email)),
        domain TEXT GENERATED ALWAYS AS (substr(email, instr(email, '@') + 1)) STORED, id2 INTEGER GENERATED ALWAYS AS (id * 2),
        tag TEXT AS ('email' || id), "Shout" TEXT AS (upper([email])), CHECK (length(email) > 0));
      ALTER TABLE members ADD COLUMN late TEXT AS (email || '');
      INSERT INTO members (id, email) VALUES (1, '${EMAIL}');
      CREATE VIRTUAL TABLE customers_search USING fts5(email, content='customers', content_rowid='id');
      INSERT INTO customers_search (customers_search) VALUES ('rebuild');
      CREATE VIRTUAL TABLE customers_words USING fts5vocab(customers_search, row);
      CREATE VIRTUAL TABLE notes_search USING fts5(email);
      INSERT INTO notes_search (email) VALUES ('${EMAIL}');`,
    );
    assert.equal(c.status, 201, c.text);
  });
  after(() => s.stop());

  test('expressions, encodings, JSON, column lists', async () => {
    const k = await newKey(s, 'lite', HASH_EMAIL);
    await holds(s, 'lite', k, [
      ...COMMON,
      ['SELECT hex(email) AS e FROM customers', 'hashed'],
      ["SELECT email || '' AS e FROM customers", 'hashed'],
      ["SELECT printf('%s', email) AS e FROM customers", 'hashed'],
      ['SELECT CAST(email AS BLOB) AS e FROM customers', 'hashed'],
      ['SELECT quote(email) AS e FROM customers', 'hashed'],
      ['SELECT unicode(email) AS e FROM customers', 'hashed'],
      ['SELECT trim(email) AS e FROM customers', 'hashed'],
      ["SELECT group_concat(email, ',') AS e FROM customers", 'hashed'],
      ["SELECT json_object('e', email) AS e FROM customers", 'hashed'],
      ['SELECT json_array(email) AS e FROM customers', 'hashed'],
      ['SELECT json_group_array(email) AS e FROM customers', 'hashed'],
      ['SELECT iif(id > 0, email, NULL) AS e FROM customers', 'hashed'],
      ['SELECT x FROM (SELECT email AS x FROM customers)', 'hashed'],
    ]);
  });
  test('mask shows only values picked unchanged; a key refusing predicates sees only the column itself', async () => {
    await masksAndRefusals(
      s,
      'lite',
      [
        ["SELECT email || '' AS e FROM customers", 'nulled'],
        ["SELECT iif(id > 0, email, 'none') AS e FROM customers", 'masked'],
        ["SELECT ifnull(email, 'none') AS e FROM customers", 'masked'],
        ['SELECT hex(email) AS e FROM customers', 'nulled'],
      ],
      [
        ['SELECT email FROM customers INTERSECT SELECT name FROM customers', 'mask_unresolvable'],
        ['SELECT email FROM customers EXCEPT SELECT name FROM customers', 'mask_unresolvable'],
        ["SELECT iif(email LIKE 'c%', email, NULL) AS e FROM customers", 'mask_predicate'],
      ],
    );
  });
  test('a generated column carries the rules of the columns its expression names (SQLite keeps it only in the CREATE text)', async () => {
    await derivedColumns(s, 'lite', {
      hashed: [
        ...DERIVED_HASHED,
        ['SELECT tag FROM members', 'served'], // 'email' there is a string
        ['SELECT "Shout" FROM members', 'hashed'],
        ['SELECT late FROM members', 'hashed'], // added by ALTER TABLE, which SQLite writes into the CREATE text
        ['SELECT email, email_lower, domain, "Shout", late FROM members', 'hashed'],
      ],
      masked: DERIVED_MASKED,
      refusing: [...DERIVED_REFUSING, ['SELECT id FROM members WHERE tag IS NOT NULL', 'served']],
      laundering: [], // a SQLite connection runs only reads
    });
  });
  test("virtual tables, which read another table's rows (FTS5 with content=, fts5vocab), and their shadow tables are untraced", async () => {
    await holds(s, 'lite', await newKey(s, 'lite', { mask: [...HASH_EMAIL.mask, { column: 'notes_search.email', action: 'hash' }] }), [
      ['SELECT email FROM customers_search', 'mask_unresolvable'],
      ['SELECT * FROM customers_search', 'mask_unresolvable'],
      ['SELECT term FROM customers_words', 'mask_unresolvable'],
      ['SELECT block FROM customers_search_data', 'mask_unresolvable'],
      ['SELECT email FROM notes_search', 'mask_unresolvable'],
      ['SELECT c0 FROM notes_search_content', 'mask_unresolvable'],
      ['SELECT email FROM customers', 'hashed'],
    ]);
  });
  test("the database's own tables (sqlite_stat4 keeps sample values of indexed columns) are not traced", async () => {
    await holds(s, 'lite', await newKey(s, 'lite', HASH_EMAIL), [
      ['SELECT sample FROM sqlite_stat4', 'mask_unresolvable'],
      ['SELECT quote(sample) AS s FROM sqlite_stat4', 'mask_unresolvable'],
      ['SELECT * FROM sqlite_stat1', 'mask_unresolvable'],
      ['SELECT sql FROM sqlite_schema', 'mask_unresolvable'],
      ['SELECT id FROM customers', 'served'],
    ]);
  });
  test('ad-hoc SQL: the database text reaches only a key that masks nothing', async () => {
    const keys = { hashing: await newKey(s, 'lite', HASH_EMAIL), plain: await newKey(s, 'lite') };
    await adhocFails(s, 'lite', keys, ["SELECT json_extract(email, '$') AS e FROM customers"]);
  });
});
