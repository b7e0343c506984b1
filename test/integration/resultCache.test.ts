// The response cache of versions with a cache_ttl: MISS then HIT, ETag and If-None-Match (304),
// hits not written to history, turned off in place by PATCHing cache_ttl; in memory and in Redis.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { startTestServer } from '../helpers.js';

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
