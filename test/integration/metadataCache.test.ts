// The metadata cache: rows are cached, decisions are not; a change through the management API is
// seen at once by this server, and by another instance on the same PostgreSQL store (LISTEN/NOTIFY,
// or Redis pub/sub when QUERYAPIGATE_REDIS_URL is set) well within the cache's TTL.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../../src/store/store.js';
import { keyRow } from '../fixtures.js';
import { ADMIN_KEY, eventually, request, scratchDatabase, startProcess, startTestServer } from '../helpers.js';

const TTL = '60'; // far longer than the test: only a notification can explain a refusal

test('with the cache on, a revoked key is refused at once by the same server', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '2', QUERYAPIGATE_METADATA_CACHE_TTL: TTL, QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  try {
    const key = (await s.call('POST', '/api/v1/api-keys', { body: { name: 'k', queries: ['example_film_lookup'], connections: [] } })).json.secret;
    for (let i = 0; i < 6; i++) assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=1', { key })).status, 200);
    await s.call('PATCH', '/api/v1/api-keys/k', { body: { active: false } });
    for (let i = 0; i < 6; i++) assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=1', { key })).status, 401);
    // A new published version is served at once too.
    await s.call('POST', '/api/v1/queries/example_film_lookup/versions', {
      body: { description: 'v2', sql: 'SELECT film_id FROM film WHERE film_id = :film_id', parameters: { film_id: 'int' }, publish: true },
    });
    const admin = await s.call('GET', '/q/example_film_lookup?film_id=1');
    assert.deepEqual(admin.json, [{ film_id: 1 }]);
  } finally {
    await s.stop();
  }
});

test('a revoked key is refused even when the call reaches a busy executor before the change does', async () => {
  // One executor, kept busy by a slow statement on SQLite (which runs on the executor's own thread):
  // the change and the next call both wait in its queues, and the call must not be served from the
  // cache the change would have cleared.
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_METADATA_CACHE_TTL: TTL, QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  try {
    for (let round = 0; round < 3; round++) {
      const name = `k${round}`;
      const secret = (await s.call('POST', '/api/v1/api-keys', { body: { name, queries: ['example_film_lookup'], connections: ['examples'] } })).json.secret;
      assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=1', { key: secret })).status, 200);
      const slow = s.call('POST', '/execute_sql', {
        body: {
          sql: 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000) SELECT count(*) AS c FROM n',
          connection_name: 'examples',
        },
      });
      await new Promise((r) => setTimeout(r, 50)); // the executor is in the statement now
      assert.equal((await s.call('PATCH', `/api/v1/api-keys/${name}`, { body: { active: false } })).status, 200);
      const after = await s.call('GET', '/q/example_film_lookup?film_id=1', { key: secret });
      assert.equal((await slow).status, 200);
      assert.equal(after.status, 401, `round ${round}: a revoked key was served: ${after.text}`);
    }
  } finally {
    await s.stop();
  }
});

for (const transport of ['LISTEN/NOTIFY', 'Redis pub/sub']) {
  test(`two instances on one PostgreSQL store: revoke on one, refused on the other (${transport})`, async () => {
    const store = await scratchDatabase('qag_meta_store');
    const env: Record<string, string> = { QUERYAPIGATE_DATABASE_URL: store.url, QUERYAPIGATE_METADATA_CACHE_TTL: TTL, QUERYAPIGATE_WORKERS: '1' };
    if (transport === 'Redis pub/sub') env.QUERYAPIGATE_REDIS_URL = 'redis://127.0.0.1:6379';
    const a = await startTestServer({ ...env, QUERYAPIGATE_LOAD_EXAMPLES: '1' });
    const b = startProcess({ ...env, QUERYAPIGATE_HOME: a.home, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_API_KEY: ADMIN_KEY });
    try {
      const bUrl = await b.listening;
      const key = (await a.call('POST', '/api/v1/api-keys', { body: { name: 'shared', queries: ['example_film_lookup'], connections: [] } })).json.secret;
      const onB = () => request(bUrl, 'GET', '/q/example_film_lookup?film_id=2', { key });
      for (let i = 0; i < 4; i++) assert.equal((await onB()).status, 200, 'cached on B');
      await a.call('PATCH', '/api/v1/api-keys/shared', { body: { active: false } });
      // Well inside the 60 s TTL, so only the change notification can explain it (no latency is asserted).
      await eventually(onB, (r) => r.status === 401, 10_000);
      for (let i = 0; i < 4; i++) assert.equal((await onB()).status, 401, 'B refuses the revoked key');
    } finally {
      b.child.kill('SIGTERM');
      await b.exited;
      await a.stop();
      await store.drop();
    }
  });
}

for (const kind of ['SQLite', 'PostgreSQL']) {
  test(`the warmer's listing of keys by hash gives the rows a call's lookup by hash gives (${kind})`, async () => {
    const home = mkdtempSync(join(tmpdir(), 'qag-keys-by-hash-'));
    const pg = kind === 'PostgreSQL' ? await scratchDatabase('qag_keys_by_hash') : null;
    const store = await openStore({ home, databaseUrl: pg?.url ?? null });
    try {
      const now = '2026-01-01 00:00:00';
      await store.putKey(keyRow({ name: 'plain', hash: 'h-plain' }), true);
      await store.putKey(keyRow({ name: 'inactive', hash: 'h-inactive', active: false }), true);
      await store.putKey(keyRow({ name: 'graced', hash: 'h-graced-old' }), true);
      await store.rotateKey('graced', 'h-graced-new', Date.now() + 600_000, now);
      await store.putKey(keyRow({ name: 'cut', hash: 'h-cut-old' }), true);
      await store.rotateKey('cut', 'h-cut-new', null, now); // no grace: the old hash is gone
      const listed = await store.listKeysByHash();
      assert.deepEqual(listed.map(([h]) => h).sort(), ['h-cut-new', 'h-graced-new', 'h-graced-old', 'h-inactive', 'h-plain']);
      for (const [hash, row] of listed) assert.deepEqual(row, await store.getKeyByHash(hash), hash);
      assert.equal(listed.find(([h]) => h === 'h-graced-old')![1].via_previous, true);
      assert.equal(listed.find(([h]) => h === 'h-graced-new')![1].via_previous, false);
    } finally {
      await store.close();
      await pg?.drop();
      rmSync(home, { recursive: true, force: true });
    }
  });
}
