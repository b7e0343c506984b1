// Tests for result serialisation: JSON, NDJSON, CSV, TSV, column names, value rules, empty results.
import { describe, test } from 'node:test';
import { GatewayError } from '../../src/contract/errors.js';
import assert from 'node:assert/strict';
import { CONTENT_TYPES, EMPTY_JSON, compileWriter, formatDateTime, jsonValue, textValue, uniqueColumnNames, writeEmpty } from '../../src/call/formats.js';

const WEIRD = [
  'plain',
  'say "hi"',
  'line\nbreak',
  'cr\rlf\r\n',
  'tab\there',
  'back\\slash',
  '</script><script>alert(1)</script>',
  'unicode é ü 中文 😀',
  '\u2028\u2029',
  '\u0000\u001f',
  'lone \ud800 surrogate',
  '',
];

test('JSON: a bare array of objects in column order', () => {
  const write = compileWriter(['film_id', 'title', 'rate'], 'json');
  const body = write([
    [48, 'Broken Harbor', 2.99],
    [49, null, 0],
  ]);
  assert.equal(body, '[{"film_id":48,"title":"Broken Harbor","rate":2.99},{"film_id":49,"title":null,"rate":0}]');
  assert.equal(write.contentType, 'application/json');
  assert.equal(write([]), '[]');
});

test('JSON: weird strings survive a round trip', () => {
  const write = compileWriter(['s'], 'json');
  const body = write(WEIRD.map((s) => [s]));
  assert.deepEqual(
    JSON.parse(body),
    WEIRD.map((s) => ({ s })),
  );
  // every string is escaped by JSON.stringify: quotes, control characters and lone surrogates
  assert.ok(body.includes('"say \\"hi\\""'));
  assert.ok(body.includes('"line\\nbreak"'));
  assert.ok(body.includes('"\\u0000\\u001f"'));
  assert.ok(body.includes('lone \\ud800 surrogate'));
  assert.ok(!/[\n\r]/.test(body), 'no raw line breaks in the body');
});

test('JSON: weird column names are escaped once, keys in order', () => {
  const columns = ['a"b', 'new\nline', 'ü', '</script>'];
  const write = compileWriter(columns, 'json');
  const body = write([[1, 2, 3, 4]]);
  const parsed = JSON.parse(body) as Record<string, number>[];
  assert.deepEqual(Object.keys(parsed[0]), columns);
  assert.deepEqual(Object.values(parsed[0]), [1, 2, 3, 4]);
});

test('value rules in JSON', async (t) => {
  const cases: [string, unknown, string][] = [
    ['null', null, 'null'],
    ['undefined', undefined, 'null'],
    ['integer', 42, '42'],
    ['negative float', -1.5, '-1.5'],
    ['NaN', NaN, 'null'],
    ['Infinity', Infinity, 'null'],
    ['-Infinity', -Infinity, 'null'],
    ['true', true, 'true'],
    ['false', false, 'false'],
    ['small bigint', 12n, '12'],
    ['max safe bigint', 9007199254740991n, '9007199254740991'],
    ['min safe bigint', -9007199254740991n, '-9007199254740991'],
    ['unsafe bigint', 9007199254740992n, '"9007199254740992"'],
    ['int64 max', 9223372036854775807n, '"9223372036854775807"'],
    ['negative unsafe bigint', -9223372036854775808n, '"-9223372036854775808"'],
    ['Date', new Date(Date.UTC(2024, 1, 29, 23, 5, 9, 999)), '"2024-02-29 23:05:09"'],
    ['Date early year', new Date(new Date(0).setUTCFullYear(5, 0, 1)), '"0005-01-01 00:00:00"'],
    ['invalid Date', new Date(NaN), 'null'],
    ['Buffer', Buffer.from('héllo'), '"héllo"'],
    ['bad UTF-8', Buffer.from([0x61, 0xff, 0x62]), '"a\ufffdb"'],
    ['BOM is kept', Buffer.from([0xef, 0xbb, 0xbf, 0x61]), '"\ufeffa"'],
    ['Uint8Array', new Uint8Array([0x68, 0x69]), '"hi"'],
    ['object', { a: 1, b: [true, null] }, JSON.stringify('{"a":1,"b":[true,null]}')],
    ['array', [1, 'x'], JSON.stringify('[1,"x"]')],
    ['nested bigint and Date', { n: 2n ** 60n, d: new Date(Date.UTC(2020, 0, 1)) }, JSON.stringify('{"n":"1152921504606846976","d":"2020-01-01 00:00:00"}')],
    ['null-prototype object', Object.assign(Object.create(null), { a: 1 }), JSON.stringify('{"a":1}')],
    ['class instance with toString', new URL('http://x.test/a'), '"http://x.test/a"'],
  ];
  for (const [name, value, want] of cases) {
    await t.test(name, () => {
      assert.equal(jsonValue(value), want);
      const body = compileWriter(['v'], 'json')([[value]]);
      assert.equal(body, `[{"v":${want}}]`);
      JSON.parse(body);
    });
  }
});

test('duplicate column names', () => {
  assert.deepEqual(uniqueColumnNames(['id', 'name', 'id', 'id']), ['id', 'name', 'id_2', 'id_3']);
  assert.deepEqual(uniqueColumnNames(['a', 'b']), ['a', 'b']);
  assert.deepEqual(uniqueColumnNames([]), []);
  // a generated suffix never collides with a real column
  assert.deepEqual(uniqueColumnNames(['id', 'id_2', 'id']), ['id', 'id_2', 'id_3']);
  assert.deepEqual(uniqueColumnNames(['id', 'id', 'id_2']), ['id', 'id_2', 'id_2_2']);
  const body = compileWriter(['id', 'id'], 'json')([[1, 2]]);
  assert.equal(body, '[{"id":1,"id_2":2}]');
  assert.equal(compileWriter(['id', 'id'], 'csv')([[1, 2]]), 'id,id_2\r\n1,2\r\n');
});

test('NDJSON: one object per line, trailing newline', () => {
  const write = compileWriter(['a', 'b'], 'ndjson');
  assert.equal(
    write([
      [1, 'x'],
      [2, 'line\nbreak'],
    ]),
    '{"a":1,"b":"x"}\n{"a":2,"b":"line\\nbreak"}\n',
  );
  assert.equal(write([]), '');
  assert.equal(write.head, '');
  assert.equal(write.contentType, 'application/x-ndjson');
  const lines = write(WEIRD.map((s, i) => [i, s])).split('\n');
  assert.equal(lines.pop(), '');
  assert.deepEqual(
    lines.map((l) => JSON.parse(l).b),
    WEIRD,
  );
});

test('CSV: header, CRLF, RFC 4180 quoting', async (t) => {
  const cases: [string, unknown, string][] = [
    ['plain', 'abc', 'abc'],
    ['comma', 'a,b', '"a,b"'],
    ['quote', 'say "hi"', '"say ""hi"""'],
    ['LF', 'a\nb', '"a\nb"'],
    ['CR', 'a\rb', '"a\rb"'],
    ['tab is not special in CSV', 'a\tb', 'a\tb'],
    ['leading space kept', ' a ', ' a '],
    ['semicolon', 'a;b', 'a;b'],
    ['null', null, ''],
    ['empty string', '', ''],
    ['true', true, 'True'],
    ['false', false, 'False'],
    ['NaN', NaN, ''],
    ['bigint', 9223372036854775807n, '9223372036854775807'],
    ['float', 2.5, '2.5'],
    ['Date', new Date(Date.UTC(2024, 0, 2, 3, 4, 5)), '2024-01-02 03:04:05'],
    ['Date with milliseconds', new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 60)), '2024-01-02 03:04:05.060000'],
    ['object', { a: 'x,y' }, '"{""a"":""x,y""}"'],
    ['Buffer', Buffer.from('x,y'), '"x,y"'],
  ];
  for (const [name, value, field] of cases) {
    await t.test(name, () => {
      const write = compileWriter(['k', 'v'], 'csv');
      assert.equal(write([[1, value]]), `k,v\r\n1,${field}\r\n`);
    });
  }
  await t.test('header fields are quoted too; content type', () => {
    const write = compileWriter(['a,b', 'c"d'], 'csv');
    assert.equal(write.head, '"a,b","c""d"\r\n');
    assert.equal(write([]), '"a,b","c""d"\r\n');
    assert.equal(write.contentType, 'text/csv; charset=utf-8');
  });
  await t.test('a row of one empty field is written as ""', () => {
    assert.equal(compileWriter(['v'], 'csv')([[null], ['']]), 'v\r\n""\r\n""\r\n');
  });
  await t.test('chunk gives rows without the header', () => {
    const write = compileWriter(['a', 'b'], 'csv');
    assert.equal(
      write.head + write.chunk([[1, 2]]) + write.chunk([[3, 4]]),
      write([
        [1, 2],
        [3, 4],
      ]),
    );
  });
});

test('TSV: tab-delimited, quoted like Python csv with a tab delimiter', () => {
  const write = compileWriter(['a', 'b'], 'tsv');
  assert.equal(
    write([
      ['x\ty', 'p,q'],
      ['say "hi"', 'l\nm'],
    ]),
    'a\tb\r\n"x\ty"\tp,q\r\n"say ""hi"""\t"l\nm"\r\n',
  );
  assert.equal(write.contentType, 'text/tab-separated-values; charset=utf-8');
});

test('textValue and formatDateTime', () => {
  assert.equal(textValue(undefined), '');
  assert.equal(textValue(-0.5), '-0.5');
  assert.equal(textValue([1, 2]), '[1,2]');
  assert.equal(formatDateTime(new Date(Date.UTC(1999, 11, 31, 23, 59, 59))), '1999-12-31 23:59:59');
  assert.equal(formatDateTime(new Date(NaN)), null);
});

test('rows shorter than the column list fill with null', () => {
  assert.equal(compileWriter(['a', 'b'], 'json')([[1]]), '[{"a":1,"b":null}]');
  assert.equal(compileWriter(['a', 'b'], 'csv')([[1]]), 'a,b\r\n1,\r\n');
});

test('no columns', () => {
  assert.equal(compileWriter([], 'json')([[], []]), '[{},{}]');
  assert.equal(compileWriter([], 'ndjson')([[]]), '{}\n');
});

test('a compiled writer is reusable', () => {
  const write = compileWriter(['a'], 'json');
  assert.equal(write([[1]]), '[{"a":1}]');
  assert.equal(write([[2], [3]]), '[{"a":2},{"a":3}]');
  assert.equal(`${write.head}${write.chunk([[2], [3]])}]`, '[{"a":2},{"a":3}]');
});

test('empty results and content types', () => {
  assert.equal(EMPTY_JSON, '{"message": "No results returned"}');
  assert.deepEqual(JSON.parse(EMPTY_JSON), { message: 'No results returned' });
  for (const format of ['json', 'ndjson', 'csv', 'tsv'] as const) {
    assert.deepEqual(writeEmpty(format), { body: EMPTY_JSON, contentType: 'application/json' });
  }
  assert.deepEqual(CONTENT_TYPES, {
    json: 'application/json',
    ndjson: 'application/x-ndjson',
    csv: 'text/csv; charset=utf-8',
    tsv: 'text/tab-separated-values; charset=utf-8',
    xml: 'application/xml',
    yaml: 'application/x-yaml',
    xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    parquet: 'application/vnd.apache.parquet',
  });
});

describe('a byte limit (QUERYAPIGATE_MAX_ANSWER_BYTES): answer_too_large, found while rows are written', () => {
  const FORMATS = ['json', 'ndjson', 'csv', 'tsv'] as const;
  const tooLarge = (e: unknown) => e instanceof GatewayError && e.code === 'answer_too_large' && /page_size/.test(e.message) && /stream=true/.test(e.message);

  test('a body at or under the limit is the same body as without one', () => {
    for (const format of FORMATS) {
      const write = compileWriter(['id', 's'], format);
      const rows = WEIRD.map((s, i) => [i, s]);
      const body = write(rows);
      const bytes = Buffer.byteLength(body);
      assert.equal(write(rows, bytes), body, format);
      assert.equal(write(rows, bytes + 1000), body, format);
      assert.throws(() => write(rows, bytes - 1), tooLarge, `${format}: one byte less`);
    }
  });

  test('the limit counts UTF-8 bytes, not characters', () => {
    for (const format of FORMATS) {
      const write = compileWriter(['s'], format);
      const rows = [['é'.repeat(100)], ['中'.repeat(100)], ['😀'.repeat(50)]];
      const body = write(rows);
      assert.ok(body.length < Buffer.byteLength(body));
      assert.throws(() => write(rows, body.length), tooLarge, `${format}: as many bytes as characters`);
      assert.equal(write(rows, Buffer.byteLength(body)), body);
    }
  });

  test('rendering stops at the first row past the limit: the rest is never written', () => {
    for (const format of FORMATS) {
      let rendered = 0;
      // a value the writers turn into text through String() (an object of a class), so each row written is counted
      const counted = new (class Counted {
        toString() {
          rendered++;
          return 'x'.repeat(100);
        }
      })();
      const write = compileWriter(['v'], format);
      const rows = Array.from({ length: 10_000 }, () => [counted]);
      assert.throws(() => write(rows, 1000), tooLarge, format);
      assert.ok(rendered >= 9 && rendered <= 11, `${format}: ${rendered} rows rendered of 10,000 for a 1,000-byte limit`);
    }
  });

  test('stream chunks are never limited', () => {
    const write = compileWriter(['s'], 'csv');
    assert.equal(write.chunk([['x'.repeat(5000)]]).length, 5002);
  });
});
