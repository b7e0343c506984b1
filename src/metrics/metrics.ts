// In charge of the Prometheus metrics with the contract's names and labels. Each thread counts what
// it does in its own registry (the acceptor: requests; executors: queries, rows, cache, key limits;
// the recorder: runs); at scrape time the acceptor asks every thread for its registry over a
// BroadcastChannel and aggregates them, so each call is reported exactly once for the process.
import { AggregatorRegistry, Counter, Gauge, Registry } from 'prom-client';
import { channel as broadcast, type MetricsReply, type MetricsRequest, type MetricsSnapshot, postOnce } from '../contract/messages.js';
import { type SpreadChild, spread, type TallyChild, tally } from './tally.js';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Values a thread owns elsewhere and reports as they stand at scrape time. */
export interface Readings {
  /** Runs waiting to be written (the recorder). */
  historyPending?: () => number;
  /** Rate checks counted locally because Redis failed (process-wide, kept in the shared buckets). */
  rateLimitFallbacks?: () => number;
  /** This thread's data-source connections, per connection name (an executor's pools). */
  pools?: () => Iterable<{ connection: string; idle: number; active: number }>;
  /** Entries held by this thread's caches, per cache (`result`, `metadata`). */
  cacheEntries?: () => Iterable<{ cache: string; entries: number }>;
  /** Log lines given up because the output took none (the acceptor's, log.ts). */
  logLinesDropped?: () => number;
}

/** A labelled gauge read at scrape time: its values replaced by what `read` gives. */
function readGauge<T>(read: (() => Iterable<T>) | undefined, set: (g: Gauge, item: T) => void) {
  return (
    read &&
    function (this: Gauge) {
      this.reset();
      for (const item of read()) set(this, item);
    }
  );
}

/** Every metric the process reports, declared in each registry so an idle thread still shows zeros. */
function declare(registry: Registry, readings: Readings) {
  const r = [registry];
  const { historyPending, rateLimitFallbacks, pools, cacheEntries, logLinesDropped } = readings;
  const running = { value: 0 };
  return {
    // The per-call families count without prom-client's per-call label checks (tally.ts).
    requests: tally(registry, 'queryapigate_requests_total', 'HTTP requests answered', ['method', 'endpoint', 'status', 'key']),
    requestDuration: spread(registry, 'queryapigate_request_duration_seconds', 'HTTP request duration', ['method', 'endpoint'], BUCKETS),
    queries: tally(registry, 'queryapigate_queries_total', 'Statements run on data sources', ['connection', 'dialect', 'status', 'key']),
    queryDuration: spread(registry, 'queryapigate_query_duration_seconds', 'Statement duration', ['connection', 'dialect'], BUCKETS),
    rows: tally(registry, 'queryapigate_rows_returned_total', 'Rows returned to callers', ['connection', 'dialect', 'key']),
    serialization: spread(registry, 'queryapigate_serialization_duration_seconds', 'Time spent rendering paged answers', ['format'], BUCKETS),
    historyRuns: new Counter({ name: 'queryapigate_history_runs_total', help: 'Runs by what became of them', labelNames: ['outcome'], registers: r }),
    historyPending: new Gauge({
      name: 'queryapigate_history_pending',
      help: 'Runs waiting to be written',
      registers: r,
      collect:
        historyPending &&
        function (this: Gauge) {
          this.set(historyPending());
        },
    }),
    // Counted with plain arithmetic by the execute stage, read at scrape time.
    activeQueries: running,
    activeQueriesGauge: new Gauge({
      name: 'queryapigate_active_queries',
      help: 'Statements running now',
      registers: r,
      collect(this: Gauge) {
        this.set(running.value);
      },
    }),
    rateLimitRejections: new Counter({ name: 'queryapigate_rate_limit_rejections_total', help: 'Requests refused by a rate limit', registers: r }),
    rateLimitFallbacks: new Counter({
      name: 'queryapigate_rate_limit_fallbacks_total',
      help: 'Rate checks counted locally because Redis failed',
      registers: r,
      collect:
        rateLimitFallbacks &&
        function (this: Counter) {
          this.reset();
          this.inc(rateLimitFallbacks());
        },
    }),
    logLinesDropped: new Counter({
      name: 'queryapigate_log_lines_dropped_total',
      help: 'Log lines given up because the output took none',
      registers: r,
      collect:
        logLinesDropped &&
        function (this: Counter) {
          this.reset();
          this.inc(logLinesDropped());
        },
    }),
    cacheHits: new Counter({ name: 'queryapigate_cache_hits_total', help: 'Answers served from the response cache', registers: r }),
    cacheMisses: new Counter({ name: 'queryapigate_cache_misses_total', help: 'Cacheable answers computed afresh', registers: r }),
    streamExports: new Counter({
      name: 'queryapigate_stream_exports_total',
      help: 'Streamed exports',
      labelNames: ['connection', 'dialect', 'status', 'key'],
      registers: r,
    }),
    // Summed over the executors at scrape time (the aggregator adds gauges), so per process and connection.
    poolIdle: new Gauge({
      name: 'queryapigate_pool_idle_connections',
      help: 'Open data-source connections waiting for a call',
      labelNames: ['connection'],
      registers: r,
      collect: readGauge(pools, (g, p) => g.labels({ connection: p.connection }).set(p.idle)),
    }),
    poolActive: new Gauge({
      name: 'queryapigate_pool_active_connections',
      help: 'Data-source connections running a call or holding a stream',
      labelNames: ['connection'],
      registers: r,
      collect: readGauge(pools, (g, p) => g.labels({ connection: p.connection }).set(p.active)),
    }),
    cacheEntries: new Gauge({
      name: 'queryapigate_cache_entries',
      help: 'Entries held by the caches',
      labelNames: ['cache'],
      registers: r,
      collect: readGauge(cacheEntries, (g, c) => g.labels({ cache: c.cache }).set(c.entries)),
    }),
  };
}

export type Metrics = ReturnType<typeof declare>;

/** Children bound to one label set are kept at most this many per kind (a clear only means re-binding). */
const MAX_BOUND = 10_000;

/**
 * Metric children bound once per label set and reused, looked up by up to three label values without
 * building a labels object per call. `make` builds the children the first time the values are seen together.
 */
export function bound<T>(make: (a: string, b: string, c: string) => T): (a: string, b?: string, c?: string) => T {
  const cache = new Map<string, T>();
  return (a, b = '', c = '') => {
    const key = `${a}\u0000${b}\u0000${c}`;
    let v = cache.get(key);
    if (v === undefined) {
      if (cache.size >= MAX_BOUND) cache.clear();
      v = make(a, b, c);
      cache.set(key, v);
    }
    return v;
  };
}

/** The statement metrics of one connection, dialect and key. */
export interface StatementCounters {
  success: TallyChild;
  error: TallyChild;
  duration: SpreadChild;
  rows: TallyChild;
}

export function statementCounters(m: Metrics): (connection: string, dialect: string, key: string) => StatementCounters {
  return bound((connection, dialect, key) => ({
    success: m.queries.labels({ connection, dialect, status: 'success', key }),
    error: m.queries.labels({ connection, dialect, status: 'error', key }),
    duration: m.queryDuration.labels({ connection, dialect }),
    rows: m.rows.labels({ connection, dialect, key }),
  }));
}

/** A thread's registry; `answerScrapes` makes it reply when the acceptor collects. */
export function threadMetrics(answerScrapes: boolean, scope: string, readings: Readings = {}): { metrics: Metrics; registry: Registry; close(): void } {
  const registry = new Registry();
  const metrics = declare(registry, readings);
  let channel: BroadcastChannel | null = null;
  if (answerScrapes) {
    channel = broadcast('metrics', scope);
    channel.onmessage = async (e: MessageEvent) => {
      const { id } = e.data as MetricsRequest;
      // Not on the metrics channel: every other thread would be handed this snapshot.
      postOnce('snapshots', scope, { id, metrics: await registry.getMetricsAsJSON() } satisfies MetricsReply);
    };
  }
  return { metrics, registry, close: () => channel?.close() };
}

export type ProcessMetrics = ReturnType<typeof processMetrics>;

/**
 * The acceptor's side: its own registry plus a scrape that gathers every other thread's. `threads`
 * is how many snapshots to wait for (executors + recorder); a thread that does not answer within
 * the time limit is left out of that scrape rather than stalling it.
 */
export function processMetrics(threads: number, scope: string, readings: Readings = {}) {
  const own = threadMetrics(false, scope, readings);
  const snapshots = broadcast('snapshots', scope);
  let next = 0;
  const waiting = new Map<number, { got: MetricsSnapshot[]; done: () => void }>();
  snapshots.onmessage = (e: MessageEvent) => {
    const m = e.data as MetricsReply;
    const w = waiting.get(m.id);
    if (!w) return;
    w.got.push(m.metrics);
    if (w.got.length >= threads) w.done();
  };
  return {
    metrics: own.metrics,
    async scrape(): Promise<{ contentType: string; body: string }> {
      const id = ++next;
      const got: MetricsSnapshot[] = [];
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1000);
        waiting.set(id, {
          got,
          done: () => {
            clearTimeout(timer);
            resolve();
          },
        });
        postOnce('metrics', scope, { id } satisfies MetricsRequest);
        if (threads === 0) resolve();
      });
      waiting.delete(id);
      const merged = AggregatorRegistry.aggregate([await own.registry.getMetricsAsJSON(), ...got]);
      return { contentType: own.registry.contentType, body: await merged.metrics() };
    },
    close() {
      snapshots.close();
    },
  };
}
