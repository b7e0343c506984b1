// In charge of what one executor owns: its store reader, its data-source pools, its plan cache and
// its batch of run records for the recorder. Nothing here is shared with another thread.
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { JwtAuth, jwtEnabled } from '../auth/jwt.js';
import { RateLimits } from '../auth/rateLimit.js';
import type { Config } from '../config.js';
import { type ChangeMessage, channel } from '../contract/messages.js';
import { type Metrics, type StatementCounters, statementCounters, threadMetrics } from '../metrics/metrics.js';
import type { SpreadChild } from '../metrics/tally.js';
import { RunBatcher } from '../recorder/batcher.js';
import { openSource } from '../sources/index.js';
import type { Source, SourceSettings } from '../sources/types.js';
import { createMetadata, type Metadata } from '../store/metadata.js';
import { attachStore, STORE_FILE, type Store } from '../store/store.js';
import type { ConnectionRow, KeyRow } from '../store/types.js';
import type { Governance, Governed } from './govern.js';
import { type CallPlan, pagedStatement } from './plan.js';
import { type FreshPlan, governAhead, planWarmer } from './planWarmer.js';
import { FORMATS, type Format } from './formats.js';
import { answerCacheRequests, createResultCache, type ResultCache, RunningAnswers } from './resultCache.js';
import { SchemaCache } from './schemaCache.js';

/** What each executor thread starts with (piscina's workerData; inline mode passes the same). */
export interface ExecutorData {
  config: Config;
  /** The process's rate-limit buckets (createLimiterMemory), shared by every thread. */
  limiterMemory: SharedArrayBuffer;
  /** The dispatcher's scope for the channels batched calls cross on (executors, and each executor's calls and answers: http/callBatches.ts); empty inline. */
  answers: string;
}

export interface CallContext {
  config: Config;
  /** This executor's own reader of the store (the catalog lists queries and connections through it). */
  store: Store;
  /** Store rows as calls read them: cached per QUERYAPIGATE_METADATA_CACHE_TTL, cleared on any change. */
  meta: Metadata;
  adminKey: Buffer | null;
  /** Signed-in users' tokens, verified once per executor and kept until they expire; null: JWT off. */
  jwt: JwtAuth | null;
  plans: LRUCache<string, CallPlan>;
  /** Plans of ad-hoc statements, apart from saved ones so ad-hoc traffic never evicts them. */
  adhocPlans: LRUCache<string, CallPlan>;
  source(conn: ConnectionRow): Source;
  runs: RunBatcher;
  /** Answers of versions with a cache_ttl. */
  results: ResultCache;
  /** The cache keys whose statement a call runs now, so the calls that miss together run it once. */
  cacheRuns: RunningAnswers;
  /** What the govern stage reads: the write ceiling, schemas, mask traces and the mask secret. */
  governance: Governance;
  /** Per-key and per-key-and-query rate limits, counted in the process-wide shared buckets. */
  limits: RateLimits;
  /** This thread's counters; the acceptor gathers them at scrape time. */
  metrics: Metrics;
  /** This thread's statement metrics bound per connection, dialect and key (no label work per call). */
  statements: (connection: string, dialect: string, key: string) => StatementCounters;
  /** The serialization histogram bound per format. */
  serialization: Record<Format, SpreadChild>;
  /** Resolves once the limits' Redis connection is up (at once without Redis), so early calls count in Redis. */
  limitsReady: Promise<unknown> | null;
  /** A call that crossed after changes this executor has not heard of yet (Request.changes): clears what they would. */
  catchUp(changes: number | undefined): void;
  close(): Promise<void>;
}

/** How this server opens data sources: its pool size, home, time limit, and the store's files kept off-limits. */
export function sourceSettings(config: Config): SourceSettings {
  return {
    poolSize: config.poolSize,
    pipeline: config.poolPipeline,
    home: config.home,
    queryTimeoutMs: config.queryTimeout * 1000,
    connectTimeoutMs: config.connectTimeout * 1000,
    reserved: config.databaseUrl ? [] : [join(config.home, STORE_FILE)],
  };
}

/** Statements a warm pass describes ahead on each connection, at most (see ready()). */
const PREPARED_AHEAD = 100;
/** Mask traces a warm pass makes ahead on each connection, at most (one per statement and key policy; see planWarmer.ts governAhead). */
const TRACED_AHEAD = 200;

export function createCallContext({ config, limiterMemory }: ExecutorData): CallContext {
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
  const plans = new LRUCache<string, CallPlan>({ max: 2000 });
  const settings = sourceSettings(config);
  const results = createResultCache(config.redisUrl);
  // In memory only this executor can see its answers: it answers the management API's requests (contract 3.8).
  const cacheRequests = config.redisUrl ? null : answerCacheRequests(results, config.home);
  const thread = threadMetrics(true, config.home, {
    pools: () => [...sources].map(([connection, s]) => ({ connection, ...s.source.connections() })),
    cacheEntries: () => [
      { cache: 'result', entries: results.size() },
      { cache: 'metadata', entries: meta.size() },
      { cache: 'plan', entries: plans.size },
      { cache: 'schema', entries: schemas.size },
      { cache: 'trace', entries: governance.traces.size },
    ],
  });
  const limits = new RateLimits({ memory: limiterMemory, redisUrl: config.redisUrl, serverRate: null });
  const schemas = new SchemaCache();
  let secret: Promise<Buffer> | null = null;
  function source(conn: ConnectionRow): Source {
    const stamp = `${conn.db}|${conn.updated_at}`;
    const have = sources.get(conn.name);
    if (have && have.stamp === stamp) return have.source;
    if (have) drop(conn.name);
    const opened = openSource(conn, settings);
    sources.set(conn.name, { stamp, source: opened });
    return opened;
  }
  const governance: Governance = {
    allowWrites: config.allowWrites,
    schemas,
    traces: new LRUCache<string, Governed>({ max: 5000 }),
    maskSecret() {
      secret ??= config.maskKey
        ? Promise.resolve(Buffer.from(config.maskKey, 'utf8'))
        : store.readSecret('mask').then(
            (s) => {
              if (!s) throw new Error('the store has no mask secret');
              return Buffer.from(s, 'hex');
            },
            (e: unknown) => {
              secret = null; // a store that could not be read is asked again by the next call
              throw e;
            },
          );
      return secret;
    },
  };
  /**
   * A connection made ready for its first call (the warmer asks): one connection opened, then the schema
   * read, the statements just planned described on the connections open by then, and governed for the
   * keys with rules that may call them. Only once the database answers: a database that does not is for
   * a call to find (and the breaker to hear of).
   */
  async function ready(conn: ConnectionRow, fresh: FreshPlan[], keys: KeyRow[]): Promise<void> {
    const s = source(conn);
    if (!(await s.warm?.())) return;
    await schemas.get(conn, s);
    // A first page's text, as runStatement sends it; calls that may write use the write pool.
    // What a source keeps for a statement stays (a MySQL session's prepared statement): a start with a catalog
    // of thousands readies its first PREPARED_AHEAD (a bounded burst), the rest are readied by their calls.
    if (s.prepare) {
      for (const { plan: p } of fresh.slice(0, PREPARED_AHEAD)) if (!p.write) s.prepare(pagedStatement(p, 0));
    }
    await governAhead(governance, fresh, keys, conn, s, TRACED_AHEAD);
  }
  // A failed read is dropped (SchemaCache.get): the first call reads again, and meets the failure.
  const warmer = planWarmer(store, plans, meta, (conn, fresh, keys) => void ready(conn, fresh, keys).catch(() => undefined));
  warmer.warm();
  const changes = channel('changes', config.home);
  /** The newest change heard of (ChangeMessage.seq), or caught up with. */
  let heard = 0;
  changes.onmessage = (e: MessageEvent) => {
    const m = e.data as ChangeMessage;
    // A call that crossed after this change cleared the rows and schemas already (catchUp): those read
    // since are newer than the change, so only the pools are left to replace.
    const caughtUp = m.seq !== undefined && m.seq <= heard;
    if (!caughtUp) {
      if (m.seq !== undefined) heard = m.seq;
      if (m.kind === 'all') meta.expire();
      else meta.clear();
      if (m.kind === 'connection') schemas.clear(m.name);
      else if (m.kind === 'all') schemas.clear();
      warmer.warm(); // a version published, a connection changed
    }
    if (m.kind === 'connection') drop(m.name);
    else if (m.kind === 'all') for (const name of [...sources.keys()]) drop(name);
  };
  const runs = new RunBatcher(config.historyMaxPending, config.home);
  return {
    config,
    store,
    meta,
    adminKey: config.adminKey ? Buffer.from(config.adminKey, 'utf8') : null,
    jwt: jwtEnabled(config) ? new JwtAuth(config) : null,
    plans,
    adhocPlans: new LRUCache<string, CallPlan>({ max: 256 }),
    source,
    runs,
    results,
    cacheRuns: new RunningAnswers(),
    governance,
    limits,
    metrics: thread.metrics,
    statements: statementCounters(thread.metrics),
    serialization: Object.fromEntries(FORMATS.map((format) => [format, thread.metrics.serialization.labels({ format })])) as Record<Format, SpreadChild>,
    limitsReady: config.redisUrl ? limits.ready() : null,
    catchUp(n) {
      if (n === undefined || n <= heard) return;
      // The change itself still comes, and does the rest (a connection's pools); which one it is is not
      // known yet, so every row and schema read before it goes.
      heard = n;
      meta.clear();
      schemas.clear();
      warmer.warm();
    },
    async close() {
      thread.close();
      cacheRequests?.close();
      this.results.close();
      await this.limits.close();
      changes.close();
      warmer.close();
      await warmer.idle();
      runs.flush();
      runs.close();
      await Promise.all([...sources.values()].map((s) => s.source.close().catch(() => undefined)));
      sources.clear();
      await store.close();
    },
  };
}
