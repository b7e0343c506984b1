// Tests for the xml, yaml and Parquet writers' rules that the integration suite does not reach:
// reading decimals, dates and timestamps out of the sources' values, XML's names and characters,
// YAML's key order, a Parquet stream's row groups, truncation note and a value that does not fit, and
// an xlsx stream's output keeping pace with its rows (bounded memory) and its truncation note.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { before, test } from 'node:test';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import XLSX from 'xlsx';
import { parse as parseYaml } from 'yaml';
import { GatewayError } from '../../src/contract/errors.js';
import { loadParquet, openParquetStream, parquetTypeNames, STREAM_ROW_GROUP, writeParquet } from '../../src/call/formats/parquet.js';
import { openXlsxStream, truncatedNote, writeXlsx } from '../../src/call/formats/xlsx.js';
import { dateMsOf, integerOf, timestampUsOf, unscaledOf, xmlSafe } from '../../src/call/formats/values.js';
import { compileXmlWriter, xmlName } from '../../src/call/formats/xml.js';
import { compileYamlWriter } from '../../src/call/formats/yaml.js';
import { COLUMN } from '../../src/sources/types.js';

// hyparquet-writer is loaded before the first parquet answer, as the call path does (formats/index.ts).
before(loadParquet);

test('decimals are scaled from their shortest text, rounded half away from zero', () => {
  assert.equal(unscaledOf(123.45, 2), 12345n);
  assert.equal(unscaledOf(1.005, 3), 1005n); // 1.005 * 1000 is 1004.9999999999999 in floats
  assert.equal(unscaledOf(1.005, 2), 101n);
  assert.equal(unscaledOf(-0.01, 2), -1n);
  assert.equal(unscaledOf(-2.5, 0), -3n);
  assert.equal(unscaledOf(7, 2), 700n);
  assert.equal(unscaledOf(1e21, 0), 1000000000000000000000n);
  assert.equal(unscaledOf(1e-7, 2), 0n);
  assert.equal(unscaledOf('12.345', 2), 1235n);
  assert.equal(unscaledOf(Number.NaN, 2), null);
  assert.equal(unscaledOf('abc', 2), null);
});

test('integers, dates and timestamps are read from the forms the sources hand over', () => {
  assert.equal(integerOf('-9223372036854775808'), -9223372036854775808n);
  assert.equal(integerOf(1.5), null);
  assert.equal(integerOf('1e3'), null);
  assert.equal(dateMsOf('2024-02-29'), Date.UTC(2024, 1, 29));
  assert.equal(dateMsOf('2023-02-29'), null, 'not a calendar date');
  assert.equal(dateMsOf('infinity'), null);
  assert.equal(new Date(dateMsOf('0099-01-01')!).getUTCFullYear(), 99, 'years below 100 are not moved to the 1900s');
  assert.equal(timestampUsOf('2024-01-02 03:04:05.123456'), BigInt(Date.UTC(2024, 0, 2, 3, 4, 5)) * 1000n + 123456n);
  assert.equal(timestampUsOf(new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 7))), BigInt(Date.UTC(2024, 0, 2, 3, 4, 5, 7)) * 1000n);
  assert.equal(timestampUsOf('2024-01-02'), null);
  assert.equal(timestampUsOf(new Date(Number.NaN)), null);
});

test('xml: names, escaping, NULL, characters XML cannot carry', () => {
  assert.equal(xmlName('1st col'), '_1st_col');
  assert.equal(xmlName('émile'), 'émile');
  assert.equal(xmlName(''), '_');
  assert.equal(xmlSafe('a\u0000b\uD800c\uFFFE😀'), 'a\uFFFDb\uFFFDc\uFFFD😀');
  const w = compileXmlWriter(['a', 'b', 'a']);
  assert.equal(
    w([['<&>', null, 'x\r\ny']]),
    '<?xml version="1.0" encoding="UTF-8"?>\n<data><item><a>&lt;&amp;&gt;</a><b/><a_2>x&#13;\ny</a_2></item></data>\n',
  );
  assert.equal(
    w([[true, 9007199254740993n, new Date(Date.UTC(2024, 0, 2, 3, 4, 5))]]).match(/<item>.*<\/item>/)![0],
    '<item><a>True</a><b>9007199254740993</b><a_2>2024-01-02 03:04:05</a_2></item>',
  );
});

test('yaml: keys in column order, values as the json answer has them', () => {
  const w = compileYamlWriter(['b', '1', 'n']);
  const text = w([
    ['x', 9007199254740993n, 1.5],
    [null, 2, '007'],
  ]);
  assert.deepEqual(
    parseYaml(text, { mapAsMap: true }).map((m: Map<string, unknown>) => [...m.entries()]),
    [
      [
        ['b', 'x'],
        ['1', '9007199254740993'],
        ['n', 1.5],
      ],
      [
        ['b', null],
        ['1', 2],
        ['n', '007'],
      ],
    ],
  );
});

test('parquet: the source type when its values fit, else the values decide; a mix is VARCHAR', () => {
  const rows = [
    [1, '9007199254740993', 1.5, '2024-01-02', 'a', true, '18446744073709551615'],
    [2, null, 2, '2024-01-03', 3, false, '1'],
  ];
  assert.deepEqual(parquetTypeNames(rows, 7, [COLUMN.integer, COLUMN.integer, null, COLUMN.date, null, null, COLUMN.integer]), [
    'BIGINT',
    'BIGINT',
    'DOUBLE',
    'DATE',
    'VARCHAR',
    'BOOLEAN',
    'DECIMAL(38,0)',
  ]);
  // A date column whose value is not a date (a MySQL zero date stays text) falls back to the values.
  assert.deepEqual(parquetTypeNames([['0000-00-00'], ['2024-01-02']], 1, [COLUMN.date]), ['VARCHAR']);
  assert.deepEqual(parquetTypeNames([[null], [null]], 1, undefined), ['VARCHAR']);
  assert.deepEqual(parquetTypeNames([[1.25]], 1, [{ kind: 'decimal', scale: 2 }]), ['DECIMAL(38,2)']);
  assert.deepEqual(parquetTypeNames([[1.25]], 1, [{ kind: 'decimal' }]), ['DOUBLE']);
});

test('parquet: a page is one file; a stream is row groups, then the footer', async () => {
  const page = writeParquet(['id'], [[1], [2]], [COLUMN.integer]);
  assert.deepEqual(await parquetReadObjects({ file: page.slice().buffer }), [{ id: 1n }, { id: 2n }]);

  const stream = openParquetStream(['id', 'label'], [[1, 'a']], [COLUMN.integer, COLUMN.text], 3);
  const chunks: Uint8Array[] = [];
  for (let b = 0; b < 4; b++)
    chunks.push(
      stream.rows([
        [b * 2 + 1, `r${b * 2 + 1}`],
        [b * 2 + 2, null],
      ]),
    );
  chunks.push(stream.end(8));
  assert.ok(
    chunks.every((c) => c.byteOffset === 0 && c.byteLength === c.buffer.byteLength),
    'each chunk owns its buffer',
  );
  const file = Buffer.concat(chunks);
  const meta = parquetMetadata(file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength));
  assert.deepEqual(
    meta.row_groups.map((g) => Number(g.num_rows)),
    [4, 4],
  );
  assert.deepEqual(meta.key_value_metadata, [{ key: 'queryapigate.truncated', value: 'after 8 rows' }]);
  const rows = await parquetReadObjects({ file: file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength) });
  assert.equal(rows.length, 8);
  assert.deepEqual(rows[7], { id: 8n, label: null });
});

test('parquet: a stream value its column type cannot take ends the stream with query_failed', () => {
  const stream = openParquetStream(['n'], [[1]], undefined);
  stream.rows([[1]]);
  assert.throws(
    () => stream.rows([['not a number']]),
    (e: unknown) => e instanceof GatewayError && e.code === 'query_failed' && /Column 'n'.*BIGINT/.test(e.message),
  );
});

/** Rows of an id and 64 hex characters that do not repeat (so neither zip nor Parquet can shrink them much). */
const hexRows = (n: number, from = 0): unknown[][] =>
  Array.from({ length: n }, (_, k) => [
    from + k + 1,
    createHash('sha256')
      .update(String(from + k))
      .digest('hex'),
  ]);

const tooLarge = (e: unknown) => e instanceof GatewayError && e.code === 'answer_too_large' && /QUERYAPIGATE_MAX_ANSWER_BYTES/.test(e.message);

test('parquet: a page is held to the answer limit, to the byte', () => {
  const rows = hexRows(200);
  const whole = writeParquet(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text]);
  assert.deepEqual(writeParquet(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text], whole.byteLength), whole, 'exactly the limit is served');
  assert.throws(() => writeParquet(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text], whole.byteLength - 1), tooLarge);
  assert.throws(() => writeParquet(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text], 1024), tooLarge);
});

test('parquet: a page longer than a row group is written in row groups, and one over the limit stops at the first', async () => {
  const n = STREAM_ROW_GROUP * 2 + 5;
  const rows = hexRows(n);
  const file = writeParquet(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text]);
  const buffer = file.slice().buffer;
  assert.deepEqual(
    parquetMetadata(buffer).row_groups.map((g) => Number(g.num_rows)),
    [STREAM_ROW_GROUP, STREAM_ROW_GROUP, 5],
  );
  const back = await parquetReadObjects({ file: buffer });
  assert.equal(back.length, n);
  assert.deepEqual(back[n - 1], { id: BigInt(n), hex: rows[n - 1][1] });
  assert.throws(() => writeParquet(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text], Math.floor(file.byteLength / 3)), tooLarge);
});

test('xlsx: a page is held to the answer limit', async () => {
  const rows = hexRows(2000);
  const whole = await writeXlsx(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text]);
  assert.ok(whole.byteLength > 64 * 1024, `the file is ${whole.byteLength} bytes`);
  const within = await writeXlsx(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text], whole.byteLength + 1024);
  // The same file but for its creation time (to the second, in docProps/core.xml), whose digits may
  // deflate a byte shorter or longer: so the same rows and nearly the same size.
  assert.ok(Math.abs(within.byteLength - whole.byteLength) <= 8, `under the limit the file is whole: ${within.byteLength} vs ${whole.byteLength} bytes`);
  const sheet = XLSX.read(within, { type: 'array' }).Sheets.result;
  assert.deepEqual(XLSX.utils.sheet_to_json<unknown[]>(sheet, { header: 1 }).slice(1), rows);
  await assert.rejects(writeXlsx(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text], Math.floor(whole.byteLength / 2)), tooLarge);
  await assert.rejects(writeXlsx(['id', 'hex'], rows, [COLUMN.integer, COLUMN.text], 1024), tooLarge);
});

test('xlsx: a stream reads back as the page of the same rows, with the same typed cells', async () => {
  const rows = [
    [1, 9007199254740993n, 'a', true, '2024-02-29', '2024-01-31 12:34:56'],
    [2, null, 'b\u0001', false, null, new Date(Date.UTC(1970, 0, 1))],
  ];
  const types = [COLUMN.integer, COLUMN.integer, COLUMN.text, null, COLUMN.date, COLUMN.timestamp];
  const columns = ['id', 'big', 'text', 'flag', 'day', 'at'];
  const stream = openXlsxStream(columns, types);
  const parts = [await stream.rows(rows.slice(0, 1)), await stream.rows(rows.slice(1)), await stream.end(null)];
  const streamed = Buffer.concat(parts);
  const grid = (bytes: Uint8Array) => {
    const book = XLSX.read(bytes, { type: 'array', cellNF: true });
    const sheet = book.Sheets[book.SheetNames[0]];
    return {
      book,
      cells: Object.entries(sheet)
        .filter(([k]) => !k.startsWith('!'))
        .map(([k, c]) => [k, c.t, c.v, c.z]),
    };
  };
  const page = grid(await writeXlsx(columns, rows, types));
  const got = grid(streamed);
  assert.deepEqual(got.cells, page.cells);
  assert.deepEqual(got.cells.find(([k]) => k === 'B2')?.slice(1, 3), ['s', '9007199254740993'], 'an integer past 2^53 stays exact text');
  assert.deepEqual(got.cells.find(([k]) => k === 'E2')?.slice(1, 2), ['n'], 'a date is an Excel date');
  assert.equal(got.book.Props?.Comments, undefined, 'a whole stream carries no truncation note');
});

test('xlsx: a capped stream says so in the workbook description', async () => {
  const stream = openXlsxStream(['id'], [COLUMN.integer]);
  const bytes = Buffer.concat([await stream.rows([[1], [2]]), await stream.end(2)]);
  const book = XLSX.read(bytes, { type: 'array' });
  assert.equal(book.Props?.Comments, truncatedNote(2));
  assert.equal(book.Props?.Comments, 'queryapigate.truncated: after 2 rows');
  assert.equal(XLSX.utils.sheet_to_json(book.Sheets.result).length, 2);
});

test("xlsx: a stream's bytes come out as its rows go in, so little waits for the end", async () => {
  const stream = openXlsxStream(['id', 'hex'], [COLUMN.integer, COLUMN.text]);
  let before = 0;
  for (let i = 0; i < 40; i++) before += (await stream.rows(hexRows(1000, i * 1000))).byteLength;
  const last = (await stream.end(null)).byteLength;
  // 40,000 rows of 64 random hex characters: about 1.4 MB of zip. Without waiting for the zip's
  // input to drain, about three quarters of it is still inside exceljs at the end.
  assert.ok(before + last > 1_000_000, `the file is ${before + last} bytes`);
  assert.ok(last < 256 * 1024, `${last} of ${before + last} bytes waited for the end`);
});
