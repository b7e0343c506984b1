// Overview: the server's health and version, and over the last minutes calls a second, the error
// rate, p50/p99 and runs recorded/dropped, read from /metrics every few seconds and drawn as small
// SVG charts (a few polylines: a chart library would outweigh them), with the live feed beside.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { between, parseMetrics, type Point, type Reading } from '../metrics';
import { FormError, Page, useLoad } from '../ui';
import { LiveFeed } from './history';

const EVERY_MS = 2000;
const KEEP = 150; // five minutes

export function Overview(_: { route: string[] }) {
  const health = useLoad(() => api.get<{ status: string; version: string; time_zone: string | null; utc_offset: string }>('/health'));
  const [points, setPoints] = useState<Point[]>([]);
  const [error, setError] = useState('');
  useEffect(() => {
    let last: Reading | null = null;
    let live = true;
    const read = async () => {
      try {
        const text = await api.get<string>('/metrics');
        const now = parseMetrics(text);
        if (last && live) {
          const p = between(last, now);
          setPoints((old) => [...old, p].slice(-KEEP));
        }
        last = now;
        setError('');
      } catch (e) {
        setError((e as Error).message);
      }
    };
    void read();
    const timer = setInterval(read, EVERY_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, []);
  const latest = points.at(-1);
  const fmt = (n: number | null | undefined, digits = 1) => (n === null || n === undefined ? '-' : n.toFixed(digits));
  return (
    <Page title="Overview">
      <FormError error={health.error || error} />
      <dl class="tiles">
        <div>
          <dt>Health</dt>
          <dd>{health.data?.status ?? '...'}</dd>
        </div>
        <div>
          <dt>Version</dt>
          <dd>{health.data?.version ?? '...'}</dd>
        </div>
        <div>
          <dt>Time zone</dt>
          <dd>{health.data ? `${health.data.time_zone ?? '?'} (${health.data.utc_offset})` : '...'}</dd>
        </div>
      </dl>
      <div class="charts">
        <Chart title="Calls a second" unit="/s" values={points.map((p) => p.callsPerSecond)} latest={fmt(latest?.callsPerSecond, 2)} />
        <Chart title="Error rate" unit="%" values={points.map((p) => p.errorRate * 100)} latest={fmt((latest?.errorRate ?? 0) * 100)} />
        <Chart title="p50 latency" unit="ms" values={points.map((p) => p.p50 ?? 0)} latest={fmt(latest?.p50)} />
        <Chart title="p99 latency" unit="ms" values={points.map((p) => p.p99 ?? 0)} latest={fmt(latest?.p99)} />
        <Chart title="Runs recorded" unit="" values={points.map((p) => p.recorded)} latest={fmt(latest?.recorded, 0)} />
        <Chart title="Runs dropped" unit="" values={points.map((p) => p.dropped)} latest={fmt(latest?.dropped, 0)} />
      </div>
      <LiveFeed compact />
    </Page>
  );
}

function Chart({ title, unit, values, latest }: { title: string; unit: string; values: number[]; latest: string }) {
  const w = 240;
  const h = 60;
  const max = Math.max(...values, 1e-9);
  // At least a minute wide, so the first points are a line rather than a dot at the edge.
  const step = w / (Math.max(values.length, 30) - 1);
  const start = w - step * (values.length - 1);
  const line = values.map((v, i) => `${(start + i * step).toFixed(1)},${(h - 2 - (v / max) * (h - 4)).toFixed(1)}`).join(' ');
  return (
    <figure class="chart">
      <figcaption>
        {title}: <strong>{latest}</strong> {unit}
      </figcaption>
      <svg
        viewBox={`0 0 ${w} ${h}`}
        preserveAspectRatio="none"
        height={h}
        role="img"
        aria-label={`${title} over the last ${Math.round((values.length * EVERY_MS) / 1000)} seconds, now ${latest} ${unit}`}
      >
        <line x1="0" y1={h - 1} x2={w} y2={h - 1} class="axis" />
        {values.length > 1 && <polyline points={line} class="series" />}
      </svg>
    </figure>
  );
}
