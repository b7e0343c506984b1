// The response cache of versions with a cache_ttl: MISS then HIT, ETag and If-None-Match (304),
// hits not written to history, turned off in place by PATCHing cache_ttl; in memory and in Redis.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { pgConnection, startTestServer } from '../helpers.js';

for (const backend of ['memory', 'Redis']) {
  test(`result cache (${backend})`, async () => {
    const env: Record<string, string> = { QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_LOAD_EXAMPLES: '1' };
    if (backend === 'Redis') env.QUERYAPIGATE_REDIS_URL = 'redis://127.0.0.1:6379';
    const s = await startTestServer(env);
    try {
      await s.call('POST', '/api/v1/queries', {
        body: {
          name: 'cached_film',
          description: 'cached',
          connection_name: 'examples',
          sql: 'SELECT film_id, title FROM film WHERE film_id = :id',
          parameters: { id: 'int' },
          cache_ttl: 60,
          publish: true,
        },
      });
      const path = `/q/cached_film?id=${backend === 'Redis' ? 5 : 4}&page_size=${(Date.now() % 1000) + 1}`; // fresh key per run
      const miss = await s.call('GET', path);
      assert.equal(miss.status, 200, miss.text);
      assert.equal(miss.headers.get('x-cache'), 'MISS');
      assert.equal(miss.headers.get('cache-control'), 'max-age=60');
      const etag = miss.headers.get('etag')!;
      assert.match(etag, /^"[0-9a-f]{32}"$/);

      // Change the data underneath: a HIT still answers the cached rows.
      const db = new Database(join(s.home, 'examples.db'));
      db.prepare("UPDATE film SET title = 'Changed' WHERE film_id IN (4, 5)").run();
      db.close();
      const hit = await s.call('GET', path);
      assert.equal(hit.headers.get('x-cache'), 'HIT');
      assert.equal(hit.text, miss.text);
      assert.equal(hit.headers.get('x-page'), miss.headers.get('x-page'));
      const notModified = await s.call('GET', path, { headers: { 'If-None-Match': etag } });
      assert.equal(notModified.status, 304);
      assert.equal(notModified.text, '');
      assert.equal(notModified.headers.get('etag'), etag);
      // Another format is another entry.
      assert.equal((await s.call('GET', `${path}&format=csv`)).headers.get('x-cache'), 'MISS');

      // A binary answer comes back as its bytes, with its content type (Redis keeps it as base64).
      const parquetMiss = await s.call('GET', `${path}&format=parquet`);
      const parquetHit = await s.call('GET', `${path}&format=parquet`);
      assert.equal(parquetHit.headers.get('x-cache'), 'HIT');
      assert.equal(parquetHit.headers.get('content-type'), 'application/vnd.apache.parquet');
      assert.deepEqual(parquetHit.bytes, parquetMiss.bytes);
      assert.equal(Buffer.from(parquetHit.bytes.subarray(0, 4)).toString(), 'PAR1');

      const history = await s.call('GET', '/api/v1/queries/cached_film/history');
      assert.equal(history.json.items.length, 3, 'only the three misses are runs');

      const off = await s.call('PATCH', '/api/v1/queries/cached_film/versions/1', { body: { cache_ttl: null } });
      assert.equal(off.status, 200, off.text);
      const fresh = await s.call('GET', path);
      assert.equal(fresh.headers.get('x-cache'), null);
      assert.match(fresh.text, /Changed/);
    } finally {
      await s.stop();
    }
  });
}

for (const workers of ['0', '1']) {
  test(`result cache: the calls that miss an entry together run its statement once (${workers === '0' ? 'inline' : 'an executor'})`, async () => {
    const s = await startTestServer({ QUERYAPIGATE_WORKERS: workers });
    try {
      assert.equal((await s.call('POST', '/api/v1/connections', { body: pgConnection('pg') })).status, 201);
      const created = await s.call('POST', '/api/v1/queries', {
        body: {
          name: 'cached_nap',
          description: 'sleeps, cached',
          connection_name: 'pg',
          sql: 'SELECT pg_sleep(0.3)::text AS slept, :n::int AS n',
          parameters: { n: 'int' },
          cache_ttl: 60,
          publish: true,
        },
      });
      assert.equal(created.status, 201, created.text);
      assert.equal((await s.call('GET', '/q/cached_nap?n=0')).status, 200); // the plan and the connection ready
      // Eight callers at once, one entry: the statement runs once, the others wait for its entry.
      const replies = await Promise.all(Array.from({ length: 8 }, () => s.call('GET', '/q/cached_nap?n=1')));
      for (const r of replies) assert.deepEqual(r.json, [{ slept: '', n: 1 }], r.text);
      assert.deepEqual(replies.map((r) => r.headers.get('x-cache')).sort(), ['HIT', 'HIT', 'HIT', 'HIT', 'HIT', 'HIT', 'HIT', 'MISS']);
      const runs = (await s.call('GET', '/api/v1/history?query=cached_nap&limit=100')).json.items as Array<{ status: string }>;
      assert.equal(runs.length, 2, 'the first call and one run for the eight (hits are not runs)');
      // A run that fails gives its waiters nothing: each runs the statement and answers for itself.
      const failing = await Promise.all(Array.from({ length: 3 }, () => s.call('GET', '/q/cached_nap?n=1&timeout=0.1&page_size=7')));
      for (const r of failing) assert.equal(r.json.code, 'query_timeout', r.text);
      const errors = (await s.call('GET', '/api/v1/history?query=cached_nap&status=error&limit=100')).json.items;
      assert.equal(errors.length, 3, 'each of the three ran the statement');
    } finally {
      await s.stop();
    }
  });
}
