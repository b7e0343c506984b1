// /api/v1/examples: where the bundled examples stand, loading them (secrets once, roles included,
// idempotent, refusing to overwrite the user's own objects) and unloading only what they installed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type TestServer } from '../helpers.js';

describe('examples API', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  });
  after(() => s.stop());

  test('a user object under an example name refuses the load: 409 examples_conflict, nothing loaded', async () => {
    const own = await s.call('POST', '/api/v1/api-keys', { body: { name: 'example-partner', connections: [] } });
    assert.equal(own.status, 201, own.text);
    const r = await s.call('POST', '/api/v1/examples');
    assert.equal(r.status, 409);
    assert.equal(r.json.code, 'examples_conflict');
    assert.match(r.json.error, /key 'example-partner'/);
    const state = await s.call('GET', '/api/v1/examples');
    assert.deepEqual([state.json.loaded, state.json.partial, state.json.connection, state.json.queries], [false, false, null, []]);
    assert.equal((await s.call('DELETE', '/api/v1/api-keys/example-partner')).status, 204);
  });

  test('load, state, load again, unload', async () => {
    const loaded = await s.call('POST', '/api/v1/examples');
    assert.equal(loaded.status, 200, loaded.text);
    assert.equal(loaded.headers.get('cache-control'), 'no-store');
    assert.equal(loaded.json.status, 'loaded');
    assert.equal(loaded.json.added.connection, 'examples');
    assert.deepEqual(loaded.json.added.roles, ['example-executive']);
    assert.deepEqual(Object.keys(loaded.json.key_secrets).sort(), ['example-dashboard', 'example-export', 'example-partner', 'example-reporting']);
    const call = await s.call('GET', '/q/example_film_lookup?film_id=7', { key: loaded.json.key_secrets['example-partner'] });
    assert.equal(call.status, 200, call.text);

    const state = (await s.call('GET', '/api/v1/examples')).json;
    assert.deepEqual([state.loaded, state.partial, state.connection], [true, false, 'examples']);
    assert.deepEqual(state.collections, ['examples-dashboard', 'examples-export', 'examples-partner', 'examples-reporting']);
    assert.equal(state.queries.length, loaded.json.added.queries.length);
    const role = await s.call('GET', '/api/v1/roles/example-executive');
    assert.deepEqual([role.json.example, role.json.collections], [true, ['examples-dashboard', 'examples-reporting']]);

    const again = await s.call('POST', '/api/v1/examples');
    assert.deepEqual(again.json.added, { connection: null, queries: [], roles: [], keys: [] });
    assert.deepEqual(again.json.key_secrets, {});

    // A key of the user's own granted an example query and collection is kept, and reported.
    const mine = await s.call('POST', '/api/v1/api-keys', { body: { name: 'mine', queries: ['example_film_lookup'], collections: ['examples-reporting'] } });
    assert.equal(mine.status, 201, mine.text);
    const removed = await s.call('DELETE', '/api/v1/examples');
    assert.equal(removed.status, 200, removed.text);
    assert.equal(removed.json.status, 'not_loaded');
    assert.equal(removed.json.removed.connection, 'examples');
    assert.deepEqual(removed.json.removed.roles, ['example-executive']);
    assert.equal(removed.json.removed.keys.length, 4);
    assert.deepEqual(removed.json.keys_still_granted, ['mine']);
    assert.equal((await s.call('GET', '/api/v1/api-keys/mine')).status, 200);
    assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=7')).json.code, 'query_not_found');
  });
});
