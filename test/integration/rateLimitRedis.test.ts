// Tests for rate limits shared through the real Redis on 127.0.0.1:6379: two instances share one
// bucket exactly; an unreachable, stopped or stalled Redis falls back to local counting (counted);
// the limiter goes back to Redis once it answers again. Outages are simulated with a TCP proxy
// this file starts and stops; the machine's Redis is never touched beyond this run's keys.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket, connect } from 'node:net';
import type { Redis } from 'ioredis';
import { RateLimits } from '../../src/auth/rateLimit.js';
import type { RateCheck } from '../../src/auth/rates.js';
import { openRedis, RedisRateLimiter } from '../../src/auth/redisBuckets.js';
import { createLimiterMemory, SharedRateLimiter } from '../../src/auth/sharedBuckets.js';

const REDIS_PORT = Number(process.env.QUERYAPIGATE_TEST_REDIS_PORT ?? 6379);
const REDIS_URL = `redis://127.0.0.1:${REDIS_PORT}`;
const PREFIX = `qag:test:rl:${process.pid}:${Date.now()}:`;
const HOUR = 3_600_000;

let admin: Redis;
const clients: Redis[] = [];

before(async () => {
  admin = openRedis(REDIS_URL, { commandTimeoutMs: 2000 });
  assert.ok(await waitReady(admin, 5000), `Redis answers on ${REDIS_URL} (bash scripts/services.sh redis)`);
});

after(async () => {
  const keys = await admin.keys(`${PREFIX}*`);
  if (keys.length) await admin.del(...keys);
  for (const c of clients) c.disconnect();
  await admin.quit();
});

function waitReady(client: Redis, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    client.once('ready', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** A limiter as one server process would have it: its own Redis client and its own memory. */
function instance(url = REDIS_URL, opts: { skipAfterFailureMs?: number; onWarn?: (m: string) => void; commandTimeoutMs?: number } = {}): RedisRateLimiter {
  // A generous timeout unless a test is about timeouts: a busy machine must not turn a slow reply
  // into a fallback the test did not ask for.
  const client = openRedis(url, { commandTimeoutMs: opts.commandTimeoutMs ?? 2000 });
  clients.push(client);
  return new RedisRateLimiter(client, new SharedRateLimiter(createLimiterMemory(1024)), { prefix: PREFIX, ...opts });
}

async function takeMany(limiter: RedisRateLimiter, key: string, limit: number, times: number): Promise<RateCheck[]> {
  const out: RateCheck[] = [];
  for (let i = 0; i < times; i++) out.push(await limiter.take(key, limit, HOUR));
  return out;
}

const allowedCount = (results: RateCheck[]) => results.filter((r) => r.allowed).length;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A TCP proxy to the real Redis that the test can stop, restart, and stall. */
class RedisProxy {
  port = 0;
  #server: Server | null = null;
  #sockets = new Set<Socket>();
  #stalled = false;
  #held: (() => void)[] = [];

  async start(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(REDIS_PORT, '127.0.0.1');
      this.#sockets.add(client).add(upstream);
      client.on('data', (chunk) => {
        if (this.#stalled) this.#held.push(() => upstream.write(chunk));
        else upstream.write(chunk);
      });
      upstream.on('data', (chunk) => client.write(chunk));
      const close = () => {
        client.destroy();
        upstream.destroy();
        this.#sockets.delete(client);
        this.#sockets.delete(upstream);
      };
      client.on('close', close).on('error', close);
      upstream.on('close', close).on('error', close);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as { port: number }).port;
    this.#server = server;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  stall(on: boolean): void {
    this.#stalled = on;
    if (!on) for (const send of this.#held.splice(0)) send();
  }
}

test('two instances sharing a limit of N admit exactly N in total', async () => {
  const a = instance();
  const b = instance();
  assert.ok(await a.ready(5000));
  assert.ok(await b.ready(5000));
  const N = 50;
  const calls: Promise<RateCheck>[] = [];
  for (let i = 0; i < 4 * N; i++) calls.push((i % 2 ? a : b).take('k:shared', N, HOUR));
  const results = await Promise.all(calls);
  assert.equal(allowedCount(results), N);
  // Each token was handed out once: the remaining counts are exactly N-1 .. 0.
  const remaining = results
    .filter((r) => r.allowed)
    .map((r) => r.remaining)
    .sort((x, y) => x - y);
  assert.deepEqual(
    remaining,
    Array.from({ length: N }, (_, i) => i),
  );
  const refused = results.find((r) => !r.allowed)!;
  assert.deepEqual(refused, { allowed: false, limit: N, remaining: 0, retryAfterS: 72 });
  assert.equal(a.fallbacks + b.fallbacks, 0);
  // The bucket lives in Redis, on Redis time, and expires when it would be full again.
  const ttl = await admin.pttl(`${PREFIX}k:shared`);
  assert.ok(ttl > 0 && ttl <= HOUR, `pttl ${ttl}`);
  // Other buckets are untouched.
  assert.equal(allowedCount(await takeMany(a, 'k:other', 3, 5)), 3);
});

test('the script is sent again when Redis has forgotten it (NOSCRIPT)', async () => {
  const real = openRedis(REDIS_URL);
  clients.push(real);
  assert.ok(await waitReady(real, 5000));
  let evals = 0;
  const forgetful = {
    get status() {
      return real.status;
    },
    evalsha: () => Promise.reject(new Error('NOSCRIPT No matching script. Please use EVAL.')),
    eval: (...args: Parameters<Redis['eval']>) => {
      evals++;
      return real.eval(...args);
    },
  } as unknown as Redis;
  const limiter = new RedisRateLimiter(forgetful, new SharedRateLimiter(createLimiterMemory(1024)), { prefix: PREFIX });
  const results = await takeMany(limiter, 'k:noscript', 2, 3);
  assert.deepEqual(
    results.map((r) => r.allowed),
    [true, true, false],
  );
  assert.equal(evals, 3);
  assert.equal(limiter.fallbacks, 0);
});

test('Redis unreachable: counted locally, still limited, and every fallback counted', async () => {
  const warnings: string[] = [];
  const limiter = instance(`redis://127.0.0.1:${await freePort()}`, { onWarn: (m) => warnings.push(m) });
  assert.equal(await limiter.ready(200), false);
  const results = await takeMany(limiter, 'k:down', 3, 10);
  assert.equal(allowedCount(results), 3);
  assert.equal(results[3].retryAfterS, 1200);
  assert.equal(limiter.fallbacks, 10);
  assert.equal(warnings.length, 1, 'warned once, not per call');
  assert.match(warnings[0], /counted per instance/);
});

test('a limiter goes back to Redis when Redis comes back', async () => {
  const proxy = new RedisProxy();
  await proxy.start();
  try {
    const limiter = instance(`redis://127.0.0.1:${proxy.port}`, { skipAfterFailureMs: 0 });
    assert.ok(await limiter.ready(5000));
    // Up: 4 of the Redis bucket's 5 tokens are spent.
    assert.equal(allowedCount(await takeMany(limiter, 'k:flaky', 5, 4)), 4);
    assert.equal(limiter.fallbacks, 0);

    // Down: the local bucket (full, 5 tokens) takes the calls, each one counted.
    await proxy.stop();
    assert.equal(allowedCount(await takeMany(limiter, 'k:flaky', 5, 2)), 2);
    assert.equal(limiter.fallbacks, 2);

    // Back: the Redis bucket is used again: 1 token left there (the local one has 3).
    await proxy.start();
    assert.ok(await limiter.ready(10_000), 'reconnected');
    assert.equal(allowedCount(await takeMany(limiter, 'k:flaky', 5, 5)), 1);
    assert.equal(limiter.fallbacks, 2);
  } finally {
    await proxy.stop();
  }
});

test('a stalled Redis times out to local counting; the late scripts still count in Redis', async () => {
  const proxy = new RedisProxy();
  await proxy.start();
  try {
    const limiter = instance(`redis://127.0.0.1:${proxy.port}`, { skipAfterFailureMs: 0, commandTimeoutMs: 100 });
    assert.ok(await limiter.ready(5000));
    proxy.stall(true);
    const stalled = await takeMany(limiter, 'k:stall', 2, 3);
    assert.deepEqual(
      stalled.map((r) => r.allowed),
      [true, true, false],
    );
    assert.equal(limiter.fallbacks, 3);
    proxy.stall(false);
    // Redis is tried again on the next call, and the three late scripts reached it before it:
    // stricter, never looser.
    const late = await limiter.take('k:stall', 2, HOUR);
    assert.equal(limiter.fallbacks, 3, 'answered by Redis');
    assert.equal(late.allowed, false);
  } finally {
    await proxy.stop();
  }
});

test('RateLimits with QUERYAPIGATE_REDIS_URL: Promises, shared across instances', async () => {
  const options = { redisUrl: REDIS_URL, serverRate: '3/minute', redis: { prefix: PREFIX, commandTimeoutMs: 2000 } };
  const one = new RateLimits({ memory: createLimiterMemory(1024), ...options });
  const two = new RateLimits({ memory: createLimiterMemory(1024), ...options });
  try {
    assert.equal(one.shared, true);
    assert.ok(await one.ready(5000));
    assert.ok(await two.ready(5000));
    const first = one.checkClient({ ip: '198.51.100.7' });
    assert.ok(first instanceof Promise);
    const results = await Promise.all([
      first,
      two.checkClient({ ip: '198.51.100.7' }),
      one.checkClient({ ip: '198.51.100.7' }),
      two.checkClient({ ip: '198.51.100.7' }),
    ]);
    assert.deepEqual(results.map((r) => r?.allowed).sort(), [false, true, true, true]);
    assert.equal(one.checkKey('k', null), null);
    const key = await one.checkKeyQuery('reporting', 'films', '1/hour');
    const again = await two.checkKeyQuery('reporting', 'films', '1/hour');
    assert.deepEqual([key?.allowed, again?.allowed], [true, false]);
    assert.equal(await admin.exists(`${PREFIX}q:1/3600000:films|reporting`), 1);
    assert.equal(one.fallbacks + two.fallbacks, 0);
  } finally {
    await one.close();
    await two.close();
  }
});
