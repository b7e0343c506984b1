// format=xml, yaml, xlsx and parquet on PostgreSQL, MariaDB and SQLite: each answer read back with an
// independent reader (fast-xml-parser, the yaml parser, SheetJS, parquet-wasm: arrow-rs's Parquet
// reader, which DuckDB and Arrow users meet; hyparquet for row groups) and compared with the
// json answer of the same call, on a table holding every value kind (integers past 2^53, decimals,
// dates, timestamps, JSON, bytes, NULLs, unicode and control characters) and a masked column; the
// Parquet column types; content types and Content-Disposition; paging headers; the result cache
// (memory and Redis) keeping the format; parquet streams by row groups, xlsx streams read back as the
// json answer; xml/yaml streams refused.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { XMLParser } from 'fast-xml-parser';
import { tableFromIPC } from 'apache-arrow';
import { parquetMetadata } from 'hyparquet';
import { readParquet as readParquetWasm } from 'parquet-wasm';
import mysql from 'mysql2/promise';
import XLSX from 'xlsx';
import { parse as parseYaml } from 'yaml';
import { type Reply, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const COLUMNS = ['id', 'big', 'amount', 'ratio', 'flag', 'day', 'at', 'doc', 'raw', 'name', 'email'];
const NAME_1 = 'unicode é 中文 😀 <&> "q" \'s\' ]]>';
const NAME_2 = 'line\nbreak\ttab ctl\u0001 end';

/** The Parquet types each source's columns get (DuckDB's names). */
const PARQUET_TYPES: Record<string, string[]> = {
  // postgres.js does not report a numeric's scale: DOUBLE (the values are floats already).
  pg_kinds: ['BIGINT', 'BIGINT', 'DOUBLE', 'DOUBLE', 'BOOLEAN', 'DATE', 'TIMESTAMP', 'VARCHAR', 'VARCHAR', 'VARCHAR', 'VARCHAR'],
  // MySQL has no boolean (TINYINT(1) is an integer); BIGINT UNSIGNED past 2^63 is DECIMAL(38,0).
  my_kinds: ['BIGINT', 'DECIMAL(38,0)', 'DECIMAL(38,2)', 'DOUBLE', 'BIGINT', 'DATE', 'TIMESTAMP', 'VARCHAR', 'VARCHAR', 'VARCHAR', 'VARCHAR'],
  lite_kinds: ['BIGINT', 'BIGINT', 'DECIMAL(38,2)', 'DOUBLE', 'BIGINT', 'DATE', 'TIMESTAMP', 'VARCHAR', 'VARCHAR', 'VARCHAR', 'VARCHAR'],
};
const QUERIES = Object.keys(PARQUET_TYPES);

/** What XML and xlsx carry for a text: the characters XML 1.0 cannot hold become U+FFFD. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it finds
const xmlSafe = (s: string) => s.replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F]/g, '\uFFFD');
const TIMESTAMP = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?$/; // SQLite's text keeps a fraction
const DATE = /^\d{4}-\d\d-\d\d$/;
/** A Date as the json answer prints it, with milliseconds (cut to the length of the json text). */
const printed = (d: Date) => d.toISOString().slice(0, 23).replace('T', ' ');

describe('answer formats', () => {
  let s: TestServer;
  let pg: Awaited<ReturnType<typeof scratchDatabase>>;
  const myDb = `qag_formats_my_${process.pid}`;
  let my: mysql.Connection;
  let liteDir = '';
  let masked = '';

  before(async () => {
    pg = await scratchDatabase('qag_formats');
    await pg.sql.unsafe(`CREATE TABLE kinds (id int PRIMARY KEY, big bigint, amount numeric(12,2), ratio float8, flag boolean,
        day date, at timestamp, doc jsonb, raw bytea, name text, email text);
      INSERT INTO kinds VALUES
        (1, 9007199254740993, 1234.56, 0.1, true, '2024-02-29', '2024-01-31 12:34:56.789', '{"a": [1, 2], "b": "x"}', '\\xdeadbeef', $$${NAME_1}$$, 'ann@example.com'),
        (2, -9223372036854775808, -0.01, -1.5e300, false, '1999-12-31', '1970-01-01 00:00:00', '[]', 'hi', E'line\\nbreak\\ttab ctl\\x01 end', 'bob@example.com'),
        (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
      CREATE TABLE wide AS SELECT i AS id, i * 1.5::float8 AS x, 'r' || i AS label, date '2024-01-01' + (i % 366) AS day FROM generate_series(1, 25000) i;`);
    my = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true, charset: 'utf8mb4' });
    await my.query(`CREATE DATABASE ${myDb} CHARACTER SET utf8mb4; USE ${myDb};
      CREATE TABLE kinds (id INT PRIMARY KEY, big BIGINT UNSIGNED, amount DECIMAL(12,2), ratio DOUBLE, flag TINYINT(1),
        day DATE, at DATETIME(3), doc JSON, raw VARBINARY(8), name VARCHAR(100), email VARCHAR(50));`);
    await my.query('INSERT INTO kinds VALUES (?), (?), (?)', [
      [
        1,
        '18446744073709551615',
        1234.56,
        0.1,
        1,
        '2024-02-29',
        '2024-01-31 12:34:56.789',
        '{"a": [1, 2], "b": "x"}',
        Buffer.from('deadbeef', 'hex'),
        NAME_1,
        'ann@example.com',
      ],
      [2, '9007199254740993', -0.01, -1.5e300, 0, '1999-12-31', '1970-01-01 00:00:00', '[]', Buffer.from('hi'), NAME_2, 'bob@example.com'],
      [3, null, null, null, null, null, null, null, null, null, null],
    ]);
    liteDir = mkdtempSync(join(tmpdir(), 'qag-formats-'));
    const lite = new Database(join(liteDir, 'kinds.db'));
    lite.exec(`CREATE TABLE kinds (id INTEGER PRIMARY KEY, big INTEGER, amount DECIMAL(12,2), ratio REAL, flag BOOLEAN,
      day DATE, at TIMESTAMP, doc JSON, raw BLOB, name TEXT, email TEXT);`);
    const insert = lite.prepare('INSERT INTO kinds VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
    insert.run(
      1,
      9007199254740993n,
      1234.56,
      0.1,
      1,
      '2024-02-29',
      '2024-01-31 12:34:56.789',
      '{"a":[1,2],"b":"x"}',
      Buffer.from('deadbeef', 'hex'),
      NAME_1,
      'ann@example.com',
    );
    insert.run(2, -9223372036854775808n, -0.01, -1.5e300, 0, '1999-12-31', '1970-01-01 00:00:00', '[]', Buffer.from('hi'), NAME_2, 'bob@example.com');
    insert.run(3, null, null, null, null, null, null, null, null, null, null);
    lite.close();

    s = await startTestServer({ QUERYAPIGATE_WORKERS: '2', QUERYAPIGATE_MAX_PAGE_SIZE: '1000', QUERYAPIGATE_STREAM_MAX_ROWS: '0' });
    copyFileSync(join(liteDir, 'kinds.db'), join(s.home, 'kinds.db'));
    const post = async (path: string, body: unknown) => {
      const r = await s.call('POST', path, { body });
      assert.ok(r.status < 300, r.text);
    };
    await post('/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' });
    await post('/api/v1/connections', { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: myDb, user: 'root' });
    await post('/api/v1/connections', { name: 'lite', db: 'sqlite', database: 'kinds.db' });
    for (const [name, conn] of [
      ['pg_kinds', 'pg'],
      ['my_kinds', 'my'],
      ['lite_kinds', 'lite'],
    ])
      await post('/api/v1/queries', {
        name,
        connection_name: conn,
        sql: `SELECT ${COLUMNS.join(', ')} FROM kinds ORDER BY id`,
        description: name,
        publish: true,
      });
    await post('/api/v1/queries', {
      name: 'pg_wide',
      connection_name: 'pg',
      sql: 'SELECT id, x, label, day FROM wide ORDER BY id',
      description: 'wide',
      publish: true,
    });
    await post('/api/v1/queries', {
      name: 'pg_cached',
      connection_name: 'pg',
      sql: 'SELECT id, amount, day FROM kinds ORDER BY id',
      description: 'cached',
      cache_ttl: 60,
      publish: true,
    });
    masked = (
      await s.call('POST', '/api/v1/api-keys', {
        body: { name: 'masked', queries: QUERIES, connections: [], mask: [{ column: '*.email', action: 'mask' }] },
      })
    ).json.secret;
  });

  after(async () => {
    await s?.stop();
    await pg?.drop();
    await my?.query(`DROP DATABASE IF EXISTS ${myDb}`);
    await my?.end();
    if (liteDir) rmSync(liteDir, { recursive: true, force: true });
  });

  const call = async (path: string, key?: string): Promise<Reply> => {
    const r = await s.call('GET', path, { key });
    assert.equal(r.status, 200, r.text);
    return r;
  };

  for (const name of QUERIES) {
    for (const who of ['admin', 'masked'] as const) {
      const key = () => (who === 'masked' ? masked : undefined);
      const jsonRows = async () => (await call(`/q/${name}`, key())).json as Record<string, unknown>[];

      test(`${name} (${who}) as yaml: the json answer's rows`, async () => {
        const r = await call(`/q/${name}?format=yaml`, key());
        assert.equal(r.headers.get('content-type'), 'application/x-yaml');
        assert.equal(r.headers.get('x-page'), '1');
        assert.equal(r.headers.get('x-has-more'), 'false');
        const rows = parseYaml(r.text) as Record<string, unknown>[];
        const json = await jsonRows();
        assert.deepEqual(rows, json);
        assert.deepEqual(Object.keys(rows[0]), COLUMNS);
        if (who === 'masked') assert.equal(rows[0].email, 'a**@example.com');
      });

      test(`${name} (${who}) as xml: the json answer's values as text, NULL an empty element`, async () => {
        const r = await call(`/q/${name}?format=xml`, key());
        assert.equal(r.headers.get('content-type'), 'application/xml');
        const doc = new XMLParser({ parseTagValue: false, trimValues: false, isArray: (tag) => tag === 'item' }).parse(r.text);
        const items = doc.data.item as Record<string, string>[];
        const json = await jsonRows();
        assert.equal(items.length, json.length);
        for (let i = 0; i < json.length; i++) {
          assert.deepEqual(Object.keys(items[i]), COLUMNS);
          for (const c of COLUMNS) {
            const want = json[i][c];
            const got = items[i][c];
            // Timestamps as CSV prints them: the json text, plus microseconds when there are any.
            if (typeof want === 'string' && TIMESTAMP.test(want)) assert.ok(got.startsWith(want), `${c}: ${got}`);
            else assert.equal(got, want === null ? '' : typeof want === 'boolean' ? (want ? 'True' : 'False') : xmlSafe(String(want)), `${c} of row ${i + 1}`);
          }
        }
      });

      test(`${name} (${who}) as xlsx: typed cells that read back as the json answer`, async () => {
        const r = await call(`/q/${name}?format=xlsx`, key());
        assert.equal(r.headers.get('content-type'), 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet');
        assert.equal(r.headers.get('content-disposition'), 'attachment;filename=result.xlsx');
        assert.equal(r.headers.get('x-page-size'), '10');
        assertXlsxRows(r.bytes, await jsonRows());
      });

      test(`${name} (${who}) as parquet: typed columns that read back as the json answer`, async () => {
        const r = await call(`/q/${name}?format=parquet`, key());
        assert.equal(r.headers.get('content-type'), 'application/vnd.apache.parquet');
        const file = readParquet(r.bytes);
        assert.deepEqual(file.types, PARQUET_TYPES[name]);
        assertParquetRows(file.rows, await jsonRows());
      });
    }
  }

  test('xml: column names become XML names, repeats numbered', async () => {
    const r = await s.call('POST', '/api/v1/queries', {
      body: { name: 'pg_names', connection_name: 'pg', sql: 'SELECT 1 AS "1st col", 2 AS "a b", 3 AS "a b", 4 AS "x<y>"', description: 'names', publish: true },
    });
    assert.ok(r.status < 300, r.text);
    const xml = await call('/q/pg_names?format=xml');
    assert.equal(
      xml.text,
      '<?xml version="1.0" encoding="UTF-8"?>\n<data><item><_1st_col>1</_1st_col><a_b>2</a_b><a_b_2>3</a_b_2><x_y_>4</x_y_></item></data>\n',
    );
  });

  test('paging: headers and rows of the page, in every format', async () => {
    for (const format of ['xml', 'yaml', 'xlsx', 'parquet']) {
      const r = await call(`/q/pg_kinds?format=${format}&page=2&page_size=1`);
      assert.equal(r.headers.get('x-page'), '2', format);
      assert.equal(r.headers.get('x-page-size'), '1', format);
      assert.equal(r.headers.get('x-has-more'), 'true', format);
      if (format === 'parquet')
        assert.deepEqual(
          readParquet(r.bytes).rows.map((row) => row.id),
          [2n],
        );
      if (format === 'yaml') assert.equal((parseYaml(r.text) as { id: number }[])[0].id, 2);
    }
  });

  test('the result cache keeps the format, content type and bytes of an answer', async () => {
    for (const format of ['parquet', 'xlsx', 'yaml', 'xml']) {
      const miss = await call(`/q/pg_cached?format=${format}`);
      assert.equal(miss.headers.get('x-cache'), 'MISS', format);
      const hit = await call(`/q/pg_cached?format=${format}`);
      assert.equal(hit.headers.get('x-cache'), 'HIT', format);
      assert.equal(hit.headers.get('content-type'), miss.headers.get('content-type'), format);
      assert.equal(hit.headers.get('content-disposition'), miss.headers.get('content-disposition'), format);
      assert.deepEqual(hit.bytes, miss.bytes, format);
      assert.equal(hit.headers.get('etag'), miss.headers.get('etag'));
    }
    const json = await call('/q/pg_cached');
    assert.equal(json.headers.get('content-type'), 'application/json', 'the json answer is cached under its own key');
  });

  test('parquet streams by row groups and reads back as the whole result', async () => {
    const r = await call('/q/pg_wide?stream=true&format=parquet');
    assert.equal(r.headers.get('content-type'), 'application/vnd.apache.parquet');
    assert.equal(r.headers.get('content-disposition'), 'attachment; filename="pg_wide.parquet"');
    const meta = parquetMetadata(r.bytes.slice().buffer);
    assert.equal(Number(meta.num_rows), 25000);
    assert.equal(meta.row_groups.length, 3, 'row groups of 10,000 rows');
    const file = readParquet(r.bytes);
    assert.deepEqual(file.types, ['BIGINT', 'DOUBLE', 'VARCHAR', 'DATE']);
    const rows = file.rows as { id: bigint; x: number; label: string; day: Date }[];
    assert.equal(rows.length, 25000);
    for (const i of [0, 9999, 10000, 24999]) {
      const n = i + 1;
      assert.deepEqual([rows[i].id, rows[i].x, rows[i].label], [BigInt(n), n * 1.5, `r${n}`]);
      assert.equal(rows[i].day.getTime(), Date.UTC(2024, 0, 1) + (n % 366) * 86400000);
    }
  });

  for (const name of QUERIES) {
    test(`${name}: a parquet stream holds what the paged parquet answer holds`, async () => {
      const streamed = await call(`/q/${name}?stream=true&format=parquet`, masked);
      const file = readParquet(streamed.bytes);
      assert.deepEqual(file.types, PARQUET_TYPES[name]);
      assertParquetRows(file.rows, (await call(`/q/${name}`, masked)).json);
    });
  }

  test('xlsx streams the whole result, which reads back as the json answer', async () => {
    const r = await call('/q/pg_wide?stream=true&format=xlsx');
    assert.equal(r.headers.get('content-type'), 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet');
    assert.equal(r.headers.get('content-disposition'), 'attachment; filename="pg_wide.xlsx"');
    const json = (await call('/q/pg_wide?page_size=1000&page=25')).json as Record<string, unknown>[];
    const book = XLSX.read(r.bytes, { type: 'array', cellNF: true });
    const grid = XLSX.utils.sheet_to_json<unknown[]>(book.Sheets.result, { header: 1, raw: true, defval: null });
    assert.equal(grid.length, 25001, 'a header row and every row');
    assert.equal(book.Props?.Comments, undefined, 'no truncation note');
    // The last page of the json answer against the sheet's last 1,000 rows.
    assertXlsxRows(r.bytes, json, 24000);
  });

  test('an xlsx stream of no rows is a workbook with the header row only', async () => {
    const r = await s.call('POST', '/api/v1/queries', {
      body: { name: 'pg_none', connection_name: 'pg', sql: 'SELECT id, day FROM kinds WHERE id < 0', description: 'none', publish: true },
    });
    assert.ok(r.status < 300, r.text);
    const streamed = await call('/q/pg_none?stream=true&format=xlsx');
    const book = XLSX.read(streamed.bytes, { type: 'array' });
    assert.deepEqual(XLSX.utils.sheet_to_json(book.Sheets.result, { header: 1 }), [['id', 'day']]);
  });

  for (const name of QUERIES) {
    test(`${name}: an xlsx stream holds what the json answer holds (masked)`, async () => {
      const streamed = await call(`/q/${name}?stream=true&format=xlsx`, masked);
      assertXlsxRows(streamed.bytes, (await call(`/q/${name}`, masked)).json);
    });
  }

  test('xml, yaml and json do not stream: 400 invalid_stream', async () => {
    for (const format of ['xml', 'yaml', 'json']) {
      const r = await s.call('GET', `/q/pg_kinds?stream=true&format=${format}`);
      assert.equal(r.status, 400, format);
      assert.equal(r.json.code, 'invalid_stream', format);
      assert.match(r.json.error, /csv, tsv, ndjson, parquet, xlsx/);
    }
  });
});

/**
 * An xlsx file read by SheetJS against the json answer's rows (from row `skip` of the sheet on):
 * typed cells, dates and timestamps as Excel dates with a date format, text with the characters XML
 * cannot carry replaced.
 */
function assertXlsxRows(bytes: Uint8Array, json: Record<string, unknown>[], skip = 0): void {
  const book = XLSX.read(bytes, { type: 'array', cellDates: false, cellNF: true });
  const sheet = book.Sheets[book.SheetNames[0]];
  const grid = XLSX.utils.sheet_to_json<unknown[]>(sheet, { header: 1, raw: true, defval: null });
  const columns = Object.keys(json[0]);
  assert.deepEqual(grid[0], columns);
  assert.equal(grid.length, skip + json.length + 1);
  for (let i = 0; i < json.length; i++) {
    const r = skip + i + 1;
    for (let c = 0; c < columns.length; c++) {
      const want = json[i][columns[c]];
      const got = grid[r][c];
      const cell = sheet[XLSX.utils.encode_cell({ r, c })];
      const where = `${columns[c]} of row ${r}`;
      if (want === null) assert.equal(got, null, where);
      else if (typeof want === 'string' && (TIMESTAMP.test(want) || DATE.test(want))) {
        // An Excel date: a serial day number with a date format (read here without SheetJS's local-time conversion).
        assert.equal(cell.t, 'n', where);
        assert.match(String(cell.z), /yyyy-mm-dd/, where);
        const ms = Math.round(((got as number) - 25569) * 86400000);
        assert.equal(printed(new Date(ms)).slice(0, want.length), want, where);
      } else if (typeof want === 'string') assert.equal(got, xmlSafe(want), where);
      else assert.equal(got, want, where); // numbers and booleans as themselves
    }
  }
}

/**
 * A Parquet file read by arrow-rs (parquet-wasm): each column's type spelt as DuckDB names it, and the
 * rows with integers as bigints, decimals as exact digit strings, dates and timestamps as Dates.
 */
function readParquet(bytes: Uint8Array): { types: string[]; rows: Record<string, unknown>[] } {
  const table = tableFromIPC(readParquetWasm(bytes).intoIPCStream());
  const fields = table.schema.fields;
  const types = fields.map((f) => {
    const t = String(f.type);
    const decimal = /^Decimal\[(\d+)e[+-]?(\d+)\]$/.exec(t);
    if (decimal) return `DECIMAL(${decimal[1]},${Math.abs(Number(decimal[2]))})`;
    const names: Record<string, string> = {
      Int64: 'BIGINT',
      Float64: 'DOUBLE',
      Bool: 'BOOLEAN',
      'Date32<DAY>': 'DATE',
      'Timestamp<MICROSECOND>': 'TIMESTAMP',
      Utf8: 'VARCHAR',
    };
    return names[t] ?? t;
  });
  const rows: Record<string, unknown>[] = [];
  for (let i = 0; i < table.numRows; i++) {
    const row: Record<string, unknown> = {};
    fields.forEach((f, c) => {
      const v = table.getChildAt(c)?.get(i) ?? null;
      const type = types[c];
      if (v === null) row[f.name] = null;
      else if (type === 'DATE' || type === 'TIMESTAMP') row[f.name] = new Date(Number(v));
      else if (type.startsWith('DECIMAL')) row[f.name] = withScale(String(v), Number(/,(\d+)\)/.exec(type)![1]));
      else row[f.name] = v;
    });
    rows.push(row);
  }
  return { types, rows };
}

/** An unscaled decimal's digits with the point put back: ('-1', 2) → '-0.01'. */
function withScale(digits: string, scale: number): string {
  if (scale === 0) return digits;
  const negative = digits.startsWith('-');
  const d = (negative ? digits.slice(1) : digits).padStart(scale + 1, '0');
  return `${negative ? '-' : ''}${d.slice(0, -scale)}.${d.slice(-scale)}`;
}

/** Parquet rows against the json answer: integers by their digits, dates and timestamps as json prints them. */
function assertParquetRows(rows: Record<string, unknown>[], json: Record<string, unknown>[]): void {
  assert.equal(rows.length, json.length);
  for (let i = 0; i < json.length; i++) {
    assert.deepEqual(Object.keys(rows[i]), Object.keys(json[i]));
    for (const [c, want] of Object.entries(json[i])) {
      const got = rows[i][c];
      const where = `${c} of row ${i + 1}`;
      if (want === null) assert.equal(got, null, where);
      else if (typeof got === 'bigint') assert.equal(got.toString(), String(want), where);
      else if (typeof got === 'string' && typeof want === 'number')
        assert.equal(Number(got), want, where); // an exact decimal
      else if (got instanceof Date) assert.equal(printed(got).slice(0, (want as string).length), want, where);
      else assert.equal(got, want, where);
    }
  }
}
