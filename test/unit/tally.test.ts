// Tests for the per-call metric families (metrics/tally.ts): they expose and aggregate exactly as
// prom-client's own Counter and Histogram do for the same observations, so /metrics reads the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { spread, tally } from '../../src/metrics/tally.js';

const BOUNDS = [0.005, 0.01, 0.1, 1];
const OBSERVED = [0.001, 0.005, 0.0051, 0.2, 3, 0.05, 1];

/** The same observations made through our families and through prom-client's, each in its registry. */
async function both(): Promise<{ ours: Registry; theirs: Registry }> {
  const ours = new Registry();
  const theirs = new Registry();
  const t = tally(ours, 'x_total', 'calls', ['method', 'status']);
  const s = spread(ours, 'x_seconds', 'time', ['method'], BOUNDS);
  const c = new Counter({ name: 'x_total', help: 'calls', labelNames: ['method', 'status'], registers: [theirs] });
  const h = new Histogram({ name: 'x_seconds', help: 'time', labelNames: ['method'], buckets: BOUNDS, registers: [theirs] });
  const child = t.labels({ method: 'GET', status: '200' });
  child.inc();
  child.inc(2);
  t.inc({ method: 'POST', status: '400' }, 5);
  c.inc({ method: 'GET', status: '200' }, 3);
  c.inc({ method: 'POST', status: '400' }, 5);
  for (const v of OBSERVED) {
    s.labels({ method: 'GET' }).observe(v);
    h.observe({ method: 'GET' }, v);
  }
  s.labels({ method: 'HEAD' }).observe(0.5);
  h.observe({ method: 'HEAD' }, 0.5);
  return { ours, theirs };
}

test('a tally and a spread expose what prom-client exposes for the same counts', async () => {
  const { ours, theirs } = await both();
  assert.equal(await ours.metrics(), await theirs.metrics());
  const text = await ours.metrics();
  assert.match(text, /^x_total\{method="GET",status="200"\} 3$/m);
  assert.match(text, /^x_seconds_bucket\{le="0\.005",method="GET"\} 2$/m); // a value on a bound is in that bucket
  assert.match(text, /^x_seconds_bucket\{le="\+Inf",method="GET"\} 7$/m);
  assert.match(text, /^x_seconds_count\{method="HEAD"\} 1$/m);
});

test('snapshots from several threads aggregate into the same sums as prom-client metrics', async () => {
  const a = await both();
  const b = await both();
  const ours = AggregatorRegistry.aggregate([await a.ours.getMetricsAsJSON(), await b.ours.getMetricsAsJSON()]);
  const theirs = AggregatorRegistry.aggregate([await a.theirs.getMetricsAsJSON(), await b.theirs.getMetricsAsJSON()]);
  assert.equal(await ours.metrics(), await theirs.metrics());
  assert.match(await ours.metrics(), /^x_total\{method="POST",status="400"\} 10$/m);
});

test('labels must be given as strings, all of them; a reset clears every child', async () => {
  const r = new Registry();
  const t = tally(r, 'y_total', 'y', ['a', 'b']);
  assert.throws(() => t.labels({ a: 'x' }), /label 'b'/);
  t.inc({ a: 'x', b: 'y' });
  assert.match(await r.metrics(), /y_total\{a="x",b="y"\} 1/);
  r.resetMetrics();
  assert.doesNotMatch(await r.metrics(), /y_total\{/);
});
