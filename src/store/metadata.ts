// In charge of the store rows calls read (in each executor, and in the acceptor for identifying
// callers of /api/v1 and /events): the key (by secret hash), the saved query, the connection and the key role. With QUERYAPIGATE_METADATA_CACHE_TTL set, rows are kept that long in bounded
// caches; rows, never decisions, so every rule is still checked against the row on every call.
// Any change anywhere clears the caches at once (see ChangeMessage); the TTL is the safety net.
// After a change the executor's warmer reads the keys, queries and connections whole and fills the
// caches with them (`fill`), so the calls right after a change (an administrator's publish) do not
// each wait for the store.
// While the store is unavailable, a row past its TTL is still used (no change can be made meanwhile,
// and the first one after clears it); a row never read fails the call with 503 `unavailable`.
// A notice that changes may have been missed (the change feed subscribing again, as it does when the
// store returns) only expires the rows: each is read again, but stays the fallback while the store
// cannot be read yet, so the calls right after a store's return are not 503s for rows it just had.
import { LRUCache } from 'lru-cache';
import { isUnavailable } from './sql.js';
import type { Store } from './store.js';
import type { AdminRow, AdminTokenRow } from './admins.js';
import type { ConnectionRow, KeyRow, QueryRow, RoleRow } from './types.js';

/** An administrator token's row with its administrator's, as identification reads them. */
export interface AdminTokenHit {
  token: AdminTokenRow;
  admin: AdminRow;
}

/**
 * A row lookup answers the row itself when the cache holds it, else a promise of it: a call's path
 * (call/runCall.ts) goes on without an await (a promise and a turn each) when every row is cached.
 */
export type Lookup<T> = T | null | Promise<T | null>;

export interface Metadata {
  key(hash: string): Lookup<KeyRow>;
  /** The administrator token with this secret hash (qagadm_ secrets only). */
  adminToken(hash: string): Lookup<AdminTokenHit>;
  query(name: string): Lookup<QueryRow>;
  connection(name: string): Lookup<ConnectionRow>;
  /** A key role, read live for signed-in (JWT) users. */
  role(name: string): Lookup<RoleRow>;
  /** Whether any scoped key or administrator exists (open mode needs none). */
  anyKey(): Promise<boolean>;
  /** A change: rows are dropped. */
  clear(): void;
  /** Changes may have been missed: rows are read again, but kept for while the store cannot be read. */
  expire(): void;
  /** Rows held (0 without a TTL), for queryapigate_cache_entries. */
  size(): number;
  /** A mark to hand `fill`, taken before the rows it is given are read. */
  mark(): number;
  /** Rows read whole since `mark`, kept as a call's read would be, unless a change came since (then they may be stale). */
  fill(mark: number, rows: MetadataRows): void;
}

/** The rows a call reads, all of them, as the warmer lists them: keys under each hash they answer to. */
export interface MetadataRows {
  keys: Array<[hash: string, key: KeyRow]>;
  queries: QueryRow[];
  connections: ConnectionRow[];
}

const MAX_ROWS = 10_000;
/** lru-cache cannot hold null; a miss is remembered as this marker (a key that does not exist). */
const NONE = Symbol('none');
const oneRow = () => 1;

export function createMetadata(store: Store, ttlSeconds: number): Metadata {
  if (ttlSeconds <= 0) {
    return {
      key: (hash) => store.getKeyByHash(hash),
      adminToken: (hash) => store.admins.byHash(hash),
      query: (name) => store.getQuery(name),
      connection: (name) => store.getConnection(name),
      role: (name) => store.getRole(name),
      anyKey: () => store.anyCredential(),
      clear: () => undefined,
      expire: () => undefined,
      size: () => 0,
      mark: () => 0,
      fill: () => undefined,
    };
  }
  const ttl = ttlSeconds * 1000;
  /** Changes seen (clears and expires): a read or a fill begun before one is not kept. */
  let generation = 0;
  const cached = <T extends object>(read: (k: string) => Promise<T | null>) => {
    // Rows past their TTL stay (until evicted or cleared) for when the store cannot be read.
    // Bounded by count through maxSize (a row counts 1), not `max`: lru-cache allocates `max` slots up front,
    // ~316 KB a cache at 10,000 in every thread that reads metadata, for the few rows these hold.
    // ttlResolution 0: the clock read at each check, not cached behind a 1 ms timer (ARCHITECTURE.md, "Caches").
    const cache = new LRUCache<string, T | typeof NONE>({
      maxSize: MAX_ROWS,
      sizeCalculation: oneRow,
      ttl,
      ttlResolution: 0,
      ttlAutopurge: false,
      noDeleteOnStaleGet: true,
    });
    // The rows an expire() took out of `cache`: looked at only when the store cannot be read.
    let expired = new Map<string, T | typeof NONE>();
    // Reads in flight, by key: the calls that miss a row together wait for one read of it. When a row's
    // TTL ran out under load, every call in flight read it for itself, and the calls queued behind
    // dozens of store reads (p99 at 32 callers 19-42 ms with a 5 s TTL against 11-19 with 60 s:
    // bench/results/levers-2026-12-05-tail). At most one a key, so bounded by the calls in flight.
    const loading = new Map<string, Promise<T | null>>();
    /** The row from the store, kept unless a clear came meanwhile; a stale row when the store cannot be read. */
    const load = async (k: string): Promise<T | null> => {
      const gen = generation;
      let row: T | null;
      try {
        row = await read(k);
      } catch (e) {
        const stale = isUnavailable(e) ? (cache.get(k, { allowStale: true }) ?? expired.get(k)) : undefined;
        if (stale === undefined) throw e;
        return stale === NONE ? null : stale;
      }
      // A clear while the read was in flight means the row may be stale: use it, don't keep it.
      if (gen === generation) {
        cache.set(k, row ?? NONE);
        expired.delete(k);
      }
      return row;
    };
    return {
      get(k: string): Lookup<T> {
        const hit = cache.get(k);
        if (hit !== undefined) return hit === NONE ? null : hit;
        let read = loading.get(k);
        if (read === undefined) {
          read = load(k).finally(() => {
            if (loading.get(k) === read) loading.delete(k); // not a later read's, after a change
          });
          loading.set(k, read);
        }
        return read;
      },
      fill(rows: Iterable<[string, T]>) {
        for (const [k, row] of rows) {
          cache.set(k, row);
          expired.delete(k);
        }
      },
      clear() {
        cache.clear();
        expired.clear();
        loading.clear(); // a read begun before a change is not joined by calls after it
      },
      expire() {
        // At most MAX_ROWS: the cache's rows now, and those of earlier expires not read since.
        const kept = new Map(expired);
        for (const [k, v] of cache.entries()) kept.set(k, v);
        for (const k of [...kept.keys()].slice(0, Math.max(0, kept.size - MAX_ROWS))) kept.delete(k);
        expired = kept;
        cache.clear();
        loading.clear();
      },
      size: () => cache.size,
    };
  };
  const keys = cached((h) => store.getKeyByHash(h));
  const queries = cached((n) => store.getQuery(n));
  const connections = cached((n) => store.getConnection(n));
  const tokens = cached((h) => store.admins.byHash(h));
  const roles = cached((n) => store.getRole(n));
  const anyKeys = cached(async () => ({ any: await store.anyCredential() }));
  return {
    key: (h) => keys.get(h),
    adminToken: (h) => tokens.get(h),
    query: (n) => queries.get(n),
    connection: (n) => connections.get(n),
    role: (n) => roles.get(n),
    anyKey: async () => (await anyKeys.get(''))!.any,
    clear() {
      generation++;
      keys.clear();
      tokens.clear();
      queries.clear();
      connections.clear();
      roles.clear();
      anyKeys.clear();
    },
    expire() {
      generation++;
      keys.expire();
      tokens.expire();
      queries.expire();
      connections.expire();
      roles.expire();
      anyKeys.expire();
    },
    size: () => keys.size() + tokens.size() + queries.size() + connections.size() + roles.size() + anyKeys.size(),
    mark: () => generation,
    fill(mark, rows) {
      if (mark !== generation) return;
      keys.fill(rows.keys);
      queries.fill(rows.queries.map((q) => [q.name, q]));
      connections.fill(rows.connections.map((c) => [c.name, c]));
    },
  };
}
