// Tests for the rate limits: the "N/period" grammar, the token bucket on a controllable clock, the
// shared table's collision rules (stricter, never looser), the gate's checks and headers, and the
// headline: a limit of N admits exactly N calls across four threads hammering one memory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { RateLimits } from '../../src/auth/rateLimit.js';
import { formatRate, parseRate, rateLimitHeaders, type RateCheck } from '../../src/auth/rates.js';
import { bucketHash, createLimiterMemory, SharedRateLimiter } from '../../src/auth/sharedBuckets.js';
import type { HammerJob } from './rateLimitWorker.js';

const HOUR = 3_600_000;
const T0 = 1_800_000_000_000; // a fixed wall-clock instant (ms)

/** A limiter over fresh memory with a clock the test moves. */
function clocked(slots = 1024): { limiter: SharedRateLimiter; memory: SharedArrayBuffer; at(ms: number): void; advance(ms: number): void } {
  let now = T0;
  const memory = createLimiterMemory(slots);
  return {
    limiter: new SharedRateLimiter(memory, () => now),
    memory,
    at: (ms) => {
      now = T0 + ms;
    },
    advance: (ms) => {
      now += ms;
    },
  };
}

function takeMany(limiter: SharedRateLimiter, key: string, limit: number, periodMs: number, times: number): number {
  let allowed = 0;
  for (let i = 0; i < times; i++) if (limiter.take(key, limit, periodMs).allowed) allowed++;
  return allowed;
}

test('parseRate: the grammar', () => {
  const cases: [string, { limit: number; periodMs: number } | null][] = [
    ['60/minute', { limit: 60, periodMs: 60_000 }],
    ['1/second', { limit: 1, periodMs: 1_000 }],
    ['5/seconds', { limit: 5, periodMs: 1_000 }],
    ['100/hour', { limit: 100, periodMs: HOUR }],
    ['100/hours', { limit: 100, periodMs: HOUR }],
    ['7/day', { limit: 7, periodMs: 86_400_000 }],
    ['7/days', { limit: 7, periodMs: 86_400_000 }],
    [' 10 / Minute ', { limit: 10, periodMs: 60_000 }],
    ['10/MINUTES', { limit: 10, periodMs: 60_000 }],
    ['010/minute', { limit: 10, periodMs: 60_000 }],
    ['0/minute', null],
    ['-1/minute', null],
    ['1.5/minute', null],
    ['10/min', null],
    ['10/week', null],
    ['10/minutess', null],
    ['10 per minute', null],
    ['/minute', null],
    ['10', null],
    ['', null],
    ['99999999999999999999/second', null],
  ];
  for (const [text, want] of cases) assert.deepEqual(parseRate(text), want, text);
  assert.equal(formatRate({ limit: 60, periodMs: 60_000 }), '60/minute');
  assert.equal(formatRate({ limit: 3, periodMs: 86_400_000 }), '3/day');
});

test('bucket: a burst of N, then refused, with remaining and retry-after', () => {
  const { limiter } = clocked();
  const seen = [];
  for (let i = 0; i < 6; i++) seen.push(limiter.take('k', 5, 1_000));
  assert.deepEqual(
    seen.map((r) => [r.allowed, r.remaining, r.retryAfterS]),
    [
      [true, 4, 0],
      [true, 3, 0],
      [true, 2, 0],
      [true, 1, 0],
      [true, 0, 0],
      [false, 0, 1],
    ],
  );
  assert.ok(seen.every((r) => r.limit === 5));
});

test('bucket: refills continuously, one token per period/limit', () => {
  const { limiter, at } = clocked();
  assert.equal(takeMany(limiter, 'k', 60, 60_000, 100), 60); // 60/minute: burst of 60
  at(999);
  assert.equal(limiter.take('k', 60, 60_000).allowed, false);
  at(1_000);
  assert.deepEqual(limiter.take('k', 60, 60_000), { allowed: true, limit: 60, remaining: 0, retryAfterS: 0 });
  assert.equal(limiter.take('k', 60, 60_000).allowed, false);
  at(1_000 + 10_500); // 10.5 tokens back
  assert.equal(limiter.take('k', 60, 60_000).remaining, 9);
  assert.equal(takeMany(limiter, 'k', 60, 60_000, 100), 9);
  at(1_000 + 10_500 + 60_000); // a full period later: full, and never more than full
  assert.equal(takeMany(limiter, 'k', 60, 60_000, 100), 60);
  at(HOUR * 5);
  assert.equal(takeMany(limiter, 'k', 60, 60_000, 100), 60);
});

test('bucket: remaining is the floor of the tokens left', () => {
  const { limiter, advance } = clocked();
  assert.equal(takeMany(limiter, 'k', 10, 1_000, 10), 10);
  advance(350); // 3.5 tokens
  assert.equal(limiter.take('k', 10, 1_000).remaining, 2);
  assert.equal(limiter.take('k', 10, 1_000).remaining, 1);
  assert.equal(limiter.take('k', 10, 1_000).remaining, 0);
  assert.equal(limiter.take('k', 10, 1_000).allowed, false);
});

test('bucket: retry-after is the whole seconds until one token, at least 1', () => {
  const { limiter, at } = clocked();
  assert.equal(takeMany(limiter, 'k', 3, HOUR, 3), 3); // one token per 20 minutes
  assert.equal(limiter.take('k', 3, HOUR).retryAfterS, 1200);
  at(600_000);
  assert.equal(limiter.take('k', 3, HOUR).retryAfterS, 600);
  at(1_199_500);
  assert.equal(limiter.take('k', 3, HOUR).retryAfterS, 1);
  at(1_200_000);
  assert.equal(limiter.take('k', 3, HOUR).allowed, true);
  const burst = clocked().limiter;
  assert.equal(takeMany(burst, 'k', 100, 1_000, 100), 100);
  assert.equal(burst.take('k', 100, 1_000).retryAfterS, 1); // 10 ms away, still 1
  const odd = clocked().limiter; // 7/hour: a token every 514.29 s, rounded up
  assert.equal(takeMany(odd, 'k', 7, HOUR, 7), 7);
  assert.equal(odd.take('k', 7, HOUR).retryAfterS, 515);
});

test('bucket: exact bursts at awkward rates; the clock going back only makes it stricter', () => {
  for (const [limit, periodMs] of [
    [3000, 1_000],
    [7, HOUR],
    [999_983, 86_400_000],
    [2_000_000, 1_000],
    [1, 1_000],
  ]) {
    const { limiter } = clocked();
    assert.equal(takeMany(limiter, 'k', limit, periodMs, limit + 5), limit, `${limit}/${periodMs}`);
  }
  const { limiter, at } = clocked();
  assert.equal(takeMany(limiter, 'k', 2, 1_000, 2), 2);
  at(-60_000);
  assert.equal(limiter.take('k', 2, 1_000).allowed, false);
  at(1_000);
  assert.equal(limiter.take('k', 2, 1_000).allowed, true);
});

test('buckets are separate per key, and shared by limiters over the same memory', () => {
  const { limiter, memory } = clocked();
  const other = new SharedRateLimiter(memory, () => T0);
  assert.equal(takeMany(limiter, 'a', 3, HOUR, 2), 2);
  assert.equal(takeMany(other, 'a', 3, HOUR, 5), 1);
  assert.equal(takeMany(other, 'b', 3, HOUR, 5), 3);
  const fresh = new SharedRateLimiter(createLimiterMemory(1024), () => T0);
  assert.equal(takeMany(fresh, 'a', 3, HOUR, 5), 3);
});

test('memory: slots must be a power of two; a foreign buffer is refused', () => {
  assert.throws(() => createLimiterMemory(1000), RangeError);
  assert.throws(() => createLimiterMemory(8), RangeError);
  assert.throws(() => new SharedRateLimiter(new SharedArrayBuffer(1 << 16)), TypeError);
  assert.equal(createLimiterMemory(16).byteLength < 16_000, true);
});

test('collisions: two keys with one fingerprint share a bucket (stricter, never looser)', () => {
  // Birthday search for two keys with the same 32-bit fingerprint and the same home slot in a
  // 16-slot table (36 bits: about 370,000 keys).
  const seen = new Map<string, string>();
  let pair: [string, string] | null = null;
  for (let i = 0; !pair && i < 4_000_000; i++) {
    const key = `k:${i}`;
    const { home, fingerprint } = bucketHash(key);
    const id = `${fingerprint}:${home & 15}`;
    const before = seen.get(id);
    if (before !== undefined) pair = [before, key];
    else seen.set(id, key);
  }
  assert.ok(pair, 'found a fingerprint collision');
  const [a, b] = pair;
  const limiter = new SharedRateLimiter(createLimiterMemory(16), () => T0);
  assert.equal(takeMany(limiter, a, 3, HOUR, 2), 2);
  assert.equal(takeMany(limiter, b, 3, HOUR, 5), 1, 'b is charged for a');
  assert.equal(takeMany(limiter, a, 3, HOUR, 5), 0);
});

test('collisions: a full table never loosens any key, and a bucket remembers its overflow', () => {
  const { limiter, at } = clocked(16);
  // 16 keys at 1/minute hold every slot with a live bucket.
  for (let i = 0; i < 16; i++) assert.equal(takeMany(limiter, `fill:${i}`, 1, 60_000, 1), 1);
  // More keys than slots: each is counted in an overflow cell, and never gets more than its limit.
  for (let i = 0; i < 200; i++) assert.ok(takeMany(limiter, `extra:${i}`, 3, HOUR, 10) <= 3);
  for (let i = 0; i < 16; i++) assert.equal(takeMany(limiter, `fill:${i}`, 1, 60_000, 1), 0);
  at(HOUR);
  for (let i = 0; i < 16; i++) assert.equal(takeMany(limiter, `fill:${i}`, 1, 60_000, 1), 1);
  // y uses up 2/hour in the overflow; a minute later the fill buckets are full, so y gets a slot
  // of its own, which must start from the overflow's count, not from a full bucket.
  const y = 'y-key';
  const fresh = clocked(16);
  for (let i = 0; i < 16; i++) takeMany(fresh.limiter, `fill:${i}`, 1, 60_000, 1);
  assert.equal(takeMany(fresh.limiter, y, 2, HOUR, 5), 2);
  fresh.at(61_000);
  assert.equal(takeMany(fresh.limiter, y, 2, HOUR, 5), 0, 'the overflow count carries into the new bucket');
  fresh.at(HOUR);
  assert.equal(takeMany(fresh.limiter, y, 2, HOUR, 5), 2);
  // Many keys through a small table over simulated time: no key ever beats its rate.
  const small = clocked(16);
  const counts = new Map<string, number>();
  for (let step = 0; step < 20_000; step++) {
    small.at(step * 50); // 1000 s in all
    const key = `r:${(step * 7919) % 97}`;
    if (small.limiter.take(key, 2, 60_000).allowed) counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  // 2/minute over 1000 s: at most 2 + 1000/30 per key.
  for (const [key, n] of counts) assert.ok(n <= 2 + Math.floor(1_000 / 30), `${key}: ${n}`);
});

test('a slot lock left held by a thread that died inside it is taken over', () => {
  const memory = createLimiterMemory(1024);
  const limiter = new SharedRateLimiter(memory, () => T0);
  assert.equal(limiter.take('k', 3, HOUR).allowed, true);
  // Slot locks are the Int32s after the 64-byte header; a fresh table puts 'k' at its home slot.
  const lockIndex = 16 + (bucketHash('k').home & 1023);
  const i32 = new Int32Array(memory);
  Atomics.store(i32, lockIndex, 1);
  assert.deepEqual(limiter.take('k', 3, HOUR), { allowed: true, limit: 3, remaining: 1, retryAfterS: 0 });
  assert.equal(Atomics.load(i32, lockIndex), 0, 'and released');
});

test('RateLimits: checks, fail-closed rates, headers', () => {
  const memory = createLimiterMemory(1024);
  const none = new RateLimits({ memory, redisUrl: null, serverRate: null, now: () => T0 });
  assert.equal(none.checkClient({ ip: '1.2.3.4' }), null);
  assert.equal(none.checkKey('k', null), null);
  assert.equal(none.checkKeyQuery('k', 'q', undefined), null);
  assert.throws(
    () => new RateLimits({ memory, redisUrl: null, serverRate: '60 per minute' }),
    /QUERYAPIGATE_RATE_LIMIT must look like '60\/minute' .* not '60 per minute'/,
  );

  const limits = new RateLimits({ memory, redisUrl: null, serverRate: '2/minute', now: () => T0 });
  assert.equal(limits.shared, false);
  const c1 = limits.checkClient({ ip: '10.0.0.1' }) as RateCheck;
  assert.deepEqual(c1, { allowed: true, limit: 2, remaining: 1, retryAfterS: 0 });
  limits.checkClient({ ip: '10.0.0.1' });
  const c3 = limits.checkClient({ ip: '10.0.0.1' }) as RateCheck;
  assert.deepEqual(c3, { allowed: false, limit: 2, remaining: 0, retryAfterS: 30 });
  assert.equal((limits.checkClient({ ip: '10.0.0.2' }) as RateCheck).allowed, true);
  assert.equal((limits.checkClient({ ip: '' }) as RateCheck).remaining, 1, 'a missing address is "unknown"');

  // Key and key+query buckets are separate from each other and from the client bucket.
  assert.equal((limits.checkKey('10.0.0.1', '1/hour') as RateCheck).allowed, true);
  assert.equal((limits.checkKey('10.0.0.1', '1/hour') as RateCheck).allowed, false);
  assert.equal((limits.checkKeyQuery('10.0.0.1', 'q', '1/hour') as RateCheck).allowed, true);
  assert.equal((limits.checkKeyQuery('10.0.0.1', 'q2', '1/hour') as RateCheck).allowed, true);
  assert.equal((limits.checkKeyQuery('10.0.0.1', 'q', '1/hour') as RateCheck).allowed, false);
  // A changed rate starts a fresh bucket; a rate the grammar refuses fails closed.
  assert.equal((limits.checkKey('10.0.0.1', '5/hour') as RateCheck).remaining, 4);
  assert.equal((limits.checkKey('k', '0/minute') as RateCheck).allowed, false);
  assert.equal((limits.checkKeyQuery('k', 'q', 'lots') as RateCheck).allowed, false);
  // Another thread's RateLimits over the same memory sees the same buckets.
  const twin = new RateLimits({ memory, redisUrl: null, serverRate: '2/minute', now: () => T0 });
  assert.equal((twin.checkClient({ ip: '10.0.0.1' }) as RateCheck).allowed, false);
  assert.equal(limits.fallbacks, 0);

  assert.deepEqual(rateLimitHeaders(c1, 'client'), ['X-RateLimit-Limit', '2', 'X-RateLimit-Remaining', '1']);
  assert.deepEqual(rateLimitHeaders(c3, 'client'), ['X-RateLimit-Limit', '2', 'X-RateLimit-Remaining', '0', 'Retry-After', '30']);
  assert.deepEqual(rateLimitHeaders({ allowed: false, limit: 5, remaining: 0, retryAfterS: 12 }, 'key'), [
    'X-RateLimit-Key-Limit',
    '5',
    'X-RateLimit-Key-Remaining',
    '0',
    'Retry-After',
    '12',
  ]);
});

/** Runs `threads` workers over one memory, released together; returns allowed counts per key. */
async function hammer(memory: SharedArrayBuffer, keys: string[], limit: number, rounds: number, threads = 4): Promise<number[]> {
  const start = new SharedArrayBuffer(4);
  const workers: Worker[] = [];
  const ready: Promise<void>[] = [];
  const results: Promise<number[]>[] = [];
  for (let seed = 0; seed < threads; seed++) {
    const job: HammerJob = { memory, start, keys, limit, periodMs: HOUR, rounds, now: T0, seed };
    const worker = new Worker(new URL('./rateLimitWorker.js', import.meta.url), { workerData: job });
    workers.push(worker);
    ready.push(
      new Promise((resolve, reject) => {
        worker.once('message', () => resolve());
        worker.once('error', reject);
      }),
    );
    results.push(
      new Promise((resolve, reject) => {
        worker.on('message', (m: { allowed?: number[] }) => {
          if (m.allowed) resolve(m.allowed);
        });
        worker.once('error', reject);
        worker.once('exit', (code) => {
          if (code !== 0) reject(new Error(`worker exited ${code}`));
        });
      }),
    );
  }
  await Promise.all(ready);
  const flag = new Int32Array(start);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
  const perWorker = await Promise.all(results);
  await Promise.all(workers.map((w) => w.terminate()));
  return keys.map((_, k) => perWorker.reduce((sum, a) => sum + a[k], 0));
}

test('a key limit of N admits exactly N calls across 4 worker threads', async () => {
  const N = 5_000;
  const memory = createLimiterMemory();
  const [allowed] = await hammer(memory, ['key:k'], N, 25_000);
  assert.equal(allowed, N);
  // And the main thread, sharing the memory, finds the bucket empty.
  assert.equal(new SharedRateLimiter(memory, () => T0).take('key:k', N, HOUR).allowed, false);
});

test('exact across 4 threads while buckets are created concurrently (many keys)', async () => {
  const keys = Array.from({ length: 301 }, (_, i) => `key:${i}`);
  const allowed = await hammer(createLimiterMemory(), keys, 7, 40);
  assert.deepEqual(
    allowed,
    keys.map(() => 7),
  );
  // A table too small for the keys: every key stays within its limit.
  const tight = await hammer(createLimiterMemory(64), keys, 7, 40);
  assert.ok(
    tight.every((n) => n <= 7),
    String(tight),
  );
  assert.ok(tight.filter((n) => n === 7).length >= 64, 'keys with a slot get their full limit');
});
