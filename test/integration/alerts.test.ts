// GET /api/v1/alerts (contract 3.8): each kind raised by the condition that should raise it, and not
// by one just short of it: open_server; connection_failing; query_errors (rate and run count),
// query_timeouts, query_slow; key_expired, key_expiring, key_unused; key_rate_limited (10 refusals
// an hour); history_dropped; instances_not_shared and instances_versions_differ; break_glass_used.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { localTimestamp } from '../../src/store/store.js';
import { ADMIN_KEY, eventually, PG_ADMIN_URL, request, startTestServer, storeToken, type TestServer } from '../helpers.js';

interface Alert {
  id: string;
  severity: string;
  kind: string;
  title: string;
  detail: string;
  since: string;
  target: { type: string; name: string };
}

const TIME = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/;
const day = (offset: number) => localTimestamp(new Date(Date.now() + offset * 86_400_000)).slice(0, 10);

describe('alerts', () => {
  let s: TestServer;
  const alerts = async (): Promise<Alert[]> => {
    const r = await s.call('GET', '/api/v1/alerts');
    assert.equal(r.status, 200, r.text);
    assert.match(r.json.checked_at, TIME);
    for (const a of r.json.items as Alert[]) {
      assert.equal(a.id, `${a.kind}:${a.target.type}:${a.target.name}`);
      assert.match(a.since, TIME, JSON.stringify(a));
      assert.ok(a.title && a.detail);
    }
    return r.json.items;
  };
  const of = async (kind: string) => (await alerts()).filter((a) => a.kind === kind);
  const names = async (kind: string) => (await of(kind)).map((a) => a.target.name).sort();
  const post = async (path: string, body: unknown) => {
    const r = await s.call('POST', path, { body });
    assert.ok(r.status === 201 || r.status === 200, `${path}: ${r.text}`);
    return r.json;
  };
  const call = (path: string, key?: string) => s.call('GET', path, { key });

  before(async () => {
    s = await startTestServer({
      QUERYAPIGATE_WORKERS: '0',
      QUERYAPIGATE_ALERT_ERROR_RATE: '50',
      QUERYAPIGATE_SLOW_QUERY_THRESHOLD: '0.05',
      QUERYAPIGATE_INSTANCES_HEARTBEAT: '0.3',
    });
    const pg = new URL(PG_ADMIN_URL);
    await post('/api/v1/connections', { name: 'pg', db: 'postgres', host: pg.hostname, port: Number(pg.port || 5432), database: 'postgres', user: 'postgres' });
    await post('/api/v1/connections', { name: 'down', db: 'postgres', host: '127.0.0.1', port: 1, database: 'x', user: 'postgres' });
    const query = (name: string, sql: string, parameters: unknown = {}, connection_name = 'pg') =>
      post('/api/v1/queries', { name, sql, parameters, connection_name, description: name, publish: true });
    for (const name of ['flaky', 'mostly_ok', 'few']) await query(name, 'SELECT 1 / :d AS x', { d: 'int' });
    await query('nap', 'SELECT pg_sleep(:s)::text AS slept', { s: 'float' });
    await query('quick', 'SELECT 1 AS one');
    await query('on_down', 'SELECT 1 AS one', {}, 'down');
    await query('on_pg', 'SELECT 1 AS one');
  });
  after(() => s.stop());

  test('a quiet server with an admin key has no alert', async () => {
    assert.deepEqual(await alerts(), []);
  });

  test('query_errors: at least the rate of the last runs, from 10 runs on', async () => {
    const runs = async (name: string, failing: number, ok: number) => {
      for (let i = 0; i < failing; i++) assert.equal((await call(`/q/${name}?d=0`)).json.code, 'query_failed');
      for (let i = 0; i < ok; i++) assert.equal((await call(`/q/${name}?d=1`)).status, 200);
    };
    await runs('flaky', 6, 4); // 60% of 10: over 50%
    await runs('mostly_ok', 4, 6); // 40%: under
    await runs('few', 9, 0); // 100%, but 9 runs only
    const [a] = await of('query_errors');
    assert.deepEqual(await names('query_errors'), ['flaky']);
    assert.equal(a.severity, 'warning');
    assert.deepEqual(a.target, { type: 'query', name: 'flaky' });
    assert.match(a.detail, /6 of its last 10 runs failed \(60%\): query_failed/);
    await runs('few', 1, 0); // the tenth run: now judged
    assert.deepEqual(await names('query_errors'), ['few', 'flaky']);
  });

  test('query_timeouts and query_slow', async () => {
    assert.equal((await call('/q/nap?s=2&timeout=0.2')).json.code, 'query_timeout');
    const [t] = await of('query_timeouts');
    assert.deepEqual(t.target, { type: 'query', name: 'nap' });
    assert.match(t.detail, /1 of its last 1 runs ran out of time/);
    // Slow: the median of 10 successful runs at or over the threshold (50 ms); 'quick' is not.
    for (let i = 0; i < 10; i++) assert.equal((await call('/q/nap?s=0.07')).status, 200);
    for (let i = 0; i < 10; i++) assert.equal((await call('/q/quick')).status, 200);
    assert.deepEqual(await names('query_slow'), ['nap']);
    assert.match((await of('query_slow'))[0].detail, /median of its last 10 successful runs/);
  });

  test('connection_failing: the latest calls could not connect; a success ends it', async () => {
    assert.equal((await call('/q/on_down')).json.code, 'connection_failed');
    assert.equal((await call('/q/on_down')).json.code, 'connection_failed');
    assert.equal((await call('/q/on_pg')).status, 200);
    const failing = await of('connection_failing');
    assert.deepEqual(
      failing.map((a) => [a.severity, a.target.type, a.target.name]),
      [['critical', 'connection', 'down']],
    );
    assert.match(failing[0].detail, /latest 2 calls could not connect/);
    assert.equal((await alerts())[0].kind, 'connection_failing', 'critical first');
    // The connection repaired (pointed at the live server): its next call succeeds and the alert goes.
    const pg = new URL(PG_ADMIN_URL);
    const fixed = await s.call('PATCH', '/api/v1/connections/down', { body: { port: Number(pg.port || 5432), database: 'postgres' } });
    assert.equal(fixed.status, 200, fixed.text);
    assert.equal((await call('/q/on_down')).status, 200);
    assert.deepEqual(await of('connection_failing'), []);
  });

  test('keys: expired, expiring within 7 days, unused for QUERYAPIGATE_ALERT_KEY_UNUSED_DAYS', async () => {
    await post('/api/v1/api-keys', { name: 'expired', queries: ['quick'], expires_at: day(-1) });
    await post('/api/v1/api-keys', { name: 'expiring', queries: ['quick'], expires_at: day(3) });
    await post('/api/v1/api-keys', { name: 'later', queries: ['quick'], expires_at: day(30) });
    await post('/api/v1/api-keys', { name: 'idle', queries: ['quick'] });
    await post('/api/v1/api-keys', { name: 'off', queries: ['quick'], expires_at: day(-1), active: false });
    assert.deepEqual(await names('key_expired'), ['expired']);
    assert.equal((await of('key_expired'))[0].since, `${day(0)} 00:00:00`);
    assert.deepEqual(await names('key_expiring'), ['expiring']);
    assert.deepEqual(await names('key_unused'), [], 'every key was made just now');
    // 'idle' last used 100 days ago, 'later' made 89 days ago and never used (the default is 90 days).
    const db = new Database(join(s.home, 'queryapigate.db'));
    try {
      db.prepare('UPDATE api_keys SET last_used_at = ? WHERE name = ?').run(localTimestamp(new Date(Date.now() - 100 * 86_400_000)), 'idle');
      db.prepare('UPDATE api_keys SET created_at = ? WHERE name = ?').run(localTimestamp(new Date(Date.now() - 89 * 86_400_000)), 'later');
    } finally {
      db.close();
    }
    const unused = await of('key_unused');
    assert.deepEqual(
      unused.map((a) => [a.severity, a.target.name]),
      [['info', 'idle']],
    );
    assert.match(unused[0].detail, /last used 100 days ago/);
    assert.equal((await alerts()).at(-1)?.severity, 'info', 'info last');
  });

  test('key_rate_limited: 10 or more refusals of one key in the hour', async () => {
    const busy = (await post('/api/v1/api-keys', { name: 'busy', queries: ['quick'], rate_limit: '1/hour' })).secret;
    const calm = (await post('/api/v1/api-keys', { name: 'calm', queries: ['quick'], rate_limit: '1/hour' })).secret;
    const statuses = async (key: string, n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await call('/q/quick', key)).status);
      return out;
    };
    assert.deepEqual(await statuses(busy, 10), [200, ...Array(9).fill(429)]);
    assert.deepEqual(await statuses(calm, 10), [200, ...Array(9).fill(429)]);
    assert.deepEqual(await names('key_rate_limited'), [], '9 refusals each');
    assert.equal((await call('/q/quick', busy)).status, 429);
    const [a] = await of('key_rate_limited');
    assert.deepEqual(a.target, { type: 'key', name: 'busy' });
    assert.match(a.detail, /10 calls were refused/);
  });

  test('instances_not_shared and instances_versions_differ, while the other instance beats', async () => {
    const db = new Database(join(s.home, 'queryapigate.db'));
    try {
      db.prepare(
        `INSERT INTO instances (id, host, pid, role, version, shared_limits, started_at, last_seen_ms) VALUES ('other', 'elsewhere', 7, 'serve', '0.0.1', 0, ?, ?)`,
      ).run(localTimestamp(), Date.now());
    } finally {
      db.close();
    }
    const mixed = (await alerts()).filter((a) => a.kind.startsWith('instances_'));
    assert.deepEqual(
      mixed.map((a) => [a.kind, a.target.name]),
      [
        ['instances_not_shared', 'QUERYAPIGATE_DATABASE_URL'],
        ['instances_not_shared', 'QUERYAPIGATE_REDIS_URL'],
        ['instances_versions_differ', 'version'],
      ],
    );
    // It stops beating: once out of the window (three 0.3 s beats), the alerts go.
    await eventually(alerts, (items) => !items.some((a) => a.kind.startsWith('instances_')), 5000);
    assert.deepEqual(
      (await alerts()).filter((a) => a.kind.startsWith('instances_')),
      [],
    );
  });

  test('break_glass_used: the shared key used once a named owner exists', async () => {
    assert.deepEqual(await of('break_glass_used'), []);
    await post('/api/v1/administrators', { name: 'olga', role: 'owner' });
    const [a] = await of('break_glass_used'); // this very request used the shared key
    assert.equal(a.severity, 'warning');
    assert.deepEqual(a.target, { type: 'settings', name: 'QUERYAPIGATE_API_KEY' });
    assert.match(a.detail, /^1 audit entry/);
  });
});

test('open_server: raised while anyone may manage the server, gone once a key exists', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_API_KEY: '' });
  try {
    const open = await request(s.url, 'GET', '/api/v1/alerts', { key: null });
    assert.equal(open.status, 200, open.text);
    assert.deepEqual(
      open.json.items.map((a: Alert) => [a.kind, a.severity, a.target.type, a.target.name]),
      [['open_server', 'critical', 'settings', 'QUERYAPIGATE_API_KEY']],
    );
    // The first administrator closes the server; their token reads no open_server any more.
    const owner = await request(s.url, 'POST', '/api/v1/administrators', { key: null, body: { name: 'first', role: 'owner' } });
    assert.equal(owner.status, 201, owner.text);
    assert.equal((await request(s.url, 'GET', '/api/v1/alerts', { key: null })).status, 401);
    const after = await request(s.url, 'GET', '/api/v1/alerts', { key: await storeToken(s, 'first') });
    assert.equal(after.status, 200, after.text);
    assert.deepEqual(after.json.items, []);
  } finally {
    await s.stop();
  }
});

test('history_dropped: runs the recorder could not hold', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_HISTORY_MAX_PENDING: '1', QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  try {
    assert.deepEqual((await s.call('GET', '/api/v1/alerts')).json.items, []);
    // Many calls ending in one turn of the executor: all but one run overflow its batch of 1.
    await Promise.all(Array.from({ length: 40 }, (_, i) => s.call('GET', `/q/example_film_lookup?film_id=${(i % 20) + 1}`)));
    const dropped = await eventually(
      async () => (await s.call('GET', '/api/v1/alerts')).json.items as Alert[],
      (items) => items.some((a) => a.kind === 'history_dropped'),
    );
    const metrics = await request(s.url, 'GET', '/metrics', { key: ADMIN_KEY });
    const counted = Number(/queryapigate_history_runs_total\{outcome="dropped"\} (\d+)/.exec(metrics.text)?.[1] ?? 0);
    assert.ok(counted > 0, 'the metric counts them too');
    const a = dropped.find((x) => x.kind === 'history_dropped')!;
    assert.deepEqual(a.target, { type: 'settings', name: 'QUERYAPIGATE_HISTORY_MAX_PENDING' });
    const said = Number(/^(\d+) runs were not recorded/.exec(a.detail)?.[1]);
    assert.ok(said > 0 && said <= counted, `${a.detail} (the metric: ${counted})`);
  } finally {
    await s.stop();
  }
});
