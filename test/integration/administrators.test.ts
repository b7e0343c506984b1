// Named administrators (contract 2.2, 3.5): every /api/v1 route against every role, tokens and their
// life, GET /api/v1/me, the shared key as break-glass, data access by role, ETag and If-Match.
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { listedRoutes, routeAccess } from '../../src/api/access.js';
import { managementRouter } from '../../src/http/app.js';
import { cli, tempHome } from '../cli.js';
import { startTestServer, storeToken, type TestServer } from '../helpers.js';

/** Who may call each route, written from contract 2.2 (O owner, A admin, D developer, U auditor). */
const EXPECTED: Record<string, string> = {
  'GET /api/v1/connections': 'OADU',
  'POST /api/v1/connections': 'OA',
  'GET /api/v1/connections/:name': 'OADU',
  'PATCH /api/v1/connections/:name': 'OA',
  'DELETE /api/v1/connections/:name': 'OA',
  'GET /api/v1/connections/:name/schema': 'OADU',
  'POST /api/v1/connections/:name/test': 'OADU',
  'GET /api/v1/queries': 'OADU',
  'POST /api/v1/queries': 'OAD',
  'POST /api/v1/queries/validate': 'OAD',
  'GET /api/v1/queries/:name': 'OADU',
  'DELETE /api/v1/queries/:name': 'OAD',
  'POST /api/v1/queries/:name/versions': 'OAD',
  'GET /api/v1/queries/:name/versions/:version': 'OADU',
  'PATCH /api/v1/queries/:name/versions/:version': 'OAD',
  'POST /api/v1/queries/:name/publish': 'OAD',
  'POST /api/v1/queries/:name/unpublish': 'OAD',
  'GET /api/v1/queries/:name/history': 'OADU',
  'GET /api/v1/api-keys': 'OAU',
  'POST /api/v1/api-keys': 'OA',
  'GET /api/v1/api-keys/:name': 'OAU',
  'PATCH /api/v1/api-keys/:name': 'OA',
  'POST /api/v1/api-keys/:name/rotate': 'OA',
  'DELETE /api/v1/api-keys/:name': 'OA',
  'GET /api/v1/history': 'OADU',
  'GET /api/v1/events': 'OADU',
  'GET /api/v1/settings': 'OAU',
  'GET /api/v1/me': 'OADU',
  // Everyone may list (a non-owner sees only themselves), read themselves and manage their own tokens.
  'GET /api/v1/administrators': 'OADU',
  'POST /api/v1/administrators': 'O',
  'GET /api/v1/administrators/:name': 'O',
  'PATCH /api/v1/administrators/:name': 'O',
  'DELETE /api/v1/administrators/:name': 'O',
  'GET /api/v1/administrators/:name/tokens': 'O',
  'POST /api/v1/administrators/:name/tokens': 'O',
  'DELETE /api/v1/administrators/:name/tokens/:id': 'O',
  'GET /api/v1/audit': 'OADU',
  'GET /api/v1/mcp/tools': 'OADU',
  'PATCH /api/v1/queries/:name': 'OAD',
  'GET /api/v1/roles': 'OAU',
  'POST /api/v1/roles': 'OA',
  'GET /api/v1/roles/:name': 'OAU',
  'PATCH /api/v1/roles/:name': 'OA',
  'DELETE /api/v1/roles/:name': 'OA',
  'GET /api/v1/collections': 'OADU',
  'PATCH /api/v1/collections/:name': 'OAD',
  'GET /api/v1/collections/:name/postman': 'OADU',
  'GET /api/v1/examples': 'OADU',
  'POST /api/v1/examples': 'OA',
  'DELETE /api/v1/examples': 'OA',
  'GET /api/v1/cache/entries': 'OADU',
  'DELETE /api/v1/cache/entries': 'OA',
  'GET /api/v1/cache/entries/:key': 'OADU',
  'DELETE /api/v1/cache/entries/:key': 'OA',
  'GET /api/v1/instances': 'OAU',
  'GET /api/v1/alerts': 'OADU',
};
/** Routes an administrator may call on their own name whatever their role. */
const SELF = new Set([
  'GET /api/v1/administrators/:name',
  'GET /api/v1/administrators/:name/tokens',
  'POST /api/v1/administrators/:name/tokens',
  'DELETE /api/v1/administrators/:name/tokens/:id',
]);
const ROLE_LETTER = { owner: 'O', admin: 'A', developer: 'D', auditor: 'U' } as const;
type Role = keyof typeof ROLE_LETTER;
const PEOPLE: Record<Role, string> = { owner: 'olivia', admin: 'adam', developer: 'dora', auditor: 'audrey' };
const REFUSALS = new Set(['unauthorized', 'admin_only', 'role_forbidden']);

function pathOf(route: string, name: string): [string, string] {
  const [method, pattern] = route.split(' ');
  return [method, pattern.replace(':name', encodeURIComponent(name)).replace(':version', '1').replace(':id', 'tok_000000000000')];
}

describe('administrators and roles', () => {
  let s: TestServer;
  const tokens = {} as Record<Role, string>;
  let scoped = '';
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_LOAD_EXAMPLES: '1' });
    for (const [role, name] of Object.entries(PEOPLE)) {
      const made = await s.call('POST', '/api/v1/administrators', { body: { name, role, email: `${name}@corp.example` } });
      assert.equal(made.status, 201, made.text);
      const t = await s.call('POST', `/api/v1/administrators/${name}/tokens`, { body: { label: 'laptop' } });
      assert.equal(t.status, 201, t.text);
      assert.match(t.json.secret, /^qagadm_[A-Za-z0-9_-]{43}$/);
      assert.match(t.json.id, /^tok_[0-9a-f]{12}$/);
      assert.equal(t.headers.get('cache-control'), 'no-store');
      tokens[role as Role] = t.json.secret;
    }
    const k = await s.call('POST', '/api/v1/api-keys', { body: { name: 'scoped', queries: ['example_film_lookup'], connections: [] } });
    scoped = k.json.secret;
  });
  after(() => s.stop());

  test('the access table lists every route the router serves, with the capability the contract gives it', () => {
    const served = managementRouter().routes();
    for (const r of served) assert.ok(routeAccess(...(r.split(' ') as [string, string])), `${r} has an access entry`);
    assert.deepEqual([...served, 'GET /api/v1/mcp/tools'].sort(), Object.keys(EXPECTED).sort(), 'the expectations cover exactly the routes served');
    assert.ok(listedRoutes().length >= served.length);
  });

  test('every /api/v1 route x every role: allowed, or refused with role_forbidden / admin_only / unauthorized', async () => {
    const checked: string[] = [];
    for (const route of Object.keys(EXPECTED)) {
      for (const role of Object.keys(ROLE_LETTER) as Role[]) {
        const variants: Array<[string, boolean]> = [['nobody-here', EXPECTED[route].includes(ROLE_LETTER[role])]];
        if (SELF.has(route)) variants.push([PEOPLE[role], true]);
        for (const [name, allowed] of variants) {
          const [method, path] = pathOf(route, name);
          const r = await s.call(method, path, { key: tokens[role], body: method === 'GET' || method === 'DELETE' ? undefined : {} });
          const what = `${role} ${method} ${path} -> ${r.status} ${r.text.slice(0, 160)}`;
          if (allowed) assert.ok(!REFUSALS.has(r.json?.code), what);
          else {
            assert.equal(r.status, 403, what);
            assert.equal(r.json.code, 'role_forbidden', what);
            assert.equal(r.json.role, role, what);
            assert.equal(r.json.capability, routeAccess(method, route.split(' ')[1])?.capability, what);
          }
          checked.push(what);
        }
      }
      const [method, path] = pathOf(route, 'nobody-here');
      const body = method === 'GET' || method === 'DELETE' ? undefined : {};
      const byKey = await s.call(method, path, { key: scoped, body });
      assert.equal(byKey.status, 403, `scoped key ${route}`);
      assert.equal(byKey.json.code, 'admin_only', `scoped key ${route}`);
      const nobody = await s.call(method, path, { key: null, body });
      assert.equal(nobody.status, 401, `no key ${route}`);
      assert.equal(nobody.json.code, 'unauthorized');
      const wrong = await s.call(method, path, { key: 'qagadm_not-a-token', body });
      assert.equal(wrong.status, 401, `a wrong token ${route}`);
      // The shared key acts as an owner (break-glass now that owners exist).
      const glass = await s.call(method, path, { body });
      assert.ok(!REFUSALS.has(glass.json?.code), `admin key ${route}: ${glass.text}`);
    }
    assert.ok(checked.length > 150);
    // DELETE /api/v1/examples was allowed above, so the examples the later tests call are loaded again.
    const reloaded = await s.call('POST', '/api/v1/examples');
    assert.ok(reloaded.status < 300, reloaded.text);
  });

  test('GET /api/v1/me: name, role, via, capabilities, data access', async () => {
    const me = await s.call('GET', '/api/v1/me', { key: tokens.developer });
    assert.equal(me.json.name, 'dora');
    assert.equal(me.json.role, 'developer');
    assert.equal(me.json.via, 'token');
    assert.equal(me.json.data_access, true);
    assert.ok(me.json.capabilities.includes('queries.write'));
    assert.ok(!me.json.capabilities.includes('access.write'));
    const auditor = await s.call('GET', '/api/v1/me', { key: tokens.auditor });
    assert.equal(auditor.json.data_access, false);
    assert.ok(!auditor.json.capabilities.includes('sql.run'));
    const glass = await s.call('GET', '/api/v1/me');
    assert.deepEqual([glass.json.name, glass.json.role, glass.json.via], ['admin', 'owner', 'break-glass']);
  });

  test('a non-owner lists only themselves; an owner everyone, with token counts and no secret', async () => {
    const dev = await s.call('GET', '/api/v1/administrators', { key: tokens.developer });
    assert.deepEqual(
      dev.json.items.map((a: { name: string }) => a.name),
      ['dora'],
    );
    const owner = await s.call('GET', '/api/v1/administrators', { key: tokens.owner });
    assert.deepEqual(owner.json.items.map((a: { name: string }) => a.name).sort(), ['adam', 'audrey', 'dora', 'olivia']);
    assert.ok(owner.json.items.every((a: { tokens: number }) => a.tokens >= 1));
    assert.doesNotMatch(owner.text, /qagadm_/);
    const list = await s.call('GET', '/api/v1/administrators/dora/tokens', { key: tokens.developer });
    assert.ok(list.json.items.length >= 1);
    assert.doesNotMatch(list.text, /qagadm_|"hash"/);
  });

  test('data: a developer token runs saved queries as an administrator does; an auditor runs no SQL', async () => {
    const dev = await s.call('GET', '/q/example_film_lookup?film_id=7', { key: tokens.developer });
    assert.equal(dev.status, 200, dev.text);
    assert.equal(dev.json.length, 1);
    const auditor = await s.call('GET', '/q/example_film_lookup?film_id=7', { key: tokens.auditor });
    assert.equal(auditor.status, 403, auditor.text);
    const sql = await s.call('POST', '/execute_sql', { key: tokens.auditor, body: { connection_name: 'examples', sql: 'SELECT 1 AS one' } });
    assert.equal(sql.status, 403, sql.text);
    // History names the administrator who ran it.
    const history = await s.call('GET', '/api/v1/history?key=dora');
    assert.ok(history.json.items.length >= 1, history.text);
  });

  test('the command line calls a server with a token as it does with the admin key (QUERYAPIGATE_ADMIN_TOKEN, --key)', async () => {
    const home = tempHome();
    try {
      const out = join(home, 'film.csv');
      const args = ['export', 'example_film_lookup', '--param', 'film_id=7', '--out', out, '--url', s.url];
      const dev = await cli(args, { home, env: { QUERYAPIGATE_ADMIN_TOKEN: tokens.developer, QUERYAPIGATE_API_KEY: 'not-the-key' } });
      assert.equal(dev.code, 0, dev.stderr);
      assert.match(readFileSync(out, 'utf8'), /^film_id,/);
      const auditor = await cli([...args, '--key', tokens.auditor], { home });
      assert.equal(auditor.code, 1, 'an auditor runs no SQL');
      const malformed = await cli(args, { home, env: { QUERYAPIGATE_ADMIN_TOKEN: 'sk_not-a-token' } });
      assert.equal(malformed.code, 1, 'a setting that is not a token stops the command');
      assert.match(malformed.stderr, /QUERYAPIGATE_ADMIN_TOKEN/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  test('names: reserved, taken by a key, taken by an administrator; the last owner stays', async () => {
    for (const name of ['admin', 'cli']) {
      const r = await s.call('POST', '/api/v1/administrators', { key: tokens.owner, body: { name, role: 'auditor' } });
      assert.equal(r.json.code, 'invalid_name', name);
    }
    const asKey = await s.call('POST', '/api/v1/administrators', { key: tokens.owner, body: { name: 'scoped', role: 'auditor' } });
    assert.equal(asKey.status, 409);
    assert.equal(asKey.json.code, 'name_taken');
    const asAdmin = await s.call('POST', '/api/v1/api-keys', { body: { name: 'dora' } });
    assert.equal(asAdmin.json.code, 'name_taken');
    const again = await s.call('POST', '/api/v1/administrators', { key: tokens.owner, body: { name: 'dora', role: 'auditor' } });
    assert.equal(again.json.code, 'admin_exists');
    const bad = await s.call('POST', '/api/v1/administrators', { key: tokens.owner, body: { name: 'zed', role: 'superuser' } });
    assert.equal(bad.json.code, 'invalid_body');
    const demote = await s.call('PATCH', '/api/v1/administrators/olivia', { key: tokens.owner, body: { role: 'admin' } });
    assert.equal(demote.status, 409);
    assert.equal(demote.json.code, 'last_owner');
    const off = await s.call('PATCH', '/api/v1/administrators/olivia', { key: tokens.owner, body: { active: false } });
    assert.equal(off.json.code, 'last_owner');
    const gone = await s.call('DELETE', '/api/v1/administrators/olivia', { key: tokens.owner });
    assert.equal(gone.json.code, 'last_owner');
  });

  test('tokens: a revoked or expired token, or an inactive administrator, is nobody (401)', async () => {
    await s.call('POST', '/api/v1/administrators', { key: tokens.owner, body: { name: 'temp', role: 'admin' } });
    const a = await s.call('POST', '/api/v1/administrators/temp/tokens', { key: tokens.owner, body: { label: 'one' } });
    const b = await s.call('POST', '/api/v1/administrators/temp/tokens', { key: tokens.owner, body: { label: 'old', expires_at: '2020-01-01' } });
    assert.equal(b.json.expired, true);
    assert.equal((await s.call('GET', '/api/v1/me', { key: a.json.secret })).status, 200);
    assert.equal((await s.call('GET', '/api/v1/me', { key: b.json.secret })).status, 401);
    // Someone else's tokens are the owner's business only.
    const other = await s.call('DELETE', `/api/v1/administrators/temp/tokens/${a.json.id}`, { key: tokens.admin });
    assert.equal(other.json.code, 'role_forbidden');
    const off = await s.call('PATCH', '/api/v1/administrators/temp', { key: tokens.owner, body: { active: false } });
    assert.equal(off.status, 200, off.text);
    assert.equal((await s.call('GET', '/api/v1/me', { key: a.json.secret })).status, 401);
    await s.call('PATCH', '/api/v1/administrators/temp', { key: tokens.owner, body: { active: true } });
    assert.equal((await s.call('GET', '/api/v1/me', { key: a.json.secret })).status, 200);
    // Anyone may revoke their own token.
    const own = await s.call('DELETE', `/api/v1/administrators/temp/tokens/${a.json.id}`, { key: a.json.secret });
    assert.equal(own.status, 204, own.text);
    assert.equal((await s.call('GET', '/api/v1/me', { key: a.json.secret })).status, 401);
    const missing = await s.call('DELETE', `/api/v1/administrators/temp/tokens/${a.json.id}`, { key: tokens.owner });
    assert.equal(missing.json.code, 'token_not_found');
    assert.equal((await s.call('DELETE', '/api/v1/administrators/temp', { key: tokens.owner })).status, 204);
    assert.equal((await s.call('GET', '/api/v1/administrators/temp', { key: tokens.owner })).json.code, 'admin_not_found');
  });

  test('a token used is seen: last_used_at and last_seen_at', async () => {
    await s.call('GET', '/api/v1/me', { key: tokens.auditor });
    const list = await s.call('GET', '/api/v1/administrators/audrey/tokens', { key: tokens.auditor });
    assert.ok(
      list.json.items.some((t: { last_used_at: string | null }) => t.last_used_at !== null),
      list.text,
    );
    const me = await s.call('GET', '/api/v1/administrators/audrey', { key: tokens.auditor });
    assert.notEqual(me.json.last_seen_at, null);
  });

  test('ETag and If-Match: a write with a stale If-Match is 412 precondition_failed and changes nothing', async () => {
    const made = await s.call('POST', '/api/v1/api-keys', { key: tokens.admin, body: { name: 'shared-edit', queries: ['example_film_lookup'] } });
    const etag = made.headers.get('etag');
    assert.match(etag ?? '', /^"[0-9a-f]{32}"$/);
    const read = await s.call('GET', '/api/v1/api-keys/shared-edit', { key: tokens.owner });
    assert.equal(read.headers.get('etag'), etag, 'the create and the read agree');
    // Two administrators read it; the first writes, the second's write is refused.
    const first = await s.call('PATCH', '/api/v1/api-keys/shared-edit', {
      key: tokens.owner,
      headers: { 'If-Match': etag! },
      body: { rate_limit: '10/minute' },
    });
    assert.equal(first.status, 200, first.text);
    assert.notEqual(first.headers.get('etag'), etag);
    const second = await s.call('PATCH', '/api/v1/api-keys/shared-edit', {
      key: tokens.admin,
      headers: { 'If-Match': etag! },
      body: { rate_limit: '99/minute' },
    });
    assert.equal(second.status, 412, second.text);
    assert.equal(second.json.code, 'precondition_failed');
    assert.equal((await s.call('GET', '/api/v1/api-keys/shared-edit')).json.rate_limit, '10/minute');
    const stale = await s.call('DELETE', '/api/v1/api-keys/shared-edit', { headers: { 'If-Match': etag! } });
    assert.equal(stale.status, 412);
    // Using a key (its last_used_at) does not change its ETag; a fresh one is accepted; '*' always.
    const now = await s.call('GET', '/api/v1/api-keys/shared-edit');
    const ok = await s.call('PATCH', '/api/v1/api-keys/shared-edit', { headers: { 'If-Match': now.headers.get('etag')! }, body: { active: false } });
    assert.equal(ok.status, 200);
    assert.equal((await s.call('DELETE', '/api/v1/api-keys/shared-edit', { headers: { 'If-Match': '*' } })).status, 204);

    // Connections, queries and administrators carry one too.
    const conn = await s.call('GET', '/api/v1/connections/examples');
    const connTag = conn.headers.get('etag')!;
    assert.ok(connTag);
    const q = await s.call('GET', '/api/v1/queries/example_film_lookup');
    const qTag = q.headers.get('etag')!;
    assert.ok(qTag);
    const ttl = await s.call('PATCH', '/api/v1/queries/example_film_lookup/versions/1', { headers: { 'If-Match': qTag }, body: { cache_ttl: 5 } });
    assert.equal(ttl.status, 200, ttl.text);
    const staleQ = await s.call('POST', '/api/v1/queries/example_film_lookup/unpublish', { headers: { 'If-Match': qTag } });
    assert.equal(staleQ.json.code, 'precondition_failed');
    const adm = await s.call('GET', '/api/v1/administrators/dora', { key: tokens.owner });
    const admTag = adm.headers.get('etag')!;
    await s.call('PATCH', '/api/v1/administrators/dora', { key: tokens.owner, headers: { 'If-Match': admTag }, body: { email: 'dora@new.example' } });
    const staleAdm = await s.call('PATCH', '/api/v1/administrators/dora', { key: tokens.owner, headers: { 'If-Match': admTag }, body: { role: 'auditor' } });
    assert.equal(staleAdm.status, 412);
    assert.equal((await s.call('GET', '/api/v1/administrators/dora')).json.role, 'developer');
  });
});

describe('break-glass and open mode', () => {
  test('the shared key works before and after a named owner exists; once one does, its use is audited at most every 10 minutes', async () => {
    const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
    try {
      const count = async () => (await s.call('GET', '/api/v1/audit?action=break_glass_used')).json.total as number;
      await s.call('GET', '/api/v1/connections');
      assert.equal(await count(), 0, 'no named owner yet: the shared key is the way in, not break-glass');
      await s.call('POST', '/api/v1/administrators', { body: { name: 'dev1', role: 'developer' } });
      await s.call('GET', '/api/v1/connections');
      assert.equal(await count(), 0, 'a developer is not an owner');
      await s.call('POST', '/api/v1/administrators', { body: { name: 'boss', role: 'owner' } });
      const used = await s.call('GET', '/api/v1/connections');
      assert.equal(used.status, 200, 'it still works');
      assert.equal(await count(), 1);
      for (let i = 0; i < 3; i++) await s.call('GET', '/api/v1/settings');
      assert.equal(await count(), 1, 'at most one entry every 10 minutes per process');
      const entry = (await s.call('GET', '/api/v1/audit?action=break_glass_used')).json.items[0];
      assert.equal(entry.actor, 'admin');
      assert.equal(entry.via, 'break-glass');
    } finally {
      await s.stop();
    }
  });

  test('open mode: every caller is an owner named null; creating an administrator ends it', async () => {
    const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_API_KEY: '' });
    try {
      const me = await s.call('GET', '/api/v1/me', { key: null });
      assert.equal(me.status, 200, me.text);
      assert.deepEqual([me.json.name, me.json.role, me.json.via], [null, 'owner', 'open']);
      const made = await s.call('POST', '/api/v1/administrators', { key: null, body: { name: 'first', role: 'owner' } });
      assert.equal(made.status, 201);
      assert.equal((await s.call('GET', '/api/v1/me', { key: null })).status, 401, 'authentication is required while any administrator exists');
      const entry = await s.call('GET', '/api/v1/audit', { key: await storeToken(s, 'first') });
      assert.equal(entry.json.items.at(-1).via, 'open');
    } finally {
      await s.stop();
    }
  });
});
