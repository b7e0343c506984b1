// Signed-in users (Authorization: Bearer <jwt>): tokens verified against a JWKS this test serves
// itself (node:http) and against an HMAC secret, signed here with jose; grants from a key role read
// live; from_claim parameters scoping rows per tenant end to end on PostgreSQL.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { eventually, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const ISSUER = 'https://id.example.test';
const AUDIENCE = 'queryapigate';

type Key = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

/** A token as an identity provider would sign it; `exp` in seconds from now (negative: expired). */
function sign(key: Key | Uint8Array, claims: Record<string, unknown>, o: { kid?: string; alg?: string; exp?: number; aud?: string; iss?: string } = {}) {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: o.alg ?? 'RS256', ...(o.kid ? { kid: o.kid } : {}) })
    .setIssuer(o.iss ?? ISSUER)
    .setAudience(o.aud ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + (o.exp ?? 300))
    .sign(key);
}

describe('JWT sign-in with a JWKS, from_claim row scoping on PostgreSQL', () => {
  let s: TestServer;
  let data: Awaited<ReturnType<typeof scratchDatabase>>;
  let jwks: Server;
  let fetches = 0;
  let signing: Key;
  let other: Key;
  const bearer = (token: string) => ({ key: null, headers: { Authorization: `Bearer ${token}` } });
  const ok = async (method: string, path: string, body?: unknown) => {
    const r = await s.call(method, path, { body });
    assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
    return r.json;
  };

  before(async () => {
    const pair = await generateKeyPair('RS256');
    signing = pair.privateKey;
    other = (await generateKeyPair('RS256')).privateKey;
    const body = JSON.stringify({ keys: [{ ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }] });
    jwks = createServer((_req, res) => {
      fetches++;
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(body);
    });
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/.well-known/jwks.json`;

    data = await scratchDatabase('qag_jwt');
    await data.sql`CREATE TABLE orders (id int PRIMARY KEY, tenant text NOT NULL, total int NOT NULL)`;
    await data.sql`INSERT INTO orders VALUES (1, 'acme', 10), (2, 'acme', 20), (3, 'globex', 30)`;
    s = await startTestServer({
      QUERYAPIGATE_WORKERS: '1',
      QUERYAPIGATE_JWT_JWKS_URL: jwksUrl,
      QUERYAPIGATE_JWT_ISSUER: ISSUER,
      QUERYAPIGATE_JWT_AUDIENCE: `other-app, ${AUDIENCE}`,
      QUERYAPIGATE_JWT_ROLE_CLAIM: 'app.role',
    });
    await ok('POST', '/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: data.name, user: 'postgres' });
    await ok('POST', '/api/v1/queries', {
      name: 'my_orders',
      collection: 'tenant',
      description: "the caller's orders",
      connection_name: 'pg',
      sql: 'SELECT id, tenant, total FROM orders WHERE tenant = :tenant ORDER BY id',
      parameters: { tenant: { type: 'str', from_claim: 'tenant_id' } },
      publish: true,
    });
    await ok('POST', '/api/v1/queries', {
      name: 'all_orders',
      description: 'every order',
      connection_name: 'pg',
      sql: 'SELECT id FROM orders ORDER BY id',
      publish: true,
    });
    await ok('POST', '/api/v1/roles', { name: 'customer', connections: [], collections: ['tenant'] });
  });
  after(async () => {
    await s.stop();
    await data.drop();
    await new Promise((r) => jwks.close(r));
  });

  test('from_claim rules are checked when saved', async () => {
    const base = { description: 'x', connection_name: 'pg', sql: 'SELECT id FROM orders WHERE tenant = :t' };
    for (const [rule, message] of [
      [{ from_claim: 'tenant_id', default: 'acme' }, /'from_claim' and a 'default'/],
      [{ from_claim: 'tenant_id', required: false }, /always required/],
      [{ from_claim: '' }, /claim name of 1-200 characters/],
    ] as const) {
      const r = await s.call('POST', '/api/v1/queries', { body: { ...base, name: 'bad_claim', parameters: { t: rule } } });
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.error, message);
    }
    const saved = await ok('GET', '/api/v1/queries/my_orders');
    assert.equal(saved.versions[0].parameters.tenant.from_claim, 'tenant_id');
  });

  test('each tenant sees only its own rows, and cannot choose another', async () => {
    const acme = await sign(signing, { sub: 'alice', tenant_id: 'acme', app: { role: 'customer' } }, { kid: 'k1' });
    const globex = await sign(signing, { sub: 'bob', tenant_id: 'globex', app: { role: ['missing', 'customer'] } }, { kid: 'k1' });
    const a = await s.call('GET', '/q/my_orders', bearer(acme));
    assert.equal(a.status, 200, a.text);
    assert.deepEqual(
      a.json.map((r: { id: number; tenant: string }) => [r.id, r.tenant]),
      [
        [1, 'acme'],
        [2, 'acme'],
      ],
    );
    const b = await s.call('GET', '/q/my_orders', bearer(globex));
    assert.deepEqual(
      b.json.map((r: { id: number }) => r.id),
      [3],
    );
    // The request's own value is refused, in the query string and in a POST body alike.
    const forged = await s.call('GET', '/q/my_orders?tenant=globex', bearer(acme));
    assert.equal(forged.status, 400);
    assert.equal(forged.json.code, 'param_from_claim');
    const posted = await s.call('POST', '/q/my_orders', { ...bearer(acme), body: { params: { tenant: 'globex' } } });
    assert.equal(posted.json.code, 'param_from_claim');
    const noClaim = await s.call('GET', '/q/my_orders', bearer(await sign(signing, { sub: 'carol', app: { role: 'customer' } }, { kid: 'k1' })));
    assert.equal(noClaim.status, 403);
    assert.equal(noClaim.json.code, 'claim_missing');
    // The role reaches the collection only.
    assert.equal((await s.call('GET', '/q/all_orders', bearer(acme))).json.code, 'query_forbidden');
    // An administrator supplies the value itself; a scoped key may not call the query at all.
    const admin = await s.call('GET', '/q/my_orders?tenant=globex');
    assert.deepEqual(
      admin.json.map((r: { id: number }) => r.id),
      [3],
    );
    const key = await ok('POST', '/api/v1/api-keys', { name: 'svc', collections: ['tenant'], connections: [] });
    const scoped = await s.call('GET', '/q/my_orders?tenant=acme', { key: key.secret });
    assert.equal(scoped.status, 403);
    assert.equal(scoped.json.code, 'sign_in_required');
    // The catalog a signed-in user reads: its role's queries, without the parameter its token gives.
    const catalog = await s.call('GET', '/catalog', bearer(acme));
    assert.equal(catalog.status, 200, catalog.text);
    assert.deepEqual(
      catalog.json.queries.map((q: { name: string }) => q.name),
      ['my_orders'],
    );
    assert.doesNotMatch(JSON.stringify(catalog.json.queries[0].parameters ?? null), /tenant/);
    // History names the signed-in user.
    const history = await eventually(
      () => s.call('GET', '/api/v1/history?query=my_orders&key=jwt:alice'),
      (r) => r.json.items.length >= 1,
    );
    assert.ok(history.json.items.every((e: { key_name: string }) => e.key_name === 'jwt:alice'));
  });

  test('expired, wrongly signed, wrong audience or issuer, no role: 401; no token: 401 (never open mode)', async () => {
    const claims = { sub: 'alice', tenant_id: 'acme', app: { role: 'customer' } };
    const cases: Array<[string, string]> = [
      ['expired', await sign(signing, claims, { kid: 'k1', exp: -120 })],
      ['wrongly signed', await sign(other, claims, { kid: 'k1' })],
      ['wrong audience', await sign(signing, claims, { kid: 'k1', aud: 'someone-else' })],
      ['wrong issuer', await sign(signing, claims, { kid: 'k1', iss: 'https://evil.test' })],
      ['HMAC under a JWKS', await sign(new TextEncoder().encode('x'.repeat(32)), claims, { alg: 'HS256' })],
      ['a role that does not exist', await sign(signing, { ...claims, app: { role: 'nobody' } }, { kid: 'k1' })],
      ['no user claim', await sign(signing, { tenant_id: 'acme', app: { role: 'customer' } }, { kid: 'k1' })],
      ['not a JWT', 'not.a.token'],
    ];
    for (const [what, token] of cases) {
      const r = await s.call('GET', '/q/my_orders', bearer(token));
      assert.equal(r.status, 401, `${what}: ${r.text}`);
      assert.equal(r.json.code, 'unauthorized', what);
    }
    // No admin key is needed to close the server: with JWT on, no credential is nobody.
    assert.equal((await s.call('GET', '/q/my_orders', { key: null })).status, 401);
    // A key is judged alone: a wrong one never falls back to the token.
    const good = await sign(signing, claims, { kid: 'k1' });
    assert.equal((await s.call('GET', '/q/my_orders', { key: 'sk_wrong', headers: { Authorization: `Bearer ${good}` } })).status, 401);
    // A signed-in user is no administrator.
    assert.equal((await s.call('GET', '/api/v1/queries', bearer(good))).json.code, 'admin_only');
  });

  test("the role's grants are read live, and verified tokens are kept (the JWKS is not fetched per call)", async () => {
    const token = await sign(signing, { sub: 'dave', tenant_id: 'globex', app: { role: 'customer' } }, { kid: 'k1' });
    const before = fetches;
    for (let i = 0; i < 5; i++) assert.equal((await s.call('GET', '/q/my_orders', bearer(token))).status, 200);
    assert.ok(fetches - before <= 1, `the JWKS was fetched ${fetches - before} times for 5 calls`);
    await ok('PATCH', '/api/v1/roles/customer', { collections: [] });
    assert.equal((await s.call('GET', '/q/my_orders', bearer(token))).json.code, 'query_forbidden');
    await ok('PATCH', '/api/v1/roles/customer', { collections: ['tenant'] });
    assert.equal((await s.call('GET', '/q/my_orders', bearer(token))).status, 200);
  });

  test("a role's allowed_ips are checked on every call, when they are added and when they change", async () => {
    const token = await sign(signing, { sub: 'erin', tenant_id: 'acme', app: { role: 'customer' } }, { kid: 'k1' });
    const status = async () => (await s.call('GET', '/q/my_orders', bearer(token))).status;
    for (const [allowed, expected] of [
      [null, 200],
      [['10.0.0.0/8'], 401],
      [['127.0.0.1'], 200],
      [['10.0.0.0/8'], 401],
      [null, 200],
    ] as const) {
      await ok('PATCH', '/api/v1/roles/customer', { allowed_ips: allowed });
      assert.equal(await status(), expected, `allowed_ips ${JSON.stringify(allowed)}`);
      assert.equal(await status(), expected, `allowed_ips ${JSON.stringify(allowed)}, called again`);
    }
  });
});

describe('JWT sign-in with an HMAC secret', () => {
  let s: TestServer;
  const secret = 'a-test-secret-of-at-least-32-bytes!!';
  before(async () => {
    s = await startTestServer({
      QUERYAPIGATE_WORKERS: '0',
      QUERYAPIGATE_JWT_SECRET: secret,
      QUERYAPIGATE_JWT_ROLE: 'everyone',
      QUERYAPIGATE_JWT_USER_CLAIM: 'email',
    });
    new Database(join(s.home, 'lite.db')).close();
    await s.call('POST', '/api/v1/connections', { body: { name: 'lite', db: 'sqlite', database: 'lite.db' } });
    const q = await s.call('POST', '/api/v1/queries', {
      body: { name: 'hello', description: 'hi', connection_name: 'lite', sql: "SELECT 'hi' AS greeting", publish: true },
    });
    assert.equal(q.status, 201, q.text);
    const role = await s.call('POST', '/api/v1/roles', { body: { name: 'everyone', connections: [], queries: ['hello'] } });
    assert.equal(role.status, 201, role.text);
  });
  after(() => s.stop());

  test('a token signed with the secret is let in under its user claim; another secret is not', async () => {
    const key = new TextEncoder().encode(secret);
    const good = await new SignJWT({ email: 'eve@example.test' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(key);
    const r = await s.call('GET', '/q/hello', { key: null, headers: { Authorization: `Bearer ${good}` } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json[0].greeting, 'hi');
    const history = await eventually(
      () => s.call('GET', '/api/v1/history?query=hello'),
      (h) => h.json.items.length >= 1,
    );
    assert.equal(history.json.items[0].key_name, 'jwt:eve@example.test');
    const forged = await new SignJWT({ email: 'eve@example.test' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('another-secret-of-at-least-32-bytes!'));
    assert.equal((await s.call('GET', '/q/hello', { key: null, headers: { Authorization: `Bearer ${forged}` } })).status, 401);
    const noExp = await new SignJWT({ email: 'eve@example.test' }).setProtectedHeader({ alg: 'HS256' }).sign(key);
    assert.equal((await s.call('GET', '/q/hello', { key: null, headers: { Authorization: `Bearer ${noExp}` } })).status, 401, 'exp is required');
  });
});

describe('JWT on, no admin key and no API key', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_API_KEY: '', QUERYAPIGATE_JWT_SECRET: 'x'.repeat(32), QUERYAPIGATE_JWT_ROLE: 'r' });
  });
  after(() => s.stop());

  test('open mode never applies: every route that needs a caller answers 401 without a token', async () => {
    for (const [method, path] of [
      ['GET', '/q/anything'],
      ['POST', '/execute_sql'],
      ['GET', '/catalog'],
      ['GET', '/api/v1/queries'],
      ['POST', '/api/v1/api-keys'],
    ]) {
      const r = await s.call(method, path, {
        key: null,
        body: path === '/execute_sql' ? { sql: 'SELECT 1', connection_name: 'x' } : method === 'POST' ? { name: 'k' } : undefined,
      });
      assert.equal(r.status, 401, `${method} ${path}: ${r.text}`);
    }
  });
});
