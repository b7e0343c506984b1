// In charge of the three rate checks the gate makes (client address, key, key + query), counted in
// the shared-memory buckets, or through Redis across instances when QUERYAPIGATE_REDIS_URL is set.
// Knows nothing of HTTP beyond the header names, nor of the store.
import type { Remote } from '../contract/exchange.js';
import { openRedis, RedisRateLimiter, type RedisLimiterOptions } from './redisBuckets.js';
import { parseRate, type Rate, type RateCheck, type RateCheckResult } from './rates.js';
import { SharedRateLimiter } from './sharedBuckets.js';

export interface RateLimitsOptions {
  /** From createLimiterMemory, the same in every thread of the process. */
  memory: SharedArrayBuffer;
  /** QUERYAPIGATE_REDIS_URL: share the buckets with every instance through Redis. */
  redisUrl: string | null;
  /** QUERYAPIGATE_RATE_LIMIT, per client address; already validated at startup. */
  serverRate: string | null;
  /** Clock for the local buckets (ms); tests only. */
  now?: () => number;
  /** Redis client and limiter tuning; tests only, mostly. */
  redis?: RedisLimiterOptions & { commandTimeoutMs?: number };
}

/**
 * The gate's three rate checks for one thread. Every check returns null when no limit applies;
 * otherwise the result, synchronously on the shared-memory path and as a Promise when Redis is
 * configured. Bucket keys carry the rate, so changing a key's rate starts it on a fresh bucket (as
 * the reference keeps one limiter per distinct rate).
 */
export class RateLimits {
  readonly #local: SharedRateLimiter;
  readonly #redis: RedisRateLimiter | null;
  readonly #server: RateEntry | null;
  readonly #rates = new Map<string, RateEntry | null>();

  constructor(opts: RateLimitsOptions) {
    this.#local = new SharedRateLimiter(opts.memory, opts.now);
    const server = opts.serverRate ? parseRate(opts.serverRate) : null;
    if (opts.serverRate && !server) {
      throw new RangeError(`QUERYAPIGATE_RATE_LIMIT must look like '60/minute' (a positive count, then second, minute, hour or day), not '${opts.serverRate}'`);
    }
    this.#server = server && entryFor(server);
    this.#redis = opts.redisUrl
      ? new RedisRateLimiter(openRedis(opts.redisUrl, { commandTimeoutMs: opts.redis?.commandTimeoutMs }), this.#local, opts.redis)
      : null;
  }

  /** The server-wide limit per client address (QUERYAPIGATE_RATE_LIMIT), before authentication. */
  checkClient(from: Remote): RateCheckResult {
    const e = this.#server;
    if (!e) return null;
    return this.#take(e, e.client, from.ip || 'unknown', '');
  }

  /** A key's own `rate_limit`, bucketed by the caller's name (a key, or jwt:<user>). */
  checkKey(keyName: string, rate: string | null | undefined): RateCheckResult {
    if (!rate) return null;
    const e = this.#entry(rate);
    return e ? this.#take(e, e.key, keyName, '') : FAIL_CLOSED;
  }

  /** A key's `rate_limits[query]`, one bucket per key and query. */
  checkKeyQuery(keyName: string, query: string, rate: string | null | undefined): RateCheckResult {
    if (!rate) return null;
    const e = this.#entry(rate);
    // Query names cannot contain '|', so the first '|' splits the bucket key unambiguously.
    return e ? this.#take(e, e.query, `${query}|`, keyName) : FAIL_CLOSED;
  }

  /** Whether checks go to Redis (results are Promises). */
  get shared(): boolean {
    return this.#redis !== null;
  }

  /** Checks done locally because Redis failed: process-wide, so read it from one thread only. */
  get fallbacks(): number {
    return this.#local.fallbacks;
  }

  /** Waits (up to `timeoutMs`) for the Redis connection, so the first calls are not fallbacks. */
  async ready(timeoutMs = 2000): Promise<boolean> {
    return this.#redis ? this.#redis.ready(timeoutMs) : true;
  }

  async close(): Promise<void> {
    await this.#redis?.close();
  }

  #take(e: RateEntry, prefix: string, a: string, b: string): RateCheck | Promise<RateCheck> {
    const { limit, periodMs } = e.rate;
    return this.#redis ? this.#redis.take(prefix + a + b, limit, periodMs) : this.#local.takeParts(prefix, a, b, limit, periodMs);
  }

  #entry(text: string): RateEntry | null {
    let e = this.#rates.get(text);
    if (e === undefined) {
      const rate = parseRate(text);
      e = rate && entryFor(rate);
      if (this.#rates.size >= 1024) this.#rates.clear();
      this.#rates.set(text, e);
    }
    return e;
  }
}

/** A parsed rate with its bucket key prefixes; the rate is in the key, so a new rate is a new bucket. */
interface RateEntry {
  rate: Rate;
  client: string;
  key: string;
  query: string;
}

function entryFor(rate: Rate): RateEntry {
  const r = `${rate.limit}/${rate.periodMs}:`;
  return { rate, client: `c:${r}`, key: `k:${r}`, query: `q:${r}` };
}

/** A stored rate the grammar refuses (e.g. "0/minute") fails closed: every call is refused. */
const FAIL_CLOSED: RateCheck = Object.freeze({ allowed: false, limit: 0, remaining: 0, retryAfterS: 60 });
