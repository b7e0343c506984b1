// Tests for a text stream's rows as bytes (formats/streamText.ts): for any values and any frame size,
// the frames joined are the bytes of formats.ts's writer, encoded as uWS encodes its strings; a row
// that does not fit leaves nothing behind; rowBytes is a row's exact size.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { compileWriter } from '../../src/call/formats.js';
import { compileTextRowEncoder, type ByteSink } from '../../src/call/formats/streamText.js';
import { parseTimestamp } from '../../src/sources/postgres.js';
import type { RawColumn } from '../../src/sources/types.js';

const FORMATS = ['csv', 'tsv', 'ndjson'] as const;

/** A string's bytes as uWS writes a JS string: UTF-8, a lone surrogate as its 3-byte form. */
function uwsBytes(s: string): Buffer {
  const parts: Buffer[] = [];
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    if (ch.length === 1 && c >= 0xd800 && c < 0xe000) parts.push(Buffer.from([0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)]));
    else parts.push(Buffer.from(ch));
  }
  return Buffer.concat(parts);
}

/** The rows written through frames of `size` bytes (a row too large for one gets a buffer of its own). */
function framed(columns: string[], format: (typeof FORMATS)[number], rows: unknown[][], size: number, raw?: RawColumn[]): Buffer {
  const enc = compileTextRowEncoder(columns, format, raw);
  const out: Buffer[] = [];
  let sink: ByteSink = { buf: new Uint8Array(size), pos: 0 };
  for (let i = 0; i < rows.length; ) {
    const before = sink.pos;
    i = enc.write(rows, i, sink);
    if (i === rows.length) break;
    assert.ok(sink.pos >= before);
    if (sink.pos > 0) {
      out.push(Buffer.from(sink.buf.subarray(0, sink.pos)));
      sink = { buf: new Uint8Array(size), pos: 0 };
    } else {
      const exact = enc.rowBytes(rows[i]);
      assert.ok(exact > size, 'only a row larger than a frame gets a buffer of its own');
      const big: ByteSink = { buf: new Uint8Array(exact), pos: 0 };
      const next = enc.write(rows, i, big);
      assert.equal(next, i + 1);
      assert.equal(big.pos, exact, 'rowBytes is the row exactly');
      out.push(Buffer.from(big.buf));
      i = next;
    }
  }
  out.push(Buffer.from(sink.buf.subarray(0, sink.pos)));
  return Buffer.concat(out);
}

const WEIRD = [
  'plain',
  'say "hi"',
  'a,b',
  'line\nbreak',
  'cr\rlf\r\n',
  'tab\there',
  'back\\slash',
  'unicode é ü 中文 😀',
  '\u2028\u2029',
  '\u0000\u001f\u007f',
  'lone \ud800 surrogate',
  'lone end \udc00',
  'pair at end \ud83d',
  '',
];

const value = fc.oneof(
  fc.constantFrom(...WEIRD),
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('a', ',', '"', '\t', '\r', '\n', '\\', '\u0000', '\u001f', '\u007f', '\u0080', 'é', '\ud800', '\udc00', '😀') }),
  fc.integer(),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  fc.constantFrom(0, -0, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, 2 ** 53, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  fc.double(),
  fc.bigInt(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.date({ noInvalidDate: false }),
  fc.date({ min: new Date('1000-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59.999Z') }),
  fc.uint8Array({ maxLength: 8 }).map((b) => Buffer.from(b)),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.oneof(fc.integer(), fc.string({ maxLength: 4 })), { maxKeys: 2 }),
  fc.array(fc.oneof(fc.integer(), fc.constant(null)), { maxLength: 3 }),
);

test("frames joined are the writer's bytes, for any values and any frame size", () => {
  fc.assert(
    fc.property(
      fc.constantFrom(...FORMATS),
      fc
        .integer({ min: 0, max: 4 })
        .chain((n) =>
          fc.tuple(fc.constant(n), fc.array(fc.array(value, { minLength: n, maxLength: n + 1 }), { maxLength: 12 }), fc.integer({ min: 1, max: 200 })),
        ),
      (format, [n, rows, size]) => {
        const columns = Array.from({ length: n }, (_, c) => ['id', 'na,me', 'é"', 'id'][c]!);
        const expected = uwsBytes(compileWriter(columns, format).chunk(rows));
        assert.deepEqual(framed(columns, format, rows, size), expected);
      },
    ),
    { numRuns: 3000 },
  );
});

test('rows as the sources give them, in frames of a few kilobytes', () => {
  const rows = Array.from({ length: 5000 }, (_, i) => [
    i - 2500,
    `row "${i}", é`,
    i / 7,
    new Date(Date.UTC(2026, 0, 1, 0, 0, i, i % 3 === 0 ? 0 : i % 1000)),
    i % 2 === 0,
    null,
    BigInt(i) * 10n ** 15n,
  ]);
  const columns = ['id', 'name', 'amount', 'at', 'flag', 'nothing', 'big'];
  for (const format of FORMATS) {
    for (const size of [200, 65536]) {
      assert.ok(framed(columns, format, rows, size).equals(uwsBytes(compileWriter(columns, format).chunk(rows))), `${format} in ${size}-byte frames`);
    }
  }
});

test('a row that does not fit leaves no bytes behind', () => {
  const enc = compileTextRowEncoder(['a', 'b'], 'csv');
  const sink: ByteSink = { buf: new Uint8Array(12).fill(7), pos: 2 };
  assert.equal(
    enc.write(
      [
        ['abc', 'de'],
        ['fghijkl', 'mn'],
      ],
      0,
      sink,
    ),
    1,
  );
  assert.equal(sink.pos, 2 + 8);
  assert.equal(Buffer.from(sink.buf.subarray(2, sink.pos)).toString(), 'abc,de\r\n');
  assert.equal(enc.rowBytes(['fghijkl', 'mn']), 12);
  assert.equal(enc.rowBytes(['x'.repeat(5000), 'é'.repeat(3000)]), 5000 + 1 + 6000 + 2);
});

// Raw values: PostgreSQL's text forms, as RawColumn describes them, each read as postgres.ts reads it.
const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');
const RAW: Record<string, { column: RawColumn; forms: fc.Arbitrary<string | Buffer> }> = {
  text: {
    column: { kind: 'text', read: text },
    forms: fc.oneof(fc.constantFrom(...WEIRD), fc.string(), fc.string({ unit: 'grapheme' })),
  },
  int4: { column: { kind: 'integer', read: (b) => +text(b) }, forms: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }).map(String) },
  int8: {
    column: { kind: 'integer', read: (b) => (Number.isSafeInteger(+text(b)) ? +text(b) : text(b)) },
    forms: fc
      .oneof(
        fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
        fc.bigInt({ min: -(10n ** 16n), max: 10n ** 16n }),
        fc.constantFrom(2n ** 53n, -(2n ** 53n) - 1n),
      )
      .map(String),
  },
  boolean: { column: { kind: 'boolean', read: (b) => text(b) === 't' }, forms: fc.constantFrom('t', 'f') },
  timestamp: {
    column: { kind: 'timestamp', read: (b) => parseTimestamp(text(b)) },
    forms: fc.oneof(
      // As PostgreSQL prints them: the fraction's trailing zeros dropped.
      fc
        .tuple(
          fc.date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }),
          fc.integer({ min: 0, max: 999_999 }),
        )
        .map(([d, us]) => `${d.toISOString().slice(0, 19).replace('T', ' ')}${us ? `.${String(us).padStart(6, '0').replace(/0+$/, '')}` : ''}`),
      fc.constantFrom(
        'infinity',
        '-infinity',
        '12026-01-01 00:00:00',
        '2026-01-01 00:00:00 BC',
        '0999-12-31 23:59:59.5',
        '2024-02-29 23:59:59.999999',
        '2026-01-31 00:00:00.0001',
      ),
    ),
  },
  // numeric and float texts: PostgreSQL's (trailing zeros, exponents, NaN, Infinity) and JavaScript's.
  numeric: {
    column: { kind: 'decimal', read: (b) => +text(b) },
    forms: fc.oneof(
      fc.double().map(String),
      fc
        .tuple(fc.boolean(), fc.stringMatching(/^(0|[1-9]\d{0,19})$/), fc.stringMatching(/^\d{0,12}$/))
        .map(([neg, int, frac]) => `${neg ? '-' : ''}${int}${frac ? `.${frac}` : ''}`),
      fc.constantFrom(
        '0',
        '-0',
        '-0.0',
        '007',
        '00.5',
        '-012',
        '0.000001',
        '0.0000001',
        '0.0000010',
        '1.50',
        '100',
        '1e+100',
        '1.5e-07',
        'NaN',
        'Infinity',
        '-Infinity',
      ),
      fc.constantFrom('123456789012345', '1234567890123456', '12345678901234.5', '1234567890123.45', '0.123456789012345', '0.1234567890123456'),
    ),
  },
  float8: { column: { kind: 'other', read: (b) => +text(b) }, forms: fc.double({ noNaN: true }).map(String) },
  // A server that does not check its text (SQL_ASCII) can send bytes that are not UTF-8.
  bytes: { column: { kind: 'text', read: text }, forms: fc.uint8Array({ maxLength: 6 }).map((b) => Buffer.from(b)) },
};

test('raw values: the bytes copied are the text of the value read from them', () => {
  const names = Object.keys(RAW);
  const raw = names.map((k) => RAW[k]!.column);
  const row = fc.tuple(...names.map((k) => fc.option(RAW[k]!.forms, { nil: null, freq: 8 })));
  fc.assert(
    fc.property(fc.constantFrom(...FORMATS), fc.array(row, { maxLength: 10 }), fc.integer({ min: 1, max: 300 }), (format, forms, size) => {
      const rows = forms.map((r) => r.map((v) => (v === null ? null : Buffer.from(v as string))));
      const values = rows.map((r) => r.map((v, c) => (v === null ? null : raw[c]!.read(v))));
      assert.deepEqual(framed(names, format, rows, size, raw), uwsBytes(compileWriter(names, format).chunk(values)));
    }),
    { numRuns: 3000 },
  );
});
