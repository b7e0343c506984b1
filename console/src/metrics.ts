// In charge of reading /metrics (Prometheus text) into the few numbers the Overview draws: calls,
// errors, the query-duration histogram and the recorder's outcomes, and the rates between two reads.

export interface Reading {
  at: number;
  calls: number;
  errors: number;
  /** Cumulative counts per bucket bound (seconds), +Inf last. */
  buckets: [number, number][];
  recorded: number;
  dropped: number;
}

export interface Point {
  at: number;
  callsPerSecond: number;
  errorRate: number;
  p50: number | null;
  p99: number | null;
  recorded: number;
  dropped: number;
}

const LINE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string, at = Date.now()): Reading {
  const r: Reading = { at, calls: 0, errors: 0, buckets: [], recorded: 0, dropped: 0 };
  const buckets = new Map<number, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const [, name, labelText = '', raw] = m;
    const value = Number(raw);
    const labels: Record<string, string> = {};
    for (const l of labelText.matchAll(LABEL)) labels[l[1]] = l[2];
    if (name === 'queryapigate_queries_total') {
      r.calls += value;
      if (labels.status === 'error') r.errors += value;
    } else if (name === 'queryapigate_query_duration_seconds_bucket') {
      const le = labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(labels.le);
      buckets.set(le, (buckets.get(le) ?? 0) + value);
    } else if (name === 'queryapigate_history_runs_total') {
      if (labels.outcome === 'recorded') r.recorded += value;
      if (labels.outcome === 'dropped') r.dropped += value;
    }
  }
  r.buckets = [...buckets].sort((a, b) => a[0] - b[0]);
  return r;
}

/** What happened between two readings. */
export function between(a: Reading, b: Reading): Point {
  const seconds = Math.max((b.at - a.at) / 1000, 0.001);
  const calls = Math.max(b.calls - a.calls, 0);
  const counts: [number, number][] = b.buckets.map(([le, n], i) => [le, n - (a.buckets[i]?.[1] ?? 0)]);
  return {
    at: b.at,
    callsPerSecond: calls / seconds,
    errorRate: calls ? Math.max(b.errors - a.errors, 0) / calls : 0,
    p50: quantile(counts, 0.5),
    p99: quantile(counts, 0.99),
    recorded: Math.max(b.recorded - a.recorded, 0),
    dropped: Math.max(b.dropped - a.dropped, 0),
  };
}

/** A quantile in milliseconds from cumulative bucket counts, linear within its bucket (as Prometheus' histogram_quantile). */
export function quantile(cumulative: [number, number][], q: number): number | null {
  const total = cumulative.at(-1)?.[1] ?? 0;
  if (!total) return null;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, n] of cumulative) {
    if (n >= rank) {
      if (le === Number.POSITIVE_INFINITY) return lower * 1000;
      const within = n - below;
      return (lower + (le - lower) * (within ? (rank - below) / within : 0)) * 1000;
    }
    lower = le;
    below = n;
  }
  return lower * 1000;
}
