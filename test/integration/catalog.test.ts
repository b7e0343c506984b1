// The catalog end to end, in every mode (inline and pooled executors, SQLite and PostgreSQL stores),
// over real PostgreSQL and SQLite data: /openapi.json validates against the OpenAPI 3.1 schema, a
// request built from each operation succeeds and its answer matches the documented row schema, a key
// sees only what it may call, a change shows in the next document, /catalog says under what terms,
// and /docs is a page of this server's own files under a CSP.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import Database from 'better-sqlite3';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/serve.js';
import { CONFORMANCE_MODES as MODES, request, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

let data: Awaited<ReturnType<typeof scratchDatabase>>;
let filmsDir = '';
let filmsFile = '';
before(async () => {
  data = await scratchDatabase('qag_catalog');
  await data.sql.unsafe(`
    CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2), created timestamp, meta jsonb, big bigint,
      flag boolean, kind text);
    INSERT INTO items SELECT i, 'item ' || i, i * 1.5, timestamp '2026-01-02 03:04:05' + i * interval '1 day',
      jsonb_build_object('n', i), 9007199254740993 + i, i % 2 = 0, CASE WHEN i % 3 = 0 THEN 'b' ELSE 'a' END FROM generate_series(1, 30) i;`);
  filmsDir = mkdtempSync(join(tmpdir(), 'qag-catalog-'));
  filmsFile = join(filmsDir, 'films.db');
  const db = new Database(filmsFile);
  db.exec(`CREATE TABLE films (film_id INTEGER PRIMARY KEY, title TEXT NOT NULL, rating VARCHAR(5), length INTEGER);
    INSERT INTO films VALUES (1, 'Academy Dinosaur', 'PG', 86), (2, 'Ace Goldfinger', 'G', 48), (3, 'Adaptation Holes', 'NC-17', 50);`);
  db.close();
});
after(async () => {
  await data.drop();
  rmSync(filmsDir, { recursive: true, force: true });
});

const validator = new Validator();
async function assertValidOpenApi(doc: unknown): Promise<void> {
  const result = await validator.validate(doc as Parameters<Validator['validate']>[0]);
  assert.equal(result.valid, true, JSON.stringify(result.errors));
  assert.equal(validator.version, '3.1');
}

// biome-ignore lint/suspicious/noExplicitAny: the documents are read as the JSON they are
type Doc = any;
const ajv = new Ajv2020({ strict: false, allErrors: true });

/** A request for one operation from its schema: required parameters from their example, default or enum. */
function requestFor(op: Doc): string {
  const args = new URLSearchParams();
  for (const p of op.parameters) {
    if (['format', 'page', 'page_size', 'version', 'timeout', 'connection_name'].includes(p.name)) continue;
    const value = p.example ?? p.schema.default ?? p.schema.enum?.[0];
    if (p.required) assert.notEqual(value, undefined, `${op.operationId}: the required ${p.name} has no example, default or enum`);
    if (value !== undefined) args.set(p.name, String(value));
  }
  return args.size ? `?${args}` : '';
}

/** Calls every operation of `doc` with `key` and checks the answer against the operation's 200 schema. */
async function callEveryOperation(s: TestServer, doc: Doc, key?: string): Promise<string[]> {
  const called: string[] = [];
  for (const [path, item] of Object.entries<Doc>(doc.paths)) {
    const op = item.get;
    const r = await s.call('GET', path + requestFor(op), { key });
    assert.equal(r.status, 200, `${path}: ${r.text}`);
    for (const h of ['X-Page', 'X-Page-Size', 'X-Has-More']) assert.ok(r.headers.get(h) !== null || !Array.isArray(r.json), `${path}: ${h}`);
    const schema = op.responses['200'].content['application/json'].schema;
    const check = ajv.compile({ ...schema, components: doc.components });
    assert.ok(check(r.json), `${path}: ${JSON.stringify(check.errors)} in ${r.text.slice(0, 300)}`);
    called.push(path);
  }
  return called;
}

for (const mode of MODES) {
  describe(`catalog: ${mode.name}`, () => {
    let s: TestServer;
    let store: Awaited<ReturnType<typeof scratchDatabase>> | null = null;
    const secrets: Record<string, string> = {};
    const post = async (path: string, body: unknown, status = 201) => {
      const r = await s.call('POST', path, { body });
      assert.equal(r.status, status, `${path}: ${r.text}`);
      return r.json;
    };

    before(async () => {
      const env: Record<string, string> = { ...mode.env, QUERYAPIGATE_ALLOW_WRITES: '1' };
      if (mode.pgStore) {
        store = await scratchDatabase('qag_catalog_store');
        env.QUERYAPIGATE_DATABASE_URL = store.url;
      }
      s = await startTestServer(env);
      copyFileSync(filmsFile, join(s.home, 'films.db'));
      const pg = { db: 'postgres', host: '127.0.0.1', port: 5432, database: data.name, user: 'postgres', password: 'secret-pw' };
      await post('/api/v1/connections', { name: 'pg', ...pg });
      await post('/api/v1/connections', { name: 'other', ...pg });
      await post('/api/v1/connections', { name: 'lite', db: 'sqlite', database: 'films.db' });
      const query = (name: string, sql: string, parameters: unknown, extra: Record<string, unknown> = {}) =>
        post('/api/v1/queries', { name, sql, parameters, connection_name: 'pg', description: `About ${name}`, publish: true, ...extra });
      await query('item', 'SELECT id, name, price, created, meta, big, flag FROM items WHERE id = :id', {
        id: { type: 'int', min: 1, max: 30, required: true, description: 'The item id' },
      });
      await query('by_kind', 'SELECT * FROM items WHERE kind = :kind ORDER BY id', { kind: { type: 'str', enum: ['a', 'b'], default: 'a' } });
      await query(
        'search',
        "SELECT id, upper(name) AS loud FROM items WHERE name LIKE :prefix || '%' ORDER BY id",
        { prefix: { type: 'str', min_length: 1, max_length: 20, pattern: '[a-z ]+', default: 'item' } },
        { tags: ['search'] },
      );
      await query('flagged', 'SELECT id FROM items WHERE flag = :flag ORDER BY id', { flag: { type: 'bool', default: true } });
      await query('rename', 'UPDATE items SET name = name WHERE id = :id', { id: { type: 'int', min: 1, default: 1 } });
      await query(
        'films',
        'SELECT film_id, title, length FROM films WHERE length >= :min_length ORDER BY film_id',
        { min_length: { type: 'int', min: 0 } },
        {
          connection_name: 'lite',
        },
      );
      await query('all films', 'SELECT * FROM films ORDER BY film_id', {}, { connection_name: 'lite' });
      await query('secret', 'SELECT count(*) AS n FROM items', {});
      await query('draft', 'SELECT 1 AS one', {}, { publish: false });
      const key = async (name: string, grants: Record<string, unknown>) => {
        secrets[name] = (await post('/api/v1/api-keys', { name, connections: [], ...grants })).secret;
      };
      await key('reader', { queries: ['item', 'films', 'search', 'draft'] });
      await key('adhoc', { queries: [], connections: ['other'] });
      await key('masked', { queries: ['item'], mask: [{ column: 'items.name', action: 'hash' }] });
    });
    after(async () => {
      await s?.stop();
      await store?.drop();
    });

    test('the document validates as OpenAPI 3.1, for the admin, a key and no key', async () => {
      for (const key of [undefined, secrets.reader, null]) {
        const r = await s.call('GET', '/openapi.json', { key });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.headers.get('cache-control'), 'no-store');
        await assertValidOpenApi(r.json);
        assert.equal(r.json.openapi, '3.1.0');
        assert.deepEqual(r.json.components.securitySchemes.ApiKeyAuth, { type: 'apiKey', in: 'header', name: 'X-API-Key' });
        assert.ok(!r.text.includes('FROM items'), 'no SQL text in the document');
      }
      // No key while keys exist: the document, without a saved query; a wrong key is told so.
      assert.deepEqual((await s.call('GET', '/openapi.json', { key: null })).json.paths, {});
      assert.equal((await s.call('GET', '/openapi.json', { key: 'sk_wrong' })).status, 401);
    });

    test('every operation answers a request built from its schema, as its schema says', async () => {
      const admin = (await s.call('GET', '/openapi.json')).json;
      const called = await callEveryOperation(s, admin);
      assert.deepEqual(called.sort(), ['/q/all%20films', '/q/by_kind', '/q/films', '/q/flagged', '/q/item', '/q/rename', '/q/search', '/q/secret']);
      const reader = (await s.call('GET', '/openapi.json', { key: secrets.reader })).json;
      assert.deepEqual((await callEveryOperation(s, reader, secrets.reader)).sort(), ['/q/films', '/q/item', '/q/search']);
    });

    test('operations carry the stored rules, the reserved arguments, typed columns and the error bodies', async () => {
      const doc = (await s.call('GET', '/openapi.json')).json;
      const item = doc.paths['/q/item'].get;
      const byName = Object.fromEntries(item.parameters.map((p: Doc) => [p.name, p]));
      assert.deepEqual(byName.id, {
        name: 'id',
        in: 'query',
        required: true,
        schema: { type: 'integer', minimum: 1, maximum: 30 },
        description: 'The item id',
        example: 1,
      });
      for (const reserved of ['format', 'page', 'page_size', 'version', 'timeout']) assert.ok(byName[reserved], reserved);
      assert.deepEqual(byName.format.schema.enum, ['json', 'ndjson', 'csv', 'tsv', 'xml', 'yaml', 'xlsx', 'parquet']);
      assert.equal(byName.page_size.schema.maximum, 1000);
      const search = Object.fromEntries(doc.paths['/q/search'].get.parameters.map((p: Doc) => [p.name, p.schema]));
      assert.deepEqual(search.prefix, { type: 'string', minLength: 1, maxLength: 20, pattern: '^(?:[a-z ]+)$', default: 'item' });
      assert.deepEqual(doc.paths['/q/search'].get.tags, ['search']);
      const kind = doc.paths['/q/by_kind'].get.parameters.find((p: Doc) => p.name === 'kind');
      assert.deepEqual([kind.required, kind.schema.enum, kind.schema.default], [false, ['a', 'b'], 'a']);

      const ok = item.responses['200'];
      assert.deepEqual(Object.keys(ok.headers).sort(), ['X-Has-More', 'X-Page', 'X-Page-Size', 'X-Request-Id']);
      const row = ok.content['application/json'].schema.oneOf[0].items.properties;
      const types = Object.fromEntries(Object.entries<Doc>(row).map(([name, p]) => [name, p.type]));
      assert.deepEqual(types, {
        id: ['integer', 'null'],
        name: ['string', 'null'],
        price: ['number', 'null'],
        created: ['string', 'null'],
        meta: ['string', 'null'],
        big: ['integer', 'string', 'null'],
        flag: ['boolean', 'null'],
      });
      // `*` expanded from the schema; a computed column is listed, untyped.
      const kinds = doc.paths['/q/by_kind'].get.responses['200'].content['application/json'].schema.oneOf[0].items.properties;
      assert.deepEqual(Object.keys(kinds), ['id', 'name', 'price', 'created', 'meta', 'big', 'flag', 'kind']);
      const loud = doc.paths['/q/search'].get.responses['200'].content['application/json'].schema.oneOf[0].items.properties;
      assert.deepEqual(loud, { id: { type: ['integer', 'null'], description: 'integer' }, loud: {} });
      // SQLite's declared types
      const films = doc.paths['/q/films'].get.responses['200'].content['application/json'].schema.oneOf[0].items.properties;
      assert.deepEqual(films.title.type, ['string', 'null']);
      assert.deepEqual(films.film_id.type, ['integer', 'string', 'null']);
      assert.ok(doc.paths['/q/rename'].get.responses['200'].headers['X-Rows-Affected']);

      for (const status of ['400', '401', '403', '404', '429', '500', '502', '503', '504']) {
        assert.equal(item.responses[status].$ref, `#/components/responses/Error${status}`);
      }
      const e404 = doc.components.responses.Error404.content['application/json'].schema;
      assert.ok(e404.allOf[1].properties.code.enum.includes('query_not_found'));
      assert.deepEqual(doc.components.schemas.Error.required, ['error', 'code', 'request_id']);
    });

    test('a key sees only its queries; the admin sees all', async () => {
      const reader = (await s.call('GET', '/openapi.json', { key: secrets.reader })).json;
      assert.deepEqual(Object.keys(reader.paths).sort(), ['/q/films', '/q/item', '/q/search']); // the draft is not published
      const catalog = (await s.call('GET', '/catalog', { key: secrets.reader })).json;
      assert.deepEqual(catalog.queries.map((q: Doc) => q.name).sort(), ['films', 'item', 'search']);
      assert.deepEqual(catalog.connections, []);
      const adhoc = (await s.call('GET', '/catalog', { key: secrets.adhoc })).json;
      assert.deepEqual(adhoc.queries, []);
      assert.deepEqual(adhoc.connections, [{ name: 'other', db: 'postgres', active: true }]);
      assert.deepEqual((await s.call('GET', '/openapi.json', { key: secrets.adhoc })).json.paths, {});

      const admin = (await s.call('GET', '/catalog')).json;
      assert.deepEqual(
        admin.queries.map((q: Doc) => `${q.name}:${q.published}`),
        ['all films:true', 'by_kind:true', 'draft:false', 'films:true', 'flagged:true', 'item:true', 'rename:true', 'search:true', 'secret:true'],
      );
      assert.deepEqual(
        admin.connections.map((c: Doc) => c.name),
        ['lite', 'other', 'pg'],
      );
      assert.ok(!JSON.stringify(admin).includes('secret-pw'), 'no password');
    });

    test('/catalog: the caller, its terms and each query', async () => {
      assert.equal((await s.call('GET', '/catalog', { key: null })).status, 401);
      assert.equal((await s.call('GET', '/catalog', { key: 'sk_wrong' })).status, 401);
      const reader = (await s.call('GET', '/catalog', { key: secrets.reader })).json;
      assert.deepEqual(reader.caller, {
        name: 'reader',
        admin: false,
        allow_writes: false,
        allowed_write_ops: null,
        allowed_tables: null,
        mask: null,
        rate_limit: null,
        rate_limits: null,
        server_rate_limit: null,
      });
      const item = reader.queries.find((q: Doc) => q.name === 'item');
      assert.deepEqual(item, {
        name: 'item',
        version: 1,
        published: true,
        description: 'About item',
        tags: [],
        collection: null,
        connection_name: 'pg',
        connections: ['pg'],
        parameters: { id: { type: 'integer', required: true, min: 1, max: 30, description: 'The item id' } },
        cache_ttl: null,
        writes: false,
        can_write: false,
        columns: [
          { name: 'id', type: 'integer' },
          { name: 'name', type: 'text' },
          { name: 'price', type: 'numeric' },
          { name: 'created', type: 'timestamp without time zone' },
          { name: 'meta', type: 'jsonb' },
          { name: 'big', type: 'bigint' },
          { name: 'flag', type: 'boolean' },
        ],
        masked: null,
        refused: null,
      });
      const films = reader.queries.find((q: Doc) => q.name === 'films');
      assert.deepEqual(films.columns, [
        { name: 'film_id', type: 'INTEGER' },
        { name: 'title', type: 'TEXT' },
        { name: 'length', type: 'INTEGER' },
      ]);
      const admin = (await s.call('GET', '/catalog')).json;
      const rename = admin.queries.find((q: Doc) => q.name === 'rename');
      assert.deepEqual([rename.writes, rename.can_write, rename.columns], [true, true, []]);
      assert.equal(admin.caller.admin, true);
      const masked = (await s.call('GET', '/catalog', { key: secrets.masked })).json;
      assert.deepEqual(masked.queries[0].masked, [{ column: 'name', action: 'hash' }]);
      assert.deepEqual(masked.caller.mask, [{ column: 'items.name', action: 'hash' }]);
    });

    test('a change to a query or a key shows in the next document', async () => {
      const paths = async () => Object.keys((await s.call('GET', '/openapi.json', { key: secrets.reader })).json.paths).sort();
      assert.deepEqual(await paths(), ['/q/films', '/q/item', '/q/search']);
      // a grant added to the key
      const patch = await s.call('PATCH', '/api/v1/api-keys/reader', { body: { queries: ['item', 'films', 'search', 'draft', 'secret'] } });
      assert.equal(patch.status, 200, patch.text);
      assert.deepEqual(await paths(), ['/q/films', '/q/item', '/q/search', '/q/secret']);
      // a draft published
      await post('/api/v1/queries/draft/publish', { version: 1 }, 200);
      assert.deepEqual(await paths(), ['/q/draft', '/q/films', '/q/item', '/q/search', '/q/secret']);
      // a new version of a query, with a new parameter
      await post('/api/v1/queries/item/versions', {
        sql: 'SELECT id, name FROM items WHERE id = :id AND kind = :kind',
        parameters: { id: { type: 'int', min: 1 }, kind: { type: 'str', enum: ['a', 'b'] } },
        description: 'Item of a kind',
        publish: true,
      });
      const op = (await s.call('GET', '/openapi.json', { key: secrets.reader })).json.paths['/q/item'].get;
      assert.equal(op.summary, 'Item of a kind');
      assert.deepEqual(
        op.parameters.filter((p: Doc) => p.name === 'id' || p.name === 'kind').map((p: Doc) => p.schema),
        [
          { type: 'integer', minimum: 1 },
          { type: 'string', enum: ['a', 'b'] },
        ],
      );
      // unpublished, and a key revoked
      await post('/api/v1/queries/secret/unpublish', {}, 200);
      assert.deepEqual(await paths(), ['/q/draft', '/q/films', '/q/item', '/q/search']);
      const off = await s.call('PATCH', '/api/v1/api-keys/reader', { body: { active: false } });
      assert.equal(off.status, 200, off.text);
      assert.equal((await s.call('GET', '/openapi.json', { key: secrets.reader })).status, 401);
      assert.equal((await s.call('GET', '/catalog', { key: secrets.reader })).status, 401);
    });

    test('/docs is a page of this server under a CSP, asking for the key', async () => {
      const page = await s.call('GET', '/docs', { key: null });
      assert.equal(page.status, 200);
      assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
      const csp = page.headers.get('content-security-policy') ?? '';
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /script-src 'self'(;|$)/);
      assert.match(csp, /connect-src 'self'(;|$)/);
      assert.doesNotMatch(page.text, /(https?:)?\/\/[a-z0-9]/i, 'no URL of another site');
      assert.match(page.text, /type="password"/);
      assert.doesNotMatch(page.text, /<script>/, 'no inline script: the CSP allows none');
      const scripts = [...page.text.matchAll(/<(?:script src|link rel="stylesheet" href)="([^"]+)"/g)].map((m) => m[1]);
      assert.deepEqual(scripts, ['/docs/swagger-ui.css', '/docs/docs.css', '/docs/swagger-ui-bundle.js', '/docs/docs.js']);
      for (const path of scripts) {
        const r = await s.call('GET', path, { key: null });
        assert.equal(r.status, 200, path);
        assert.ok(r.headers.get('content-security-policy'), path);
      }
      const script = (await s.call('GET', '/docs/docs.js', { key: null })).text;
      assert.match(script, /fetch\('\/openapi\.json', \{ headers: key \? \{ 'X-API-Key': key \}/);
      assert.match(script, /sessionStorage/);
      assert.equal((await s.call('GET', '/docs/other.js', { key: null })).status, 404);
    });
  });
}

describe('catalog: open mode', () => {
  test('with no admin key and no key, every caller sees everything', async () => {
    const home = mkdtempSync(join(tmpdir(), 'qag-catalog-open-'));
    const server = await startServer(
      loadConfig({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_LOG_LEVEL: 'warning' }),
    );
    const base = `http://127.0.0.1:${server.port}`;
    try {
      copyFileSync(filmsFile, join(home, 'films.db'));
      const made = await request(base, 'POST', '/api/v1/connections', { key: null, body: { name: 'lite', db: 'sqlite', database: 'films.db' } });
      assert.equal(made.status, 201, made.text);
      const q = await request(base, 'POST', '/api/v1/queries', {
        key: null,
        body: { name: 'films', sql: 'SELECT * FROM films', connection_name: 'lite', description: 'Films', publish: true },
      });
      assert.equal(q.status, 201, q.text);
      const catalog = await request(base, 'GET', '/catalog', { key: null });
      assert.equal(catalog.status, 200, catalog.text);
      assert.deepEqual([catalog.json.caller.name, catalog.json.caller.admin], ['-', true]);
      assert.deepEqual(catalog.json.connections, [{ name: 'lite', db: 'sqlite', active: true }]);
      const doc = await request(base, 'GET', '/openapi.json', { key: null });
      await assertValidOpenApi(doc.json);
      assert.deepEqual(Object.keys(doc.json.paths), ['/q/films']);
    } finally {
      await server.stop();
      rmSync(home, { recursive: true, force: true });
    }
  });
});
