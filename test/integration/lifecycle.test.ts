// The server as a process: SIGTERM finishes calls in flight and flushes history before exiting 0,
// a store written by a newer release is refused at startup with a clear message, and the threads run
// under the scheduling policy the server sets.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { ADMIN_KEY, request, roleWithoutTemp, scratchDatabase, startProcess } from '../helpers.js';

const ok = (r: { status: number; text: string }) => assert.ok(r.status < 300, r.text);

/** Publishes query `name` of `sql` on connection 'pg', to the PostgreSQL database `database`. */
async function publish(url: string, database: string, name: string, sql: string): Promise<void> {
  ok(await request(url, 'POST', '/api/v1/connections', { body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database, user: 'postgres' } }));
  ok(await request(url, 'POST', '/api/v1/queries', { body: { name, description: name, connection_name: 'pg', sql, publish: true } }));
}

// The recorder runs on a thread of its own with a SQLite store; with a PostgreSQL store in an executor, or on the
// acceptor's thread inline (serve.ts): in each place the run in flight at SIGTERM is in history before the exit.
for (const where of [
  { name: 'the recorder on its own thread (SQLite store)', pgStore: false, workers: 1, place: 'a thread of its own' },
  { name: 'the recorder in an executor (PostgreSQL store)', pgStore: true, workers: 1, place: 'an executor thread' },
  { name: 'the recorder in one of two executors (PostgreSQL store)', pgStore: true, workers: 2, place: 'an executor thread' },
  { name: "the recorder on the acceptor's thread (PostgreSQL store, inline)", pgStore: true, workers: 0, place: 'the acceptor thread' },
]) {
  test(`SIGTERM: calls in flight finish, history is flushed, exit code 0; ${where.name}`, async () => {
    const home = mkdtempSync(join(tmpdir(), 'qag-life-'));
    const data = await scratchDatabase('qag_life');
    const store = where.pgStore ? await scratchDatabase('qag_life_store') : null;
    let p: ReturnType<typeof startProcess> | undefined;
    try {
      p = startProcess({
        QUERYAPIGATE_HOME: home,
        QUERYAPIGATE_PORT: '0',
        QUERYAPIGATE_API_KEY: ADMIN_KEY,
        QUERYAPIGATE_WORKERS: String(where.workers),
        QUERYAPIGATE_HISTORY_FLUSH_INTERVAL: '30',
        ...(store ? { QUERYAPIGATE_DATABASE_URL: store.url } : {}),
      });
      const url = await p.listening;
      const threads = where.workers ? `${where.workers} threads?` : 'none';
      assert.match(p.output(), new RegExp(`executors: ${threads}.*; the recorder runs in ${where.place}`));
      await publish(url, data.name, 'nap', 'SELECT pg_sleep(0.7)::text AS slept');
      const inFlight = request(url, 'GET', '/q/nap', { headers: { 'X-Request-Id': 'in-flight-1' } });
      await new Promise((r) => setTimeout(r, 200));
      p.child.kill('SIGTERM');
      const answer = await inFlight;
      assert.equal(answer.status, 200, answer.text);
      assert.equal(await p.exited, 0, p.output());
      const read = "SELECT entry_json FROM run_history WHERE query_name = 'nap'";
      let runs: Array<{ entry_json: string }>;
      if (store) runs = await store.sql.unsafe(read);
      else {
        const db = new Database(join(home, 'queryapigate.db'), { readonly: true });
        runs = db.prepare(read).all() as Array<{ entry_json: string }>;
        db.close();
      }
      assert.equal(runs.length, 1, 'the run in flight was recorded before exit');
      assert.equal(JSON.parse(runs[0].entry_json).request_id, 'in-flight-1');
    } finally {
      p?.child.kill('SIGKILL'); // (already gone unless an assertion failed)
      await data.drop();
      await store?.drop();
      rmSync(home, { recursive: true, force: true });
    }
  });
}

test("V8 flags on node's command line: the server starts with executor threads and answers calls", async () => {
  const home = mkdtempSync(join(tmpdir(), 'qag-life-'));
  try {
    // A Worker refuses V8 flags in its execArgv; the executors get Node's own flags only.
    const p = startProcess(
      { QUERYAPIGATE_HOME: home, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_API_KEY: ADMIN_KEY, QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_LOAD_EXAMPLES: '1' },
      undefined,
      ['--max-old-space-size=512', '--no-warnings'],
    );
    const url = await p.listening;
    try {
      const r = await request(url, 'POST', '/execute_sql', { key: ADMIN_KEY, body: { sql: 'SELECT 1 AS one', connection_name: 'examples' } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json, [{ one: 1 }]);
    } finally {
      p.child.kill('SIGTERM');
      assert.equal(await p.exited, 0);
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

/** The scheduling policy of each thread of process `pid` (0 SCHED_OTHER, 3 SCHED_BATCH): /proc/<pid>/task/<tid>/stat's 41st field. */
function threadPolicies(pid: number | 'self'): number[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[38]); // fields from the 3rd on
  });
}

test('every thread of the server runs under SCHED_BATCH, the executors and the recorder too; with QUERYAPIGATE_BATCH_SCHEDULING=0 none is changed', async () => {
  const own = threadPolicies('self')[0];
  for (const batch of [true, false]) {
    const home = mkdtempSync(join(tmpdir(), 'qag-sched-'));
    try {
      const p = startProcess({
        QUERYAPIGATE_HOME: home,
        QUERYAPIGATE_PORT: '0',
        QUERYAPIGATE_API_KEY: ADMIN_KEY,
        QUERYAPIGATE_WORKERS: '2',
        QUERYAPIGATE_LOAD_EXAMPLES: '1',
        QUERYAPIGATE_BATCH_SCHEDULING: batch ? '1' : '0',
      });
      const url = await p.listening;
      try {
        // A call on each executor's way, so the threads started on demand exist too.
        for (let i = 0; i < 4; i++) {
          const r = await request(url, 'POST', '/execute_sql', { key: ADMIN_KEY, body: { sql: 'SELECT 1 AS one', connection_name: 'examples' } });
          assert.equal(r.status, 200, r.text);
        }
        const policies = threadPolicies(p.child.pid!);
        assert.ok(policies.length >= 5, `threads: ${policies.length}`); // the acceptor, 2 executors, the recorder, V8's helpers
        assert.deepEqual(new Set(policies), new Set([batch ? 3 : own]));
        assert.equal(/scheduling: every thread under SCHED_BATCH/.test(p.output()), batch);
      } finally {
        p.child.kill('SIGTERM');
        assert.equal(await p.exited, 0);
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }
});

test('a store with a newer schema refuses to start, saying why', async () => {
  const home = mkdtempSync(join(tmpdir(), 'qag-newer-'));
  try {
    const db = new Database(join(home, 'queryapigate.db'));
    db.exec('CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (999);');
    db.close();
    const p = startProcess({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_WORKERS: '0' });
    assert.equal(await p.exited, 1);
    assert.match(p.output(), /schema version 999, newer than this release/);
    assert.doesNotMatch(p.output(), /at .*\.js:\d+/, 'no stack trace');
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test('a PostgreSQL store whose role may not create temporary tables refuses to start, naming the grant', async () => {
  const store = await roleWithoutTemp('qag_notemp');
  try {
    const p = startProcess({ QUERYAPIGATE_DATABASE_URL: store.url, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_WORKERS: '0' });
    const started = await p.listening.then(
      () => true,
      () => false,
    );
    if (started) p.child.kill('SIGTERM');
    assert.equal(started, false, 'it must not start');
    assert.equal(await p.exited, 1);
    assert.match(p.output(), new RegExp(`GRANT TEMPORARY ON DATABASE ${store.database} TO ${store.role}`));
    // Granted, it starts.
    await store.grant();
    const ok = startProcess({ QUERYAPIGATE_DATABASE_URL: store.url, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_WORKERS: '0' });
    await ok.listening;
    ok.child.kill('SIGTERM');
    assert.equal(await ok.exited, 0);
  } finally {
    await store.drop();
  }
});

test('a bad setting stops startup naming the variable', async () => {
  const p = startProcess({ QUERYAPIGATE_PORT: 'eighty', QUERYAPIGATE_WORKERS: '0' });
  assert.equal(await p.exited, 1);
  assert.match(p.output(), /QUERYAPIGATE_PORT="eighty": must be a whole number/);
});

test('a store that cannot be opened stops startup with one line naming the setting, no stack trace', async () => {
  for (const [env, said] of [
    [
      { QUERYAPIGATE_DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/qag_no_such_database' },
      /QUERYAPIGATE_DATABASE_URL: the store could not be opened: database "qag_no_such_database" does not exist/,
    ],
    [
      { QUERYAPIGATE_DATABASE_URL: 'postgres://postgres:hunter2@127.0.0.1:1/x' },
      /QUERYAPIGATE_DATABASE_URL: the store could not be opened: connect ECONNREFUSED/,
    ],
    [{ QUERYAPIGATE_HOME: join(tmpdir(), 'qag-missing-home', 'nested') }, /QUERYAPIGATE_HOME \(.*nested\): the store could not be opened/],
  ] as const) {
    const p = startProcess({ QUERYAPIGATE_PORT: '0', QUERYAPIGATE_WORKERS: '0', ...env });
    assert.equal(await p.exited, 1, p.output());
    assert.match(p.output(), said);
    assert.doesNotMatch(p.output(), /at .*\.js:\d+/, 'no stack trace');
    assert.doesNotMatch(p.output(), /hunter2/, 'no password');
  }
});

test('a port already taken stops the second server naming the port, and the first keeps it', async () => {
  const home = mkdtempSync(join(tmpdir(), 'qag-port-'));
  const otherHome = mkdtempSync(join(tmpdir(), 'qag-port-'));
  const first = startProcess({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_WORKERS: '0' });
  try {
    const url = new URL(await first.listening);
    const second = startProcess({ QUERYAPIGATE_HOME: otherHome, QUERYAPIGATE_PORT: url.port, QUERYAPIGATE_WORKERS: '0' });
    assert.equal(await second.exited, 1, second.output());
    assert.match(second.output(), new RegExp(`cannot listen on 127\\.0\\.0\\.1:${url.port}: the port is taken`));
    assert.doesNotMatch(second.output(), /at .*\.js:\d+/, 'no stack trace');
    const health = await request(url.origin, 'GET', '/health', { key: null });
    assert.equal(health.status, 200);
  } finally {
    first.child.kill('SIGTERM');
    await first.exited;
    rmSync(home, { recursive: true, force: true });
    rmSync(otherHome, { recursive: true, force: true });
  }
});

test('an unreachable Redis does not hold the start: the server says so and serves', async () => {
  const home = mkdtempSync(join(tmpdir(), 'qag-redis-'));
  const p = startProcess({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_REDIS_URL: 'redis://127.0.0.1:1' });
  try {
    const started = performance.now();
    const url = await p.listening;
    assert.ok(performance.now() - started < 10_000, 'listening within a bounded wait');
    assert.match(p.output(), /Redis does not answer: rate limits are counted in this instance/);
    assert.equal((await request(url, 'GET', '/health', { key: null })).status, 200);
  } finally {
    p.child.kill('SIGTERM');
    await p.exited;
    rmSync(home, { recursive: true, force: true });
  }
});

test('the executor holding the recorder fails: the recorder starts again in its replacement, later runs are recorded, SIGTERM exits 0', async () => {
  const home = mkdtempSync(join(tmpdir(), 'qag-life-'));
  const data = await scratchDatabase('qag_life');
  const store = await scratchDatabase('qag_life_store');
  const failNow = join(home, 'fail-now');
  const p = startProcess(
    {
      QUERYAPIGATE_HOME: home,
      QUERYAPIGATE_PORT: '0',
      QUERYAPIGATE_API_KEY: ADMIN_KEY,
      QUERYAPIGATE_WORKERS: '1',
      QUERYAPIGATE_DATABASE_URL: store.url,
      QAG_TEST_FAIL_EXECUTOR: failNow,
    },
    undefined,
    ['--import', fileURLToPath(new URL('../failExecutor.js', import.meta.url))],
  );
  try {
    const url = await p.listening;
    assert.match(p.output(), /the recorder runs in an executor thread/);
    await publish(url, data.name, 'one', 'SELECT 1 AS one');
    const history = async () => {
      const r = await request(url, 'GET', '/api/v1/queries/one/history');
      ok(r);
      return (JSON.parse(r.text) as { items: Array<{ request_id: string }> }).items.map((run) => run.request_id).sort();
    };
    ok(await request(url, 'GET', '/q/one', { headers: { 'X-Request-Id': 'before-1' } }));
    assert.deepEqual(await history(), ['before-1']);

    writeFileSync(failNow, '');
    const until = Date.now() + 10_000;
    while (!/the recorder starts again/.test(p.output()) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.match(p.output(), /the executor holding the recorder failed; the runs it held are lost; the recorder starts again/);
    assert.ok(!existsSync(failNow), 'the executor read the file and failed');

    // Its replacement serves calls, and the recorder, started again in it, records them.
    let after: { status: number; text: string } = { status: 0, text: '' };
    while (Date.now() < until && after.status !== 200) after = await request(url, 'GET', '/q/one', { headers: { 'X-Request-Id': 'after-1' } });
    assert.equal(after.status, 200, after.text);
    assert.deepEqual(await history(), ['after-1', 'before-1']);

    ok(await request(url, 'GET', '/q/one', { headers: { 'X-Request-Id': 'after-2' } }));
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0, p.output());
    const rows: Array<{ id: string }> = await store.sql.unsafe(
      "SELECT entry_json::json->>'request_id' AS id FROM run_history WHERE query_name = 'one' ORDER BY 1",
    );
    assert.deepEqual(
      rows.map((r) => r.id),
      ['after-1', 'after-2', 'before-1'],
    );
  } finally {
    p.child.kill('SIGKILL');
    await data.drop();
    await store.drop();
    rmSync(home, { recursive: true, force: true });
  }
});
