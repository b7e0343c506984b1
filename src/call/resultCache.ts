// In charge of the response cache for saved-query versions with a cache_ttl: answers keyed by
// query, version, connection, bound values, format, page AND the caller's policy fingerprint, so no
// key is served rows shaped for another. Bounded in memory per executor, or shared in Redis when
// QUERYAPIGATE_REDIS_URL is set, where any Redis failure is a miss, never an error.
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis as RedisClient } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { Caller } from '../auth/keys.js';
import type { Answer } from '../contract/exchange.js';

export interface CachedAnswer {
  /** Text, or the bytes of a binary format (xlsx, parquet): the cached answer keeps its format. */
  body: string | Uint8Array;
  headers: string[];
  etag: string;
}

export interface ResultCache {
  get(key: string): Promise<CachedAnswer | undefined>;
  set(key: string, value: CachedAnswer, ttlSeconds: number): void;
  /** Answers held in this thread's memory (0 with Redis, whose entries are shared). */
  size(): number;
  close(): void;
}

const fingerprints = new WeakMap<object, string>();

/** What shapes a caller's rows: its table allow-list and mask rules (admin and open see all). */
export function policyFingerprint(caller: Caller): string {
  if (caller.kind !== 'key') return 'admin';
  let f = fingerprints.get(caller.key);
  if (f === undefined) {
    f = JSON.stringify([caller.key.allowed_tables, caller.key.mask, caller.key.mask_predicates ?? 'allow']);
    fingerprints.set(caller.key, f);
  }
  return f;
}

export function cacheKey(parts: unknown[]): string {
  return createHash('sha256')
    .update(JSON.stringify(parts, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)))
    .digest('hex');
}

export function etagOf(body: string | Uint8Array): string {
  return `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"`;
}

export function createResultCache(redisUrl: string | null, maxBytes = 64 << 20): ResultCache {
  if (redisUrl) {
    // Required only when Redis is configured: ioredis costs each thread about 12 MB of RSS.
    const { Redis } = createRequire(import.meta.url)('ioredis') as { Redis: typeof RedisClient };
    const redis = new Redis(redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 100, lazyConnect: false });
    redis.on('error', () => undefined); // a failure is a miss; ioredis reconnects by itself
    return {
      async get(key) {
        try {
          const raw = await redis.get(`qag:cache:${key}`);
          return raw ? fromRedis(raw) : undefined;
        } catch {
          return undefined;
        }
      },
      set(key, value, ttl) {
        redis.set(`qag:cache:${key}`, toRedis(value), 'EX', ttl).catch(() => undefined);
      },
      size: () => 0,
      close: () => redis.disconnect(),
    };
  }
  const lru = new LRUCache<string, CachedAnswer>({
    maxSize: maxBytes,
    sizeCalculation: (v) => (typeof v.body === 'string' ? v.body.length * 2 : v.body.byteLength) + 256,
    ttlAutopurge: false,
  });
  return {
    async get(key) {
      return lru.get(key);
    },
    set(key, value, ttl) {
      lru.set(key, value, { ttl: ttl * 1000 });
    },
    size() {
      lru.purgeStale(); // expired answers are not held for use (scrapes are rare; the cache is bounded)
      return lru.size;
    },
    close: () => lru.clear(),
  };
}

/** An entry as Redis keeps it: JSON, a binary body as base64 beside a flag. */
function toRedis(value: CachedAnswer): string {
  if (typeof value.body === 'string') return JSON.stringify(value);
  return JSON.stringify({ ...value, body: Buffer.from(value.body.buffer, value.body.byteOffset, value.body.byteLength).toString('base64'), bytes: true });
}

function fromRedis(raw: string): CachedAnswer {
  const entry = JSON.parse(raw) as CachedAnswer & { bytes?: true };
  if (!entry.bytes) return entry;
  // A copy of its own: a view into Buffer's shared pool would clone the whole pool across threads.
  return { body: new Uint8Array(Buffer.from(entry.body as string, 'base64')), headers: entry.headers, etag: entry.etag };
}

/** A cached answer for this request: 304 when the client holds the same ETag. */
export function cacheAnswer(entry: CachedAnswer, ttl: number, state: 'HIT' | 'MISS', ifNoneMatch: string): Answer {
  const extra = ['ETag', entry.etag, 'Cache-Control', `max-age=${ttl}`, 'X-Cache', state];
  if (ifNoneMatch !== '' && ifNoneMatch.split(/\s*,\s*/).includes(entry.etag)) return { status: 304, headers: extra, body: '' };
  return { status: 200, headers: entry.headers.concat(extra), body: entry.body };
}
