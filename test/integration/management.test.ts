// Management API v1 round trips, body validation, the examples as a user loads them, and open mode.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/serve.js';
import { request, startTestServer, type TestServer } from '../helpers.js';

describe('management API', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '1' });
  });
  after(() => s.stop());

  test('connections: create, list, get, patch, delete; passwords never returned', async () => {
    const created = await s.call('POST', '/api/v1/connections', {
      body: {
        name: 'warehouse',
        db: 'postgres',
        host: 'db.internal',
        port: 5433,
        database: 'w',
        user: 'app',
        password: 'hunter2',
        options: { sslmode: 'require' },
      },
    });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.password, '********');
    assert.deepEqual(created.json.options, { sslmode: 'require' });
    assert.doesNotMatch(created.text, /hunter2/);
    const again = await s.call('POST', '/api/v1/connections', { body: { name: 'warehouse', db: 'postgres' } });
    assert.equal(again.status, 409);
    assert.equal(again.json.code, 'connection_exists');
    const list = await s.call('GET', '/api/v1/connections');
    assert.deepEqual(
      list.json.items.map((c: { name: string }) => c.name),
      ['warehouse'],
    );
    assert.equal(list.json.items[0].password, undefined);
    const patched = await s.call('PATCH', '/api/v1/connections/warehouse', { body: { port: 5434, password: '********', host: null } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.port, 5434);
    assert.equal(patched.json.host, null);
    assert.equal(patched.json.password, '********');
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${VAR} reference is stored and shown as written, not a template
    const ref = await s.call('PATCH', '/api/v1/connections/warehouse', { body: { password: '${WAREHOUSE_PW}' } });
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${VAR} reference is stored and shown as written, not a template
    assert.equal(ref.json.password, '${WAREHOUSE_PW}');
    const get = await s.call('GET', '/api/v1/connections/warehouse');
    assert.equal(get.json.user, 'app');
    const noReason = await s.call('DELETE', '/api/v1/connections/warehouse');
    assert.equal(noReason.json.code, 'reason_required');
    const del = await s.call('DELETE', '/api/v1/connections/warehouse', { body: { reason: 'moved' } });
    assert.equal(del.status, 204);
    assert.equal((await s.call('GET', '/api/v1/connections/warehouse')).json.code, 'connection_not_found');
  });

  test('bodies: unknown fields, bad values, bad JSON, oversized', async () => {
    const unknown = await s.call('POST', '/api/v1/connections', { body: { name: 'x', db: 'postgres', colour: 'blue' } });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json.code, 'unknown_field');
    assert.match(unknown.json.error, /colour/);
    const badDb = await s.call('POST', '/api/v1/connections', { body: { name: 'x', db: 'oracle' } });
    assert.equal(badDb.json.code, 'invalid_body');
    const badName = await s.call('POST', '/api/v1/connections', { body: { name: 'a/b', db: 'postgres' } });
    assert.equal(badName.status, 400);
    const notJson = await s.call('POST', '/api/v1/connections', { body: '{"name":' });
    assert.equal(notJson.json.code, 'invalid_body');
    const big = await s.call('POST', '/api/v1/connections', { body: { name: 'x', db: 'postgres', host: 'h'.repeat(2 << 20) } });
    assert.equal(big.status, 413);
    assert.equal(big.json.code, 'payload_too_large');
  });

  test('queries: create, version, publish, unpublish, delete', async () => {
    // A saved query's connection must exist (the SQL reads fine, so its file is never opened).
    const conn = await s.call('POST', '/api/v1/connections', { body: { name: 'examples', db: 'sqlite', database: 'examples.db' } });
    assert.equal(conn.status, 201, conn.text);
    const create = await s.call('POST', '/api/v1/queries', {
      body: {
        name: 'films',
        description: 'Films',
        connection_name: 'examples',
        sql: 'SELECT * FROM film WHERE film_id = :id AND rating = :rating',
        parameters: { id: { type: 'int', min: 1 }, rating: { type: 'str', enum: ['G', 'PG'], default: 'G' } },
      },
    });
    assert.equal(create.status, 201, create.text);
    assert.equal(create.json.published_version, null);
    assert.equal(create.json.versions[0].status, 'draft');
    assert.deepEqual(create.json.versions[0].placeholders, ['id', 'rating']);
    assert.equal(create.json.versions[0].parameters.id.type, 'integer');
    assert.equal(create.json.versions[0].parameters.rating.required, false);
    const dup = await s.call('POST', '/api/v1/queries', { body: { name: 'films', description: 'x', sql: 'SELECT 1' } });
    assert.equal(dup.json.code, 'query_exists');
    const multi = await s.call('POST', '/api/v1/queries', { body: { name: 'two', description: 'x', sql: 'SELECT 1; SELECT 2' } });
    assert.equal(multi.json.code, 'multiple_statements');
    const unused = await s.call('POST', '/api/v1/queries', { body: { name: 'p', description: 'x', sql: 'SELECT 1', parameters: { ghost: 'int' } } });
    assert.equal(unused.status, 400);
    assert.equal(unused.json.code, 'param_unused');
    assert.ok(unused.json.errors.ghost);
    const pub = await s.call('POST', '/api/v1/queries/films/publish', { body: { version: 1 } });
    assert.equal(pub.json.published_version, 1);
    const v2 = await s.call('POST', '/api/v1/queries/films/versions', {
      body: { description: 'v2', sql: 'SELECT title FROM film WHERE film_id = :id', parameters: { id: 'int' }, publish: true },
    });
    assert.equal(v2.status, 201, v2.text);
    assert.equal(v2.json.published_version, 2);
    assert.deepEqual(
      v2.json.versions.map((x: { status: string }) => x.status),
      ['previous', 'published'],
    );
    assert.equal(v2.json.versions[1].connection_name, 'examples');
    const one = await s.call('GET', '/api/v1/queries/films/versions/1');
    assert.equal(one.json.status, 'previous');
    const list = await s.call('GET', '/api/v1/queries?status=published');
    assert.deepEqual(
      list.json.items.map((q: { name: string }) => q.name),
      ['films'],
    );
    const unpub = await s.call('POST', '/api/v1/queries/films/unpublish');
    assert.equal(unpub.json.published_version, null);
    assert.equal((await s.call('DELETE', '/api/v1/queries/films')).status, 204);
    assert.equal((await s.call('GET', '/api/v1/queries/films')).json.code, 'query_not_found');
  });

  test('api keys: secret once, only its hash stored, patch, delete revokes', async () => {
    // The queries a key is granted must exist.
    for (const q of ['a', 'b']) {
      const r = await s.call('POST', '/api/v1/queries', { body: { name: q, description: q, sql: 'SELECT 1' } });
      assert.equal(r.status, 201, r.text);
    }
    const created = await s.call('POST', '/api/v1/api-keys', {
      body: {
        name: 'partner',
        queries: ['a', { name: 'b', allow_writes: true }],
        connections: [],
        allowed_tables: ['Film'],
        allowed_ips: ['10.0.0.0/8', '::1'],
        rate_limit: '100/minute',
        expires_at: '2099-12-31',
        mask: [{ column: '*.title', action: 'hash' }],
      },
    });
    assert.equal(created.status, 201, created.text);
    assert.match(created.json.secret, /^sk_[A-Za-z0-9_-]{43}$/);
    assert.equal(created.headers.get('cache-control'), 'no-store');
    // table names are kept as written: they are read as SQL names on the connection (an unquoted Film folds there)
    assert.deepEqual(created.json.allowed_tables, ['Film']);
    const got = await s.call('GET', '/api/v1/api-keys/partner');
    assert.equal(got.json.secret, undefined);
    assert.equal(got.json.rate_limit, '100/minute');
    assert.equal(got.json.expired, false);
    for (const bad of [
      { rate_limit: '5 per hour' },
      { allowed_ips: ['300.1.1.1'] },
      { expires_at: '2026-02-30' },
      { mask: [{ column: 'x', action: 'shred' }] },
    ]) {
      const r = await s.call('PATCH', '/api/v1/api-keys/partner', { body: bad });
      assert.equal(r.status, 400, JSON.stringify(bad));
    }
    const patched = await s.call('PATCH', '/api/v1/api-keys/partner', { body: { active: false, rate_limit: null } });
    assert.equal(patched.json.active, false);
    assert.equal(patched.json.rate_limit, null);
    const del = await s.call('DELETE', '/api/v1/api-keys/partner');
    assert.equal(del.status, 204);
    assert.equal((await s.call('GET', '/api/v1/api-keys/partner')).json.code, 'key_not_found');
  });

  test('history filters are validated', async () => {
    for (const bad of ['status=maybe', 'since=yesterday', 'limit=0', 'limit=5000', 'cursor=!!']) {
      const r = await s.call('GET', `/api/v1/history?${bad}`);
      assert.equal(r.status, 400, bad);
      assert.equal(r.json.code, 'invalid_filter', bad);
    }
  });
});

test('examples: loaded idempotently, served to their keys', async () => {
  const home = mkdtempSync(join(tmpdir(), 'qag-examples-'));
  const env = {
    QUERYAPIGATE_HOME: home,
    QUERYAPIGATE_PORT: '0',
    QUERYAPIGATE_LOAD_EXAMPLES: '1',
    QUERYAPIGATE_WORKERS: '1',
    QUERYAPIGATE_LOG_LEVEL: 'warning',
  };
  const first = await startServer(loadConfig(env));
  try {
    const partner = first.exampleKeys.find((k) => k.name === 'example-partner')?.secret;
    assert.match(partner ?? '', /^sk_/);
    const url = `http://127.0.0.1:${first.port}`;
    const film = await request(url, 'GET', '/q/example_film_lookup?film_id=7', { key: partner });
    assert.equal(film.status, 200, film.text);
    assert.deepEqual(Object.keys(film.json[0]), ['film_id', 'title', 'category', 'rating', 'length', 'rentals_last_30_days', 'currently_rented']);
    assert.equal(film.json[0].film_id, 7);
    const bad = await request(url, 'GET', '/q/example_film_lookup?film_id=0', { key: partner });
    assert.equal(bad.json.code, 'param_invalid');
    const notMine = await request(url, 'GET', '/q/example_all_rentals', { key: partner });
    assert.equal(notMine.status, 403);
    // Keys exist and no admin key is set, so the management API is closed.
    assert.equal((await request(url, 'GET', '/api/v1/queries', { key: null })).status, 401);
  } finally {
    await first.stop();
  }
  const second = await startServer(loadConfig(env));
  try {
    assert.deepEqual(second.exampleKeys, [], 'a second load creates nothing');
  } finally {
    await second.stop();
    rmSync(home, { recursive: true, force: true });
  }
});

test('open mode: no admin key and no keys means every caller is an administrator', async () => {
  const s = await startTestServer({ QUERYAPIGATE_API_KEY: '', QUERYAPIGATE_WORKERS: '0' });
  try {
    assert.equal((await s.call('GET', '/api/v1/queries', { key: null })).status, 200);
    const key = await s.call('POST', '/api/v1/api-keys', { key: null, body: { name: 'first' } });
    assert.equal(key.status, 201);
    assert.equal((await s.call('GET', '/api/v1/queries', { key: null })).status, 401);
  } finally {
    await s.stop();
  }
});

for (const workers of ['0', '1']) {
  test(`key rules are checked on every call: active, expiry, address (QUERYAPIGATE_WORKERS=${workers})`, async () => {
    const s = await startTestServer({ QUERYAPIGATE_WORKERS: workers, QUERYAPIGATE_LOAD_EXAMPLES: '1' });
    try {
      const day = (offset: number) => {
        const d = new Date(Date.now() + offset * 86_400_000);
        return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
      };
      const make = async (name: string, extra: Record<string, unknown>) => {
        const r = await s.call('POST', '/api/v1/api-keys', { body: { name, queries: ['example_film_lookup'], connections: [], ...extra } });
        assert.equal(r.status, 201, r.text);
        return r.json.secret as string;
      };
      const call = (key: string) => s.call('GET', '/q/example_film_lookup?film_id=3', { key });
      const cases: Array<[string, Record<string, unknown>, number]> = [
        ['plain', {}, 200],
        ['far-net', { allowed_ips: ['10.0.0.0/8', '2001:db8::/32'] }, 401],
        ['no-address', { allowed_ips: [] }, 401],
        ['loopback', { allowed_ips: ['127.0.0.0/8'] }, 200],
        ['exact', { allowed_ips: ['127.0.0.1'] }, 200],
        ['expired', { expires_at: day(-1) }, 401],
        ['last-day', { expires_at: day(0) }, 200],
        ['inactive', { active: false }, 401],
        ['tables', { allowed_tables: ['film', 'rental'] }, 200],
        ['tables-elsewhere', { allowed_tables: ['customer'] }, 403],
      ];
      for (const [name, extra, status] of cases) {
        const secret = await make(name, extra);
        const r = await call(secret);
        assert.equal(r.status, status, `${name}: ${r.text}`);
        if (status === 401) assert.deepEqual(Object.keys(r.json), ['error', 'code', 'request_id']);
        // A streamed export is handed on with the request's address as well.
        const streamed = await s.call('GET', '/q/example_film_lookup?film_id=3&stream=true&format=csv', { key: secret });
        assert.equal(streamed.status, status, `${name}, streamed: ${streamed.text}`);
      }
      const revoked = await make('revoked-later', {});
      assert.equal((await call(revoked)).status, 200);
      await s.call('PATCH', '/api/v1/api-keys/revoked-later', { body: { active: false } });
      assert.equal((await call(revoked)).status, 401);
      // An address rule added, changed and dropped after calls (pooled, the address crosses only
      // for keys whose rules read it: each change must still be seen on the next call).
      const fenced = await make('fenced-later', { connections: ['examples'] });
      const adhoc = () => s.call('POST', '/execute_sql', { key: fenced, body: { sql: 'SELECT 1 AS one', connection_name: 'examples' } });
      for (const [allowed, status] of [
        [null, 200],
        [['10.0.0.0/8'], 401],
        [['127.0.0.1'], 200],
        [['2001:db8::/32'], 401],
        [null, 200],
      ] as const) {
        const patched = await s.call('PATCH', '/api/v1/api-keys/fenced-later', { body: { allowed_ips: allowed } });
        assert.equal(patched.status, 200, patched.text);
        for (let i = 0; i < 2; i++) {
          assert.equal((await call(fenced)).status, status, `allowed_ips ${JSON.stringify(allowed)}, call ${i + 1}`);
          assert.equal((await adhoc()).status, status, `allowed_ips ${JSON.stringify(allowed)}, ad-hoc call ${i + 1}`);
        }
      }
    } finally {
      await s.stop();
    }
  });
}
