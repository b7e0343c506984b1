// In charge of the per-call metrics' counting: counters and histograms whose children are bound once
// per label set and then counted with plain arithmetic. prom-client validates and hashes a labels
// object on every inc/observe, even through `labels()` (it only binds the object), which cost a call
// several µs (bench/results/profile-2026-12-01). These families are registered in a prom-client
// Registry like any metric (they answer `get()` in prom-client's own shape), so the exposition, the
// cross-thread snapshots and the aggregation stay prom-client's.
import type { Registry } from 'prom-client';

/** Label sets kept per family: a family past this is cleared (its counts start again from zero). */
const MAX_CHILDREN = 10_000;

interface Family<C> {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly aggregator: 'sum';
  /** The child counting for these label values (every label name given, none other). */
  labels(labels: Record<string, string>): C;
  get(): Promise<{ name: string; help: string; type: string; values: MetricValue[]; aggregator: 'sum' }>;
  reset(): void;
}

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

export interface TallyChild {
  labels: Record<string, string>;
  value: number;
  inc(by?: number): void;
}

export interface SpreadChild {
  labels: Record<string, string>;
  /** Observations per bucket, not cumulative; the last slot is above every bound. */
  counts: Float64Array;
  sum: number;
  count: number;
  observe(value: number): void;
}

function family<C extends { labels: Record<string, string> }>(
  name: string,
  labelNames: readonly string[],
  make: (labels: Record<string, string>) => C,
): { children: Map<string, C>; labels(labels: Record<string, string>): C } {
  const children = new Map<string, C>();
  return {
    children,
    labels(labels) {
      let key = '';
      for (const n of labelNames) {
        const v = labels[n];
        if (typeof v !== 'string') throw new TypeError(`${name}: label '${n}' must be a string`);
        key += `${v}\u0000`;
      }
      let child = children.get(key);
      if (child === undefined) {
        if (children.size >= MAX_CHILDREN) children.clear();
        const own: Record<string, string> = {};
        for (const n of labelNames) own[n] = labels[n];
        child = make(own);
        children.set(key, child);
      }
      return child;
    },
  };
}

/** A counter family: `labels(...)` once per label set, then `inc()` on the child is an addition. */
export function tally(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly string[],
): Family<TallyChild> & { inc(labels: Record<string, string>, by?: number): void } {
  const f = family(
    name,
    labelNames,
    (labels): TallyChild => ({
      labels,
      value: 0,
      inc(by = 1) {
        this.value += by;
      },
    }),
  );
  const metric = {
    name,
    help,
    type: 'counter' as const,
    aggregator: 'sum' as const,
    labels: f.labels,
    inc: (labels: Record<string, string>, by = 1) => f.labels(labels).inc(by),
    async get() {
      const values: MetricValue[] = [];
      for (const c of f.children.values()) values.push({ labels: { ...c.labels }, value: c.value });
      return { name, help, type: 'counter', values, aggregator: 'sum' as const };
    },
    reset: () => f.children.clear(),
  };
  registry.registerMetric(metric as never);
  return metric;
}

/** A histogram family with fixed bucket bounds (seconds); `observe()` on a child finds its bucket and adds. */
export function spread(registry: Registry, name: string, help: string, labelNames: readonly string[], bounds: readonly number[]): Family<SpreadChild> {
  const f = family(
    name,
    labelNames,
    (labels): SpreadChild => ({
      labels,
      counts: new Float64Array(bounds.length + 1),
      sum: 0,
      count: 0,
      observe(value) {
        let i = 0;
        while (i < bounds.length && value > bounds[i]) i++;
        this.counts[i]++;
        this.sum += value;
        this.count++;
      },
    }),
  );
  const metric = {
    name,
    help,
    type: 'histogram' as const,
    aggregator: 'sum' as const,
    labels: f.labels,
    async get() {
      const values: MetricValue[] = [];
      const bucket = `${name}_bucket`;
      for (const c of f.children.values()) {
        let acc = 0;
        for (let i = 0; i < bounds.length; i++) {
          acc += c.counts[i];
          values.push({ labels: { le: bounds[i], ...c.labels }, value: acc, metricName: bucket });
        }
        values.push({ labels: { le: '+Inf', ...c.labels }, value: c.count, metricName: bucket });
        values.push({ labels: { ...c.labels }, value: c.sum, metricName: `${name}_sum` });
        values.push({ labels: { ...c.labels }, value: c.count, metricName: `${name}_count` });
      }
      return { name, help, type: 'histogram', values, aggregator: 'sum' as const };
    },
    reset: () => f.children.clear(),
  };
  registry.registerMetric(metric as never);
  return metric;
}
