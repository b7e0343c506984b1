// In charge of the response cache for saved-query versions with a cache_ttl: answers keyed by
// query, version, connection, bound values, format, page AND the caller's policy fingerprint, so no
// key is served rows shaped for another. Bounded in memory per executor, or shared in Redis when
// QUERYAPIGATE_REDIS_URL is set, where any Redis failure is a miss, never an error. Also the
// management API's view of it (contract 3.8): in memory, each executor answers the acceptor's
// CacheRequests on the 'cache' channel (`answerCacheRequests`, `memoryCacheAdmin`); with Redis the
// acceptor reads and deletes the qag:cache:* keys itself (`redisCacheAdmin`). Neither touches a call.
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis as RedisClient } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { Caller } from '../auth/keys.js';
import { GatewayError } from '../contract/errors.js';
import type { Answer } from '../contract/exchange.js';
import { type CacheEntryBody, type CacheEntryInfo, type CacheEntryMeta, type CacheReply, type CacheRequest, channel, postOnce } from '../contract/messages.js';

export interface CachedAnswer {
  /** Text, or the bytes of a binary format (xlsx, parquet): the cached answer keeps its format. */
  body: string | Uint8Array;
  headers: string[];
  etag: string;
  /** What the answer is of, for the management API (written on a miss, never read by a call). */
  meta: CacheEntryMeta;
}

export interface ResultCache {
  get(key: string): Promise<CachedAnswer | undefined>;
  set(key: string, value: CachedAnswer, ttlSeconds: number): void;
  /** Answers held in this thread's memory (0 with Redis, whose entries are shared). */
  size(): number;
  /** This thread's entries (memory only; with Redis the acceptor reads Redis), at most LIST_MAX. */
  list(): CacheEntryInfo[];
  /** One entry of this thread's memory, without counting as a use. */
  peek(key: string): CacheEntryBody | null;
  /** Removes one entry (`key`) or every one (null) from this thread's memory; how many went. */
  evict(key: string | null): number;
  close(): void;
}

/**
 * The cache keys whose statement a call is running now: a call that misses while another runs its key's
 * statement waits for that call's entry (answered as a hit) instead of running it again; at an entry's
 * expiry under load, every caller of it would run it. Per thread, one a key, so bounded by the calls in
 * flight. A run that fails gives its waiters nothing: each then runs the statement itself.
 */
export class RunningAnswers {
  readonly #running = new Map<string, Promise<CachedAnswer | null>>();

  /** The entry the call running `key`'s statement will make (null if it fails), or undefined when none runs it. */
  joined(key: string): Promise<CachedAnswer | null> | undefined {
    return this.#running.get(key);
  }

  /** This call runs `key`'s statement: the function returned hands its waiters the entry (or null), once. */
  lead(key: string): (entry: CachedAnswer | null) => void {
    let settle!: (entry: CachedAnswer | null) => void;
    const made = new Promise<CachedAnswer | null>((resolve) => {
      settle = resolve;
    });
    this.#running.set(key, made);
    return (entry) => {
      if (this.#running.get(key) === made) this.#running.delete(key); // not a later run's, for the same key
      settle(entry); // its own waiters, always (settling twice keeps the first)
    };
  }
}

/** The most entries one listing returns (soonest to expire first), so an answer stays bounded. */
export const LIST_MAX = 10_000;
/** A cache key as the management API takes it: the SHA-256 the cache is keyed by, in hex. */
export const CACHE_KEY = /^[0-9a-f]{64}$/;
const REDIS_PREFIX = 'qag:cache:';

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
      list: () => [],
      peek: () => null,
      evict: () => 0,
      close: () => redis.disconnect(),
    };
  }
  const lru = new LRUCache<string, CachedAnswer>({
    maxSize: maxBytes,
    sizeCalculation: (v) => (typeof v.body === 'string' ? v.body.length * 2 : v.body.byteLength) + 256,
    ttlAutopurge: false,
    ttlResolution: 0, // the clock read at each check, not cached behind a 1 ms timer (ARCHITECTURE.md, "Caches")
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
    list() {
      lru.purgeStale();
      const out: CacheEntryInfo[] = [];
      for (const [key, v] of lru.entries()) {
        out.push(entryInfo(key, v, lru.getRemainingTTL(key)));
        if (out.length >= LIST_MAX) break;
      }
      return out;
    },
    peek(key) {
      const v = lru.peek(key);
      return v ? { content_type: contentTypeOf(v.headers), body: v.body } : null;
    },
    evict(key) {
      if (key !== null) return lru.delete(key) ? 1 : 0;
      const n = lru.size;
      lru.clear();
      return n;
    },
    close: () => lru.clear(),
  };
}

function contentTypeOf(headers: string[]): string {
  for (let i = 0; i < headers.length; i += 2) if (headers[i].toLowerCase() === 'content-type') return headers[i + 1];
  return 'application/octet-stream';
}

function entryInfo(key: string, v: CachedAnswer, ttlMs: number): CacheEntryInfo {
  return {
    key,
    content_type: contentTypeOf(v.headers),
    size_bytes: typeof v.body === 'string' ? Buffer.byteLength(v.body) : v.body.byteLength,
    ttl_remaining_s: Math.max(0, Math.ceil(ttlMs / 1000)),
    // An entry written before entries carried their meta (Redis outlives a release) says what it can.
    meta: v.meta ?? { name: '', version: 0, connection: '', format: '' },
  };
}

/** Soonest to expire first; one line per key (an answer cached by two executors is one entry to an administrator). */
function merged(lists: CacheEntryInfo[][]): CacheEntryInfo[] {
  const byKey = new Map<string, CacheEntryInfo>();
  for (const list of lists) {
    for (const e of list) {
      const had = byKey.get(e.key);
      if (!had || had.ttl_remaining_s < e.ttl_remaining_s) byKey.set(e.key, e); // served until the last copy expires
    }
  }
  return [...byKey.values()].sort((a, b) => a.ttl_remaining_s - b.ttl_remaining_s || (a.key < b.key ? -1 : 1)).slice(0, LIST_MAX);
}

/** The management API's side of the response cache (contract 3.8), in the acceptor. */
export interface CacheAdmin {
  list(): Promise<CacheEntryInfo[]>;
  /** The entry's body and content type; null when no cache holds it. */
  read(key: string): Promise<CacheEntryBody | null>;
  /** Removes one entry (`key`) or all (null) wherever it is held. */
  evict(key: string | null): Promise<void>;
  close(): void;
}

/** The acceptor's view of the caches: Redis's keys with QUERYAPIGATE_REDIS_URL, else the executors'. */
export function createCacheAdmin(redisUrl: string | null, executors: number, scope: string): CacheAdmin {
  return redisUrl ? redisCacheAdmin(redisUrl) : memoryCacheAdmin(executors, scope);
}

/** An executor's answers to the acceptor's CacheRequests (memory mode); returns the channel to close. */
export function answerCacheRequests(cache: ResultCache, scope: string): BroadcastChannel {
  const c = channel('cache', scope);
  c.onmessage = (e: MessageEvent) => {
    const m = e.data as CacheRequest;
    let reply: CacheReply;
    if (m.op === 'list') reply = { kind: 'listed', id: m.id, entries: cache.list() };
    else if (m.op === 'read') reply = { kind: 'read', id: m.id, entry: cache.peek(m.key) };
    else reply = { kind: 'evicted', id: m.id, removed: cache.evict(m.key) };
    postOnce('cacheReplies', scope, reply); // not on the cache channel: every other executor would be handed it
  };
  return c;
}

/** How long the acceptor waits for every executor's reply; one that does not answer is left out. */
const REPLY_WAIT_MS = 1000;

/**
 * In memory each executor holds its own answers, so the acceptor asks them all over the 'cache'
 * channel and merges the replies (a read takes the first that has the entry). This process's
 * executors only: another instance's memory is its own (Redis is the shared cache).
 */
export function memoryCacheAdmin(executors: number, scope: string): CacheAdmin {
  const replies = channel('cacheReplies', scope);
  let next = 0;
  const waiting = new Map<number, { got: CacheReply[]; check: () => void }>();
  replies.onmessage = (e: MessageEvent) => {
    const m = e.data as CacheReply;
    const w = waiting.get(m.id);
    if (!w) return;
    w.got.push(m);
    w.check();
  };
  /** Sends `request` (given its id) and resolves with the replies once all came, `enough` says so, or the wait ran out. */
  const ask = (request: (id: number) => CacheRequest, enough: (got: CacheReply[]) => boolean = () => false) => {
    const id = ++next;
    const got: CacheReply[] = [];
    return new Promise<CacheReply[]>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        waiting.delete(id);
        resolve(got);
      };
      const timer = setTimeout(done, REPLY_WAIT_MS);
      waiting.set(id, {
        got,
        check: () => {
          if (got.length >= executors || enough(got)) done();
        },
      });
      postOnce('cache', scope, request(id));
    });
  };
  return {
    async list() {
      const replies = await ask((id) => ({ op: 'list', id }));
      return merged(replies.map((r) => (r.kind === 'listed' ? r.entries : [])));
    },
    async read(key) {
      const found = (got: CacheReply[]) => got.some((r) => r.kind === 'read' && r.entry !== null);
      const replies = await ask((id) => ({ op: 'read', id, key }), found);
      for (const r of replies) if (r.kind === 'read' && r.entry) return r.entry;
      return null;
    },
    async evict(key) {
      await ask((id) => ({ op: 'evict', id, key }));
    },
    close: () => replies.close(),
  };
}

/** Entries read per Redis round trip while listing or clearing. */
const REDIS_BATCH = 200;

/** With Redis the entries are Redis's: listed with SCAN (bounded), read with GET and PTTL, removed with UNLINK. */
export function redisCacheAdmin(redisUrl: string): CacheAdmin {
  let redis: RedisClient | null = null;
  const client = () => {
    if (!redis) {
      const { Redis } = createRequire(import.meta.url)('ioredis') as { Redis: typeof RedisClient };
      redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, commandTimeout: 2000, lazyConnect: false });
      redis.on('error', () => undefined); // a failure is answered as 503 unavailable below; ioredis reconnects by itself
    }
    return redis;
  };
  const failing = (e: unknown): never => {
    if (e instanceof GatewayError) throw e;
    throw new GatewayError('unavailable', 'Redis (QUERYAPIGATE_REDIS_URL) did not answer; try again shortly', { retry_after: 1 });
  };
  /** Calls `each` with batches of the cache's Redis keys; stops when it returns false. */
  const scan = async (each: (keys: string[]) => Promise<boolean>) => {
    let cursor = '0';
    do {
      const [nextCursor, keys] = await client().scan(cursor, 'MATCH', `${REDIS_PREFIX}*`, 'COUNT', REDIS_BATCH);
      cursor = nextCursor;
      if (keys.length && !(await each(keys))) return;
    } while (cursor !== '0');
  };
  return {
    async list() {
      const lists: CacheEntryInfo[] = [];
      await scan(async (keys) => {
        const p = client().pipeline();
        for (const k of keys) p.get(k).pttl(k);
        const out = (await p.exec()) ?? [];
        keys.forEach((k, i) => {
          const raw = out[2 * i]?.[1] as string | null;
          const ttl = Number(out[2 * i + 1]?.[1] ?? -2);
          if (!raw || ttl < 0) return; // gone since the scan, or (never written so) without an expiry
          try {
            lists.push(entryInfo(k.slice(REDIS_PREFIX.length), fromRedis(raw), ttl));
          } catch {
            // not an entry this gateway wrote: not listed
          }
        });
        return lists.length < LIST_MAX;
      }).catch(failing);
      return merged([lists]);
    },
    async read(key) {
      const raw = await client()
        .get(REDIS_PREFIX + key)
        .catch(failing);
      if (!raw) return null;
      const entry = fromRedis(raw);
      return { content_type: contentTypeOf(entry.headers), body: entry.body };
    },
    async evict(key) {
      if (key !== null) {
        await client()
          .unlink(REDIS_PREFIX + key)
          .catch(failing);
        return;
      }
      await scan(async (keys) => {
        await client().unlink(...keys);
        return true;
      }).catch(failing);
    },
    close: () => {
      redis?.disconnect();
      redis = null;
    },
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
  return { body: new Uint8Array(Buffer.from(entry.body as string, 'base64')), headers: entry.headers, etag: entry.etag, meta: entry.meta };
}

/** A cached answer for this request: 304 when the client holds the same ETag. */
export function cacheAnswer(entry: CachedAnswer, ttl: number, state: 'HIT' | 'MISS', ifNoneMatch: string): Answer {
  const extra = ['ETag', entry.etag, 'Cache-Control', `max-age=${ttl}`, 'X-Cache', state];
  if (ifNoneMatch !== '' && ifNoneMatch.split(/\s*,\s*/).includes(entry.etag)) return { status: 304, headers: extra, body: '' };
  return { status: 200, headers: entry.headers.concat(extra), body: entry.body };
}
