// In charge of one process-wide table of token buckets in shared memory, exact across the acceptor
// and every executor thread (the GCRA state and its arithmetic are described in rates.ts).
//
// Layout of the SharedArrayBuffer (S slots, a power of two; K overflow cells):
//
//   bytes 0..63     header: i32 magic, i32 S, i32 K; i64 fallbacks at byte 16
//   Int32 × S       slot locks            (0 free, 1 held, 2 held with waiters)
//   Int32 × S       claim locks, by home slot (serialise creating a bucket for one home)
//   Int32 × S       fingerprints          (0 = never used)
//   Int32 × K       overflow cell locks
//   Float64 × S     TAT per slot (µs since the epoch; ≤ now means the bucket is full)
//   Float64 × K     TAT per overflow cell
//
// A bucket key hashes to a home slot and an independent non-zero 32-bit fingerprint, and lives in
// the first slot of home..home+PROBE-1 holding its fingerprint. Rules that keep every limit exact
// or stricter, never looser:
// - A slot is reused only when its bucket is full (TAT ≤ now): a full bucket carries no
//   information, so its old key, coming back, gets the full bucket it would have had anyway.
// - A bucket is only ever created under its home's claim lock, after a full rescan, so one key can
//   never hold two buckets (which would double its limit).
// - Slot and TAT change together under the slot lock, so a take can never land in a bucket that
//   was handed to another key meanwhile.
// - Two keys with the same home region and fingerprint share one bucket: both get stricter.
// - When no slot in the window is free or full, the key takes from an overflow cell chosen by its
//   fingerprint, shared with other overflowing keys (stricter), and a bucket created later for that
//   key starts from the cell's TAT, so the takes counted there are not forgotten.
// Slots are never emptied, so a key's bucket always sits before the first never-used slot of its
// window, and lookups stop there.
import { bucketSize, tokenInterval, type RateCheck } from './rates.js';

const MAGIC = 0x51414752; // 'QAGR'
const HEADER_BYTES = 64;
const FALLBACKS_I64 = 2; // BigInt64 index of the fallbacks counter (byte 16)
const PROBE = 16;
const OVERFLOW_CELLS = 1024;
/** A lock held this long belongs to a thread that died inside it (terminated); take it over. */
const STEAL_AFTER_MS = 1000;
const SPINS = 64;

interface Layout {
  slots: number;
  cells: number;
  lock: number; // Int32 indexes
  claim: number;
  fp: number;
  cellLock: number;
  tat: number; // Float64 indexes
  cellTat: number;
  bytes: number;
}

function layoutFor(slots: number, cells: number): Layout {
  const i32 = HEADER_BYTES / 4;
  const lock = i32;
  const claim = lock + slots;
  const fp = claim + slots;
  const cellLock = fp + slots;
  const f64Start = Math.ceil(((cellLock + cells) * 4) / 8);
  const tat = f64Start;
  const cellTat = tat + slots;
  return { slots, cells, lock, claim, fp, cellLock, tat, cellTat, bytes: (cellTat + cells) * 8 };
}

/**
 * The process-wide bucket table: created once by the acceptor and handed to every executor in
 * workerData (a SharedArrayBuffer is shared, not copied). 65,536 slots take 1.3 MB.
 */
export function createLimiterMemory(slots = 65536): SharedArrayBuffer {
  if (!Number.isInteger(slots) || slots < PROBE || (slots & (slots - 1)) !== 0 || slots > 1 << 26) {
    throw new RangeError(`rate limiter slots must be a power of two from ${PROBE} to 2^26, not ${slots}`);
  }
  const layout = layoutFor(slots, OVERFLOW_CELLS);
  const memory = new SharedArrayBuffer(layout.bytes);
  const header = new Int32Array(memory, 0, 4);
  header[1] = slots;
  header[2] = OVERFLOW_CELLS;
  Atomics.store(header, 0, MAGIC);
  return memory;
}

// Two independent 32-bit hashes (FNV-1a and a murmur-style mix), streamed over the parts of a key
// so callers need not build the string: hashing a, b, c gives the same as hashing a + b + c.
let ha = 0;
let hb = 0;

function hashStart(): void {
  ha = 0x811c9dc5;
  hb = 0x9747b28c;
}

function hashPart(s: string): void {
  let a = ha;
  let b = hb;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  ha = a;
  hb = b;
}

/** The home (before masking) and fingerprint a bucket key gets; exported for the collision tests. */
export function bucketHash(bucketKey: string): { home: number; fingerprint: number } {
  hashStart();
  hashPart(bucketKey);
  return { home: fmix(ha) >>> 0, fingerprint: fmix(hb) || 1 };
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/**
 * Token buckets in shared memory; one instance per thread over the same memory. `take` is
 * synchronous and atomic across threads (per-slot futex-style locks held for a few arithmetic
 * operations). `now` returns milliseconds (Date.now by default: the same clock in every thread).
 */
export class SharedRateLimiter {
  readonly #i32: Int32Array;
  readonly #f64: Float64Array;
  readonly #i64: BigInt64Array;
  readonly #l: Layout;
  readonly #mask: number;
  readonly #now: () => number;

  constructor(memory: SharedArrayBuffer, now: () => number = Date.now) {
    const header = new Int32Array(memory, 0, 4);
    if (Atomics.load(header, 0) !== MAGIC) throw new TypeError('not a rate limiter memory (use createLimiterMemory)');
    this.#l = layoutFor(header[1], header[2]);
    if (memory.byteLength < this.#l.bytes) throw new TypeError('rate limiter memory is truncated');
    this.#i32 = new Int32Array(memory);
    this.#f64 = new Float64Array(memory);
    this.#i64 = new BigInt64Array(memory, 0, 8);
    this.#mask = this.#l.slots - 1;
    this.#now = now;
  }

  /** Takes one token from `bucketKey`'s bucket (capacity `limit`, refilled over `periodMs`). */
  take(bucketKey: string, limit: number, periodMs: number): RateCheck {
    hashStart();
    hashPart(bucketKey);
    return this.#take(limit, periodMs);
  }

  /** The same bucket as take(a + b + c, ...), without building the string. */
  takeParts(a: string, b: string, c: string, limit: number, periodMs: number): RateCheck {
    hashStart();
    hashPart(a);
    hashPart(b);
    hashPart(c);
    return this.#take(limit, periodMs);
  }

  #take(limit: number, periodMs: number): RateCheck {
    const home = fmix(ha) & this.#mask;
    const fp = fmix(hb) || 1;
    const nowUs = Math.floor(this.#now() * 1000);
    const n = bucketSize(limit);
    const r = tokenInterval(n, periodMs);
    const tau = r * n;
    // Fast path: the key's bucket exists.
    return this.#existing(home, fp, nowUs, n, r, tau) ?? this.#claim(home, fp, nowUs, n, r, tau);
  }

  /** Takes from the key's bucket when one exists along its probe sequence; null when none does. */
  #existing(home: number, fp: number, nowUs: number, n: number, r: number, tau: number): RateCheck | null {
    const i32 = this.#i32;
    const l = this.#l;
    for (let i = 0; i < PROBE; i++) {
      const s = (home + i) & this.#mask;
      const f = i32[l.fp + s];
      if (f === 0) break;
      if (f !== fp) continue;
      this.#lock(l.lock + s);
      if (i32[l.fp + s] === fp) {
        const result = this.#apply(l.tat + s, nowUs, n, r, tau);
        this.#unlock(l.lock + s);
        return result;
      }
      this.#unlock(l.lock + s); // reused by another key meanwhile (it was full)
    }
    return null;
  }

  /** Checks done locally because Redis failed, process-wide (all threads add to one counter). */
  get fallbacks(): number {
    return Number(Atomics.load(this.#i64, FALLBACKS_I64));
  }

  countFallback(): void {
    Atomics.add(this.#i64, FALLBACKS_I64, 1n);
  }

  /** Slow path, under the home's claim lock: find the bucket again, or create it, or overflow. */
  #claim(home: number, fp: number, nowUs: number, n: number, r: number, tau: number): RateCheck {
    const i32 = this.#i32;
    const f64 = this.#f64;
    const l = this.#l;
    this.#lock(l.claim + home);
    try {
      // Only this lock's holders create buckets for this key, so a full rescan is exact: the
      // bucket can disappear meanwhile (reused once full, which loses nothing), never appear.
      const found = this.#existing(home, fp, nowUs, n, r, tau);
      if (found) return found;
      const cell = (fp >>> 0) % l.cells;
      for (let i = 0; i < PROBE; i++) {
        const s = (home + i) & this.#mask;
        if (i32[l.fp + s] !== 0 && f64[l.tat + s] > nowUs) continue; // another key's live bucket
        this.#lock(l.lock + s);
        const tat = f64[l.tat + s];
        if (i32[l.fp + s] === 0 || tat <= nowUs) {
          this.#lock(l.cellLock + cell);
          const carried = f64[l.cellTat + cell];
          this.#unlock(l.cellLock + cell);
          f64[l.tat + s] = Math.max(carried, tat);
          Atomics.store(i32, l.fp + s, fp);
          const result = this.#apply(l.tat + s, nowUs, n, r, tau);
          this.#unlock(l.lock + s);
          return result;
        }
        this.#unlock(l.lock + s);
      }
      // Every slot of the window holds another key's live bucket: count in the overflow cell.
      this.#lock(l.cellLock + cell);
      const result = this.#apply(l.cellTat + cell, nowUs, n, r, tau);
      this.#unlock(l.cellLock + cell);
      return result;
    } finally {
      this.#unlock(l.claim + home);
    }
  }

  /** One GCRA step on the TAT at f64 index `at`; the caller holds its lock. */
  #apply(at: number, nowUs: number, n: number, r: number, tau: number): RateCheck {
    const tat = this.#f64[at];
    const next = Math.max(tat, nowUs) + r;
    if (next - nowUs > tau) {
      return { allowed: false, limit: n, remaining: 0, retryAfterS: Math.max(1, Math.ceil((next - tau - nowUs) / 1e6)) };
    }
    this.#f64[at] = next;
    return { allowed: true, limit: n, remaining: Math.floor((tau - (next - nowUs)) / r), retryAfterS: 0 };
  }

  // A three-state futex mutex (Drepper, "Futexes are tricky", mutex 2), with a takeover after
  // STEAL_AFTER_MS so a thread terminated inside the few instructions it holds a lock for cannot
  // wedge a slot (or the acceptor) forever.
  #lock(at: number): void {
    if (Atomics.compareExchange(this.#i32, at, 0, 1) !== 0) this.#lockSlow(at);
  }

  #lockSlow(at: number): void {
    const i32 = this.#i32;
    for (let i = 0; i < SPINS; i++) {
      if (Atomics.load(i32, at) === 0 && Atomics.compareExchange(i32, at, 0, 1) === 0) return;
    }
    const deadline = performance.now() + STEAL_AFTER_MS;
    while (Atomics.exchange(i32, at, 2) !== 0) {
      if (performance.now() > deadline) return; // taken over: the holder is gone
      Atomics.wait(i32, at, 2, 5);
    }
  }

  #unlock(at: number): void {
    if (Atomics.sub(this.#i32, at, 1) !== 1) {
      Atomics.store(this.#i32, at, 0);
      Atomics.notify(this.#i32, at, 1);
    }
  }
}

// ---------------------------------------------------------------- the gate's checks
