// In charge of sharing rate limits between instances through Redis: the same GCRA token bucket as
// sharedBuckets.ts, run atomically by one Lua script on Redis time, with a fast fall back to the local
// shared-memory buckets (counted) whenever Redis fails or is slow. Knows nothing of HTTP.
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import { bucketSize, tokenInterval, type RateCheck } from './rates.js';
import type { SharedRateLimiter } from './sharedBuckets.js';

// KEYS[1] bucket; ARGV[1] r = µs per token; ARGV[2] tau = limit·r, the bucket's depth in µs.
// The value is the bucket's TAT (µs on Redis's clock) and expires exactly when the bucket is full
// again, so idle buckets cost nothing. Returns {allowed, remaining, µs until one token}.
const SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local r = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local nxt = tat + r
if nxt - now > tau then
  return {0, 0, nxt - tau - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX', math.ceil((nxt - now) / 1000))
return {1, math.floor((tau - (nxt - now)) / r), 0}
`;
const SHA = createHash('sha1').update(SCRIPT).digest('hex');

const WARN_EVERY_MS = 60_000;
// ioredis takes 0.2-0.4 s to load here; only processes with QUERYAPIGATE_REDIS_URL pay for it,
// not every executor thread (nor the tests' workers).
const require = createRequire(import.meta.url);

export interface RedisLimiterOptions {
  /** Key prefix; buckets are `<prefix><bucketKey>`. Default 'qag:rl:'. */
  prefix?: string;
  /** After a failure, go straight to the local buckets for this long (ms). Default 1000. */
  skipAfterFailureMs?: number;
  /** Told at most once a minute that Redis failed and limits are counted per instance. */
  onWarn?: (message: string) => void;
}

/**
 * An ioredis client set to fail fast instead of queueing: no offline queue, no retries of a
 * command, a short command timeout; it reconnects on its own (at most 1 s apart) so the limiter
 * recovers. `unix:///path` connects to a socket.
 */
export function openRedis(url: string, opts: { commandTimeoutMs?: number } = {}): Redis {
  const { Redis: RedisClient } = require('ioredis') as typeof import('ioredis');
  const options = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: opts.commandTimeoutMs ?? 500,
    connectTimeout: 500,
    retryStrategy: (times: number) => Math.min(times * 100, 1000),
  };
  const client = url.startsWith('unix://') ? new RedisClient({ ...options, path: url.slice('unix://'.length) }) : new RedisClient(url, options);
  client.on('error', () => undefined); // failures surface as fallbacks; an unhandled 'error' would only log
  return client;
}

/**
 * Token buckets shared by every instance through Redis. Each take is one EVALSHA (EVAL once the
 * server reports NOSCRIPT). On any error or timeout the take is made on the local buckets instead
 * and counted in `fallbacks`: limits stay enforced, per instance, never lifted. Redis is tried
 * again on the next call after the skip window.
 */
export class RedisRateLimiter {
  readonly #client: Redis;
  readonly #local: SharedRateLimiter;
  readonly #prefix: string;
  readonly #skipMs: number;
  readonly #onWarn: (message: string) => void;
  #skipUntil = 0;
  #warnedAt = -Infinity;

  constructor(client: Redis, local: SharedRateLimiter, opts: RedisLimiterOptions = {}) {
    this.#client = client;
    this.#local = local;
    this.#prefix = opts.prefix ?? 'qag:rl:';
    this.#skipMs = opts.skipAfterFailureMs ?? 1000;
    this.#onWarn = opts.onWarn ?? (() => undefined);
  }

  take(bucketKey: string, limit: number, periodMs: number): Promise<RateCheck> {
    const n = bucketSize(limit);
    const r = tokenInterval(n, periodMs);
    if (this.#client.status !== 'ready' || (this.#skipUntil && performance.now() < this.#skipUntil)) {
      return Promise.resolve(this.#fallback(bucketKey, limit, periodMs, null));
    }
    const key = this.#prefix + bucketKey;
    const rs = String(r);
    const taus = String(r * n);
    return (this.#client.evalsha(SHA, 1, key, rs, taus) as Promise<unknown>)
      .catch((error: Error) => {
        if (!String(error?.message).startsWith('NOSCRIPT')) throw error;
        return this.#client.eval(SCRIPT, 1, key, rs, taus) as Promise<unknown>;
      })
      .then(
        (reply) => {
          const [allowed, remaining, waitUs] = reply as [number, number, number];
          return allowed === 1
            ? { allowed: true, limit: n, remaining, retryAfterS: 0 }
            : { allowed: false, limit: n, remaining: 0, retryAfterS: Math.max(1, Math.ceil(waitUs / 1e6)) };
        },
        (error: Error) => this.#fallback(bucketKey, limit, periodMs, error),
      );
  }

  /** Checks made locally because Redis failed (process-wide, from the shared memory). */
  get fallbacks(): number {
    return this.#local.fallbacks;
  }

  /** Resolves true once connected, false after `timeoutMs` without a connection. */
  ready(timeoutMs = 2000): Promise<boolean> {
    if (this.#client.status === 'ready') return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.#client.off('ready', onReady);
        resolve(ok);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.#client.on('ready', onReady);
    });
  }

  async close(): Promise<void> {
    try {
      if (this.#client.status === 'ready') await this.#client.quit();
    } catch {
      /* closing anyway */
    } finally {
      this.#client.disconnect();
    }
  }

  #fallback(bucketKey: string, limit: number, periodMs: number, error: Error | null): RateCheck {
    this.#local.countFallback();
    const now = performance.now();
    if (error) this.#skipUntil = now + this.#skipMs;
    if (now - this.#warnedAt >= WARN_EVERY_MS) {
      this.#warnedAt = now;
      this.#onWarn(`rate limits are counted per instance: Redis ${error ? `failed (${error.message})` : `is ${this.#client.status}`}`);
    }
    return this.#local.take(bucketKey, limit, periodMs);
  }
}
