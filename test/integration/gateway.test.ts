// The conformance suite: the same calls against every way the gateway runs (inline and pooled
// executors, SQLite and PostgreSQL stores), each against a real PostgreSQL data source.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { ADMIN_KEY, CONFORMANCE_MODES as MODES, eventually, request, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

/** Every mode's answers to the shared call sequence, compared at the end. */
const transcripts = new Map<string, unknown[]>();

let data: Awaited<ReturnType<typeof scratchDatabase>>;
before(async () => {
  data = await scratchDatabase('qag_data');
  await data.sql.unsafe(`
    CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2), created timestamp, meta jsonb, big bigint, flag boolean);
    INSERT INTO items SELECT i, 'item ' || i, i * 1.5, timestamp '2026-01-02 03:04:05' + i * interval '1 day',
      jsonb_build_object('n', i), 9007199254740993 + i, i % 2 = 0 FROM generate_series(1, 30) i;
    UPDATE items SET name = 'quote "and", comma' WHERE id = 3;`);
});
after(async () => {
  await data.drop();
});

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
      await post('/api/v1/connections', {
        name: 'pg',
        db: 'postgres',
        host: '127.0.0.1',
        port: 5432,
        database: data.name,
        user: 'postgres',
        password: 'secret-pw',
      });
      await post('/api/v1/connections', { name: 'dead', db: 'postgres', host: '127.0.0.1', port: 1, database: 'x', user: 'postgres' });
      await post('/api/v1/connections', { name: 'off', db: 'postgres', host: '127.0.0.1', port: 5432, database: data.name, user: 'postgres', active: false });
      const query = (name: string, sql: string, parameters: unknown = {}, extra: Record<string, unknown> = {}) =>
        post('/api/v1/queries', { name, sql, parameters, connection_name: 'pg', description: name, publish: true, ...extra });
      await query('item', 'SELECT id, name, price FROM items WHERE id = :id', { id: { type: 'int', min: 1, required: true } });
      await query('items', 'SELECT id, name, price, created, meta, big, flag FROM items ORDER BY id LIMIT 25');
      await query('by_name', 'SELECT id FROM items WHERE name = :name ORDER BY id', { name: 'str' });
      await query('slow', 'SELECT pg_sleep(:s)::text AS slept', { s: 'float' });
      await query('broken', 'SELECT no_such_column FROM items');
      await query('rename', "UPDATE items SET name = 'renamed' WHERE id = :id", { id: 'int' });
      await query('unpublished', 'SELECT 1 AS one', {}, { publish: false });
      await query('on_dead', 'SELECT 1 AS one', {}, { connection_name: 'dead' });
      await query('on_off', 'SELECT 1 AS one', {}, { connection_name: 'off' });
      await post('/api/v1/queries/item/versions', { sql: 'SELECT id, name FROM items WHERE id = :id', parameters: { id: 'int' }, description: 'draft' });
      const all = ['item', 'items', 'by_name', 'slow', 'broken', 'rename', 'unpublished', 'on_dead', 'on_off'];
      reader = (await post('/api/v1/api-keys', { name: 'reader', queries: all, connections: [] })).secret;
      other = (await post('/api/v1/api-keys', { name: 'other', queries: ['by_name'], connections: [] })).secret;
    });
    after(async () => {
      await s.stop();
      await store?.drop();
    });

    test('a lookup answers a bare JSON array with paging headers and a request id', async () => {
      const r = await recorded('/q/item?id=7');
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json, [{ id: 7, name: 'item 7', price: 10.5 }]);
      assert.equal(r.headers.get('content-type'), 'application/json');
      assert.equal(r.headers.get('x-page'), '1');
      assert.equal(r.headers.get('x-page-size'), '10');
      assert.equal(r.headers.get('x-has-more'), 'false');
      assert.match(r.headers.get('x-request-id') ?? '', /^[0-9a-f]{12}$/);
      const mine = await q('/q/item?id=7', reader, { headers: { 'X-Request-Id': 'my-call.1' } });
      assert.equal(mine.headers.get('x-request-id'), 'my-call.1');
    });

    test('POST with JSON params gives the same answer as GET', async () => {
      const r = await q('/q/item', reader, { method: 'POST', body: { params: { id: 7 } } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json, [{ id: 7, name: 'item 7', price: 10.5 }]);
      const bad = await q('/q/item', reader, { method: 'POST', body: { params: { id: '7' } } });
      assert.equal(bad.json.code, 'param_invalid');
      const notJson = await q('/q/item', reader, { method: 'POST', body: '{oops', headers: { 'Content-Type': 'application/json' } });
      assert.equal(notJson.status, 400);
      assert.equal(notJson.json.code, 'invalid_body');
    });

    test('values are serialized as the contract says', async () => {
      const r = await recorded('/q/items?page_size=1');
      assert.deepEqual(r.json, [{ id: 1, name: 'item 1', price: 1.5, created: '2026-01-03 03:04:05', meta: '{"n":1}', big: '9007199254740994', flag: false }]);
    });

    test("paging stays inside the statement's own LIMIT", async () => {
      const sizes: number[] = [];
      const more: string[] = [];
      for (const page of [1, 2, 3]) {
        const r = await recorded(`/q/items?page=${page}&page_size=10`);
        sizes.push(r.json.length);
        more.push(r.headers.get('x-has-more')!);
      }
      assert.deepEqual(sizes, [10, 10, 5]);
      assert.deepEqual(more, ['true', 'true', 'false']);
      const third = await q('/q/items?page=3&page_size=10');
      assert.deepEqual(
        third.json.map((x: { id: number }) => x.id),
        [21, 22, 23, 24, 25],
      );
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
      const lines = nd.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      assert.deepEqual(
        lines.map((l) => l.id),
        [1, 2, 3],
      );
      assert.equal(lines[2].name, 'quote "and", comma');
      const csv = await recorded('/q/items?format=csv&page_size=3');
      assert.match(csv.headers.get('content-type') ?? '', /^text\/csv/);
      const csvLines = csv.text.split(/\r?\n/);
      assert.equal(csvLines[0], 'id,name,price,created,meta,big,flag');
      assert.ok(csvLines[3].startsWith('3,"quote ""and"", comma",4.5,'), csvLines[3]);
      const tsv = await recorded('/q/items?format=tsv&page_size=2');
      assert.match(tsv.headers.get('content-type') ?? '', /^text\/tab-separated-values/);
      assert.equal(tsv.text.split(/\r?\n/)[0], 'id\tname\tprice\tcreated\tmeta\tbig\tflag');
      const bad = await recorded('/q/items?format=pdf');
      assert.equal(bad.json.code, 'invalid_format');
    });

    test('parameter errors are all reported at once and never reach the database', async () => {
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
    });

    test('SQL injection through parameters returns data or 400, never a changed statement', async () => {
      for (const attempt of ["item 1' OR '1'='1", "x'; DROP TABLE items; --", 'item 1"; SELECT 1', '1 OR 1=1']) {
        const r = await q(`/q/by_name?name=${encodeURIComponent(attempt)}`, other);
        assert.equal(r.status, 200, r.text);
        assert.deepEqual(r.json, { message: 'No results returned' }, attempt);
      }
      for (const attempt of ['7 OR 1=1', '7; DELETE FROM items', "7'--"]) {
        const r = await q(`/q/item?id=${encodeURIComponent(attempt)}`);
        assert.equal(r.status, 400, attempt);
      }
      const still = await data.sql`SELECT count(*)::int AS n FROM items`;
      assert.equal(still[0].n, 30);
      const ok = await q(`/q/by_name?name=${encodeURIComponent('quote "and", comma')}`, other);
      assert.deepEqual(ok.json, [{ id: 3 }]);
    });

    test('versions: published by default, older or draft by number, drafts for admins only', async () => {
      const draftAsKey = await recorded('/q/item?id=7&version=2');
      assert.equal(draftAsKey.status, 404);
      assert.equal(draftAsKey.json.code, 'version_not_found');
      const draftAsAdmin = await q('/q/item?id=7&version=2', ADMIN_KEY);
      assert.deepEqual(draftAsAdmin.json, [{ id: 7, name: 'item 7' }]);
      const none = await recorded('/q/item?id=7&version=9', ADMIN_KEY);
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
        const r = await q('/q/item?id=1', key);
        assert.equal(r.status, 401, String(key));
        assert.equal(r.json.code, 'unauthorized');
        assert.match(r.json.request_id, /^[0-9a-f]{12}$/);
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
      assert.match(asAdmin.json.detail, /no_such_column/);
      const dead = await recorded('/q/on_dead');
      assert.equal(dead.status, 502);
      assert.equal(dead.json.code, 'connection_failed');
      assert.doesNotMatch(dead.text, /secret-pw/);
      const write = await recorded('/q/rename?id=1');
      assert.equal(write.status, 403);
      assert.equal(write.json.code, 'read_only');
      assert.equal((await data.sql`SELECT name FROM items WHERE id = 1`)[0].name, 'item 1');
    });

    test('the query timeout gives 504 and cancels the statement on the server', async () => {
      const r = await recorded('/q/slow?s=5&timeout=0.3');
      assert.equal(r.status, 504, r.text);
      assert.equal(r.json.code, 'query_timeout');
      const running = await eventually(
        () => data.sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%pg_sleep%' AND state = 'active' AND pid <> pg_backend_pid()`,
        (rows) => rows[0].n === 0,
        3000,
      );
      assert.equal(running[0].n, 0);
      for (const bad of ['x', '0', '-1']) {
        const t = await recorded(`/q/slow?s=0&timeout=${bad}`);
        assert.equal(t.json.code, 'invalid_timeout', bad);
      }
    });

    test('run history records runs with their request id, key and outcome', async () => {
      const ok = await q('/q/item?id=9', reader, { headers: { 'X-Request-Id': `hist-${mode.pgStore ? 'pg' : 'lite'}-1` } });
      assert.equal(ok.status, 200);
      const h = await eventually(
        () => s.call('GET', '/api/v1/queries/item/history?limit=5'),
        (r) => r.json.items.some((x: { request_id: string }) => x.request_id.startsWith('hist-')),
      );
      const entry = h.json.items.find((x: { request_id: string }) => x.request_id.startsWith('hist-'));
      assert.equal(entry.status, 'success');
      assert.equal(entry.key_name, 'reader');
      assert.equal(entry.rows, 1);
      assert.equal(entry.version, 1);
      assert.equal(entry.connection_name, 'pg');
      assert.equal(entry.transport, 'rest');
      assert.equal(typeof entry.duration_ms, 'number');
      const errors = await s.call('GET', '/api/v1/history?status=error&query=broken');
      assert.ok(errors.json.items.length >= 1);
      assert.equal(errors.json.items[0].code, 'query_failed');
      // Rejected before running: not recorded.
      const rejected = await s.call('GET', '/api/v1/history?query=item&status=error');
      assert.equal(rejected.json.items.length, 0);
    });

    test('history of the shared call sequence', async () => {
      const h = await s.call('GET', '/api/v1/history?limit=1000');
      const mine = h.json.items
        .filter((x: { query: string }) => x.query !== 'item')
        .map((x: Record<string, unknown>) => [x.query, x.version, x.status, x.code ?? null, x.rows, x.key_name, x.connection_name]);
      transcript.push({ history: mine });
    });

    test('history keeps the newest runs per version', async () => {
      const limit = 50;
      for (let i = 0; i < limit + 10; i++) assert.equal((await q(`/q/item?id=${(i % 30) + 1}`)).status, 200);
      const h = await eventually(
        () => s.call('GET', '/api/v1/history?query=item&version=1&limit=1000'),
        (r) => r.json.items.length >= limit,
      );
      assert.equal(h.json.items.length, limit);
    });
  });
}

test('every mode gave the same answers to the same calls', () => {
  const [first, ...rest] = [...transcripts.entries()];
  assert.ok(first[1].length > 20);
  for (const [name, t] of rest) assert.deepEqual(t, first[1], `${name} differs from ${first[0]}`);
});

test('/health is public; unknown routes and methods get JSON errors with a request id', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  try {
    const health = await request(s.url, 'GET', '/health', { key: null });
    assert.equal(health.status, 200);
    assert.equal(health.json.status, 'ok');
    assert.equal(health.json.version, JSON.parse(readFileSync('package.json', 'utf8')).version, "package.json's version");
    assert.match(health.json.utc_offset, /^[+-]\d{2}:\d{2}$/);
    const missing = await request(s.url, 'GET', '/nowhere', { key: null });
    assert.equal(missing.status, 404);
    assert.equal(missing.json.code, 'not_found');
    assert.equal(missing.json.request_id, missing.headers.get('x-request-id'));
    const wrongMethod = await request(s.url, 'DELETE', '/q/anything');
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.json.code, 'method_not_allowed');
  } finally {
    await s.stop();
  }
});
