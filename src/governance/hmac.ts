// HMAC-SHA256 (RFC 2104 over FIPS 180-4's SHA-256) for the hash mask, written out on purpose rather than taken from
// node:crypto: a hashed column hashes a value of every row of every answer, and createHmac sets the key up again for
// each value (two compressions of its pads) and has OpenSSL find the digest by name under a lock. Here the pads are
// compressed once per key, and a value of up to 55 bytes costs the two compressions HMAC cannot do without. Exactness is
// the point of a hash others join on: test/unit/hmac.test.ts checks it against node:crypto byte for byte.
import { createHash } from 'node:crypto';

const K = Int32Array.from([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74,
  0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d,
  0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e,
  0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5,
  0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = Int32Array.from([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
const BLOCK = 64;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

// Scratch shared by every call: the functions below never yield, so no two calls overlap. Its size is fixed: a longer
// text is encoded into bytes of its own, and a message's full blocks are read where they are, so a large value once
// hashed is not kept. What of a value it holds is zeroed before the call returns.
const SCRATCH = 4096;
const scratch = new Uint8Array(SCRATCH);
const w = new Int32Array(64);
const state = new Int32Array(8);
const encoder = new TextEncoder();

/** SHA-256's compression of the block in w[0..15] into `s`. */
function compress(s: Int32Array): void {
  for (let i = 16; i < 64; i++) {
    const a = w[i - 15];
    const b = w[i - 2];
    const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
    const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
    w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
  }
  let a = s[0];
  let b = s[1];
  let c = s[2];
  let d = s[3];
  let e = s[4];
  let f = s[5];
  let g = s[6];
  let h = s[7];
  for (let i = 0; i < 64; i++) {
    const t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
    const t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  s[0] = (s[0] + a) | 0;
  s[1] = (s[1] + b) | 0;
  s[2] = (s[2] + c) | 0;
  s[3] = (s[3] + d) | 0;
  s[4] = (s[4] + e) | 0;
  s[5] = (s[5] + f) | 0;
  s[6] = (s[6] + g) | 0;
  s[7] = (s[7] + h) | 0;
}

/** The 64-byte block at `at` of `from` into w[0..15], big-endian. */
function load(from: Uint8Array, at: number): void {
  for (let i = 0; i < 16; i++, at += 4) w[i] = (from[at] << 24) | (from[at + 1] << 16) | (from[at + 2] << 8) | from[at + 3];
}

/** The state after one block of the key, padded to a block, XORed with `pad`. */
function padState(key: Uint8Array, pad: number): Int32Array {
  const block = new Uint8Array(BLOCK).fill(pad);
  for (let i = 0; i < key.length; i++) block[i] ^= key[i];
  load(block, 0);
  const s = IV.slice();
  compress(s);
  return s;
}

/** `text`, of at most (SCRATCH - 2 blocks) / 3 characters, as UTF-8 into the scratch; its length in bytes. */
function encode(text: string): number {
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return encoder.encodeInto(text, scratch).written; // not ASCII: the encoder's way, lone surrogates as U+FFFD
    scratch[i] = c;
  }
  return n;
}

/**
 * HMAC-SHA256 under `key`, as a function of the message (text as UTF-8) that returns the MAC's first `hexChars`
 * hexadecimal characters (at most 64).
 */
export function hmacSha256Hex(key: Uint8Array, hexChars = 64): (message: string | Uint8Array) => string {
  const k = key.length > BLOCK ? createHash('sha256').update(key).digest() : key;
  const inner = padState(k, 0x36);
  const outer = padState(k, 0x5c);
  const hexBytes = Math.min(32, Math.ceil(hexChars / 2));
  return (message) => {
    let src: Uint8Array;
    let n: number;
    if (typeof message !== 'string') {
      src = message;
      n = message.length;
    } else if (message.length <= (SCRATCH - 2 * BLOCK) / 3) {
      src = scratch;
      n = encode(message);
    } else {
      src = encoder.encode(message); // a long text: bytes of its own, gone with the call
      n = src.length;
    }
    // The inner hash: the message after the inner pad's block, its full blocks where they are; then its tail, 0x80,
    // zeros and the length in bits (the pad's block and the message) in one or two blocks at the scratch's start.
    state.set(inner);
    const full = n & ~(BLOCK - 1);
    for (let at = 0; at < full; at += BLOCK) {
      load(src, at);
      compress(state);
    }
    const tail = n - full;
    if (src !== scratch || full > 0) for (let i = 0; i < tail; i++) scratch[i] = src[full + i];
    const end = (tail + 8 + BLOCK) & ~(BLOCK - 1);
    scratch[tail] = 0x80;
    scratch.fill(0, tail + 1, end - 8);
    const bits = (BLOCK + n) * 8;
    const high = Math.floor(bits / 0x1_0000_0000);
    scratch[end - 8] = high >>> 24;
    scratch[end - 7] = high >>> 16;
    scratch[end - 6] = high >>> 8;
    scratch[end - 5] = high;
    scratch[end - 4] = bits >>> 24;
    scratch[end - 3] = bits >>> 16;
    scratch[end - 2] = bits >>> 8;
    scratch[end - 1] = bits;
    for (let at = 0; at < end; at += BLOCK) {
      load(scratch, at);
      compress(state);
    }
    scratch.fill(0, 0, src === scratch && n > end ? n : end);
    // The outer hash: the inner digest after the outer pad's block, in one block of its own.
    for (let i = 0; i < 8; i++) w[i] = state[i];
    w[8] = 0x80000000;
    w.fill(0, 9, 15);
    w[15] = (BLOCK + 32) * 8;
    state.set(outer);
    compress(state);
    let hex = '';
    for (let i = 0; i < hexBytes; i++) hex += HEX[(state[i >> 2] >>> (24 - 8 * (i & 3))) & 0xff];
    return hex.length > hexChars ? hex.slice(0, hexChars) : hex;
  };
}
