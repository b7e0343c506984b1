// Key roles (templates copied once into keys) and collections (live, read-only grants; rename and
// merge without a moment of lost access; the Postman export), on both stores.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const STORES = [
  { name: 'SQLite store', pg: false },
  { name: 'PostgreSQL store', pg: true },
];

for (const mode of STORES) {
  describe(`key roles and collections, ${mode.name}`, () => {
    let s: TestServer;
    let data: Awaited<ReturnType<typeof scratchDatabase>>;
    let store: Awaited<ReturnType<typeof scratchDatabase>> | null = null;
    const ok = async (method: string, path: string, body?: unknown) => {
      const r = await s.call(method, path, { body });
      assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
      return r.json;
    };
    const query = (name: string, collection: string | null) =>
      ok('POST', '/api/v1/queries', {
        name,
        collection,
        description: name,
        connection_name: 'pg',
        sql: `SELECT '${name}' AS q, COUNT(*) AS n FROM items`,
        publish: true,
      });
    /** The status a key's call of a query gets. */
    const reach = async (secret: string, name: string) => (await s.call('GET', `/q/${name}`, { key: secret })).status;

    before(async () => {
      data = await scratchDatabase('qag_roles');
      await data.sql`CREATE TABLE items (id int PRIMARY KEY, label text)`;
      await data.sql`INSERT INTO items VALUES (1, 'one'), (2, 'two')`;
      if (mode.pg) store = await scratchDatabase('qag_roles_store');
      // Cached rows, so the test also shows that every change reaches the executors at once.
      s = await startTestServer({
        QUERYAPIGATE_WORKERS: '2',
        QUERYAPIGATE_METADATA_CACHE_TTL: '60',
        ...(store ? { QUERYAPIGATE_DATABASE_URL: store.url } : {}),
      });
      await ok('POST', '/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: data.name, user: 'postgres' });
      await query('q_a', 'reports');
      await query('q_b', 'reports');
      await query('q_c', null);
    });
    after(async () => {
      await s.stop();
      await data.drop();
      await store?.drop();
    });

    test('roles: create, list, get, conflicts, unknown grants', async () => {
      const made = await s.call('POST', '/api/v1/roles', { body: { name: 'reader', connections: [], collections: ['reports'], rate_limit: '100/minute' } });
      assert.equal(made.status, 201, made.text);
      assert.deepEqual(
        [made.json.name, made.json.connections, made.json.queries, made.json.collections, made.json.keys_created, made.json.example],
        ['reader', [], [], ['reports'], 0, false],
      );
      assert.equal((await s.call('POST', '/api/v1/roles', { body: { name: 'reader' } })).json.code, 'role_exists');
      const unknown = await s.call('POST', '/api/v1/roles', { body: { name: 'bad', collections: ['nope'] } });
      assert.equal(unknown.status, 400);
      assert.equal(unknown.json.code, 'unknown_grant');
      assert.match(unknown.json.error, /no collection 'nope'.*the collections are .*reports/);
      assert.equal((await s.call('POST', '/api/v1/roles', { body: { name: 'bad', collections: ['Not A Name'] } })).json.code, 'invalid_body');
      assert.equal((await s.call('POST', '/api/v1/roles', { body: { name: 'bad', expires_at: '2030-01-01' } })).json.code, 'unknown_field');
      assert.deepEqual(
        (await ok('GET', '/api/v1/roles')).items.map((r: { name: string }) => r.name),
        ['reader'],
      );
      assert.equal((await ok('GET', '/api/v1/roles/reader')).rate_limit, '100/minute');
      assert.equal((await s.call('GET', '/api/v1/roles/ghost')).json.code, 'role_not_found');
    });

    test('a key made from a role copies its grants once; changing or deleting the role never touches it', async () => {
      const key = await s.call('POST', '/api/v1/api-keys', { body: { name: 'from-role', role: 'reader', expires_at: '2099-12-31' } });
      assert.equal(key.status, 201, key.text);
      assert.deepEqual(
        [key.json.created_from_role, key.json.connections, key.json.collections, key.json.rate_limit, key.json.expires_at],
        ['reader', [], ['reports'], '100/minute', '2099-12-31'],
      );
      const mixed = await s.call('POST', '/api/v1/api-keys', { body: { name: 'mixed', role: 'reader', queries: ['q_c'] } });
      assert.equal(mixed.status, 400);
      assert.equal(mixed.json.code, 'invalid_body');
      assert.match(mixed.json.error, /queries/);
      assert.equal((await s.call('POST', '/api/v1/api-keys', { body: { name: 'orphan', role: 'ghost' } })).json.code, 'role_not_found');
      assert.equal((await ok('GET', '/api/v1/roles/reader')).keys_created, 1);

      const secret = key.json.secret as string;
      assert.equal(await reach(secret, 'q_a'), 200);
      await ok('PATCH', '/api/v1/roles/reader', { collections: [], rate_limit: null });
      const kept = await ok('GET', '/api/v1/api-keys/from-role');
      assert.deepEqual([kept.collections, kept.rate_limit], [['reports'], '100/minute']);
      assert.equal(await reach(secret, 'q_a'), 200);
      assert.equal((await s.call('DELETE', '/api/v1/roles/reader')).status, 204);
      assert.equal(await reach(secret, 'q_a'), 200);
      await ok('DELETE', '/api/v1/api-keys/from-role');
    });

    test('a collections grant follows queries moved in and out, and reaches nothing else', async () => {
      const key = await ok('POST', '/api/v1/api-keys', { name: 'coll', connections: [], collections: ['reports'] });
      const secret = key.secret as string;
      assert.deepEqual(await Promise.all(['q_a', 'q_b', 'q_c'].map((q) => reach(secret, q))), [200, 200, 403]);
      // Read-only reach, on the query's own connection only, and never ad-hoc SQL.
      assert.equal((await s.call('GET', '/q/q_a?connection_name=other', { key: secret })).status, 403);
      assert.equal((await s.call('POST', '/execute_sql', { key: secret, body: { sql: 'SELECT 1', connection_name: 'pg' } })).json.code, 'connection_forbidden');

      await ok('PATCH', '/api/v1/queries/q_c', { collection: 'reports' });
      assert.equal(await reach(secret, 'q_c'), 200, 'moved in: reached at once');
      await ok('PATCH', '/api/v1/queries/q_c', { collection: null });
      assert.equal(await reach(secret, 'q_c'), 403, 'moved out: refused at once');
      assert.equal((await s.call('PATCH', '/api/v1/queries/q_c', { body: { collection: 'Bad Name' } })).json.code, 'invalid_body');
      assert.equal((await s.call('PATCH', '/api/v1/queries/ghost', { body: { collection: null } })).json.code, 'query_not_found');

      const catalog = await s.call('GET', '/catalog', { key: secret });
      assert.deepEqual(catalog.json.queries.map((q: { name: string }) => q.name).sort(), ['q_a', 'q_b']);

      const list = await ok('GET', '/api/v1/collections');
      assert.deepEqual(list.items, [{ name: 'reports', queries: ['q_a', 'q_b'], keys: ['coll'], roles: [] }]);
      assert.deepEqual(list.uncollected, ['q_c']);
      await ok('DELETE', '/api/v1/api-keys/coll');
    });

    test('rename and merge: keys and roles follow, nobody loses access partway', async () => {
      const key = await ok('POST', '/api/v1/api-keys', { name: 'renamed', connections: [], collections: ['reports'] });
      await ok('POST', '/api/v1/roles', { name: 'team', collections: ['reports'] });
      const secret = key.secret as string;
      // Calls keep running while the collection is renamed: every one must be answered 200.
      let running = true;
      const seen: number[] = [];
      const caller = (async () => {
        while (running) seen.push(await reach(secret, 'q_a'), await reach(secret, 'q_b'));
      })();
      const renamed = await ok('PATCH', '/api/v1/collections/reports', { name: 'finance' });
      await new Promise((r) => setTimeout(r, 100));
      running = false;
      await caller;
      assert.deepEqual(renamed, { name: 'finance', moved: { queries: 2, keys: 1, roles: 1 } });
      assert.ok(seen.length > 0);
      assert.deepEqual([...new Set(seen)], [200], 'no call was refused while the collection moved');
      assert.deepEqual((await ok('GET', '/api/v1/api-keys/renamed')).collections, ['finance']);
      assert.deepEqual((await ok('GET', '/api/v1/roles/team')).collections, ['finance']);

      await ok('PATCH', '/api/v1/queries/q_c', { collection: 'archive' });
      const clash = await s.call('PATCH', '/api/v1/collections/finance', { body: { name: 'archive' } });
      assert.equal(clash.status, 409);
      assert.equal(clash.json.code, 'collection_exists');
      assert.equal(await reach(secret, 'q_c'), 403);
      const merged = await ok('PATCH', '/api/v1/collections/finance', { name: 'archive', merge: true });
      assert.deepEqual(merged.moved, { queries: 2, keys: 1, roles: 1 });
      assert.deepEqual(
        await Promise.all(['q_a', 'q_b', 'q_c'].map((q) => reach(secret, q))),
        [200, 200, 200],
        'the merged collection, the old queries and the one already there',
      );
      assert.equal((await s.call('PATCH', '/api/v1/collections/finance', { body: { name: 'x' } })).json.code, 'collection_not_found');
      await ok('DELETE', '/api/v1/api-keys/renamed');
      await ok('DELETE', '/api/v1/roles/team');
    });

    test('a collection as a Postman Collection v2.1 document', async () => {
      await ok('POST', '/api/v1/queries', {
        name: 'q_param',
        collection: 'archive',
        description: 'one item',
        connection_name: 'pg',
        sql: 'SELECT label FROM items WHERE id = :id',
        parameters: { id: { type: 'int', description: 'the item' } },
        publish: true,
      });
      const r = await s.call('GET', '/api/v1/collections/archive/postman');
      assert.equal(r.status, 200, r.text);
      assert.match(r.headers.get('content-disposition') ?? '', /archive\.postman_collection\.json/);
      const doc = r.json;
      assert.equal(doc.info.schema, 'https://schema.getpostman.com/json/collection/v2.1.0/collection.json');
      assert.equal(doc.info.name, 'archive');
      const vars = Object.fromEntries(doc.variable.map((v: { key: string; value: string }) => [v.key, v.value]));
      assert.equal(vars.apiKey, '');
      assert.match(vars.baseUrl, /^http:\/\//);
      assert.deepEqual(doc.item.map((i: { name: string }) => i.name).sort(), ['q_a', 'q_b', 'q_c', 'q_param']);
      const item = doc.item.find((i: { name: string }) => i.name === 'q_param');
      assert.equal(item.request.method, 'GET');
      assert.equal(item.request.url.raw, '{{baseUrl}}/q/q_param?id=');
      assert.deepEqual(item.request.url.query, [{ key: 'id', value: '', description: 'the item' }]);
      assert.deepEqual(doc.auth.apikey.find((a: { key: string }) => a.key === 'value').value, '{{apiKey}}');
      assert.equal((await s.call('GET', '/api/v1/collections/nothing/postman')).json.code, 'collection_not_found');
    });
  });
}
