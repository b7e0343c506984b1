// Integration tests for Source.stream() (the database side of ?stream=true) against the real
// PostgreSQL on 127.0.0.1:5432 and MariaDB on 127.0.0.1:3306 (scratch databases created and dropped
// here) and a temporary SQLite file. One suite runs against every source.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import type postgres from 'postgres';
import { openSource } from '../../src/sources/index.js';
import { statusOf } from '../../src/contract/errors.js';
import type { ConnectionConfig, Source, SourceSettings } from '../../src/sources/index.js';
import { eventually, PG_ADMIN_URL, rejectsWith, scratchDatabase } from '../helpers.js';

const ROWS = 50_000;
const BATCH = 1000;
const READ = { timeoutMs: 30_000, readOnly: true };
const stream = (batchRows = BATCH, timeoutMs = 30_000) => ({ timeoutMs, readOnly: true, batchRows });
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const settings = (poolSize = 4): SourceSettings => ({ poolSize, home: os.tmpdir(), queryTimeoutMs: 30_000 });

/** What a source's suite needs: how to open it, and its dialect's SQL for the shared cases. */
interface Harness {
  open(poolSize?: number): Source;
  /** The generated table, in id order. */
  all: string;
  /** Many wide rows (about 50 MB), more than socket buffers hold; `marker` in its text. */
  wide(marker: string): string;
  /** Fast for the first rows, then one row takes 30 s. */
  stall(marker: string): string;
  /** The limit `stall` is run with. */
  stallMs: number;
  /** A statement that writes. */
  write: string;
  /** No rows. */
  empty: string;
  /** Statements containing `marker` the server is still executing (null: not observable). */
  running: ((marker: string) => Promise<number>) | null;
  /** Streams a source lets run at once (opened with poolSize 2 for PG and MySQL). */
  maxStreams: number;
}

/** The cases every source must pass. */
function streamSuite(h: () => Harness): void {
  test('streams the whole table in batches, equal to run()', async () => {
    const src = h().open();
    const whole = await src.run(h().all, [], READ);
    assert.equal(whole.rowCount, ROWS);
    const got: unknown[][] = [];
    const sizes: number[] = [];
    let columns: string[] = [];
    const n = await src.stream(h().all, [], stream(), (cols, rows) => {
      columns = cols;
      sizes.push(rows.length);
      for (const r of rows) got.push(r);
    });
    assert.equal(n, ROWS);
    assert.deepEqual(columns, whole.columns);
    assert.equal(sizes.length, ROWS / BATCH);
    assert.ok(
      sizes.every((s) => s === BATCH),
      `batch sizes ${sizes.join(',')}`,
    );
    assert.deepStrictEqual(got, whole.rows); // same values, same types, same order
    // A short last batch.
    const sizes2: number[] = [];
    assert.equal(await src.stream(h().all, [], stream(7000), (_c, rows) => void sizes2.push(rows.length)), ROWS);
    assert.deepEqual(sizes2, [...Array(7).fill(7000), ROWS - 49_000]);
  });

  test('batchRows is read for every batch: the caller may change it as it goes', async () => {
    const src = h().open();
    const opts = stream(1000);
    const plan = [3000, 17, 12_000, 500];
    const sizes: number[] = [];
    const n = await src.stream(h().all, [], opts, (_c, rows) => {
      sizes.push(rows.length);
      opts.batchRows = plan[sizes.length - 1] ?? 500;
    });
    assert.equal(n, ROWS);
    const expected = [1000, 3000, 17, 12_000];
    for (let left = ROWS - expected.reduce((a, b) => a + b, 0); left > 0; left -= 500) expected.push(Math.min(500, left));
    assert.deepEqual(sizes, expected);
  });

  test('backpressure: one batch at a time, and the server is still producing while the reader waits', async () => {
    const src = h().open();
    const marker = `qag_bp_${Date.now()}`;
    let inFlight = 0;
    let maxInFlight = 0;
    let batches = 0;
    let runningWhilePaused = -1;
    const n = await src.stream(h().wide(marker), [], stream(), async (_c, rows) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      batches++;
      assert.equal(rows.length, BATCH);
      if (batches === 2 && h().running) runningWhilePaused = await h().running!(marker);
      await sleep(batches <= 3 ? 20 : 0);
      inFlight--;
    });
    assert.equal(n, ROWS);
    assert.equal(batches, ROWS / BATCH);
    assert.equal(maxInFlight, 1, 'a batch was handed over before the previous one was done');
    if (h().running) assert.equal(runningWhilePaused, 1, 'the statement had finished: rows were fetched ahead');
  });

  test('onBatch throwing on the 3rd batch cancels the statement and frees the connection', async () => {
    const src = h().open(1); // one connection: the next call needs the very one the stream had
    const marker = `qag_cancel_${Date.now()}`;
    const boom = new Error('client went away');
    let batches = 0;
    let caught: unknown;
    await src
      .stream(h().wide(marker), [], stream(), () => {
        if (++batches === 3) throw boom;
      })
      .then(
        () => assert.fail('the stream should have failed'),
        (err: unknown) => (caught = err),
      );
    assert.equal(caught, boom); // that very error, not a wrapped one
    assert.equal(batches, 3);
    const again = await src.run('SELECT 1 AS one', [], READ); // at once, on the freed connection
    assert.deepEqual(again.rows, [[1]]);
    if (h().running)
      assert.equal(
        await eventually(
          () => h().running!(marker),
          (v) => v === 0,
        ),
        0,
      );
    // An async throw too, and the source streams again afterwards.
    const late = new Error('late');
    caught = undefined;
    await src
      .stream(h().all, [], stream(), async () => {
        await sleep(1);
        throw late;
      })
      .catch((err: unknown) => (caught = err));
    assert.equal(caught, late);
    assert.equal(await src.stream(h().all, [], stream(25_000), () => {}), ROWS);
  });

  test('run() calls complete while a stream waits in onBatch', { timeout: 30_000 }, async () => {
    const src = h().open();
    let reached!: () => void;
    const atFirst = new Promise<void>((r) => (reached = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let batches = 0;
    const streaming = src.stream(h().all, [], stream(), async () => {
      if (++batches === 1) {
        reached();
        await gate;
      }
    });
    await atFirst;
    const runs = await Promise.all(Array.from({ length: 12 }, (_, i) => src.run(`SELECT ${i} AS i`, [], READ)));
    assert.deepEqual(
      runs.map((r) => r.rows[0]![0]),
      Array.from({ length: 12 }, (_, i) => i),
    );
    assert.equal(batches, 1, 'the stream stayed paused meanwhile');
    release();
    assert.equal(await streaming, ROWS);
  });

  test('no rows: one call with the columns and no rows', async () => {
    const src = h().open();
    const calls: [string[], unknown[][]][] = [];
    assert.equal(await src.stream(h().empty, [], stream(), (c, r) => void calls.push([c, r])), 0);
    assert.equal(calls.length, 1);
    assert.deepEqual(calls[0], [['id', 'label'], []]);
  });

  test('a write is refused: streams are read-only', async () => {
    const src = h().open();
    let called = false;
    await rejectsWith(
      src.stream(h().write, [], { ...stream(), readOnly: false }, () => {
        called = true;
      }),
      'read_only',
    );
    assert.equal(called, false);
  });

  test('a slow database is query_timeout and the statement is cancelled; a slow reader is not', { timeout: 30_000 }, async () => {
    const src = h().open(1);
    const marker = `qag_stall_${Date.now()}`;
    let batches = 0;
    await rejectsWith(
      src.stream(h().stall(marker), [], stream(BATCH, h().stallMs), () => void batches++),
      'query_timeout',
    );
    assert.ok(batches <= 1);
    if (h().running)
      assert.equal(
        await eventually(
          () => h().running!(marker),
          (v) => v === 0,
        ),
        0,
      );
    assert.deepEqual((await src.run('SELECT 1 AS one', [], READ)).rows, [[1]]);
    // The limit counts the database's time only: a reader slower than the limit in all is fine.
    let slow = 0;
    const n = await src.stream(h().all, [], stream(10_000, 400), async () => {
      slow++;
      await sleep(150);
    });
    assert.equal(n, ROWS);
    assert.equal(slow, ROWS / 10_000);
  });

  test('streams beyond the limit are unavailable; ordinary calls still run', { timeout: 30_000 }, async () => {
    const src = h().open(2);
    const max = h().maxStreams;
    const releases: (() => void)[] = [];
    const started: Promise<void>[] = [];
    const open: Promise<number>[] = [];
    for (let i = 0; i < max; i++) {
      let reached!: () => void;
      started.push(new Promise<void>((r) => (reached = r)));
      const gate = new Promise<void>((r) => releases.push(r));
      let first = true;
      open.push(
        src.stream(h().all, [], stream(), async () => {
          if (first) {
            first = false;
            reached();
            await gate;
          }
        }),
      );
    }
    await Promise.all(started);
    const e = await rejectsWith(
      src.stream(h().all, [], stream(), () => {}),
      'unavailable',
    );
    assert.equal(statusOf(e.code), 503);
    assert.deepEqual((await src.run('SELECT 2 AS two', [], READ)).rows, [[2]]);
    for (const r of releases) r();
    assert.deepEqual(await Promise.all(open), Array(max).fill(ROWS));
    assert.equal(await src.stream(h().all, [], stream(), () => {}), ROWS); // room again
  });
}

describe('stream: postgres', () => {
  let db: Awaited<ReturnType<typeof scratchDatabase>>;
  let admin: postgres.Sql;
  const opened: Source[] = [];
  const url = new URL(PG_ADMIN_URL);

  before(async () => {
    db = await scratchDatabase('qag_streams');
    admin = db.sql;
    await admin.unsafe(`
      create table big (id int primary key, big int8, n numeric, ts timestamp, d date, j jsonb, b bytea, ok bool, label text);
      insert into big select g,
        case when g % 7 = 0 then 9007199254740993 + g else g * 1000 end, g / 8.0,
        timestamp '2024-01-01' + g * interval '1 minute', date '2024-01-01' + (g % 365),
        jsonb_build_object('g', g, 'a', jsonb_build_array(g, 'x')), decode(lpad(to_hex(g), 8, '0'), 'hex'),
        g % 2 = 0, case when g % 11 = 0 then null else 'row ' || g end
      from generate_series(1, ${ROWS}) g;
    `);
  });

  after(async () => {
    await Promise.all(opened.map((s) => s.close()));
    await db.drop();
  });

  const conn = (): ConnectionConfig => ({
    name: 'pg',
    db: 'postgres',
    host: url.hostname,
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username) || 'postgres',
    password: decodeURIComponent(url.password) || null,
    database: db.name,
  });

  streamSuite(() => ({
    open(poolSize = 4) {
      const s = openSource(conn(), settings(poolSize));
      opened.push(s);
      return s;
    },
    all: 'select * from big order by id',
    wide: (m) => `select g, repeat('x', 1000) as pad from generate_series(1, ${ROWS}) g /* ${m} */`,
    stall: (m) => `select g, case when g = 1500 then pg_sleep(30) end as s from generate_series(1, 3000) g /* ${m} */`,
    stallMs: 500,
    write: 'insert into big (id) values (-1)',
    empty: 'select id, label from big where id < 0',
    // Between FETCHes a stream's backend waits idle in its transaction, showing its last FETCH.
    async running(m) {
      const rows = await admin.unsafe(
        `select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()
          and ((state = 'active' and query like $1) or (state like 'idle in transaction%' and query like 'fetch forward % from qag_stream'))`,
        [`%${m}%`],
      );
      return rows.length;
    },
    maxStreams: 1,
  }));

  test('raw: each value as the bytes of its text, read by its column into the value run() gives', async () => {
    const src = openSource(conn(), settings());
    opened.push(src);
    const sql = "select *, ts + id * interval '1.000123 second' as frac, (id % 30000)::int2 as small, id::float8 / 3 as f from big order by id";
    const whole = await src.run(sql, [], READ);
    const got: unknown[][] = [];
    const kinds = new Set<string>();
    let sawRaw = false;
    const n = await src.stream(sql, [], { ...stream(), raw: true }, (cols, rows, _types, raw) => {
      assert.deepEqual(cols, whole.columns);
      assert.ok(raw && raw.length === cols.length);
      sawRaw = true;
      for (const r of rows) {
        got.push(
          r.map((v, c) => {
            if (v === null) return null;
            assert.ok(v instanceof Uint8Array);
            kinds.add(`${cols[c]}:${raw[c]!.kind}`);
            return raw[c]!.read(v);
          }),
        );
      }
    });
    assert.ok(sawRaw);
    assert.equal(n, ROWS);
    assert.deepStrictEqual(got, whole.rows);
    assert.deepEqual([...kinds].sort(), [
      'b:other',
      'big:integer',
      'd:text',
      'f:decimal',
      'frac:timestamp',
      'id:integer',
      'j:other',
      'label:text',
      'n:decimal',
      'ok:boolean',
      'small:integer',
      'ts:timestamp',
    ]);
  });

  test('a statement a cursor cannot hold streams as a portal; a refused one fails as run() does', async () => {
    const src = openSource(conn(), settings(1));
    opened.push(src);
    const explain = 'explain (costs off) select * from big where id > $1 order by id';
    const whole = await src.run(explain, [7], READ);
    const got: unknown[][] = [];
    assert.equal(await src.stream(explain, [7], stream(1), (_c, rows) => void got.push(...rows)), whole.rowCount);
    assert.deepStrictEqual(got, whole.rows);
    for (const bad of ['select nope from big', 'select id from big where id = $1']) {
      const values = bad.includes('$1') ? ['not a number'] : [];
      const ran = await src.run(bad, values, READ).then(
        () => assert.fail('run() should have failed'),
        (e: { code: string; message: string }) => e,
      );
      const streamed = await src
        .stream(bad, values, stream(), () => assert.fail('no batch'))
        .then(
          () => assert.fail('stream() should have failed'),
          (e: { code: string; message: string }) => e,
        );
      assert.deepEqual([streamed.code, streamed.message], [ran.code, ran.message], bad);
    }
    assert.deepEqual((await src.run('select 1 as one', [], READ)).rows, [[1]]); // the connection is free, out of any transaction
    assert.deepEqual((await src.run('select now() = statement_timestamp() as fresh', [], READ)).rows, [[true]]);
  });

  test("a reader idle past the server's idle_in_transaction_session_timeout still gets every row", { timeout: 30_000 }, async () => {
    await admin.unsafe(`alter database ${db.name} set idle_in_transaction_session_timeout = '150ms'`);
    try {
      const src = openSource(conn(), settings(2));
      opened.push(src);
      let batches = 0;
      const n = await src.stream('select * from big order by id', [], stream(12_500), async () => {
        batches++;
        await sleep(400);
      });
      assert.equal(n, ROWS);
      assert.equal(batches, 4);
    } finally {
      await admin.unsafe(`alter database ${db.name} reset idle_in_transaction_session_timeout`);
    }
  });

  test('a cursor occupies its client: calls on a source of 2 go to the other one', { timeout: 30_000 }, async () => {
    const src = openSource(conn(), settings(2));
    opened.push(src);
    let reached!: () => void;
    const atFirst = new Promise<void>((r) => (reached = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const streaming = src.stream('select * from big order by id', [], stream(), async () => {
      reached();
      await gate;
    });
    await atFirst;
    // Enough calls that a round-robin pick would have put some on the stream's client.
    const pids = await Promise.all(Array.from({ length: 20 }, () => src.run('select pg_backend_pid()', [], READ)));
    assert.equal(new Set(pids.map((r) => r.rows[0]![0])).size, 1);
    release();
    assert.equal(await streaming, ROWS);
  });
});

/**
 * A TCP proxy to PostgreSQL that holds each cancel request (a connection whose first message is PostgreSQL's
 * CancelRequest) for `holdMs` before passing it on: a cancel that lands after the statement it was sent for has
 * answered, every time. Other connections pass at once.
 */
async function lateCancels(target: { host: string; port: number }, holdMs: number): Promise<{ port: number; held: () => number; close(): void }> {
  let held = 0;
  const server = net.createServer((client) => {
    client.once('data', (first) => {
      client.pause();
      const cancel = first.length >= 8 && first.readInt32BE(0) === 16 && first.readInt32BE(4) === 80877102;
      if (cancel) held++;
      setTimeout(
        () => {
          const upstream = net.connect(target.port, target.host, () => {
            upstream.write(first);
            client.pipe(upstream).pipe(client);
            client.resume();
          });
          upstream.on('error', () => client.destroy());
          client.on('error', () => upstream.destroy());
        },
        cancel ? holdMs : 0,
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as net.AddressInfo).port, held: () => held, close: () => server.close() };
}

describe('stream: postgres, a cancel that lands late', () => {
  test('a first batch that comes after the limit ran out is not handed over: query_timeout before any row', async () => {
    const url = new URL(PG_ADMIN_URL);
    const proxy = await lateCancels({ host: url.hostname, port: Number(url.port || 5432) }, 600);
    const src = openSource(
      {
        name: 'pg',
        db: 'postgres',
        host: '127.0.0.1',
        port: proxy.port,
        user: decodeURIComponent(url.username) || 'postgres',
        password: decodeURIComponent(url.password) || null,
        database: url.pathname.slice(1) || 'postgres',
      },
      settings(2),
    );
    try {
      // Both connections open before the clock starts (two calls at once), so the limit runs out in the FETCH.
      await Promise.all([src.run('select pg_sleep(0.05)', [], READ), src.run('select pg_sleep(0.05)', [], READ)]);
      // The first FETCH takes 300 ms; the limit is 60 ms, and its cancel reaches the server 600 ms after it is sent.
      let batches = 0;
      await rejectsWith(
        src.stream('select g, pg_sleep(0.3)::text as s from generate_series(1, 1) g', [], stream(BATCH, 60), () => {
          batches++;
        }),
        'query_timeout',
      );
      assert.equal(proxy.held(), 1, 'the cancel went through the proxy');
      assert.equal(batches, 0, 'no row handed over once the limit has run out');
    } finally {
      await src.close();
      proxy.close();
    }
  });
});

describe('stream: mysql (MariaDB)', () => {
  const SCRATCH = `qag_streams_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const host = process.env.QUERYAPIGATE_TEST_MYSQL_HOST ?? '127.0.0.1';
  const port = Number(process.env.QUERYAPIGATE_TEST_MYSQL_PORT ?? 3306);
  const user = process.env.QUERYAPIGATE_TEST_MYSQL_USER ?? 'root';
  let admin: mysql.Connection;
  const opened: Source[] = [];

  before(async () => {
    admin = await mysql.createConnection({ host, port, user, multipleStatements: true });
    await admin.query(`CREATE DATABASE ${SCRATCH}`);
    await admin.query(`
      USE ${SCRATCH};
      CREATE TABLE big (
        id INT PRIMARY KEY, big BIGINT, n DECIMAL(12,3), f FLOAT, ts DATETIME(3), d DATE, t TIME(2), bits BIT(8),
        j JSON, b VARBINARY(8), label VARCHAR(40)
      );
      INSERT INTO big SELECT seq,
        IF(seq % 7 = 0, 9007199254740993 + seq, seq * 1000), seq / 8, seq / 10,
        TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL (seq % 1000) * 1000 MICROSECOND,
        DATE('2024-01-01') + INTERVAL (seq % 365) DAY, SEC_TO_TIME(seq % 86400) + INTERVAL 250000 MICROSECOND,
        seq % 256, JSON_OBJECT('g', seq, 'a', JSON_ARRAY(seq, 'x')), UNHEX(LPAD(HEX(seq), 8, '0')),
        IF(seq % 11 = 0, NULL, CONCAT('row ', seq))
      FROM seq_1_to_${ROWS};
    `);
  });

  after(async () => {
    await Promise.all(opened.map((s) => s.close()));
    await admin.query(`DROP DATABASE IF EXISTS ${SCRATCH}`);
    await admin.end();
  });

  streamSuite(() => ({
    open(poolSize = 4) {
      const s = openSource({ name: 'my', db: 'mysql', host, port, user, database: SCRATCH }, settings(poolSize));
      opened.push(s);
      return s;
    },
    all: 'SELECT * FROM big ORDER BY id',
    wide: (m) => `SELECT seq, REPEAT('x', 1000) AS pad FROM seq_1_to_${ROWS} /* ${m} */`,
    stall: (m) => `SELECT seq, IF(seq = 1500, SLEEP(30), 0) AS s FROM seq_1_to_3000 /* ${m} */`,
    stallMs: 500,
    write: 'INSERT INTO big (id) VALUES (-1)',
    empty: 'SELECT id, label FROM big WHERE id < 0',
    async running(m) {
      const [rows] = await admin.query<mysql.RowDataPacket[]>('SHOW FULL PROCESSLIST');
      return rows.filter((r) => typeof r.Info === 'string' && r.Info.includes(m) && !r.Info.includes('PROCESSLIST')).length;
    },
    maxStreams: 1,
  }));
});

describe('stream: sqlite', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qag-streams-'));
  const file = path.join(dir, 'big.db');
  const opened: Source[] = [];

  before(() => {
    const setup = new Database(file);
    setup.exec(`
      create table big (id integer primary key, big integer, r real, label text, b blob);
      with recursive g(x) as (select 1 union all select x + 1 from g where x < ${ROWS})
      insert into big select x, case when x % 7 = 0 then 9007199254740993 + x else x * 1000 end, x / 8.0,
        case when x % 11 = 0 then null else 'row ' || x end, randomblob(4) from g;
    `);
    setup.close();
  });

  after(async () => {
    await Promise.all(opened.map((s) => s.close()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  streamSuite(() => ({
    open() {
      const s = openSource({ name: 'lite', db: 'sqlite', database: file }, settings());
      opened.push(s);
      return s;
    },
    all: 'select * from big order by id',
    wide: () => "select id, printf('%.1000c', 'x') as pad from big order by id",
    // SQLite cannot be interrupted; the limit is checked per batch, so a limit below any batch's pull time.
    stall: () => 'select * from big order by id',
    stallMs: 0.001,
    write: 'insert into big (id) values (-1)',
    empty: 'select id, label from big where id < 0',
    running: null,
    maxStreams: 4,
  }));
});
