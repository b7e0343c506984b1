// Integration tests for src/sources/mysql.ts against the real MariaDB on 127.0.0.1:3306 (a scratch
// database created and dropped here).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import net from 'node:net';
import mysql from 'mysql2/promise';
import { GatewayError } from '../../src/contract/errors.js';
import { openSource } from '../../src/sources/index.js';
import type { ConnectionConfig, ResultSet, Source, SourceSettings } from '../../src/sources/index.js';
import { eventually, rejectsWith } from '../helpers.js';

const MY_HOST = process.env.QUERYAPIGATE_TEST_MYSQL_HOST ?? '127.0.0.1';
const MY_PORT = Number(process.env.QUERYAPIGATE_TEST_MYSQL_PORT ?? 3306);
const MY_USER = process.env.QUERYAPIGATE_TEST_MYSQL_USER ?? 'root';
const SCRATCH = `qag_mysql_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
const READ = { timeoutMs: 30_000, readOnly: true };
const WRITE = { timeoutMs: 30_000, readOnly: false };
const settings: SourceSettings = { poolSize: 4, home: os.tmpdir(), queryTimeoutMs: 30_000 };
const PAGED = (statement: string): string => `SELECT * FROM (\n${statement}\n) AS _qag_page LIMIT ? OFFSET ?`;

function myConn(extra: Partial<ConnectionConfig> = {}): ConnectionConfig {
  return { name: 'my', db: 'mysql', host: MY_HOST, port: MY_PORT, user: MY_USER, database: SCRATCH, ...extra };
}

/** A TCP port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('mysql source (MariaDB)', () => {
  let admin: mysql.Connection;
  const opened: Source[] = [];
  let src: Source;

  function open(conn = myConn(), s: typeof settings = settings): Source {
    const source = openSource(conn, s);
    opened.push(source);
    return source;
  }

  /** Statements of the scratch database the server is still running, found by a marker in their text. */
  async function running(marker: string): Promise<unknown[]> {
    const [rows] = await admin.query<mysql.RowDataPacket[]>('SHOW FULL PROCESSLIST');
    return rows.filter((r) => typeof r.Info === 'string' && r.Info.includes(marker) && !r.Info.includes('PROCESSLIST'));
  }

  /** running(), given up to a second for a cancelled statement to leave the list: the server may still show it
   *  ('Writing to net') while it sends the error the client already has. A statement not cancelled stays for seconds. */
  const runningAfterCancel = (marker: string) =>
    eventually(
      () => running(marker),
      (rows) => rows.length === 0,
      1000,
    );

  async function connectionsToScratch(): Promise<number> {
    const [rows] = await admin.query<mysql.RowDataPacket[]>('SHOW FULL PROCESSLIST');
    return rows.filter((r) => r.db === SCRATCH && r.Id !== admin.threadId).length;
  }

  before(async () => {
    admin = await mysql.createConnection({ host: MY_HOST, port: MY_PORT, user: MY_USER, multipleStatements: true });
    await admin.query(`CREATE DATABASE ${SCRATCH}`);
    await admin.query(`
      USE ${SCRATCH};
      CREATE TABLE kinds (
        id INT PRIMARY KEY, big BIGINT, small BIGINT, ubig BIGINT UNSIGNED, n DECIMAL(10,2), f FLOAT, dbl DOUBLE,
        dt DATETIME, dt3 DATETIME(3), ts TIMESTAMP NULL, d DATE, tm TIME, tm3 TIME(3), b1 BIT(1), b8 BIT(8),
        b64 BIT(64), j JSON, bl BLOB, bin BINARY(3), vb VARBINARY(8), ti TINYINT(1), yr YEAR, txt TEXT,
        e ENUM('a','b'), absent VARCHAR(10)
      );
      INSERT INTO kinds VALUES (
        1, 9007199254740993, 42, 18446744073709551615, 12.50, 0.1, 2.25,
        '2026-01-02 03:04:05', '2026-01-02 03:04:05.678', '2026-01-02 03:04:05', '2024-02-29', '-838:59:59',
        '13:14:15.250', b'1', b'10100101', b'1111111111111111111111111111111111111111111111111111111111111111',
        '{"a": [1, "x"], "b": null}', x'00ff10', x'010203', x'aa', 1, 2026, 'héllo', 'b', NULL
      );
      INSERT INTO kinds (id, dt, b1, ti) VALUES (2, '0001-02-03 04:05:06', b'0', 0);
      CREATE TABLE items (id INT PRIMARY KEY, parent INT, name VARCHAR(40), qty INT);
      INSERT INTO items SELECT seq, seq % 10, CONCAT('item ', seq), seq FROM seq_1_to_500;
      CREATE PROCEDURE two_sets(IN top INT)
      BEGIN
        SELECT id, name FROM items WHERE id <= top ORDER BY id;
        SELECT 'second' AS other;
      END;
    `);
    src = open();
  });

  after(async () => {
    await Promise.all(opened.map((s) => s.close()));
    await admin.query(`DROP DATABASE IF EXISTS ${SCRATCH}`);
    await admin.end();
  });

  test('value types', async () => {
    const r = await src.run('SELECT * FROM kinds WHERE id = ?', [1], READ);
    assert.deepEqual(r.columns, [
      'id',
      'big',
      'small',
      'ubig',
      'n',
      'f',
      'dbl',
      'dt',
      'dt3',
      'ts',
      'd',
      'tm',
      'tm3',
      'b1',
      'b8',
      'b64',
      'j',
      'bl',
      'bin',
      'vb',
      'ti',
      'yr',
      'txt',
      'e',
      'absent',
    ]);
    assert.equal(r.rowCount, 1);
    const [id, big, small, ubig, n, f, dbl, dt, dt3, ts, d, tm, tm3, b1, b8, b64, j, bl, bin, vb, ti, yr, txt, e, absent] = r.rows[0]!;
    assert.equal(id, 1);
    assert.equal(big, '9007199254740993'); // beyond 2^53: exact, as a string
    assert.equal(small, 42); // a BIGINT that fits stays a number
    assert.equal(ubig, '18446744073709551615');
    assert.equal(n, 12.5); // DECIMAL → float
    assert.equal(f, 0.1); // FLOAT: the shortest decimal of the stored float, not 0.10000000149011612
    assert.equal(dbl, 2.25);
    assert.ok(dt instanceof Date);
    assert.equal(dt.toISOString(), '2026-01-02T03:04:05.000Z'); // wall clock read as UTC
    assert.ok(dt3 instanceof Date);
    assert.equal(dt3.toISOString(), '2026-01-02T03:04:05.678Z');
    assert.ok(ts instanceof Date);
    assert.equal(ts.toISOString(), '2026-01-02T03:04:05.000Z'); // as the session prints it
    assert.equal(d, '2024-02-29');
    assert.equal(tm, '-838:59:59');
    assert.equal(tm3, '13:14:15.250');
    assert.equal(b1, 1);
    assert.equal(b8, 0xa5);
    assert.equal(b64, '18446744073709551615');
    assert.deepEqual(j, { a: [1, 'x'], b: null }); // MariaDB's JSON (LONGTEXT) parsed through extended metadata
    assert.deepEqual(bl, Buffer.from([0x00, 0xff, 0x10]));
    assert.deepEqual(bin, Buffer.from([1, 2, 3]));
    assert.deepEqual(vb, Buffer.from([0xaa]));
    assert.equal(ti, 1); // TINYINT(1) is a number: MySQL has no boolean
    assert.equal(yr, 2026);
    assert.equal(txt, 'héllo');
    assert.equal(e, 'b');
    assert.equal(absent, null);

    const r2 = await src.run('SELECT dt, b1, ti, big, j FROM kinds WHERE id = ?', [2], READ);
    const [dt2, b1b, ti2, big2, j2] = r2.rows[0]!;
    assert.ok(dt2 instanceof Date);
    assert.equal(dt2.toISOString(), '0001-02-03T04:05:06.000Z'); // a year below 100 is not moved to 19xx
    assert.equal(b1b, 0);
    assert.equal(ti2, 0);
    assert.equal(big2, null);
    assert.equal(j2, null);
  });

  test('values survive the paging wrapper (JSON keeps its type through the derived table)', async () => {
    const r = await src.run(PAGED('SELECT j, dt, b8, n FROM kinds WHERE id = ?'), [1, 11, 0], READ);
    assert.deepEqual(r.columns, ['j', 'dt', 'b8', 'n']);
    const [j, dt, b8, n] = r.rows[0]!;
    assert.deepEqual(j, { a: [1, 'x'], b: null });
    assert.equal((dt as Date).toISOString(), '2026-01-02T03:04:05.000Z');
    assert.equal(b8, 0xa5);
    assert.equal(n, 12.5);
  });

  test('? markers bind strings, numbers, big integers, booleans and null', async () => {
    const r = await src.run(
      'SELECT ? AS s, ? + 1 AS n, ? AS big, ? AS yes, ? AS nothing, name FROM items WHERE id = ? AND name = ?',
      ['text', 41, 9007199254740993n, true, null, 7, 'item 7'],
      READ,
    );
    assert.deepEqual(r.columns, ['s', 'n', 'big', 'yes', 'nothing', 'name']);
    assert.equal(r.rowCount, 1);
    const [s, n, big, yes, nothing, name] = r.rows[0]!;
    assert.equal(s, 'text');
    assert.equal(Number(n), 42);
    assert.equal(String(big), '9007199254740993');
    assert.equal(Number(yes), 1);
    assert.equal(nothing, null);
    assert.equal(name, 'item 7');
    const big2 = await src.run('SELECT id FROM kinds WHERE big = ?', [9007199254740993n], READ);
    assert.deepEqual(big2.rows, [[1]]);
    const none = await src.run('SELECT id FROM items WHERE name = ?', ["x' OR '1'='1"], READ);
    assert.deepEqual(none.rows, []);
    assert.equal(none.rowCount, 0);
    assert.deepEqual(none.columns, ['id']);
  });

  test('a read run is refused by the database; a write run writes', async () => {
    const err = await rejectsWith(src.run('UPDATE items SET qty = qty + 1000 WHERE id = ?', [3], READ), 'read_only');
    assert.match(err.extras?.detail ?? '', /READ ONLY transaction/);
    await rejectsWith(src.run('CREATE TEMPORARY TABLE scratch_tmp (a INT)', [], READ), 'read_only');
    assert.deepEqual((await src.run('SELECT qty FROM items WHERE id = ?', [3], READ)).rows, [[3]]);

    const w = await src.run('UPDATE items SET qty = qty + 1000 WHERE id IN (?, ?)', [3, 4], WRITE);
    assert.deepEqual(w, { columns: [], rows: [], rowCount: 2 });
    assert.deepEqual((await src.run('SELECT qty FROM items WHERE id IN (3, 4) ORDER BY id', [], READ)).rows, [[1003], [1004]]);
    const ins = await src.run('INSERT INTO items VALUES (?, ?, ?, ?), (?, ?, ?, ?)', [901, 1, 'a', 1, 902, 1, 'b', 2], WRITE);
    assert.equal(ins.rowCount, 2);
    assert.deepEqual(ins.rows, []);
    const del = await src.run('DELETE FROM items WHERE id > ?', [900], WRITE);
    assert.equal(del.rowCount, 2);
    await src.run('UPDATE items SET qty = id WHERE id IN (3, 4)', [], WRITE);
  });

  test('CALL answers with its first result set', async () => {
    const r = await src.run('CALL two_sets(?)', [2], WRITE);
    assert.deepEqual(r, {
      columns: ['id', 'name'],
      rows: [
        [1, 'item 1'],
        [2, 'item 2'],
      ],
      rowCount: 2,
      types: [{ kind: 'integer' }, { kind: 'text' }], // the first result set's column types
    });
  });

  test('a write that changes session state does not leak into later calls', async () => {
    const one = open(myConn(), { ...settings, poolSize: 1 });
    await one.run('SET @qag_leak = 42', [], WRITE);
    const r = await one.run('SELECT @qag_leak AS v', [], WRITE);
    assert.deepEqual(r.rows, [[null]]);
  });

  test('a statement past its limit is query_timeout and no longer runs on the server', async () => {
    const marker = `qag_sleep_${process.pid}`;
    // Control: a statement that is running is seen by running().
    const control = src.run(`SELECT /* ${marker}_control */ SLEEP(0.5) AS s`, [], { timeoutMs: 0, readOnly: true });
    let seen: unknown[] = [];
    for (let i = 0; i < 40 && seen.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
      seen = await running(`${marker}_control`);
    }
    assert.equal(seen.length, 1);
    assert.deepEqual((await control).rows, [[0]]);

    const err = await rejectsWith(src.run(`SELECT /* ${marker} */ SLEEP(5) AS s`, [], { timeoutMs: 300, readOnly: true }), 'query_timeout');
    assert.equal(err.message, 'The query exceeded the time limit of 0.3 seconds and was cancelled');
    assert.deepEqual(err.extras, { timeout: 0.3 });
    assert.deepEqual(await runningAfterCancel(marker), []);

    // Inside the paging wrapper, and a write (MariaDB limits every statement, not only SELECT).
    await rejectsWith(src.run(PAGED(`SELECT /* ${marker} */ SLEEP(5) AS s`), [11, 0], { timeoutMs: 250, readOnly: true }), 'query_timeout');
    await rejectsWith(src.run(`UPDATE /* ${marker} */ items SET qty = qty + SLEEP(5) WHERE id = ?`, [1], { timeoutMs: 250, readOnly: false }), 'query_timeout');
    assert.deepEqual(await runningAfterCancel(marker), []);
    assert.deepEqual((await src.run('SELECT qty FROM items WHERE id = 1', [], READ)).rows, [[1]]);
  });

  test('a statement the server limit does not cover is killed from another connection', async () => {
    // SET STATEMENT ... FOR turns the session's max_statement_time off for this one statement, so
    // only the JS backstop (KILL QUERY) can stop it.
    const marker = `qag_kill_${process.pid}`;
    const err = await rejectsWith(
      src.run(`SET STATEMENT max_statement_time = 0 FOR SELECT /* ${marker} */ SLEEP(10) AS s`, [], { timeoutMs: 200, readOnly: false }),
      'query_timeout',
    );
    assert.deepEqual(err.extras, { timeout: 0.2 });
    assert.deepEqual(await runningAfterCancel(marker), []);
    assert.deepEqual((await src.run('SELECT 1 AS one', [], WRITE)).rows, [[1]]);
  });

  test('a session keeps the limit of the call before it only until a call needs another', async () => {
    const one = open(myConn(), { ...settings, poolSize: 1 });
    await rejectsWith(one.run('SELECT SLEEP(2) AS s', [], { timeoutMs: 100, readOnly: true }), 'query_timeout');
    // Same connection, a longer limit: the shorter one must be gone.
    assert.deepEqual((await one.run('SELECT SLEEP(0.3) AS s', [], READ)).rows, [[0]]);
    // No limit at all.
    assert.deepEqual((await one.run('SELECT SLEEP(0.2) AS s', [], { timeoutMs: 0, readOnly: true })).rows, [[0]]);
    await rejectsWith(one.run('SELECT SLEEP(2) AS s', [], { timeoutMs: 100, readOnly: true }), 'query_timeout');
  });

  test('an unreachable server, bad credentials or an unknown database is connection_failed', async () => {
    const port = await closedPort();
    const down = open(myConn({ port, password: 'hunter2-secret' }));
    const e1 = await rejectsWith(down.run('SELECT 1', [], READ), 'connection_failed');
    assert.equal(e1.message, 'Could not connect to the database');
    assert.match(e1.extras?.detail ?? '', /ECONNREFUSED/);
    assert.ok(!(e1.extras?.detail ?? '').includes('hunter2-secret'));
    await rejectsWith(down.run('SELECT 1', [], READ), 'connection_failed'); // and again, not hanging

    const denied = open(myConn({ user: 'qag_nobody', password: 'hunter2-secret' }));
    const e2 = await rejectsWith(denied.run('SELECT 1', [], READ), 'connection_failed');
    assert.match(e2.extras?.detail ?? '', /Access denied/);
    assert.ok(!(e2.extras?.detail ?? '').includes('hunter2-secret'));

    const nodb = open(myConn({ database: `${SCRATCH}_missing` }));
    const e3 = await rejectsWith(nodb.run('SELECT 1', [], READ), 'connection_failed');
    assert.match(e3.extras?.detail ?? '', /Unknown database/);
  });

  test('a call cut off by its source closing is not a database that cannot be reached', async () => {
    // The warmer's last statements on a server stopping, or on a connection just changed, meet mysql2's
    // "Pool is closed.": that must not mark the database down, nor log that it cannot be connected to.
    const closing = open();
    const cut = closing.run('SELECT 1', [], READ);
    await closing.close();
    const e = await rejectsWith(cut, 'connection_failed');
    assert.equal(e.extras?.detail, 'source closed');
  });

  test("LOAD DATA LOCAL INFILE cannot have the server read a file of the gateway's host", async () => {
    const e = await rejectsWith(src.run("LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE items", [], WRITE), 'query_failed');
    assert.match(e.extras?.detail ?? '', /not allowed|LOCAL/i);
    assert.doesNotMatch(e.extras?.detail ?? '', /streamFactory/);
  });

  test('bad SQL is query_failed with the server text as detail', async () => {
    const e1 = await rejectsWith(src.run('SELEC id FROM items', [], READ), 'query_failed');
    assert.equal(e1.message, 'An error occurred while executing the SQL query');
    assert.match(e1.extras?.detail ?? '', /SQL syntax/);
    const e2 = await rejectsWith(src.run('SELECT * FROM no_such_table', [], READ), 'query_failed');
    assert.match(e2.extras?.detail ?? '', /doesn't exist/);
    // The pool is still fine afterwards.
    assert.deepEqual((await src.run('SELECT COUNT(*) FROM items', [], READ)).rows, [[500]]);
  });

  test('syntaxError: the server parses a prepared statement without running it', async () => {
    assert.match((await src.syntaxError('SELEC id FROM items')) ?? '', /You have an error in your SQL syntax/);
    assert.match((await src.syntaxError('SELECT id FROM items WHERE')) ?? '', /SQL syntax/);
    // read, though the gateway's parser cannot: a backslash-escaped quote, an index hint, a write (never run)
    assert.equal(await src.syntaxError("SELECT 'it\\'s' AND id = ? FROM items"), null);
    assert.equal(await src.syntaxError('SELECT id FROM items FORCE INDEX (PRIMARY)'), null);
    assert.equal(await src.syntaxError('DELETE FROM items'), null);
    assert.deepEqual((await src.run('SELECT COUNT(*) FROM items', [], READ)).rows, [[500]], 'the DELETE was not run');
    // other refusals mean the statement was read
    assert.equal(await src.syntaxError('SELECT * FROM no_such_table'), null);
    const down = open(myConn({ port: await closedPort() }));
    await rejectsWith(down.syntaxError('SELECT 1'), 'connection_failed');
  });

  test('200 concurrent lookups through a pool of 4', async () => {
    const base = await connectionsToScratch();
    const four = open(myConn(), { ...settings, poolSize: 4 });
    const ids = Array.from({ length: 200 }, (_, i) => i + 1);
    const results = await Promise.all(ids.map((id) => four.run('SELECT id, name FROM items WHERE id = ?', [id], READ)));
    results.forEach((r, i) => {
      assert.deepEqual(r.rows, [[ids[i], `item ${ids[i]}`]]);
    });
    const afterReads = await connectionsToScratch();
    assert.ok(afterReads > base && afterReads <= base + 4, `sessions: ${base} before, ${afterReads} after`);
    // Reads and writes at once: a second pool of 4 for the writes.
    const mixed = await Promise.all(
      ids.map((id) => (id % 2 ? four.run('SELECT qty FROM items WHERE id = ?', [id], READ) : four.run('UPDATE items SET qty = qty WHERE id = ?', [id], WRITE))),
    );
    mixed.forEach((r, i) => {
      assert.equal(r.rowCount, 1, `call ${i}`);
    });
    const afterMixed = await connectionsToScratch();
    assert.ok(afterMixed <= base + 8, `sessions: ${base} before, ${afterMixed} after`);
  });

  test('reads that come while a read of the turn runs share its connection (pipelined), each with its own answer and error', async () => {
    // The subquery fails (1242, more than one row) only for the call that passes 1.
    const text = 'SELECT CONNECTION_ID() AS id, ? AS v, (SELECT 1 UNION ALL SELECT 2 FROM DUAL WHERE ? = 1) AS e';
    const shared = open(myConn(), { ...settings, pipeline: 16 });
    const byFour = open(myConn(), { ...settings, pipeline: 4 });
    const alone = open(myConn(), { ...settings, pipeline: 1 });
    /**
     * Twelve calls in one turn: all at once (as an executor starts a batch of calls), or the first and then the rest
     * once it is under way (its connection taken, a few ticks on), as the acceptor's requests come.
     */
    const calls = async (s: Source, spaced: boolean): Promise<PromiseSettledResult<ResultSet>[]> => {
      const first = s.run(text, [0, 0], READ);
      if (spaced) for (let i = 0; i < 20; i++) await new Promise((resolve) => process.nextTick(resolve));
      const later = Array.from({ length: 11 }, (_, i) => s.run(text, [i + 1, i + 1 === 5 ? 1 : 0], READ));
      return Promise.allSettled([first, ...later]);
    };
    for (const s of [shared, byFour, alone]) {
      // Four sessions with the statement prepared: calls at once, each preparing on a connection of its own.
      // (The first leads a turn it cannot open, its statement not prepared yet: the others then take their own.)
      const warm = await Promise.all([0, 1, 2, 3].map((i) => s.run(text, [i, 0], READ)));
      assert.deepEqual(
        warm.map((r) => r.rows[0]!.slice(1)),
        [0, 1, 2, 3].map((i) => [i, 1]),
      );
      assert.deepEqual(s.connections(), { idle: 4, active: 0 });
    }
    // mysql2 only warns (console.error) when answers come with sequence ids other than it expects.
    const warnings: string[] = [];
    const consoleError = console.error;
    console.error = (...args: unknown[]) => void warnings.push(args.join(' '));
    const restore = () => {
      console.error = consoleError;
    };
    after(restore);
    const connectionsOf = (rs: PromiseSettledResult<ResultSet>[]) =>
      new Set(rs.map((r) => (r.status === 'fulfilled' ? r.value.rows[0]![0] : null)).filter((id) => id !== null));
    // The connections the twelve use: one turn of 16; three of 4 (a full turn gives way to the next); spread without.
    for (const [s, turns, spaced] of [
      [shared, 1, false],
      [shared, 1, true],
      [byFour, 3, false],
      [byFour, 3, true],
      [alone, 0, false],
      [alone, 0, true],
    ] as const) {
      const results = await calls(s, spaced);
      results.forEach((r, i) => {
        if (i === 5) {
          assert.equal(r.status, 'rejected', `call ${i} (spaced: ${spaced})`);
          assert.equal(((r as PromiseRejectedResult).reason as GatewayError).code, 'query_failed');
          assert.match(((r as PromiseRejectedResult).reason as GatewayError).message + JSON.stringify((r as PromiseRejectedResult).reason), /more than 1 row/i);
        } else {
          assert.equal(r.status, 'fulfilled', `call ${i}: ${(r as PromiseRejectedResult).reason}`);
          assert.deepEqual((r as PromiseFulfilledResult<ResultSet>).value.rows[0]!.slice(1), [i, 1], `call ${i}`);
        }
      });
      const used = connectionsOf(results).size;
      if (turns) assert.equal(used, turns, `connections for ${turns} turn(s) (spaced: ${spaced})`);
      else assert.ok(used > 1, `${used} connection(s) without sharing`);
      // Back in the pool once the last call on it is done, and fit for the next call.
      assert.deepEqual(s.connections(), { idle: 4, active: 0 });
      assert.deepEqual((await s.run(text, [7, 0], READ)).rows[0]!.slice(1), [7, 1]);
    }
    restore();
    assert.deepEqual(warnings, []);
  });

  test('the paging wrapper cuts pages inside the statement own LIMIT, with numeric limit and offset', async () => {
    const ids = (r: { rows: unknown[][] }): unknown[] => r.rows.map((row) => row[0]);
    for (const window of ['LIMIT 5,10', 'LIMIT 10 OFFSET 5']) {
      const statement = `SELECT id FROM items ORDER BY id ${window}`;
      assert.deepEqual(ids(await src.run(PAGED(statement), [4, 0], READ)), [6, 7, 8, 9]);
      assert.deepEqual(ids(await src.run(PAGED(statement), [4, 8], READ)), [14, 15]);
      assert.deepEqual(ids(await src.run(PAGED(statement), [11, 0], READ)), [6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
      assert.deepEqual(ids(await src.run(PAGED(statement), [4, 10], READ)), []);
    }
    const ten = 'SELECT id FROM items ORDER BY id LIMIT 10';
    assert.deepEqual(ids(await src.run(PAGED(ten), [4, 8], READ)), [9, 10]);
    assert.deepEqual(ids(await src.run(PAGED(ten), [11, 0], READ)), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    // With the statement's own markers ahead of the window's two.
    const withParam = 'SELECT id FROM items WHERE qty > ? ORDER BY id LIMIT 10';
    assert.deepEqual(ids(await src.run(PAGED(withParam), [100, 3, 2], READ)), [103, 104, 105]);
  });

  // biome-ignore lint/suspicious/noTemplateCurlyInString: the title names the ${VAR} syntax under test
  test('${VAR} in a connection is resolved at open', async () => {
    process.env.QAG_TEST_MYSQL_DB = SCRATCH;
    try {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${VAR} reference the gateway resolves from the environment, not a template
      const viaEnv = open(myConn({ database: '${QAG_TEST_MYSQL_DB}' }));
      assert.deepEqual((await viaEnv.run('SELECT DATABASE()', [], READ)).rows, [[SCRATCH]]);
    } finally {
      delete process.env.QAG_TEST_MYSQL_DB;
    }
    assert.throws(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a ${VAR} reference the gateway resolves from the environment, not a template
      () => openSource(myConn({ password: '${QAG_TEST_MYSQL_UNSET_VAR}' }), settings),
      (e: unknown) => e instanceof GatewayError && e.code === 'connection_misconfigured' && e.message.includes('QAG_TEST_MYSQL_UNSET_VAR'),
    );
  });

  test('close() ends every pool', async () => {
    const s = openSource(myConn(), settings);
    await Promise.all([s.run('SELECT 1', [], READ), s.run('SELECT 1', [], WRITE), s.run('SELECT 2', [], READ)]);
    const marker = `qag_close_${process.pid}`;
    await s.run(`SELECT /* ${marker} */ 1`, [], READ);
    const before = await connectionsToScratch();
    await s.close();
    await rejectsWith(s.run('SELECT 1', [], READ), 'connection_failed');
    // The server drops the closed sessions (asynchronously; poll briefly).
    let now = before;
    for (let i = 0; i < 50 && now > before - 2; i++) {
      await new Promise((r) => setTimeout(r, 20));
      now = await connectionsToScratch();
    }
    assert.ok(now <= before - 2, `sessions before close ${before}, after ${now}`);
  });
});
