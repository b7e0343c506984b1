// The conformance suite over the other data sources: the same calls against every way the gateway
// runs (inline and pooled executors, SQLite and PostgreSQL stores), once against a MariaDB data
// source and once against a SQLite file, each mode's answers compared per source.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import { ADMIN_KEY, CONFORMANCE_MODES as MODES, eventually, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const MY_HOST = process.env.QUERYAPIGATE_TEST_MYSQL_HOST ?? '127.0.0.1';
const MY_PORT = Number(process.env.QUERYAPIGATE_TEST_MYSQL_PORT ?? 3306);
const MY_USER = process.env.QUERYAPIGATE_TEST_MYSQL_USER ?? 'root';

/** The `items` dataset in one kind of data source, and how a mode's server reaches it. */
interface DataSource {
  name: string;
  setup(): Promise<void>;
  teardown(): Promise<void>;
  /** Connection bodies (without name) for one server; SQLite copies its file into the server's home. */
  connections(s: TestServer): { live: object; dead: object; off: object };
  /** The row count and one item's name, read straight from the data the server uses. */
  peek(s: TestServer, id: number): Promise<{ count: number; name: string }>;
  /** What the admin sees as the dead connection's detail. */
  deadDetail: RegExp;
  /** The by-name lookup in the dialect's own lexis: a `:word` inside it that is not a marker. */
  byName: string;
}

// Same rows as gateway.test.ts's PostgreSQL items, plus a name with a tab (TSV quoting).
const TAB_NAME = 'tab\there é';

function mariadb(): DataSource {
  const database = `qag_srcconf_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  let admin: mysql.Connection;
  return {
    name: 'MariaDB',
    async setup() {
      admin = await mysql.createConnection({ host: MY_HOST, port: MY_PORT, user: MY_USER, multipleStatements: true });
      await admin.query(`CREATE DATABASE ${database}`);
      await admin.query(`
        USE ${database};
        CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(60) NOT NULL, price DECIMAL(10,2), created DATETIME,
          meta JSON, big BIGINT, flag BOOLEAN);
        INSERT INTO items SELECT seq, CONCAT('item ', seq), seq * 1.5, TIMESTAMP '2026-01-02 03:04:05' + INTERVAL seq DAY,
          JSON_OBJECT('n', seq), 9007199254740993 + seq, seq % 2 = 0 FROM seq_1_to_30;
        UPDATE items SET name = 'quote "and", comma' WHERE id = 3;`);
      await admin.query(`UPDATE ${database}.items SET name = ? WHERE id = 5`, [TAB_NAME]);
    },
    async teardown() {
      await admin?.query(`DROP DATABASE IF EXISTS ${database}`);
      await admin?.end();
    },
    connections: () => ({
      live: { db: 'mysql', host: MY_HOST, port: MY_PORT, database, user: MY_USER },
      dead: { db: 'mysql', host: '127.0.0.1', port: 1, database, user: MY_USER, password: 'secret-pw' },
      off: { db: 'mysql', host: MY_HOST, port: MY_PORT, database, user: MY_USER, active: false },
    }),
    async peek(_s, id) {
      const [rows] = await admin.query<mysql.RowDataPacket[]>(
        `SELECT (SELECT COUNT(*) FROM ${database}.items) AS count, name FROM ${database}.items WHERE id = ?`,
        [id],
      );
      return { count: Number(rows[0].count), name: rows[0].name };
    },
    deadDetail: /ECONNREFUSED/,
    // A backslash-escaped quote and a # comment, both MySQL's own.
    byName: "SELECT id FROM items WHERE name = :name AND 'it\\'s :no_marker' <> '' # nor :this\nORDER BY id",
  };
}

function sqlite(): DataSource {
  let dir = '';
  let file = '';
  return {
    name: 'SQLite',
    async setup() {
      dir = mkdtempSync(join(tmpdir(), 'qag-srcconf-'));
      file = join(dir, 'items.db');
      const db = new Database(file);
      db.exec(`
        CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price NUMERIC(10,2), created TIMESTAMP,
          meta TEXT, big INTEGER, flag BOOLEAN);
        WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < 30)
        INSERT INTO items SELECT i, 'item ' || i, i * 1.5, datetime('2026-01-02 03:04:05', '+' || i || ' days'),
          json_object('n', i), 9007199254740993 + i, i % 2 = 0 FROM g;
        UPDATE items SET name = 'quote "and", comma' WHERE id = 3;`);
      db.prepare('UPDATE items SET name = ? WHERE id = 5').run(TAB_NAME);
      db.close();
    },
    async teardown() {
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
    connections(s) {
      // Paths are relative to the server's home, as the README says of SQLite connections.
      copyFileSync(file, join(s.home, 'items.db'));
      return {
        live: { db: 'sqlite', database: 'items.db' },
        dead: { db: 'sqlite', database: 'missing.db' },
        off: { db: 'sqlite', database: 'items.db', active: false },
      };
    },
    async peek(s, id) {
      const db = new Database(join(s.home, 'items.db'), { readonly: true });
      try {
        const { count } = db.prepare('SELECT count(*) AS count FROM items').get() as { count: number };
        const { name } = db.prepare('SELECT name FROM items WHERE id = ?').get(id) as { name: string };
        return { count, name };
      } finally {
        db.close();
      }
    },
    deadDetail: /unable to open database file/,
    // A [bracketed] identifier, SQLite's own, and a string that looks like a marker.
    byName: "SELECT [id] FROM items WHERE [name] = :name AND ':no_marker' <> '' ORDER BY id",
  };
}

for (const source of [mariadb(), sqlite()]) {
  describe(`${source.name} data source`, () => {
    /** Every mode's answers to the shared call sequence, compared at the end. */
    const transcripts = new Map<string, unknown[]>();

    before(() => source.setup());
    after(() => source.teardown());

    for (const mode of MODES) {
      describe(mode.name, () => {
        let s: TestServer;
        let store: Awaited<ReturnType<typeof scratchDatabase>> | null = null;
        let reader = '';
        let other = '';
        const transcript: unknown[] = [];
        transcripts.set(mode.name, transcript);
        const q = (path: string, key: string | null = reader, opts: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
          s.call(opts.method ?? 'GET', path, { key, body: opts.body, headers: opts.headers });
        /** Records a call's visible answer for the cross-mode comparison. */
        const recorded = async (path: string, key: string | null = reader) => {
          const r = await q(path, key);
          const body = r.json ? { ...r.json, request_id: undefined } : r.text;
          transcript.push({ path, status: r.status, type: r.headers.get('content-type'), more: r.headers.get('x-has-more'), body });
          return r;
        };

        before(async () => {
          const env = { ...mode.env };
          if (mode.pgStore) {
            store = await scratchDatabase('qag_store');
            env.QUERYAPIGATE_DATABASE_URL = store.url;
          }
          s = await startTestServer(env);
          const post = async (path: string, body: unknown, status = 201) => {
            const r = await s.call('POST', path, { body });
            assert.equal(r.status, status, `${path}: ${r.text}`);
            return r.json;
          };
          const c = source.connections(s);
          await post('/api/v1/connections', { name: 'src', ...c.live });
          await post('/api/v1/connections', { name: 'dead', ...c.dead });
          await post('/api/v1/connections', { name: 'off', ...c.off });
          const query = (name: string, sql: string, parameters: unknown = {}, extra: Record<string, unknown> = {}) =>
            post('/api/v1/queries', { name, sql, parameters, connection_name: 'src', description: name, publish: true, ...extra });
          await query('item', 'SELECT id, name, price FROM items WHERE id = :id', { id: { type: 'int', min: 1, required: true } });
          await query('items', 'SELECT id, name, price, created, meta, big, flag FROM items ORDER BY id LIMIT 25');
          await query('by_name', source.byName, { name: 'str' });
          await query('by_big', 'SELECT id, big FROM items WHERE big = :big', { big: { type: 'int', required: true } });
          await query('broken', 'SELECT no_such_column FROM items');
          await query('rename', "UPDATE items SET name = 'renamed' WHERE id = :id", { id: 'int' });
          await query('unpublished', 'SELECT 1 AS one', {}, { publish: false });
          await query('on_dead', 'SELECT 1 AS one', {}, { connection_name: 'dead' });
          await query('on_off', 'SELECT 1 AS one', {}, { connection_name: 'off' });
          await post('/api/v1/queries/item/versions', { sql: 'SELECT id, name FROM items WHERE id = :id', parameters: { id: 'int' }, description: 'draft' });
          const all = ['item', 'items', 'by_name', 'by_big', 'broken', 'rename', 'unpublished', 'on_dead', 'on_off'];
          reader = (await post('/api/v1/api-keys', { name: 'reader', queries: all, connections: [] })).secret;
          other = (await post('/api/v1/api-keys', { name: 'other', queries: ['by_name'], connections: [] })).secret;
        });
        after(async () => {
          await s?.stop();
          await store?.drop();
        });

        test('a lookup answers a bare JSON array with paging headers', async () => {
          const r = await recorded('/q/item?id=7');
          assert.equal(r.status, 200, r.text);
          assert.deepEqual(r.json, [{ id: 7, name: 'item 7', price: 10.5 }]);
          assert.equal(r.headers.get('content-type'), 'application/json');
          assert.equal(r.headers.get('x-page'), '1');
          assert.equal(r.headers.get('x-page-size'), '10');
          assert.equal(r.headers.get('x-has-more'), 'false');
          const post = await q('/q/item', reader, { method: 'POST', body: { params: { id: 7 } } });
          assert.deepEqual(post.json, r.json);
          const none = await recorded('/q/item?id=31');
          assert.equal(none.status, 200);
          assert.deepEqual(none.json, { message: 'No results returned' });
        });

        test('values are serialized as the contract says', async () => {
          const r = await recorded('/q/items?page_size=2');
          assert.equal(r.status, 200, r.text);
          // Decimals as numbers, DATETIME/TIMESTAMP text as written, JSON as compact JSON text, the
          // bigint past 2^53 as its exact digits, the flag as the 0/1 the database holds.
          assert.deepEqual(r.json, [
            { id: 1, name: 'item 1', price: 1.5, created: '2026-01-03 03:04:05', meta: '{"n":1}', big: '9007199254740994', flag: 0 },
            { id: 2, name: 'item 2', price: 3, created: '2026-01-04 03:04:05', meta: '{"n":2}', big: '9007199254740995', flag: 1 },
          ]);
        });

        test('a big integer parameter is bound exactly', async () => {
          // 9007199254741001 (id 8) has no double: rounding it would find id 7 or 9 instead.
          const r = await recorded('/q/by_big?big=9007199254741001');
          assert.equal(r.status, 200, r.text);
          assert.deepEqual(r.json, [{ id: 8, big: '9007199254741001' }]);
          const tooBig = await recorded('/q/by_big?big=9223372036854775808');
          assert.equal(tooBig.status, 400);
          assert.equal(tooBig.json.code, 'param_invalid');
        });

        test("paging stays inside the statement's own LIMIT", async () => {
          const sizes: number[] = [];
          const more: string[] = [];
          const ids: number[] = [];
          for (const page of [1, 2, 3]) {
            const r = await recorded(`/q/items?page=${page}&page_size=10`);
            assert.equal(r.status, 200, r.text);
            assert.equal(r.headers.get('x-page'), String(page));
            sizes.push(r.json.length);
            more.push(r.headers.get('x-has-more')!);
            ids.push(...r.json.map((x: { id: number }) => x.id));
          }
          assert.deepEqual(sizes, [10, 10, 5]);
          assert.deepEqual(more, ['true', 'true', 'false']);
          assert.deepEqual(
            ids,
            Array.from({ length: 25 }, (_, i) => i + 1),
          );
          const exact = await recorded('/q/items?page=5&page_size=5');
          assert.equal(exact.json.length, 5);
          assert.equal(exact.headers.get('x-has-more'), 'false'); // the 25th row ends the statement's window
          const beyond = await recorded('/q/items?page=4&page_size=10');
          assert.equal(beyond.status, 200);
          assert.deepEqual(beyond.json, { message: 'No results returned' });
          for (const bad of ['page=0', 'page_size=0', 'page_size=1001', 'page=x', 'page_size=-1']) {
            const r = await recorded(`/q/items?${bad}`);
            assert.equal(r.status, 400, bad);
            assert.equal(r.json.code, 'invalid_paging', bad);
          }
        });

        test('formats: ndjson, csv and tsv', async () => {
          const nd = await recorded('/q/items?format=ndjson&page_size=3');
          assert.equal(nd.headers.get('content-type'), 'application/x-ndjson');
          assert.equal(nd.headers.get('x-has-more'), 'true');
          const lines = nd.text
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l));
          assert.deepEqual(
            lines.map((l) => l.id),
            [1, 2, 3],
          );
          assert.equal(lines[2].name, 'quote "and", comma');
          assert.equal(lines[0].big, '9007199254740994');
          const csv = await recorded('/q/items?format=csv&page_size=3');
          assert.match(csv.headers.get('content-type') ?? '', /^text\/csv/);
          assert.deepEqual(csv.text.split('\r\n'), [
            'id,name,price,created,meta,big,flag',
            '1,item 1,1.5,2026-01-03 03:04:05,"{""n"":1}",9007199254740994,0',
            '2,item 2,3,2026-01-04 03:04:05,"{""n"":2}",9007199254740995,1',
            '3,"quote ""and"", comma",4.5,2026-01-05 03:04:05,"{""n"":3}",9007199254740996,0',
            '',
          ]);
          const tsv = await recorded('/q/items?format=tsv&page=2&page_size=3');
          assert.match(tsv.headers.get('content-type') ?? '', /^text\/tab-separated-values/);
          assert.deepEqual(tsv.text.split('\r\n'), [
            'id\tname\tprice\tcreated\tmeta\tbig\tflag',
            '4\titem 4\t6\t2026-01-06 03:04:05\t"{""n"":4}"\t9007199254740997\t1',
            `5\t"${TAB_NAME}"\t7.5\t2026-01-07 03:04:05\t"{""n"":5}"\t9007199254740998\t0`,
            '6\titem 6\t9\t2026-01-08 03:04:05\t"{""n"":6}"\t9007199254740999\t1',
            '',
          ]);
          const emptyCsv = await recorded('/q/item?id=31&format=csv');
          assert.equal(emptyCsv.headers.get('content-type'), 'application/json'); // the contract's empty answer
          const bad = await recorded('/q/items?format=pdf');
          assert.equal(bad.status, 400);
          assert.equal(bad.json.code, 'invalid_format');
        });

        test('parameter errors are reported and never reach the database', async () => {
          const missing = await recorded('/q/item');
          assert.equal(missing.status, 400);
          assert.equal(missing.json.code, 'param_required');
          assert.deepEqual(Object.keys(missing.json.errors), ['id']);
          for (const bad of ['id=abc', 'id=0', 'id=1.5', 'id=99999999999999999999']) {
            const r = await recorded(`/q/item?${bad}`);
            assert.equal(r.status, 400, bad);
            assert.equal(r.json.code, 'param_invalid', bad);
            assert.ok(r.json.errors.id, bad);
          }
          const spaced = await recorded('/q/item?id=%207'); // integers are read strictly, without trimming
          assert.equal(spaced.json.code, 'param_invalid');
          const typed = await q('/q/item', reader, { method: 'POST', body: { params: { id: '7' } } });
          assert.equal(typed.status, 400);
          assert.equal(typed.json.code, 'param_invalid');
        });

        test('parameters are bound, never spliced into the statement', async () => {
          // MySQL also reads backslash escapes in strings, so those get a try too.
          for (const attempt of ["item 1' OR '1'='1", "x'; DROP TABLE items; --", "item 1\\' OR 1=1 -- ", 'item 1"; SELECT 1']) {
            const r = await q(`/q/by_name?name=${encodeURIComponent(attempt)}`, other);
            assert.equal(r.status, 200, r.text);
            assert.deepEqual(r.json, { message: 'No results returned' }, attempt);
          }
          const ok = await recorded(`/q/by_name?name=${encodeURIComponent('quote "and", comma')}`, other);
          assert.deepEqual(ok.json, [{ id: 3 }]);
          const tab = await recorded(`/q/by_name?name=${encodeURIComponent(TAB_NAME)}`, other);
          assert.deepEqual(tab.json, [{ id: 5 }]);
          assert.equal((await source.peek(s, 1)).count, 30);
        });

        test('versions: published by default, older or draft by number, drafts for admins only', async () => {
          const v1 = await recorded('/q/item?id=7&version=1');
          assert.deepEqual(v1.json, [{ id: 7, name: 'item 7', price: 10.5 }]);
          const draftAsKey = await recorded('/q/item?id=7&version=2');
          assert.equal(draftAsKey.status, 404);
          assert.equal(draftAsKey.json.code, 'version_not_found');
          const draftAsAdmin = await recorded('/q/item?id=7&version=2', ADMIN_KEY);
          assert.equal(draftAsAdmin.status, 200);
          assert.deepEqual(draftAsAdmin.json, [{ id: 7, name: 'item 7' }]);
          const published = await q('/q/item?id=7', ADMIN_KEY);
          assert.deepEqual(published.json, [{ id: 7, name: 'item 7', price: 10.5 }]); // the draft does not replace it
          const none = await recorded('/q/item?id=7&version=9', ADMIN_KEY);
          assert.equal(none.status, 404);
          assert.equal(none.json.code, 'version_not_found');
          const unpublished = await recorded('/q/unpublished');
          assert.equal(unpublished.status, 404);
          assert.equal(unpublished.json.code, 'not_published');
          const missing = await recorded('/q/nope');
          assert.equal(missing.status, 404);
          assert.equal(missing.json.code, 'query_not_found');
        });

        test('authentication and reach', async () => {
          for (const key of [null, 'sk_wrong', 'test-admin-keyX']) {
            const r = await recorded('/q/item?id=1', key);
            assert.equal(r.status, 401, String(key));
            assert.equal(r.json.code, 'unauthorized');
          }
          const notGranted = await recorded('/q/item?id=1', other);
          assert.equal(notGranted.status, 403);
          assert.equal(notGranted.json.code, 'query_forbidden');
          assert.equal(notGranted.json.error, "This API key is not granted the query 'item'");
          const otherConnection = await recorded('/q/item?id=1&connection_name=off');
          assert.equal(otherConnection.status, 403);
          assert.equal(otherConnection.json.code, 'connection_forbidden');
          const inactive = await recorded('/q/on_off');
          assert.equal(inactive.status, 403);
          assert.equal(inactive.json.code, 'connection_inactive');
          const noAdmin = await s.call('GET', '/api/v1/queries', { key: reader });
          assert.equal(noAdmin.status, 403);
          assert.equal(noAdmin.json.code, 'admin_only');
        });

        test('database failures: query_failed hides detail from scoped keys, connection_failed, read_only', async () => {
          const failed = await recorded('/q/broken');
          assert.equal(failed.status, 500);
          assert.equal(failed.json.code, 'query_failed');
          assert.equal(failed.json.detail, undefined);
          assert.doesNotMatch(failed.text, /no_such_column/);
          const asAdmin = await q('/q/broken', ADMIN_KEY);
          assert.equal(asAdmin.json.code, 'query_failed');
          assert.match(asAdmin.json.detail, /no_such_column/);
          const dead = await recorded('/q/on_dead');
          assert.equal(dead.status, 502);
          assert.equal(dead.json.code, 'connection_failed');
          assert.equal(dead.json.detail, undefined);
          const deadAsAdmin = await q('/q/on_dead', ADMIN_KEY);
          assert.equal(deadAsAdmin.json.code, 'connection_failed');
          assert.match(deadAsAdmin.json.detail, source.deadDetail);
          assert.doesNotMatch(deadAsAdmin.text, /secret-pw/);
          const write = await recorded('/q/rename?id=1');
          assert.equal(write.status, 403);
          assert.equal(write.json.code, 'read_only');
          assert.equal((await source.peek(s, 1)).name, 'item 1');
          // The sources still answer after their failures.
          const again = await q('/q/item?id=2');
          assert.deepEqual(again.json, [{ id: 2, name: 'item 2', price: 3 }]);
        });

        test('run history of the shared call sequence', async () => {
          const marker = `end-${source.name}-${mode.pgStore ? 'pg' : 'lite'}-${mode.env.QUERYAPIGATE_WORKERS}`;
          assert.equal((await q('/q/item?id=9', reader, { headers: { 'X-Request-Id': marker } })).status, 200);
          const h = await eventually(
            () => s.call('GET', '/api/v1/history?limit=1000'),
            (r) => r.json.items.some((x: { request_id: string }) => x.request_id === marker),
          );
          const items: Array<Record<string, unknown>> = h.json.items;
          assert.equal(items[0].request_id, marker, 'newest first');
          const runs = items.map((x) => [x.query, x.version, x.status, x.code ?? null, x.rows, x.key_name, x.connection_name]);
          transcript.push({ history: runs });
          const has = (run: unknown[]) => runs.some((r) => JSON.stringify(r) === JSON.stringify(run));
          assert.ok(has(['broken', 1, 'error', 'query_failed', null, 'reader', 'src']));
          assert.ok(has(['broken', 1, 'error', 'query_failed', null, 'admin', 'src']));
          assert.ok(has(['on_dead', 1, 'error', 'connection_failed', null, 'reader', 'dead']));
          assert.ok(has(['rename', 1, 'error', 'read_only', null, 'reader', 'src']));
          assert.ok(has(['item', 2, 'success', null, 1, 'admin', 'src']));
          assert.ok(has(['by_big', 1, 'success', null, 1, 'reader', 'src']));
          assert.ok(has(['items', 1, 'success', null, 10, 'reader', 'src']));
          // Rejected before running (bad parameters, an unknown version, a forbidden key): not runs.
          assert.deepEqual(
            runs.filter((r) => r[0] === 'item' && r[2] === 'error'),
            [],
          );
          assert.deepEqual(
            runs.filter((r) => r[5] === 'other' && r[0] !== 'by_name'),
            [],
          );
          assert.equal(runs.filter((r) => r[0] === 'items' && r[2] === 'error').length, 0);
        });
      });
    }

    test(`${source.name}: every mode gave the same answers to the same calls`, () => {
      const [first, ...rest] = [...transcripts.entries()];
      assert.equal(rest.length, MODES.length - 1);
      assert.ok(first[1].length > 40, `only ${first[1].length} answers recorded`);
      for (const [name, t] of rest) assert.deepEqual(t, first[1], `${name} differs from ${first[0]}`);
    });
  });
}
