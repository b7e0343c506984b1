// GET /api/v1/instances (contract 3.8): two server processes on one PostgreSQL store each list both,
// `this` naming the one answering; a row that stops beating (a process killed, an old release's row)
// drops out once the window (three heartbeats, made short here) has passed; a mix of versions or of
// unshared rate limits is a problem, and one SQLite server alone has none.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { packageVersion } from '../../src/contract/version.js';
import { ADMIN_KEY, eventually, request, scratchDatabase, startProcess, startTestServer } from '../helpers.js';

const HEARTBEAT = '0.3'; // seconds: the window is three of them

interface Item {
  id: string;
  host: string;
  pid: number;
  role: string;
  version: string;
  shared_limits: boolean;
  started_at: string;
  last_seen: string;
  this: boolean;
}

test('instances: two processes on one PostgreSQL store, this, the window, the problems', async () => {
  const store = await scratchDatabase('qag_instances');
  const env = {
    QUERYAPIGATE_DATABASE_URL: store.url,
    QUERYAPIGATE_REDIS_URL: 'redis://127.0.0.1:6379/7',
    QUERYAPIGATE_WORKERS: '1',
    QUERYAPIGATE_INSTANCES_HEARTBEAT: HEARTBEAT,
  };
  const a = await startTestServer(env);
  const b = startProcess({ ...env, QUERYAPIGATE_HOME: a.home, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_API_KEY: ADMIN_KEY });
  try {
    const bUrl = await b.listening;
    const onA = async () => (await a.call('GET', '/api/v1/instances')).json as { items: Item[]; problems: unknown[] };
    const onB = async () => (await request(bUrl, 'GET', '/api/v1/instances')).json as { items: Item[]; problems: unknown[] };

    const fromA = await onA();
    assert.deepEqual(fromA.items.map((i) => i.pid).sort(), [process.pid, b.child.pid].sort());
    assert.deepEqual(
      fromA.items.map((i) => [i.pid, i.this]),
      fromA.items.map((i) => [i.pid, i.pid === process.pid]),
      'A says this of itself only',
    );
    const fromB = await onB();
    assert.deepEqual(
      fromB.items.map((i) => [i.pid, i.this]),
      fromB.items.map((i) => [i.pid, i.pid === b.child.pid]),
      'B says this of itself only',
    );
    for (const i of fromA.items) {
      assert.equal(i.role, 'serve');
      assert.equal(i.version, packageVersion());
      assert.equal(i.shared_limits, true);
      assert.match(i.started_at, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
      assert.match(i.last_seen, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
      assert.match(i.id, /^[0-9a-f-]{36}$/);
    }
    assert.deepEqual(fromA.problems, [], 'one version, limits shared in Redis, a PostgreSQL store');

    // An older release on the store, its limits in its own memory: both problems, for as long as it beats.
    const old = { id: 'old-release', pid: 4242 };
    await store.sql`INSERT INTO instances (id, host, pid, role, version, shared_limits, started_at, last_seen_ms)
      VALUES (${old.id}, 'elsewhere', ${old.pid}, 'serve', '0.0.1', 0, '2026-01-01 00:00:00', ${Date.now()})`;
    const mixed = await onA();
    assert.equal(mixed.items.length, 3);
    assert.deepEqual(mixed.problems.map((p) => (p as { kind: string }).kind).sort(), ['instances_not_shared', 'instances_versions_differ']);
    assert.match(JSON.stringify(mixed.problems), /0\.0\.1 \(1\)/);
    assert.match(JSON.stringify(mixed.problems), /elsewhere:4242/);
    // The alerts say the same, read from this PostgreSQL store (and nothing else: no run, key or audit entry calls for one).
    const alerts = (await a.call('GET', '/api/v1/alerts')).json;
    assert.deepEqual(
      alerts.items.map((x: { kind: string; target: { name: string } }) => [x.kind, x.target.name]),
      [
        ['instances_not_shared', 'QUERYAPIGATE_REDIS_URL'],
        ['instances_versions_differ', 'version'],
      ],
    );
    // It never beats again: gone after the window, and its problems with it.
    const after = await eventually(onA, (r) => r.items.length === 2, 10_000);
    assert.deepEqual(after.items.map((i) => i.pid).sort(), [process.pid, b.child.pid].sort());
    assert.deepEqual(after.problems, []);

    // A process killed (no goodbye) drops out after the window too; the live one stays.
    b.child.kill('SIGKILL');
    await b.exited;
    const stillThere = await onA();
    assert.equal(stillThere.items.length, 2, 'within the window the killed process is still listed');
    const alone = await eventually(onA, (r) => r.items.length === 1, 10_000);
    assert.deepEqual(
      alone.items.map((i) => [i.pid, i.this]),
      [[process.pid, true]],
    );
    // A heartbeat a day old is removed by the next beat of any instance.
    await store.sql`INSERT INTO instances (id, host, pid, role, version, shared_limits, started_at, last_seen_ms)
      VALUES ('long-gone', 'h', 1, 'serve', '0.0.1', 0, '2026-01-01 00:00:00', ${Date.now() - 2 * 86_400_000})`;
    await eventually(
      async () => (await store.sql`SELECT id FROM instances WHERE id = 'long-gone'`).length,
      (n) => n === 0,
      10_000,
    );
    assert.equal((await store.sql`SELECT id FROM instances WHERE id = 'long-gone'`).length, 0);
  } finally {
    if (b.child.exitCode === null && b.child.signalCode === null) {
      b.child.kill('SIGTERM');
      await b.exited;
    }
    await a.stop();
    await store.drop();
  }
});

test('instances: a stopped server removes its row; one SQLite server alone has no problem, a second on the file has one', async () => {
  const a = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_INSTANCES_HEARTBEAT: HEARTBEAT });
  const b = startProcess({
    QUERYAPIGATE_HOME: a.home,
    QUERYAPIGATE_PORT: '0',
    QUERYAPIGATE_API_KEY: ADMIN_KEY,
    QUERYAPIGATE_WORKERS: '0',
    QUERYAPIGATE_INSTANCES_HEARTBEAT: HEARTBEAT,
  });
  try {
    await b.listening;
    const two = await eventually(
      async () => (await a.call('GET', '/api/v1/instances')).json,
      (r) => r.items.length === 2,
    );
    const kinds = two.problems.map((p: { kind: string }) => p.kind);
    assert.deepEqual(kinds, ['instances_not_shared', 'instances_not_shared'], JSON.stringify(two.problems));
    assert.match(two.problems[0].message, /SQLite/);
    assert.match(two.problems[1].message, /QUERYAPIGATE_REDIS_URL/);
    // A graceful stop removes the row at once (well inside the window).
    b.child.kill('SIGTERM');
    assert.equal(await b.exited, 0);
    const one = (await a.call('GET', '/api/v1/instances')).json;
    assert.equal(one.items.length, 1);
    assert.equal(one.items[0].this, true);
    assert.equal(one.items[0].shared_limits, false);
    assert.deepEqual(one.problems, []);
  } finally {
    if (b.child.exitCode === null && b.child.signalCode === null) b.child.kill('SIGKILL');
    await a.stop();
  }
});
