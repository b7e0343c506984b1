// In charge of what one executor owns: its store reader, its data-source pools, its plan cache and
// its batch of run records for the recorder. Nothing here is shared with another thread.
import { LRUCache } from 'lru-cache';
import type { Config } from '../config.js';
import { RunBatcher } from '../recorder/batcher.js';
import { openSource } from '../sources/index.js';
import type { Source } from '../sources/types.js';
import { attachStore } from '../store/store.js';
import type { ConnectionRow } from '../store/types.js';
import type { ChangeMessage } from '../store/changes.js';
import { createMetadata, type Metadata } from './metadata.js';
import type { CallPlan } from './plan.js';
import { channel } from './messages.js';
import { createResultCache, type ResultCache } from './resultCache.js';
import { SchemaCache } from './schemaCache.js';
import type { Governed } from './govern.js';
import { inspectStatement } from '../governance/analysis.js';
import { RateLimits } from '../auth/rateLimit.js';
import { threadMetrics, type Metrics } from '../metrics/metrics.js';

export interface CallContext {
  config: Config;
  /** Store rows as calls read them: cached per QUERYAPIGATE_METADATA_CACHE_TTL, cleared on any change. */
  meta: Metadata;
  adminKey: Buffer | null;
  plans: LRUCache<string, CallPlan>;
  source(conn: ConnectionRow): Source;
  runs: RunBatcher;
  /** Answers of versions with a cache_ttl. */
  results: ResultCache;
  /** Each connection's tables and columns, for masking. */
  schemas: SchemaCache;
  /** Mask traces by plan, rules and schema fingerprint. */
  traces: LRUCache<string, Governed>;
  /** Per-key and per-key-and-query rate limits, counted in the process-wide shared buckets. */
  limits: RateLimits;
  /** This thread's counters; the acceptor gathers them at scrape time. */
  metrics: Metrics;
  /** Resolves once the limits' Redis connection is up (at once without Redis), so early calls count in Redis. */
  limitsReady: Promise<unknown> | null;
  /** The HMAC key for hashed values (QUERYAPIGATE_MASK_KEY or the store's own secret). */
  maskSecret(): Promise<Buffer>;
  close(): Promise<void>;
}

export function createCallContext(config: Config, limiterMemory: SharedArrayBuffer): CallContext {
  const store = attachStore(config, { readonly: true, max: Math.max(2, Math.min(config.poolSize, 8)) });
  // One pool per connection, replaced when the connection's row changes (updated_at).
  const sources = new Map<string, { stamp: string; source: Source }>();
  const drop = (name: string) => {
    const s = sources.get(name);
    if (s) {
      sources.delete(name);
      s.source.close().catch(() => undefined);
    }
  };
  const meta = createMetadata(store, config.metadataCacheTtl);
  const thread = threadMetrics(true, config.home);
  const limits = new RateLimits({ memory: limiterMemory, redisUrl: config.redisUrl, serverRate: null });
  const schemas = new SchemaCache();
  let secret: Promise<Buffer> | null = null;
  // Load the SQL parsers now, not on the first governed call (their first use costs ~100 ms).
  inspectStatement('SELECT a FROM t WHERE b = 1', 'postgres');
  inspectStatement('SELECT a FROM t LIMIT 1, 2', 'mysql');
  const changes = channel('changes', config.home);
  changes.onmessage = (e: MessageEvent) => {
    const m = e.data as ChangeMessage;
    meta.clear();
    if (m.kind === 'connection') {
      drop(m.name);
      schemas.clear(m.name);
    } else if (m.kind === 'all') {
      for (const name of [...sources.keys()]) drop(name);
      schemas.clear();
    }
  };
  const runs = new RunBatcher(config.historyMaxPending, config.home);
  return {
    config,
    meta,
    adminKey: config.adminKey ? Buffer.from(config.adminKey, 'utf8') : null,
    plans: new LRUCache<string, CallPlan>({ max: 2000 }),
    source(conn) {
      const stamp = conn.db + '|' + conn.updated_at;
      const have = sources.get(conn.name);
      if (have && have.stamp === stamp) return have.source;
      if (have) drop(conn.name);
      const source = openSource(conn, { poolSize: config.poolSize, home: config.home, queryTimeoutMs: config.queryTimeout * 1000 });
      sources.set(conn.name, { stamp, source });
      return source;
    },
    runs,
    results: createResultCache(config.redisUrl),
    schemas,
    limits,
    metrics: thread.metrics,
    limitsReady: config.redisUrl ? limits.ready() : null,
    traces: new LRUCache<string, Governed>({ max: 5000 }),
    maskSecret() {
      secret ??= config.maskKey
        ? Promise.resolve(Buffer.from(config.maskKey, 'utf8'))
        : store.readSecret('mask').then((s) => {
          if (!s) throw new Error('the store has no mask secret');
          return Buffer.from(s, 'hex');
        });
      return secret;
    },
    async close() {
      thread.close();
      this.results.close();
      await this.limits.close();
      changes.close();
      runs.flush();
      runs.close();
      await Promise.all([...sources.values()].map((s) => s.source.close().catch(() => undefined)));
      sources.clear();
      await store.close();
    },
  };
}
