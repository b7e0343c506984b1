// The PostgreSQL timestamp parser's fast path reads the same instant as Date's string parser for
// every shape PostgreSQL prints, and leaves every other shape to that parser.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseTimestamp } from '../../src/sources/postgres.js';

const slow = (x: string): number | string => {
  const d = new Date(`${x.replace(' ', 'T')}Z`);
  return Number.isNaN(d.getTime()) ? x : d.getTime();
};
const read = (x: string): number | string => {
  const v = parseTimestamp(x);
  return v instanceof Date ? v.getTime() : v;
};

test('timestamps in ISO output read as the Date parser reads them, to the millisecond', () => {
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const shapes: string[] = [];
  for (let i = 0; i < 20_000; i++) {
    const d = new Date(Date.UTC(1000, 0, 1) + Math.floor(random() * (Date.UTC(9999, 11, 31) - Date.UTC(1000, 0, 1))));
    const base = d.toISOString().slice(0, 19).replace('T', ' ');
    const digits = Math.floor(random() * 7); // PostgreSQL prints 0 to 6 fraction digits
    shapes.push(digits ? `${base}.${String(Math.floor(random() * 10 ** digits)).padStart(digits, '0')}` : base);
  }
  for (const x of shapes) assert.equal(read(x), slow(x), x);
});

test('other shapes and out-of-range fields are left to the Date parser', () => {
  for (const x of [
    '2026-02-29 00:00:00', // not a leap year: the parser's reading, whatever it is
    '2024-02-29 23:59:59.999999',
    '2026-01-31 12:00:00',
    '2026-13-01 00:00:00',
    '2026-00-10 00:00:00',
    '2026-01-01 24:00:00',
    '2026-01-01 23:60:00',
    '0999-12-31 23:59:59',
    '12026-01-01 00:00:00',
    '2026-01-01 00:00:00 BC',
    'infinity',
    '-infinity',
    '2026-01-01T00:00:00',
  ]) {
    assert.equal(read(x), slow(x), x);
  }
  assert.equal(parseTimestamp('infinity'), 'infinity'); // not a date: the text, as before
});
