// The hash mask's HMAC-SHA256, written out in governance/hmac.ts, against node:crypto's: the same MAC for every key
// length (short, a block, longer than a block and so hashed first), every message length across the block and
// padding boundaries, every byte value, and text as UTF-8 (lone surrogates as U+FFFD, as node:crypto writes them).
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { hmacSha256Hex } from '../../src/governance/hmac.js';
import { hashValue } from '../../src/governance/masking.js';

const KEY_LENGTHS = [0, 1, 16, 32, 63, 64, 65, 100, 200];
const oracle = (key: Uint8Array, message: string | Uint8Array) => createHmac('sha256', key).update(message).digest('hex');

test('hmac: every key length and message length from 0 to 300 bytes, against node:crypto', () => {
  for (const kl of KEY_LENGTHS) {
    const key = randomBytes(kl);
    const mac = hmacSha256Hex(key);
    for (let n = 0; n <= 300; n++) {
      const message = randomBytes(n);
      assert.equal(mac(message), oracle(key, message), `key ${kl} bytes, message ${n} bytes`);
    }
  }
});

test('hmac: a long message (many blocks) and every byte value', () => {
  const key = randomBytes(32);
  const mac = hmacSha256Hex(key);
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  assert.equal(mac(all), oracle(key, all));
  const long = randomBytes(100_000);
  assert.equal(mac(long), oracle(key, long));
  // Short messages after long ones: nothing of a long one's blocks is left over in the scratch.
  assert.equal(mac('0'), oracle(key, '0'));
  assert.equal(mac('x'.repeat(4000)), oracle(key, 'x'.repeat(4000)));
  assert.equal(mac(''), oracle(key, ''));
  assert.equal(mac(Buffer.from('y'.repeat(1000))), oracle(key, 'y'.repeat(1000)));
  assert.equal(mac('z'), oracle(key, 'z'));
});

test('hmac: text as UTF-8, ASCII or not, lone surrogates as U+FFFD', () => {
  const key = randomBytes(32);
  const mac = hmacSha256Hex(key);
  const texts = [
    '',
    '0',
    '-1234',
    'ACADEMY DINOSAUR',
    'john@example.com',
    'Zoë',
    'é'.repeat(40),
    '日本語のテキスト',
    '😀 ok',
    'a\uD800b',
    '\uDC00',
    'x'.repeat(55),
    'x'.repeat(56),
    'y'.repeat(119),
    '\u0000\u007f\u0080\u07ff\u0800\uffff',
  ];
  for (let n = 0; n < 70; n++) texts.push(`${'a'.repeat(n)}ü`);
  // Around the length past which a text is encoded into bytes of its own rather than the scratch, and far past it.
  for (let n = 1300; n < 1380; n += 7) texts.push('b'.repeat(n), `${'€'.repeat(n)}x`);
  texts.push('c'.repeat(50_000), '漢'.repeat(20_000));
  for (const t of texts) assert.equal(mac(t), oracle(key, t), JSON.stringify(t));
});

test('hmac: the first hexChars characters', () => {
  const key = randomBytes(20);
  for (const chars of [1, 2, 15, 16, 17, 63, 64]) assert.equal(hmacSha256Hex(key, chars)('value'), oracle(key, 'value').slice(0, chars), `${chars}`);
});

test('hash mask: HMAC-SHA256 of the text form, its first 16 hex characters, as it has always been', () => {
  const secret = Buffer.from('secret-one');
  const cases: Array<[unknown, string]> = [
    ['john@example.com', 'john@example.com'],
    [42, '42'],
    [-0.5, '-0.5'],
    [true, 'true'],
    [new Date('2024-01-02T03:04:05.678Z'), '2024-01-02T03:04:05.678Z'],
    [{ a: [1, 'b'] }, '{"a":[1,"b"]}'],
    [12345678901234567890n, '12345678901234567890'],
  ];
  for (const [value, text] of cases) assert.equal(hashValue(value, secret), oracle(secret, text).slice(0, 16), String(text));
  const bytes = Buffer.from([0, 1, 2, 255]);
  assert.equal(hashValue(bytes, secret), oracle(secret, bytes).slice(0, 16));
  assert.equal(hashValue(null, secret), null);
  assert.equal(hashValue(undefined, secret), null);
});
