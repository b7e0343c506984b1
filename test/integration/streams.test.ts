// ?stream=true exports: the same bytes as the paged path, for every format and source; masking on
// every row; the row cap's truncation line; a client that leaves frees its connection at once; and
// ordinary calls served while a stream waits on a slow reader.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import mysql from 'mysql2/promise';
import XLSX from 'xlsx';
import { eventually, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const ROWS = 5000;

describe('streamed exports', () => {
  let s: TestServer;
  let pg: Awaited<ReturnType<typeof scratchDatabase>>;
  const myDb = `qag_stream_my_${process.pid}`;
  let my: mysql.Connection;
  let masked = '';
  before(async () => {
    pg = await scratchDatabase('qag_stream');
    await pg.sql.unsafe(`CREATE TABLE t (id int PRIMARY KEY, name text, amount numeric(10,2), at timestamp, email text);
      INSERT INTO t SELECT i, 'row "' || i || '", x', i / 7.0, timestamp '2026-01-01' + i * interval '1 minute', 'u' || i || '@example.com'
      FROM generate_series(1, ${ROWS}) i;
      CREATE TABLE big AS SELECT i AS id, repeat('x', 200) AS pad FROM generate_series(1, 300000) i;
      CREATE TABLE types AS SELECT i AS id, i::int2 % 300 AS small, (i::int8 - 2500) * 4000000000000 AS big, i::numeric / 3 AS num,
        i::float8 / 7 AS flt, (i % 3 = 0) AS flag, date '2026-01-01' + i AS day,
        timestamp '2026-01-01' + i * interval '1 day 1 hour 1.000123 second' AS at, timestamptz '2026-01-01 00:00:00+02' + i * interval '1 hour' AS atz,
        (ARRAY['plain', 'a,b', 'say "hi"', 'line' || chr(10) || 'break', 'tab' || chr(9) || 'here', 'back\\slash', 'unicode é 中文 😀', '', ' '])[i % 9 + 1] || i AS txt,
        md5(i::text)::uuid AS uid, ('{"k": ' || i || ', "s": "v\\"q"}')::jsonb AS doc, ARRAY[i, i + 1] AS arr, decode(md5(i::text), 'hex') AS raw,
        interval '1 day' * i AS span, time '12:00' + i * interval '1 second' AS tod
        FROM generate_series(1, 5000) i;
      UPDATE types SET at = 'infinity' WHERE id = 7; UPDATE types SET at = '0044-03-15 12:00:00 BC' WHERE id = 8;
      UPDATE types SET at = '12026-01-01 00:00:00' WHERE id = 9; UPDATE types SET txt = NULL, big = NULL, at = NULL, flag = NULL WHERE id % 11 = 0;`);
    my = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
    await my.query(`CREATE DATABASE ${myDb}; USE ${myDb};
      CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(10,2), at DATETIME);`);
    const values = Array.from(
      { length: ROWS },
      (_, k) => `(${k + 1}, 'row ${k + 1}, "q"', ${((k + 1) / 7).toFixed(2)}, '2026-01-01 00:00:00' + INTERVAL ${k + 1} MINUTE)`,
    );
    await my.query(`INSERT INTO t VALUES ${values.join(',')}`);
    s = await startTestServer({
      QUERYAPIGATE_WORKERS: '2',
      QUERYAPIGATE_LOAD_EXAMPLES: '1',
      QUERYAPIGATE_MAX_PAGE_SIZE: '100000',
      QUERYAPIGATE_STREAM_MAX_ROWS: '0',
    });
    const post = async (path: string, body: unknown) => assert.ok((await s.call('POST', path, { body })).status < 300);
    await post('/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' });
    await post('/api/v1/connections', { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: myDb, user: 'root' });
    for (const [name, conn, sql] of [
      ['pg_rows', 'pg', 'SELECT id, name, amount, at, email FROM t ORDER BY id'],
      ['my_rows', 'my', 'SELECT id, name, amount, at FROM t ORDER BY id'],
      ['lite_rows', 'examples', 'SELECT rental_id, rental_date, return_date, amount FROM rental ORDER BY rental_id LIMIT 5000'],
      ['pg_big', 'pg', 'SELECT id, pad FROM big ORDER BY id'],
      ['pg_types', 'pg', 'SELECT * FROM types ORDER BY id'],
      ['pg_slow', 'pg', 'SELECT id, pad FROM big WHERE id <= 20000 ORDER BY id'],
    ])
      await post('/api/v1/queries', { name, connection_name: conn, sql, description: name, publish: true });
    masked = (
      await s.call('POST', '/api/v1/api-keys', {
        body: { name: 'masked', queries: ['pg_rows'], connections: [], mask: [{ column: '*.email', action: 'mask' }] },
      })
    ).json.secret;
  });
  after(async () => {
    await s.stop();
    await pg.drop();
    await my.query(`DROP DATABASE ${myDb}`);
    await my.end();
  });

  for (const name of ['pg_rows', 'my_rows', 'lite_rows']) {
    for (const format of ['csv', 'tsv', 'ndjson']) {
      test(`${name} as ${format}: the stream has exactly the bytes of the whole result`, async () => {
        const streamed = await s.call('GET', `/q/${name}?stream=true&format=${format}`);
        assert.equal(streamed.status, 200, streamed.text);
        assert.match(streamed.headers.get('content-disposition') ?? '', new RegExp(`attachment; filename="${name}.${format}"`));
        const paged = await s.call('GET', `/q/${name}?format=${format}&page_size=100000`);
        assert.equal(streamed.text, paged.text);
        const lines = streamed.text.split(/\r?\n/).filter(Boolean);
        assert.equal(lines.length, format === 'ndjson' ? ROWS : ROWS + 1);
      });
    }
  }

  // PostgreSQL's values come raw to a text export (their text, copied where it is already the output):
  // every type, NULLs, text that needs quoting or escaping, non-ASCII, timestamps a Date cannot hold.
  for (const format of ['csv', 'tsv', 'ndjson']) {
    test(`PostgreSQL types as ${format}: the stream has exactly the bytes of the whole result`, async () => {
      const streamed = await s.call('GET', `/q/pg_types?stream=true&format=${format}`);
      assert.equal(streamed.status, 200, streamed.text);
      const paged = await s.call('GET', `/q/pg_types?format=${format}&page_size=100000`);
      assert.equal(streamed.bytes.length, paged.bytes.length);
      assert.ok(Buffer.from(streamed.bytes).equals(Buffer.from(paged.bytes)));
      assert.match(streamed.text, /infinity/);
    });
  }

  test('a slow reader gets the same bytes as a fast one', async () => {
    const fast = await s.call('GET', '/q/pg_slow?stream=true&format=csv');
    const url = new URL(`${s.url}/q/pg_slow?stream=true&format=csv`);
    const chunks: Buffer[] = [];
    await new Promise<void>((resolve, reject) => {
      http
        .get(url, { headers: { 'X-API-Key': 'test-admin-key' } }, (res) => {
          let got = 0;
          res.on('data', (d: Buffer) => {
            chunks.push(d);
            got += d.length;
            if (got > 256 * 1024) {
              got = 0;
              res.pause(); // the socket backs up, the export waits, its frames are handed back later
              setTimeout(() => res.resume(), 30);
            }
          });
          res.on('end', resolve);
          res.on('error', reject);
        })
        .on('error', reject);
    });
    assert.ok(Buffer.concat(chunks).equals(Buffer.from(fast.bytes)));
    assert.equal(fast.text.split('\r\n').length, 20_000 + 2);
  });

  test('masking applies to every streamed row', async () => {
    const r = await s.call('GET', '/q/pg_rows?stream=true&format=ndjson', { key: masked });
    const rows = r.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(rows.length, ROWS);
    for (const row of rows) assert.match(row.email, /^u\**@example\.com$/);
    assert.doesNotMatch(r.text, /u\d+@example\.com/);
  });

  test('stream errors before the first byte are JSON errors', async () => {
    const bad = await s.call('GET', '/q/pg_rows?stream=true&format=json');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.code, 'invalid_stream');
    const paged = await s.call('GET', '/q/pg_rows?stream=true&format=csv&page=2');
    assert.equal(paged.json.code, 'invalid_stream');
  });

  test('a client that disconnects cancels the statement and frees its connection; others are served meanwhile', async () => {
    const url = new URL(`${s.url}/q/pg_big?stream=true&format=csv`);
    let got = 0;
    await new Promise<void>((resolve, reject) => {
      const req = http.get(url, { headers: { 'X-API-Key': 'test-admin-key' } }, (res) => {
        res.on('data', (d: Buffer) => {
          got += d.length;
          if (got > 200_000) {
            res.pause(); // a slow reader: the export waits on us
            void (async () => {
              for (let i = 0; i < 5; i++) {
                const side = await s.call('GET', '/q/pg_rows?page_size=2');
                assert.equal(side.status, 200, 'ordinary calls are served while the stream waits');
              }
              req.destroy();
              resolve();
            })().catch(reject);
          }
        });
      });
      req.on('error', () => undefined);
    });
    const active = await eventually(
      () =>
        pg.sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = ${pg.name} AND query LIKE '%FROM big%' AND state = 'active' AND pid <> pg_backend_pid()`,
      (r) => r[0].n === 0,
      5000,
    );
    assert.equal(active[0].n, 0, 'the cursor was closed on the server');
    const after = await s.call('GET', '/q/pg_rows?page_size=1');
    assert.equal(after.status, 200);
    const h = await eventually(
      () => s.call('GET', '/api/v1/queries/pg_big/history?limit=1'),
      (r) => r.json.items.length > 0,
    );
    assert.equal(h.json.items[0].status, 'error');
    assert.ok(h.json.items[0].rows > 0, 'the run records the rows sent');
  });
});

test('QUERYAPIGATE_STREAM_MAX_ROWS ends a stream with a visible truncation note', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_STREAM_MAX_ROWS: '1500' });
  try {
    await s.call('POST', '/api/v1/queries', {
      body: { name: 'all', connection_name: 'examples', sql: 'SELECT rental_id FROM rental ORDER BY rental_id', description: 'a', publish: true },
    });
    const nd = await s.call('GET', '/q/all?stream=true&format=ndjson');
    const lines = nd.text.trim().split('\n');
    assert.equal(lines.length, 1501);
    assert.deepEqual(JSON.parse(lines[1500]), { truncated: true, rows: 1500 });
    const csv = await s.call('GET', '/q/all?stream=true&format=csv');
    assert.match(csv.text, /# truncated after 1500 rows\r\n$/);
    // xlsx says it in the workbook's description, as parquet does in its footer: not as a row.
    const xlsx = await s.call('GET', '/q/all?stream=true&format=xlsx');
    const book = XLSX.read(xlsx.bytes, { type: 'array' });
    assert.equal(book.Props?.Comments, 'queryapigate.truncated: after 1500 rows');
    const rows = XLSX.utils.sheet_to_json<{ rental_id: number }>(book.Sheets.result);
    assert.deepEqual([rows.length, rows[0].rental_id, rows[1499].rental_id], [1500, 1, 1500]);
    const metrics = await s.call('GET', '/metrics', { key: null });
    assert.match(metrics.text, /queryapigate_stream_exports_total\{[^}]*status="truncated"[^}]*\} 3/);
    const h = await s.call('GET', '/api/v1/queries/all/history?limit=1');
    assert.equal(h.json.items[0].rows, 1500);
    assert.equal(h.json.items[0].status, 'success');
  } finally {
    await s.stop();
  }
});

test('a reader that takes nothing for QUERYAPIGATE_STALL_TIMEOUT is cut off (a stream, its statement cancelled; a page); one that keeps reading, longer than that in all, is not', async () => {
  const pg = await scratchDatabase('qag_stall');
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_STALL_TIMEOUT: '3', QUERYAPIGATE_MAX_PAGE_SIZE: '100000' });
  try {
    await pg.sql`CREATE TABLE big AS SELECT i AS id, repeat('x', 200) AS pad FROM generate_series(1, 300000) i`;
    const post = async (path: string, body: unknown) => assert.ok((await s.call('POST', path, { body })).status < 300);
    await post('/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' });
    await post('/api/v1/queries', { name: 'big', connection_name: 'pg', sql: 'SELECT id, pad FROM big ORDER BY id', description: 'b', publish: true });
    await post('/api/v1/queries', {
      name: 'some',
      connection_name: 'pg',
      sql: 'SELECT id, pad FROM big WHERE id <= 90000 ORDER BY id',
      description: 's',
      publish: true,
    });
    /**
     * Reads the export at `path`, pausing `pauseMs` after each 256 KiB; `stallMs`: once, for that long, after the first
     * 256 KiB (a paused socket sees no end, so it reads on after it). The bytes it got and whether the answer was whole.
     */
    const read = (path: string, pauseMs: number, stallMs = 0) =>
      new Promise<{ bytes: number; whole: boolean }>((resolve) => {
        let bytes = 0;
        let since = 0;
        let stalls = stallMs > 0 ? 1 : 0;
        http
          .get(new URL(`${s.url}${path}`), { headers: { 'X-API-Key': 'test-admin-key' } }, (res) => {
            res.on('data', (d: Buffer) => {
              bytes += d.length;
              since += d.length;
              if (since < 256 * 1024) return;
              since = 0;
              res.pause();
              setTimeout(() => res.resume(), stalls-- > 0 ? stallMs : pauseMs);
            });
            res.on('close', () => resolve({ bytes, whole: res.complete }));
          })
          .on('error', () => resolve({ bytes, whole: false }));
      });
    const whole = (await s.call('GET', '/q/big?stream=true&format=csv')).bytes.byteLength;
    const stalled = await read('/q/big?stream=true&format=csv', 0, 6000);
    assert.equal(stalled.whole, false, 'the server cut the stream');
    assert.ok(stalled.bytes < whole, `${stalled.bytes} of ${whole} bytes`);
    const active = await eventually(
      () =>
        pg.sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = ${pg.name} AND query LIKE '%FROM big ORDER%' AND state <> 'idle' AND pid <> pg_backend_pid()`,
      (r) => r[0].n === 0,
      5000,
    );
    assert.equal(active[0].n, 0, 'the statement was cancelled on the server');
    const h = await eventually(
      () => s.call('GET', '/api/v1/queries/big/history?limit=1'),
      (r) => r.json.items.length > 0,
    );
    assert.equal(h.json.items[0].status, 'error');
    assert.equal(h.json.items[0].code, 'stream_stalled', JSON.stringify(h.json.items[0]));
    // Short pauses, longer than the limit in all: the export is whole. The socket says it can take more only once the
    // reader has freed about half its kernel buffer (megabytes on loopback), so the reader keeps a brisk pace.
    const slow = await read('/q/some?stream=true&format=csv', 100);
    assert.equal(slow.whole, true);
    assert.equal(slow.bytes, (await s.call('GET', '/q/some?stream=true&format=csv')).bytes.byteLength);
    // An ordinary answer too large for the socket's buffers (about 19 MB of JSON): the same two readers.
    const page = '/q/some?page_size=100000';
    const answer = (await s.call('GET', page)).bytes.byteLength;
    assert.ok(answer > 10_000_000, `${answer} bytes`);
    const stalledPage = await read(page, 0, 6000);
    assert.equal(stalledPage.whole, false, 'the server cut the answer');
    assert.ok(stalledPage.bytes < answer, `${stalledPage.bytes} of ${answer} bytes`);
    const slowPage = await read(page, 100);
    assert.equal(slowPage.whole, true);
    assert.equal(slowPage.bytes, answer);
  } finally {
    await s.stop();
    await pg.drop();
  }
});
