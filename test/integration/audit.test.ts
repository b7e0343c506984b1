// The audit log (contract 3.6 and past it): an entry for every change route with actor, via, action,
// target and a diff (the whole object for a create or a delete), no secret anywhere in it; filters and
// paging; the hash chain, found broken by `queryapigate audit verify` after an edit straight in the
// store, kept verifiable through retention, and unforked by concurrent writers on a PostgreSQL store.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { GENESIS } from '../../src/store/audit.js';
import { openStore, STORE_FILE } from '../../src/store/store.js';
import { cli } from '../cli.js';
import { ADMIN_KEY, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

describe('audit log', () => {
  let s: TestServer;
  /** Every secret the test gives or is given, and their hashes: none may appear in any entry. */
  const secrets: string[] = ['pw-Secret-123', 'pw-Secret-456', ADMIN_KEY];
  let owner = '';
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  });
  after(() => s.stop());

  const entries = async (qs = '') => (await s.call('GET', `/api/v1/audit?limit=1000${qs}`, { key: owner || ADMIN_KEY })).json;

  test('start-up imports are audited as via startup', async () => {
    const { items } = await entries('&action=load_examples');
    assert.equal(items.length, 1);
    assert.equal(items[0].via, 'startup');
    assert.equal(items[0].changes.source, 'import');
    assert.ok(items[0].changes.keys_created.length >= 1);
  });

  test('every change route leaves an entry with actor, via, action, target and changes; no secret in any', async () => {
    const call = async (method: string, path: string, body?: unknown, key?: string) => {
      const r = await s.call(method, path, { body, key: key ?? owner });
      assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
      return r.json;
    };
    // Administrators first (with the shared key, before any owner exists), then as the owner.
    await call('POST', '/api/v1/administrators', { name: 'olivia', role: 'owner', email: 'o@corp.example' }, ADMIN_KEY);
    const t = await call('POST', '/api/v1/administrators/olivia/tokens', { label: 'laptop' }, ADMIN_KEY);
    owner = t.secret;
    secrets.push(t.secret, sha(t.secret));
    await call('POST', '/api/v1/administrators', { name: 'dev', role: 'developer' });
    await call('PATCH', '/api/v1/administrators/dev', { role: 'auditor', email: 'd@corp.example' });
    const devToken = await call('POST', '/api/v1/administrators/dev/tokens', { label: 'ci', expires_at: '2030-01-01' });
    secrets.push(devToken.secret, sha(devToken.secret));
    await call('DELETE', `/api/v1/administrators/dev/tokens/${devToken.id}`);
    await call('DELETE', '/api/v1/administrators/dev');

    await call('POST', '/api/v1/connections', { name: 'wh', db: 'postgres', host: 'db.internal', port: 5432, user: 'app', password: 'pw-Secret-123' });
    await call('PATCH', '/api/v1/connections/wh', { password: 'pw-Secret-456', port: 6432 });
    await call('DELETE', '/api/v1/connections/wh', { reason: 'moved' });

    await call('POST', '/api/v1/queries', { name: 'films', description: 'Films', connection_name: 'examples', sql: 'SELECT film_id FROM film LIMIT 3' });
    await call('POST', '/api/v1/queries/films/versions', { description: 'Films 2', sql: 'SELECT film_id, title FROM film LIMIT 3' });
    await call('PATCH', '/api/v1/queries/films/versions/2', { cache_ttl: 30 });
    await call('POST', '/api/v1/queries/films/publish', { version: 2 });
    await call('POST', '/api/v1/queries/films/unpublish');

    const key = await call('POST', '/api/v1/api-keys', { name: 'partner', queries: ['films'], connections: [] });
    secrets.push(key.secret, sha(key.secret));
    await call('PATCH', '/api/v1/api-keys/partner', { rate_limit: '10/minute' });
    const rotated = await call('POST', '/api/v1/api-keys/partner/rotate', {});
    secrets.push(rotated.secret, sha(rotated.secret));
    await call('DELETE', '/api/v1/api-keys/partner');
    await call('DELETE', '/api/v1/queries/films');

    const all = await entries();
    const text = JSON.stringify(all);
    for (const secret of secrets) assert.ok(!text.includes(secret), `the audit log holds a secret (${secret.slice(0, 10)}...)`);
    assert.doesNotMatch(text, /qagadm_|sk_[A-Za-z0-9_-]{20}/);

    const one = (action: string, target?: string) => {
      const found = all.items.find((e: { action: string; target: string }) => e.action === action && (target === undefined || e.target === target));
      assert.ok(found, `an entry for ${action}${target ? ` ${target}` : ''}`);
      for (const f of ['timestamp', 'actor', 'via', 'action', 'target', 'changes']) assert.ok(f in found, `${action} has ${f}`);
      return found;
    };
    const created = one('create_connection', 'wh');
    assert.equal(created.actor, 'olivia');
    assert.equal(created.via, 'token');
    assert.equal(created.changes.host, 'db.internal', 'a create records the whole object');
    assert.equal(created.changes.password, '********');
    const updated = one('update_connection', 'wh');
    assert.deepEqual(updated.changes.port, { from: 5432, to: 6432 });
    assert.equal(updated.changes.password, 'changed');
    assert.equal(updated.changes.host, undefined, 'an update records only what changed');
    assert.equal(one('delete_connection', 'wh').changes.user, 'app', 'a delete records the whole object');

    const saves = all.items.filter((e: { action: string }) => e.action === 'save_query');
    assert.ok(saves.at(-1).changes.version_1, 'the create snapshot');
    assert.equal(saves.at(-1).changes.name, 'films');
    const v2 = all.items.find((e: { action: string; changes: Record<string, unknown> }) => e.action === 'save_query' && e.changes.version_2);
    assert.equal((v2.changes.version_2 as { from: unknown }).from, null);
    assert.deepEqual(one('publish_query', 'films').changes.published_version, { from: null, to: 2 });
    assert.deepEqual(one('unpublish_query', 'films').changes.published_version, { from: 2, to: null });
    assert.ok(one('update_query', 'films').changes.version_2);
    assert.ok(one('delete_query', 'films').changes.version_2);

    assert.equal(one('create_key', 'partner').changes.secret, '********');
    assert.deepEqual(one('update_key', 'partner').changes.rate_limit, { from: null, to: '10/minute' });
    assert.equal(one('rotate_key', 'partner').changes.secret, 'changed');
    one('delete_key', 'partner');

    const admin = one('create_admin', 'olivia');
    assert.equal(admin.actor, 'admin');
    assert.equal(admin.via, 'break-glass');
    assert.deepEqual(one('update_admin', 'dev').changes.role, { from: 'developer', to: 'auditor' });
    const issued = one('issue_admin_token', `olivia/${t.id}`);
    assert.equal(issued.changes.secret, '********');
    assert.equal(issued.changes.label, 'laptop');
    one('revoke_admin_token', `dev/${devToken.id}`);
    one('delete_admin', 'dev');
    assert.ok(all.actions.includes('create_admin'));
    assert.equal(all.retention.limit, 500);
    assert.equal(all.total, all.items.length);
  });

  test('filters and paging: action, actor, target, q; newest first; a cursor that never repeats', async () => {
    const byActor = await entries('&actor=olivia');
    assert.ok(byActor.items.length > 5);
    assert.ok(byActor.items.every((e: { actor: string }) => e.actor === 'olivia'));
    const byTarget = await entries('&target=wh');
    assert.deepEqual(
      byTarget.items.map((e: { action: string }) => e.action),
      ['delete_connection', 'update_connection', 'create_connection'],
    );
    const text = await entries('&q=db.internal');
    assert.ok(text.items.length >= 2 && text.items.every((e: unknown) => JSON.stringify(e).includes('db.internal')));
    const seen: number[] = [];
    let cursor = '';
    for (;;) {
      const page = (await s.call('GET', `/api/v1/audit?limit=4${cursor ? `&cursor=${cursor}` : ''}`, { key: owner })).json;
      seen.push(...page.items.map((e: { id: number }) => e.id));
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    assert.deepEqual(
      seen,
      [...seen].sort((a, b) => b - a),
    );
    assert.equal(new Set(seen).size, seen.length);
    assert.equal(seen.length, (await entries()).total);
    const bad = await s.call('GET', '/api/v1/audit?limit=0', { key: owner });
    assert.equal(bad.json.code, 'invalid_filter');
  });

  test('`queryapigate audit verify` holds, then names the entry edited straight in the store (exit 1)', async () => {
    const env = { QUERYAPIGATE_HOME: s.home };
    // A change made on the command line is audited as actor and via 'cli', in the same chain.
    const made = await cli(['keys', 'create', 'cli-made', '--queries', 'example_film_lookup', '--connections', ''], { home: s.home, env });
    assert.equal(made.code, 0, made.stderr);
    const [byCli] = (await entries('&actor=cli')).items;
    assert.deepEqual([byCli.action, byCli.target, byCli.via], ['create_key', 'cli-made', 'cli']);
    assert.ok(!JSON.stringify(byCli).includes(made.stdout.trim()), 'the secret the command printed is not in the entry');
    const good = await cli(['audit', 'verify'], { home: s.home, env });
    assert.equal(good.code, 0, good.stderr);
    assert.match(good.stdout, /^ok: \d+ entries hold/);
    const db = new Database(join(s.home, STORE_FILE));
    try {
      const [victim] = db.prepare("SELECT id FROM audit_log WHERE action = 'update_connection'").all() as Array<{ id: number }>;
      db.prepare("UPDATE audit_log SET actor = 'mallory' WHERE id = ?").run(victim.id);
      const bad = await cli(['audit', 'verify'], { home: s.home, env });
      assert.equal(bad.code, 1, bad.stdout);
      assert.match(bad.stderr, new RegExp(`broken at entry ${victim.id}:.*edited`));
      db.prepare("UPDATE audit_log SET actor = 'olivia' WHERE id = ?").run(victim.id);
      assert.equal((await cli(['audit', 'verify'], { home: s.home, env })).code, 0, 'restored, it holds again');
      // A deleted entry in the middle is found too.
      db.prepare('DELETE FROM audit_log WHERE id = ?').run(victim.id);
      const gap = await cli(['audit', 'verify', '--json'], { home: s.home, env });
      assert.equal(gap.code, 1);
      assert.equal(JSON.parse(gap.stdout).broken_at, victim.id + 1);
    } finally {
      db.close();
    }
  });
});

describe('audit chain in the store', () => {
  test('SQLite: retention keeps the newest N and the last pruned hash as the anchor; verify still holds', async () => {
    const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_AUDIT_LOG_LIMIT: '5' });
    try {
      for (let i = 0; i < 12; i++) {
        const r = await s.call('POST', '/api/v1/connections', { body: { name: `c${i}`, db: 'postgres', host: 'h' } });
        assert.equal(r.status, 201);
      }
      const page = (await s.call('GET', '/api/v1/audit')).json;
      assert.equal(page.total, 5);
      assert.deepEqual(
        page.items.map((e: { id: number }) => e.id),
        [12, 11, 10, 9, 8],
      );
      const store = await openStore({ home: s.home, databaseUrl: null });
      try {
        const result = await store.audit.verify();
        assert.equal(result.ok, true, JSON.stringify(result));
        assert.equal(result.ok && result.anchor_id, 7);
        assert.equal(result.entries, 5);
        // The anchor itself edited: the first kept entry no longer follows from it.
        await store.db.run("UPDATE audit_chain SET anchor_hash = 'ff'");
        const broken = await store.audit.verify();
        assert.equal(broken.ok, false);
        assert.equal(!broken.ok && broken.broken_at, 8);
      } finally {
        await store.close();
      }
    } finally {
      await s.stop();
    }
  });

  test('PostgreSQL store: a server audits, tags and checks If-Match as on SQLite; administrators and tokens work', async () => {
    const scratch = await scratchDatabase('qag_audit_srv');
    const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_DATABASE_URL: scratch.url });
    try {
      assert.equal((await s.call('POST', '/api/v1/administrators', { body: { name: 'pat', role: 'owner' } })).status, 201);
      const token = (await s.call('POST', '/api/v1/administrators/pat/tokens', { body: {} })).json.secret;
      const me = await s.call('GET', '/api/v1/me', { key: token });
      assert.equal(me.json.name, 'pat', me.text);
      const made = await s.call('POST', '/api/v1/connections', { key: token, body: { name: 'pgc', db: 'postgres', password: 'pg-Secret-789' } });
      const tag = made.headers.get('etag')!;
      assert.equal((await s.call('PATCH', '/api/v1/connections/pgc', { key: token, headers: { 'If-Match': tag }, body: { port: 1 } })).status, 200);
      assert.equal((await s.call('PATCH', '/api/v1/connections/pgc', { key: token, headers: { 'If-Match': tag }, body: { port: 2 } })).status, 412);
      const log = (await s.call('GET', '/api/v1/audit', { key: token })).json;
      assert.deepEqual(
        log.items.map((e: { action: string }) => e.action),
        // The token was issued with the shared key once an owner existed: break-glass.
        ['update_connection', 'create_connection', 'issue_admin_token', 'break_glass_used', 'create_admin'],
      );
      assert.doesNotMatch(JSON.stringify(log), /pg-Secret-789|qagadm_/);
      const store = await openStore({ home: s.home, databaseUrl: scratch.url });
      try {
        const result = await store.audit.verify();
        assert.equal(result.ok && result.entries, 5, JSON.stringify(result));
      } finally {
        await store.close();
      }
    } finally {
      await s.stop();
      await scratch.drop();
    }
  });

  test('PostgreSQL: two stores appending at once (as two instances) keep one unforked chain', async () => {
    const scratch = await scratchDatabase('qag_audit');
    try {
      const where = { home: '/nonexistent', databaseUrl: scratch.url };
      const [a, b] = [await openStore(where), await openStore(where)];
      try {
        const write = (store: typeof a, who: string) =>
          Promise.all(
            Array.from({ length: 40 }, (_, i) =>
              store.audit.append(
                { actor: who, via: 'token', action: 'update_key', target: `k${i}`, changes: { n: { from: i, to: i + 1 } } },
                '2026-12-02 03:00:00',
                60,
              ),
            ),
          );
        await Promise.all([write(a, 'alice'), write(b, 'bob')]);
        const result = await a.audit.verify();
        assert.equal(result.ok, true, JSON.stringify(result));
        // 80 appended, the newest 60 kept, the chain anchored at entry 20.
        assert.equal(result.entries, 60);
        assert.equal(result.ok && result.anchor_id, 20);
        const ids = (await scratch.sql`SELECT id FROM audit_log ORDER BY id`).map((r) => Number(r.id));
        assert.deepEqual(
          ids,
          Array.from({ length: 60 }, (_, i) => i + 21),
        );
        const [anchor] = await scratch.sql`SELECT anchor_hash FROM audit_chain`;
        assert.notEqual(anchor.anchor_hash, GENESIS);
        await scratch.sql`UPDATE audit_log SET entry_json = ${JSON.stringify({ changes: { n: 'forged' } })} WHERE id = 50`;
        const broken = await b.audit.verify();
        assert.equal(!broken.ok && broken.broken_at, 50);
      } finally {
        await a.close();
        await b.close();
      }
    } finally {
      await scratch.drop();
    }
  });
});
