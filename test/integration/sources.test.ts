// Integration tests for src/sources against the real PostgreSQL on 127.0.0.1:5432 (a scratch
// database created and dropped here) and a temporary SQLite file.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import Database from 'better-sqlite3';
import { fillValues, pagedStatement, planCall } from '../../src/call/plan.js';
import { GatewayError, statusOf } from '../../src/contract/errors.js';
import { openSource, resolveEnvRefs } from '../../src/sources/index.js';
import type { ConnectionConfig, ResultSet, Source, SourceSettings } from '../../src/sources/index.js';
import { rejectsWith } from '../helpers.js';

const PG_HOST = process.env.QUERYAPIGATE_TEST_PG_HOST ?? '127.0.0.1';
const PG_PORT = Number(process.env.QUERYAPIGATE_TEST_PG_PORT ?? 5432);
const PG_USER = process.env.QUERYAPIGATE_TEST_PG_USER ?? 'postgres';
const SCRATCH = `qag_sources_${process.pid}_${Date.now().toString(36)}`;
const READ = { timeoutMs: 30_000, readOnly: true };
const WRITE = { timeoutMs: 30_000, readOnly: false };
const settings = { poolSize: 4, home: os.tmpdir(), queryTimeoutMs: 30_000 };

function pgConn(extra: Partial<ConnectionConfig> = {}): ConnectionConfig {
  return { name: 'pg', db: 'postgres', host: PG_HOST, port: PG_PORT, user: PG_USER, database: SCRATCH, ...extra };
}

describe('postgres source', () => {
  const admin = postgres({ host: PG_HOST, port: PG_PORT, username: PG_USER, database: 'postgres', onnotice: () => {} });
  const opened: Source[] = [];
  let src: Source;

  function open(conn = pgConn(), s: SourceSettings = settings): Source {
    const source = openSource(conn, s);
    opened.push(source);
    return source;
  }

  before(async () => {
    await admin.unsafe(`create database ${SCRATCH}`);
    const setup = postgres({ host: PG_HOST, port: PG_PORT, username: PG_USER, database: SCRATCH, onnotice: () => {} });
    await setup.unsafe(`
      create table kinds (
        id int primary key, big int8, small int8, n numeric, ts timestamp, tstz timestamptz, d date,
        tm time, j jsonb, b bytea, ok bool, absent text, ints int4[], bigs int8[]
      );
      insert into kinds values (
        1, 9007199254740993, 42, 12.5, '2024-01-02 03:04:05.123', '2024-01-02 03:04:05+02', '2024-02-29',
        '13:14:15', '{"a": [1, "x"], "b": null}', '\\x00ff10', true, null, '{1,2,3}', '{9007199254740993,7}'
      );
      create table items (id int primary key, parent int, name text, qty int);
      insert into items select g, g % 10, 'item ' || g, g from generate_series(1, 500) g;
    `);
    await setup.end();
    src = open();
  });

  after(async () => {
    await Promise.all(opened.map((s) => s.close()));
    await admin.unsafe(`drop database if exists ${SCRATCH} with (force)`);
    await admin.end();
  });

  test('value types', async () => {
    const r = await src.run('select big, small, n, ts, tstz, d, tm, j, b, ok, absent, ints, bigs from kinds where id = $1', [1], READ);
    assert.deepEqual(r.columns, ['big', 'small', 'n', 'ts', 'tstz', 'd', 'tm', 'j', 'b', 'ok', 'absent', 'ints', 'bigs']);
    assert.equal(r.rowCount, 1);
    const [big, small, n, ts, tstz, d, tm, j, b, ok, absent, ints, bigs] = r.rows[0]!;
    assert.equal(big, '9007199254740993'); // beyond 2^53: exact, as a string
    assert.equal(small, 42); // int8 within range: a number
    assert.equal(n, 12.5);
    assert.ok(ts instanceof Date);
    assert.equal(ts.toISOString(), '2024-01-02T03:04:05.123Z'); // timestamp: wall clock read as UTC
    assert.ok(tstz instanceof Date);
    assert.equal(tstz.toISOString(), '2024-01-02T01:04:05.000Z');
    assert.equal(d, '2024-02-29');
    assert.equal(tm, '13:14:15');
    assert.deepEqual(j, { a: [1, 'x'], b: null });
    assert.ok(Buffer.isBuffer(b));
    assert.deepEqual([...b], [0, 255, 16]);
    assert.equal(ok, true);
    assert.equal(absent, null);
    assert.deepEqual(ints, [1, 2, 3]);
    assert.deepEqual(bigs, ['9007199254740993', 7]);
  });

  test('arrays of built-in types are parsed (without fetch_types)', async () => {
    const r = await src.run(
      `select array['a b', 'c"d', null, 'x\\y', '', 'NULL']::text[],
              '{{1,2},{3,4}}'::int[],
              array['{"k":1}'::jsonb, null],
              array['2024-01-02'::date],
              array['\\x00ff'::bytea],
              '[0:1]={5,6}'::int[],
              '{}'::int8[],
              array[true, false]`,
      [],
      READ,
    );
    const [texts, grid, docs, dates, bytes, bounded, empty, bools] = r.rows[0]!;
    assert.deepEqual(texts, ['a b', 'c"d', null, 'x\\y', '', 'NULL']);
    assert.deepEqual(grid, [
      [1, 2],
      [3, 4],
    ]);
    assert.deepEqual(docs, [{ k: 1 }, null]);
    assert.deepEqual(dates, ['2024-01-02']);
    assert.ok(Array.isArray(bytes) && Buffer.isBuffer(bytes[0]));
    assert.deepEqual([...(bytes[0] as Buffer)], [0, 255]);
    assert.deepEqual(bounded, [5, 6]);
    assert.deepEqual(empty, []);
    assert.deepEqual(bools, [true, false]);
    const bound = await src.run(
      'select $1::int[] as a, $2::text[] as b',
      [
        [1, 2, null],
        ['a"b', 'c\\d', null],
      ],
      READ,
    );
    assert.deepEqual(bound.rows, [
      [
        [1, 2, null],
        ['a"b', 'c\\d', null],
      ],
    ]);
  });

  test('a 1 ms session limit does not take the process down', async () => {
    const tiny = open(pgConn(), { ...settings, poolSize: 1, queryTimeoutMs: 1 });
    for (let i = 0; i < 5; i++) {
      await tiny.run('select 1', [], { timeoutMs: 1, readOnly: true }).then(
        (r) => assert.deepEqual(r.rows, [[1]]),
        (err: unknown) => assert.ok(err instanceof GatewayError && err.code === 'query_timeout', String(err)),
      );
    }
  });

  test('count(*) is an int8 that comes back as a number', async () => {
    const r = await src.run('select count(*) as c from items', [], READ);
    assert.deepEqual(r.rows, [[500]]);
  });

  test('parameters: $1 reused, strings for typed parameters', async () => {
    const r = await src.run('select count(*) from items where id = $1 or parent = $1', ['3'], READ);
    assert.deepEqual(r.rows, [[50]]); // 3, 13, ..., 493: id 3 is also one of parent 3's
    const t = await src.run('select $1::int + $1::int as s, $2::bool as yes, $3::jsonb as doc, $4::date as d', ['21', 'true', '{"k":1}', '2024-03-01'], READ);
    assert.deepEqual(t.columns, ['s', 'yes', 'doc', 'd']);
    assert.deepEqual(t.rows, [[42, true, { k: 1 }, '2024-03-01']]);
    const nulls = await src.run('select $1::text is null', [null], READ);
    assert.deepEqual(nulls.rows, [[true]]);
  });

  test('a read-only run refuses an UPDATE; a write run succeeds', async () => {
    const e = await rejectsWith(src.run('update items set qty = qty + 1 where id = $1', [1], READ), 'read_only');
    assert.match(e.extras?.detail ?? '', /read-only transaction/);
    const w = await src.run('update items set qty = qty + 1 where id <= $1', [3], WRITE);
    assert.deepEqual(w.columns, []);
    assert.equal(w.rowCount, 3);
    const r = await src.run('select qty from items where id = 1', [], READ);
    assert.deepEqual(r.rows, [[2]]);
  });

  test('a read session that switches read-only off is switched back', async () => {
    const one = open(pgConn(), { ...settings, poolSize: 1 });
    const flip = await one.run("select set_config('default_transaction_read_only', 'off', false)", [], READ);
    assert.deepEqual(flip.rows, [['off']]);
    await rejectsWith(one.run('update items set qty = 0 where id = 2', [], READ), 'read_only');
    const r = await one.run('select qty from items where id = 2', [], READ);
    assert.notEqual(r.rows[0]![0], 0);
  });

  test("a saved read's first page settles on a generic plan (with OFFSET $n it was planned on every call)", async () => {
    // The page windows of call/plan.ts, in the one session of a poolSize 1 source.
    const one = open(pgConn(), { ...settings, poolSize: 1 });
    const plan = planCall('generic', { sql: 'SELECT id, name FROM items WHERE id = :id /* qag_generic_marker */', parameters: null }, 'postgres');
    for (let id = 1; id <= 10; id++) {
      const first = await one.run(pagedStatement(plan, 0), fillValues(plan, [id], 11, 0), READ);
      assert.deepEqual(first.rows, [[id, `item ${id}`]]);
      // The first page as it was sent before: the window with OFFSET $n and 0 for it.
      const before = await one.run(plan.pagedText, [id, 11, 0], READ);
      assert.deepEqual(before.rows, first.rows);
    }
    const plans = await one.run(
      "SELECT statement LIKE '%OFFSET%' AS offset, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%qag_generic_marker%' ORDER BY 1",
      [],
      READ,
    );
    assert.deepEqual(plans.rows, [
      [false, 5, 5], // five custom plans, then the generic one for every call after
      [true, 0, 10], // OFFSET $n with 0: a custom plan every time (the generic one counts a row more)
    ]);
  });

  test('a statement past its limit is query_timeout and no longer runs on the server', async () => {
    const one = open(pgConn(), { ...settings, poolSize: 1 });
    const e = await rejectsWith(one.run('select pg_sleep(20) as qag_slow_marker', [], { timeoutMs: 300, readOnly: true }), 'query_timeout');
    assert.equal(e.extras?.timeout, 0.3);
    assert.equal(statusOf(e.code), 504);
    const active = await admin.unsafe(
      "select pid from pg_stat_activity where datname = $1 and state = 'active' and query like '%qag_slow_marker%' and pid <> pg_backend_pid()",
      [SCRATCH],
    );
    assert.equal(active.length, 0);
    // The session went back to the pool's limit, and the connection still serves calls.
    const r = await one.run('show statement_timeout', [], READ);
    assert.deepEqual(r.rows, [['30s']]);
  });

  test('a lowered limit still holds after the session is replaced', async () => {
    const one = open(pgConn(), { ...settings, poolSize: 1 });
    const low = { timeoutMs: 300, readOnly: true };
    const pid = (await one.run('select pg_backend_pid()', [], low)).rows[0]![0];
    await admin.unsafe('select pg_terminate_backend($1)', [pid as number]);
    let newPid: unknown;
    for (let i = 0; i < 50 && newPid === undefined; i++) {
      try {
        newPid = (await one.run('select pg_backend_pid()', [], low)).rows[0]![0];
      } catch (err) {
        assert.ok(err instanceof GatewayError && err.code === 'connection_failed', String(err));
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    assert.notEqual(newPid, undefined);
    assert.notEqual(newPid, pid);
    await rejectsWith(one.run('select pg_sleep(3)', [], low), 'query_timeout');
  });

  test('a call ended by pg_terminate_backend fails alone: the next call on the reconnected session is answered', async () => {
    const one = open(pgConn(), { ...settings, poolSize: 1 });
    for (let i = 0; i < 5; i++) {
      const pid = (await one.run('select pg_backend_pid()', [], READ)).rows[0]![0];
      const killed = one.run('select pg_sleep(2)', [], READ).then(
        () => 'answered',
        (e: GatewayError) => e.code,
      );
      // Once the sleep runs on that backend, it is ended under it.
      while (!(await admin.unsafe("select 1 from pg_stat_activity where pid = $1 and query like '%pg_sleep%'", [pid as number])).length) {
        await new Promise((r) => setTimeout(r, 10));
      }
      await admin.unsafe('select pg_terminate_backend($1)', [pid as number]);
      assert.notEqual(await killed, 'answered');
      // postgres.js 3.4.9 failed this one with the killed query's error (porsager/postgres#1223).
      assert.deepEqual((await one.run('select 1 as x', [], READ)).rows, [[1]]);
    }
  });

  test('the pool-wide limit applies without a per-call SET', async () => {
    const tight = open(pgConn(), { ...settings, poolSize: 1, queryTimeoutMs: 250 });
    const shown = await tight.run('show statement_timeout', [], { timeoutMs: 250, readOnly: true });
    assert.deepEqual(shown.rows, [['250ms']]);
    const e = await rejectsWith(tight.run('select pg_sleep(20)', [], { timeoutMs: 250, readOnly: true }), 'query_timeout');
    assert.equal(e.extras?.timeout, 0.25);
    // timeout 0 means no limit for this call
    const none = await tight.run('select pg_sleep(0.3) is null', [], { timeoutMs: 0, readOnly: true });
    assert.deepEqual(none.rows, [[false]]);
  });

  test('unreachable server, unknown database and unknown role are connection_failed', async () => {
    const down = open(pgConn({ port: 1, password: 's3cret-pw' }));
    const e = await rejectsWith(down.run('select 1', [], READ), 'connection_failed');
    assert.equal(statusOf(e.code), 502);
    assert.equal(e.message, 'Could not connect to the database');
    assert.ok(!(e.extras?.detail ?? '').includes('s3cret-pw'));
    await rejectsWith(open(pgConn({ database: `${SCRATCH}_missing` })).run('select 1', [], READ), 'connection_failed');
    await rejectsWith(open(pgConn({ user: 'qag_no_such_role' })).run('select 1', [], READ), 'connection_failed');
  });

  test('bad SQL is query_failed with the driver message as detail', async () => {
    const e = await rejectsWith(src.run('selec 1', [], READ), 'query_failed');
    assert.equal(e.message, 'An error occurred while executing the SQL query');
    assert.match(e.extras?.detail ?? '', /syntax error/);
    await rejectsWith(src.run('select * from no_such_table', [], READ), 'query_failed');
    // the source still works afterwards
    assert.deepEqual((await src.run('select 1 as one', [], READ)).rows, [[1]]);
  });

  test('syntaxError: the server parses and describes a statement without running it', async () => {
    assert.equal(await src.syntaxError('selec 1'), 'syntax error at or near "selec"');
    assert.equal(await src.syntaxError('select * from items where'), 'syntax error at end of input');
    // read, though the gateway's parser cannot; a write is parsed, never run
    assert.equal(await src.syntaxError('select parent, count(*) from items group by grouping sets ((parent), ())'), null);
    assert.equal(await src.syntaxError('delete from items'), null);
    assert.deepEqual((await src.run('select count(*) from items', [], READ)).rows, [[500]], 'the delete was not run');
    // other refusals mean the statement was read
    assert.equal(await src.syntaxError('select * from no_such_table where id = $1'), null);
    await rejectsWith(open(pgConn({ port: 1 })).syntaxError('select 1'), 'connection_failed');
  });

  test('200 concurrent lookups through a poolSize 4 source all succeed', async () => {
    const ids = Array.from({ length: 200 }, (_, i) => (i % 500) + 1);
    const results = await Promise.all(ids.map((id) => src.run('select id, name from items where id = $1', [id], READ)));
    results.forEach((r, i) => {
      assert.deepEqual(r.rows, [[ids[i], `item ${ids[i]}`]]);
    });
  });

  test("one turn's calls share a connection, 16 at most, then the next least busy one", async () => {
    // The backend of each of n calls made in one turn.
    const pids = (source: Source, n: number) =>
      Promise.all(Array.from({ length: n }, () => source.run('select pg_backend_pid()', [], READ).then((r) => Number(r.rows[0]![0]))));
    const counts = (xs: number[]) => [...new Set(xs)].map((p) => xs.filter((x) => x === p).length);
    const joined = open(pgConn(), { ...settings, poolSize: 8, pipeline: 16 });
    assert.deepEqual(counts(await pids(joined, 10)), [10]);
    assert.deepEqual(counts(await pids(joined, 40)), [16, 16, 8]);
    // pipeline 1: each call takes the least busy connection.
    const spread = open(pgConn(), { ...settings, poolSize: 8, pipeline: 1 });
    assert.deepEqual(counts(await pids(spread, 10)).sort(), [1, 1, 1, 1, 1, 1, 2, 2]);
  });

  test('warm opens one connection ahead of the first call, and calls go to an open idle connection first', async () => {
    const s = open(pgConn(), { ...settings, poolSize: 4, pipeline: 1 });
    assert.deepEqual(s.connections(), { idle: 0, active: 0 });
    s.warm!();
    s.warm!(); // one is opening: nothing more
    const start = Date.now();
    while (s.connections().idle < 1 && Date.now() - start < 5000) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(s.connections(), { idle: 1, active: 0 });
    // One call after another: each finds the open connection idle, so none opens another.
    const pid = async () => Number((await s.run('select pg_backend_pid()', [], READ)).rows[0]![0]);
    const pids = [await pid(), await pid(), await pid()];
    assert.equal(new Set(pids).size, 1);
    assert.deepEqual(s.connections(), { idle: 1, active: 0 });
    s.warm!(); // a connection is open: nothing to do
    assert.deepEqual(s.connections(), { idle: 1, active: 0 });
    // Calls in flight together still spread over the pool, opening connections as they need them.
    const together = await Promise.all(Array.from({ length: 4 }, () => pid()));
    assert.equal(new Set(together).size, 4);
  });

  test('a table changed under a prepared statement (its columns moved) is read on a new connection, the call answered', async () => {
    const s = open(pgConn(), { ...settings, poolSize: 1, pipeline: 1 });
    await s.run('create table moved (id int, name text, email text)', [], WRITE);
    await s.run("insert into moved values (1, 'n', 'e')", [], WRITE);
    const text = 'select * from moved where id < $1';
    assert.deepEqual((await s.run(text, [10], READ)).columns, ['id', 'name', 'email']);
    // The same types in another order: the server refuses the prepared statement's plan.
    await s.run('alter table moved drop column name, add column name text', [], WRITE);
    for (let i = 0; i < 3; i++) {
      const r = await s.run(text, [10], READ);
      assert.deepEqual(r.columns, ['id', 'email', 'name']);
      assert.deepEqual(r.rows, [[1, 'e', null]]);
    }
  });

  test("prepare: a connection's first call of a described statement runs in one round trip", async () => {
    // A proxy counting what the client sends: postgres.js writes a round trip's messages at once.
    let writes = 0;
    const proxy = net.createServer((down) => {
      const up = net.connect(PG_PORT, PG_HOST);
      down.on('data', (d) => {
        writes++;
        up.write(d);
      });
      up.pipe(down);
      down.on('error', () => up.destroy());
      up.on('error', () => down.destroy());
      down.on('close', () => up.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const port = (proxy.address() as net.AddressInfo).port;
      const firstCall = async (text: string, prepared: boolean): Promise<number> => {
        const s = open(pgConn({ host: '127.0.0.1', port }), { ...settings, poolSize: 1, pipeline: 1 });
        assert.equal(await s.warm!(), true);
        if (prepared) {
          s.prepare!(text);
          await new Promise((r) => setTimeout(r, 200)); // the description's round trip
        }
        const before = writes;
        assert.deepEqual((await s.run(text, [41, 'x'], READ)).rows, [[42, 'x']]);
        return writes - before;
      };
      // Untyped, the first call waits for its statement's description: two round trips.
      assert.equal(await firstCall('select $1::int + 1 as n, $2::text as t', false), 2);
      assert.equal(await firstCall('select $1::int + 1 as n, $2::text as t /* ahead */', true), 1);
    } finally {
      proxy.close();
    }
  });

  test('calls a client is given in separate callbacks of one turn of the loop go out in one write', async () => {
    const s = open(pgConn(), { ...settings, poolSize: 1 });
    const text = 'select $1::int + 1 as n';
    assert.deepEqual((await s.run(text, [1], READ)).rows, [[2]]); // prepared on the one connection
    // The socket writes to the server's port, seen as they are made (a proxy in this process would read them
    // only after the turn, all at once).
    const write = net.Socket.prototype.write;
    let writes = 0;
    net.Socket.prototype.write = function (this: net.Socket, ...args: Parameters<net.Socket['write']>) {
      if (this.remotePort === PG_PORT) writes++;
      return write.apply(this, args);
    } as net.Socket['write'];
    try {
      // As uWS hands requests over: each from a callback of its own, the tick queue run after each.
      const answers = await Promise.all(
        [10, 20, 30].map((v) => new Promise<ResultSet>((resolve, reject) => setImmediate(() => s.run(text, [v], READ).then(resolve, reject)))),
      );
      assert.deepEqual(
        answers.map((a) => a.rows),
        [[[11]], [[21]], [[31]]],
      );
    } finally {
      net.Socket.prototype.write = write;
    }
    assert.equal(writes, 1);
  });

  test('prepare: a column whose type changed under the types asked ahead fails one call, then calls run untyped', async () => {
    const s = open(pgConn(), { ...settings, poolSize: 1, pipeline: 1 });
    await s.run('create table retyped (c int)', [], WRITE);
    await s.run('insert into retyped values (41)', [], WRITE);
    const text = 'select count(*)::int as n from retyped where c = $1';
    assert.equal(await s.warm!(), true);
    s.prepare!(text);
    await new Promise((r) => setTimeout(r, 200)); // the description's round trip
    assert.deepEqual((await s.run(text, ['41'], READ)).rows, [[1]]);
    await s.run('alter table retyped alter column c type text', [], WRITE);
    // The next call, bound as int4, meets a text column (42883): refused, and the types are dropped.
    await rejectsWith(s.run(text, ['41'], READ), 'query_failed');
    for (let i = 0; i < 3; i++) assert.deepEqual((await s.run(text, ['41'], READ)).rows, [[1]]);
  });

  test('a call a turn after a slow statement does not wait for it while another connection is idle', async () => {
    const s = open(pgConn(), { ...settings, poolSize: 2, pipeline: 16 });
    const slow = s.run('select pg_backend_pid(), pg_sleep(1)', [], READ);
    await new Promise((r) => setImmediate(r)); // the next turn
    const t0 = performance.now();
    const fast = await s.run('select pg_backend_pid()', [], READ);
    assert.ok(performance.now() - t0 < 500, 'the fast call waited for the slow one');
    assert.notEqual(fast.rows[0]![0], (await slow).rows[0]![0]);
  });

  test('concurrent calls with different limits keep their own limits', async () => {
    const runs = Array.from({ length: 40 }, (_, i) =>
      i % 4 === 0
        ? rejectsWith(src.run('select pg_sleep(5)', [], { timeoutMs: 100, readOnly: true }), 'query_timeout').then(() => 'timeout')
        : src.run('select current_setting($1)', ['statement_timeout'], READ).then((r) => r.rows[0]![0]),
    );
    const out = await Promise.all(runs);
    out.forEach((v, i) => {
      assert.equal(v, i % 4 === 0 ? 'timeout' : '30s');
    });
  });
});

describe('sqlite source', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qag-sources-'));
  const file = path.join(dir, 'data.db');
  let src: Source;

  before(() => {
    const db = new Database(file);
    db.exec(`
      create table kinds (id integer primary key, big integer, small integer, r real, t text, b blob, absent text);
      insert into kinds values (1, 9007199254740993, 42, 1.5, 'héllo', x'00ff10', null);
      create table items (id integer primary key, parent integer, name text);
    `);
    const ins = db.prepare('insert into items values (?, ?, ?)');
    db.transaction(() => {
      for (let i = 1; i <= 100; i++) ins.run(i, i % 10, `item ${i}`);
    })();
    db.close();
    // relative to home
    src = openSource({ name: 'lite', db: 'sqlite', database: path.basename(file) }, { poolSize: 4, home: dir });
  });

  after(async () => {
    await src?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('value types', async () => {
    const r = await src.run('select big, small, r, t, b, absent from kinds where id = ?', [1], READ);
    assert.deepEqual(r.columns, ['big', 'small', 'r', 't', 'b', 'absent']);
    assert.equal(r.rowCount, 1);
    const [big, small, real, text, blob, absent] = r.rows[0]!;
    assert.equal(big, '9007199254740993');
    assert.equal(small, 42);
    assert.equal(real, 1.5);
    assert.equal(text, 'héllo');
    assert.ok(Buffer.isBuffer(blob));
    assert.deepEqual([...blob], [0, 255, 16]);
    assert.equal(absent, null);
  });

  test('parameters bind in order; booleans become 1/0', async () => {
    const r = await src.run('select count(*) from items where id = ? or parent = ?', [3, 3], READ);
    assert.deepEqual(r.rows, [[10]]); // 3, 13, ..., 93
    const b = await src.run('select ? as yes, ? as no, ? as s', [true, false, 'x'], READ);
    assert.deepEqual(b.rows, [[1, 0, 'x']]);
  });

  test('writes are refused: no-data statements and writes that return rows', async () => {
    await rejectsWith(src.run('update items set name = ? where id = 1', ['x'], WRITE), 'read_only');
    await rejectsWith(src.run('insert into items values (1000, 1, ?) returning id', ['x'], WRITE), 'read_only');
    const r = await src.run('select name from items where id = 1', [], READ);
    assert.deepEqual(r.rows, [['item 1']]);
  });

  test('bad SQL is query_failed with detail', async () => {
    const e = await rejectsWith(src.run('selec 1', [], READ), 'query_failed');
    assert.match(e.extras?.detail ?? '', /syntax error/);
    await rejectsWith(src.run('select * from no_such_table', [], READ), 'query_failed');
  });

  test('syntaxError: SQLite compiles a statement without running it', async () => {
    assert.equal(await src.syntaxError('selec 1'), 'near "selec": syntax error');
    assert.equal(await src.syntaxError('select * from items where'), 'incomplete input');
    assert.equal(await src.syntaxError("select 'x"), 'unrecognized token: "\'x"');
    // read, though the gateway's parser cannot; a write is compiled, never run
    assert.equal(await src.syntaxError('select id from items where name = ? collate nocase'), null);
    assert.equal(await src.syntaxError('delete from items'), null);
    assert.deepEqual((await src.run('select count(*) from items', [], READ)).rows, [[100]], 'the delete was not run');
    assert.equal(await src.syntaxError('select * from no_such_table'), null, 'a missing table means it was read');
  });

  test('a statement that ran past its limit is query_timeout', async () => {
    const slow = 'with recursive c(x) as (select 1 union all select x + 1 from c where x < 1000000) select count(*) from c';
    const e = await rejectsWith(src.run(slow, [], { timeoutMs: 1, readOnly: true }), 'query_timeout');
    assert.equal(e.extras?.timeout, 0.001);
    const ok = await src.run(slow, [], { timeoutMs: 0, readOnly: true });
    assert.deepEqual(ok.rows, [[1000000]]);
  });

  test('a missing file is connection_failed', () => {
    assert.throws(
      () => openSource({ name: 'gone', db: 'sqlite', database: path.join(dir, 'missing.db') }, { poolSize: 1, home: dir }),
      (err: unknown) => err instanceof GatewayError && err.code === 'connection_failed',
    );
  });
});

describe('openSource and resolveEnvRefs', () => {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the title names the ${VAR} syntax under test
  test('${VAR} is replaced from the environment, recursively', () => {
    process.env.QAG_TEST_SECRET = 'pa$$';
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${VAR} reference the gateway resolves from the environment, not a template
    const out = resolveEnvRefs({ name: 'x', db: 'postgres', password: '${QAG_TEST_SECRET}!', options: { list: ['a${QAG_TEST_SECRET}'] }, port: 5 });
    assert.deepEqual(out, { name: 'x', db: 'postgres', password: 'pa$$!', options: { list: ['apa$$'] }, port: 5 });
  });

  test('a missing variable is connection_misconfigured, naming it', () => {
    delete process.env.QAG_TEST_MISSING;
    assert.throws(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${VAR} reference the gateway resolves from the environment, not a template
      () => openSource(pgConn({ password: '${QAG_TEST_MISSING}' }), settings),
      (err: unknown) => err instanceof GatewayError && err.code === 'connection_misconfigured' && err.message.includes('QAG_TEST_MISSING'),
    );
  });

  test('unknown database types are unsupported_database', () => {
    for (const db of ['oracle', 'mongo']) {
      assert.throws(
        () => openSource({ name: 'm', db }, settings),
        (err: unknown) => err instanceof GatewayError && err.code === 'unsupported_database',
      );
    }
  });
});
