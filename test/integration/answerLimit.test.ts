// The answer size limit (QUERYAPIGATE_MAX_ANSWER_BYTES) on every data source: a result over it is
// 400 answer_too_large (rendering stopped at the limit) and the server stays healthy with bounded
// memory; a result under it is unchanged; ?stream=true exports the same rows whatever their size.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import { scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const LIMIT = 1 << 20; // 1 MiB
const ROWS = 1000;
const PAD = 10_000; // 1,000 rows of 10,000 characters: about 10 MB as JSON, ten times the limit
const MY_DB = `qag_answer_limit_${process.pid}`;

/** The same 1,000 rows of (id, pad) in each dialect, ordered by id. */
const SQL: Record<string, string> = {
  pg: `SELECT g AS id, repeat('x', ${PAD}) AS pad FROM generate_series(1, ${ROWS}) g ORDER BY id`,
  my: `SELECT seq AS id, REPEAT('x', ${PAD}) AS pad FROM seq_1_to_${ROWS} ORDER BY id`,
  lite: `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${ROWS}) SELECT n AS id, replace(hex(zeroblob(${PAD / 2})), '0', 'x') AS pad FROM g ORDER BY id`,
};

/**
 * 1,000 rows of (id, hex): 10,016 hex characters that do not repeat (md5 of distinct inputs; SQLite's
 * random bytes), so compression leaves about half: some 5 MB as xlsx or Parquet, five times the limit.
 */
const HEX: Record<string, string> = {
  pg: `SELECT g AS id, (SELECT string_agg(md5(g || '-' || i), '') FROM generate_series(1, 313) i) AS hex FROM generate_series(1, ${ROWS}) g ORDER BY id`,
  my: `SELECT t.seq AS id, (SELECT GROUP_CONCAT(MD5(CONCAT(t.seq, '-', i.seq)) SEPARATOR '') FROM seq_1_to_313 i) AS hex FROM seq_1_to_${ROWS} t ORDER BY id`,
  lite: `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${ROWS}) SELECT n AS id, lower(hex(randomblob(5008))) AS hex FROM g ORDER BY id`,
};

let s: TestServer;
let pg: Awaited<ReturnType<typeof scratchDatabase>>;
let my: mysql.Connection;

before(async () => {
  pg = await scratchDatabase('qag_answer_limit');
  my = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
  await my.query(`CREATE DATABASE ${MY_DB}`);
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_MAX_ANSWER_BYTES: String(LIMIT), QUERYAPIGATE_STREAM_MAX_ROWS: '0' });
  new Database(join(s.home, 'lite.db')).close();
  const post = async (path: string, body: unknown) => {
    const r = await s.call('POST', path, { body });
    assert.equal(r.status, 201, `${path}: ${r.text}`);
  };
  await post('/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' });
  await post('/api/v1/connections', { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: MY_DB, user: 'root' });
  await post('/api/v1/connections', { name: 'lite', db: 'sqlite', database: 'lite.db' });
  for (const c of Object.keys(SQL)) await post('/api/v1/queries', { name: `big_${c}`, connection_name: c, description: 'big', publish: true, sql: SQL[c] });
  for (const c of Object.keys(HEX))
    await post('/api/v1/queries', { name: `hex_${c}`, connection_name: c, description: 'big, binary', publish: true, sql: HEX[c] });
});

after(async () => {
  await s?.stop();
  await pg?.drop();
  await my?.query(`DROP DATABASE IF EXISTS ${MY_DB}`);
  await my?.end();
});

const rssMb = () => process.memoryUsage().rss / 2 ** 20; // the server runs in this process

for (const c of Object.keys(SQL)) {
  describe(`${c}: an answer over QUERYAPIGATE_MAX_ANSWER_BYTES`, () => {
    test('is 400 answer_too_large in every format, naming the limit, paging and streams', async () => {
      for (const format of ['json', 'ndjson', 'csv', 'tsv']) {
        const r = await s.call('GET', `/q/big_${c}?page_size=1000&format=${format}`);
        assert.equal(r.status, 400, `${format}: ${r.text.slice(0, 200)}`);
        assert.equal(r.json.code, 'answer_too_large');
        assert.deepEqual(Object.keys(r.json), ['error', 'code', 'request_id']);
        assert.match(r.json.error, /1 MiB/);
        assert.match(r.json.error, /page_size/);
        assert.match(r.json.error, /stream=true/);
      }
    });

    test('is 400 answer_too_large as xlsx and parquet too, and under the limit they are served', async () => {
      for (const format of ['xlsx', 'parquet']) {
        const r = await s.call('GET', `/q/hex_${c}?page_size=1000&format=${format}`);
        assert.equal(r.status, 400, `${format}: ${r.status} ${r.headers.get('content-type')}`);
        assert.equal(r.json.code, 'answer_too_large', `${format}: ${r.text.slice(0, 200)}`);
        assert.deepEqual(Object.keys(r.json), ['error', 'code', 'request_id']);
        assert.match(r.json.error, /1 MiB/);
        const small = await s.call('GET', `/q/hex_${c}?page_size=20&format=${format}`);
        const bytes = Buffer.from(small.bytes);
        assert.equal(small.status, 200, `${format}: ${small.text.slice(0, 200)}`);
        assert.ok(bytes.length > 20 * 5000 * 0.4 && bytes.length < LIMIT, `${format}: ${bytes.length} bytes`);
        assert.equal(bytes.subarray(0, 4).toString('latin1'), format === 'xlsx' ? 'PK\x03\x04' : 'PAR1', `${format}: its magic bytes`);
      }
    });

    test('leaves the server healthy, its memory bounded, and the failed run in history', async () => {
      const before = rssMb();
      const answers = await Promise.all(Array.from({ length: 8 }, () => s.call('GET', `/q/big_${c}?page_size=1000`)));
      for (let i = 0; i < 16; i++) answers.push(await s.call('GET', `/q/big_${c}?page_size=1000&format=csv`));
      for (const r of answers) assert.equal(r.json?.code, 'answer_too_large', r.text.slice(0, 200));
      const grown = rssMb() - before;
      assert.ok(grown < 300, `RSS grew by ${grown.toFixed(0)} MB over 24 refused calls`);
      assert.equal((await s.call('GET', '/health')).status, 200);
      const small = await s.call('GET', `/q/big_${c}?page_size=2`);
      assert.equal(small.status, 200, small.text.slice(0, 200));
      assert.deepEqual(
        small.json.map((r: { id: unknown }) => Number(r.id)),
        [1, 2],
      );
      const history = await s.call('GET', `/api/v1/queries/big_${c}/history`);
      assert.ok(JSON.stringify(history.json).includes('answer_too_large'), 'the refused call is a failed run');
    });

    test('under the limit the answer is unchanged', async () => {
      const r = await s.call('GET', `/q/big_${c}?page_size=50`);
      assert.equal(r.status, 200, r.text.slice(0, 200));
      assert.ok(Buffer.byteLength(r.text) < LIMIT);
      const expected = Array.from({ length: 50 }, (_, i) => `{"id":${i + 1},"pad":"${'x'.repeat(PAD)}"}`).join(',');
      assert.equal(r.text, `[${expected}]`);
      assert.equal(r.headers.get('x-has-more'), 'true');
    });

    test('a stream of the same query is served whole', async () => {
      const r = await s.call('GET', `/q/big_${c}?stream=true&format=csv`);
      assert.equal(r.status, 200, r.text.slice(0, 200));
      const lines = r.text.split('\r\n');
      assert.equal(lines[0], 'id,pad');
      assert.equal(lines.length, ROWS + 2, 'a header, every row, and the empty string after the last line break');
      assert.equal(lines[ROWS], `${ROWS},${'x'.repeat(PAD)}`);
      assert.ok(Buffer.byteLength(r.text) > 9 * LIMIT, 'nine times the limit and more');
    });
  });
}
