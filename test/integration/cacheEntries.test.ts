// The response cache through the management API (contract 3.8): entries listed soonest to expire
// first with their meta, one read back with its own content type and bytes, evicted one by one and
// all at once (the next call a MISS again), unknown keys 404, evictions not audited; in memory (two
// executors, each asked over the 'cache' channel, and inline, where the acceptor's own thread answers
// on it) and in Redis (read by the acceptor itself).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, startTestServer, type TestServer } from '../helpers.js';

// A Redis database of its own, so clearing every entry here never empties another test's cache.
const REDIS = 'redis://127.0.0.1:6379/7';

/** Calls `path` until a call is a HIT (an executor's Redis connection may still be opening: its first writes are lost), returning the first answer. */
async function cachedCall(s: TestServer, path: string) {
  const first = await s.call('GET', path);
  assert.equal(first.headers.get('x-cache'), 'MISS', first.text);
  await eventually(
    () => s.call('GET', path),
    (r) => r.headers.get('x-cache') === 'HIT',
  );
  return first;
}

for (const [backend, workers] of [
  ['memory', '2'],
  ['memory', '0'],
  ['Redis', '2'],
] as const) {
  test(`cache entries: list, read, evict (${backend}, ${workers === '0' ? 'inline' : `${workers} executors`})`, async () => {
    const env: Record<string, string> = { QUERYAPIGATE_WORKERS: workers, QUERYAPIGATE_LOAD_EXAMPLES: '1' };
    if (backend === 'Redis') env.QUERYAPIGATE_REDIS_URL = REDIS;
    const s = await startTestServer(env);
    try {
      assert.equal((await s.call('DELETE', '/api/v1/cache/entries')).status, 204); // Redis may hold an earlier run's
      const save = (name: string, ttl: number) =>
        s.call('POST', '/api/v1/queries', {
          body: {
            name,
            description: 'cached',
            connection_name: 'examples',
            sql: 'SELECT film_id, title FROM film WHERE film_id = :id',
            parameters: { id: 'int' },
            cache_ttl: ttl,
            publish: true,
          },
        });
      assert.equal((await save('cached_long', 600)).status, 201);
      assert.equal((await save('cached_short', 120)).status, 201);
      assert.deepEqual((await s.call('GET', '/api/v1/cache/entries')).json, { items: [] });

      const long = await cachedCall(s, '/q/cached_long?id=3&page=2&page_size=1');
      const short = await cachedCall(s, '/q/cached_short?id=4&format=csv');
      const parquet = await cachedCall(s, '/q/cached_long?id=5&format=parquet');

      const listed = await s.call('GET', '/api/v1/cache/entries');
      assert.equal(listed.status, 200, listed.text);
      const items = listed.json.items as Array<{
        key: string;
        content_type: string;
        size_bytes: number;
        ttl_remaining_s: number;
        meta: Record<string, unknown>;
      }>;
      assert.equal(items.length, 3, listed.text);
      assert.deepEqual(
        items.map((e) => e.meta),
        [
          { name: 'cached_short', version: 1, connection: 'examples', format: 'csv', page: 1 },
          // the two of cached_long expire within a second of each other: either may come first
          ...items.slice(1).map((e) => e.meta),
        ],
      );
      assert.ok(items[0].ttl_remaining_s <= items[1].ttl_remaining_s && items[1].ttl_remaining_s <= items[2].ttl_remaining_s, 'soonest first');
      assert.ok(items[0].ttl_remaining_s > 100 && items[0].ttl_remaining_s <= 120, String(items[0].ttl_remaining_s));
      assert.ok(items[2].ttl_remaining_s > 580 && items[2].ttl_remaining_s <= 600);
      const longJson = items.find((e) => e.meta.format === 'json')!;
      assert.deepEqual(longJson.meta, { name: 'cached_long', version: 1, connection: 'examples', format: 'json', page: 2 });
      assert.equal(longJson.size_bytes, Buffer.byteLength(long.text));
      assert.match(longJson.content_type, /^application\/json/);
      for (const e of items) assert.match(e.key, /^[0-9a-f]{64}$/);

      // One entry back as it was answered: its content type, its exact bytes (parquet too).
      const csv = await s.call('GET', `/api/v1/cache/entries/${items[0].key}`);
      assert.equal(csv.status, 200);
      assert.equal(csv.headers.get('content-type'), short.headers.get('content-type'));
      assert.equal(csv.text, short.text);
      const pq = items.find((e) => e.meta.format === 'parquet')!;
      assert.equal(pq.content_type, 'application/vnd.apache.parquet');
      const pqBody = await s.call('GET', `/api/v1/cache/entries/${pq.key}`);
      assert.equal(pqBody.headers.get('content-type'), 'application/vnd.apache.parquet');
      assert.deepEqual(pqBody.bytes, parquet.bytes);
      assert.equal(pq.size_bytes, parquet.bytes.byteLength);

      for (const key of ['0'.repeat(64), 'not-a-key', '*']) {
        const missing = await s.call('GET', `/api/v1/cache/entries/${encodeURIComponent(key)}`);
        assert.equal(missing.status, 404);
        assert.equal(missing.json.code, 'cache_entry_not_found');
      }
      // A scoped key is not an administrator.
      const scoped = await s.call('POST', '/api/v1/api-keys', { body: { name: 'reader', queries: ['cached_long'] } });
      assert.equal(scoped.status, 201, scoped.text);
      assert.equal((await s.call('GET', '/api/v1/cache/entries', { key: scoped.json.secret })).json.code, 'admin_only');
      assert.equal((await s.call('DELETE', '/api/v1/cache/entries', { key: scoped.json.secret })).status, 403);

      // Evicting one: gone from the list and from every executor (the next calls compute it again).
      assert.equal((await s.call('DELETE', `/api/v1/cache/entries/${items[0].key}`)).status, 204);
      assert.equal((await s.call('GET', `/api/v1/cache/entries/${items[0].key}`)).status, 404);
      assert.deepEqual(
        (await s.call('GET', '/api/v1/cache/entries')).json.items.map((e: { key: string }) => e.key).sort(),
        [items[1].key, items[2].key].sort(),
      );
      assert.equal((await s.call('GET', '/q/cached_short?id=4&format=csv')).headers.get('x-cache'), 'MISS');

      // Clearing everything: every entry, in every executor.
      for (let i = 0; i < 4; i++) await s.call('GET', '/q/cached_long?id=3&page=2&page_size=1'); // both executors may hold it now
      assert.equal((await s.call('DELETE', '/api/v1/cache/entries')).status, 204);
      assert.deepEqual((await s.call('GET', '/api/v1/cache/entries')).json, { items: [] });
      assert.equal((await s.call('GET', '/q/cached_long?id=3&page=2&page_size=1')).headers.get('x-cache'), 'MISS');

      // Evictions save nothing and are not audited (contract 1.7).
      const audit = await s.call('GET', '/api/v1/audit?limit=1000');
      const actions = audit.json.items.map((e: { action: string }) => e.action);
      assert.ok(actions.includes('save_query'));
      assert.ok(!actions.some((a: string) => /cache/.test(a)), actions.join(', '));
    } finally {
      await s.stop();
    }
  });
}
