// deploy/grafana/queryapigate.json asks only for what a real server's /metrics has: every metric name
// its queries name is a series of a server that served calls, and every label they match or group by
// is one of that metric's labels (Prometheus adds `instance` and `job` itself).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { eventually, startTestServer } from '../helpers.js';

const DASHBOARD = new URL('../../../deploy/grafana/queryapigate.json', import.meta.url);
const DOCS = readFileSync(new URL('../../../docs/metrics.md', import.meta.url), 'utf8');
const ADDED_BY_PROMETHEUS = new Set(['instance', 'job']);

interface Panel {
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: Array<{ expr: string }>;
}

function queries(): Array<{ where: string; expr: string }> {
  const d = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[]; templating: { list: Array<{ name: string; query: unknown }> } };
  const out: Array<{ where: string; expr: string }> = [];
  for (const p of d.panels) {
    if (p.type === 'row') continue;
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template literal
    assert.equal(p.datasource?.uid, '${datasource}', `${p.title}: the dashboard's data source variable`);
    assert.ok(p.targets?.length, `${p.title}: has a query`);
    for (const t of p.targets) out.push({ where: p.title, expr: t.expr });
  }
  for (const v of d.templating.list) {
    const q = typeof v.query === 'object' && v.query ? (v.query as { query: string }).query : String(v.query);
    if (q.includes('queryapigate_')) out.push({ where: `variable ${v.name}`, expr: q });
  }
  return out;
}

/** Label names per series name, from the scrape's sample lines. */
function seriesLabels(scrape: string): Map<string, Set<string>> {
  const series = new Map<string, Set<string>>();
  for (const line of scrape.split('\n')) {
    const m = /^(queryapigate_\w+)(?:\{(.*)\})? /.exec(line);
    if (!m) continue;
    const labels = series.get(m[1]) ?? new Set<string>();
    for (const l of (m[2] ?? '').matchAll(/(\w+)="/g)) labels.add(l[1]);
    series.set(m[1], labels);
  }
  return series;
}

test("every metric and label the Grafana dashboard queries exists in a real server's /metrics", async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  try {
    // Calls that give every labelled series a sample: answers, an error, a cached version twice, runs recorded.
    assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=7')).status, 200);
    assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=x')).status, 400);
    for (let i = 0; i < 2; i++) assert.equal((await s.call('GET', '/q/example_kpi_rentals_today')).status, 200);
    const scrape = await eventually(
      async () => (await s.call('GET', '/metrics', { key: null })).text,
      (t) => /queryapigate_history_runs_total\{outcome="recorded"\} [1-9]/.test(t),
    );
    const series = seriesLabels(scrape);
    const all = queries();
    assert.ok(all.length >= 15, 'the dashboard has its panels');
    const used = new Set<string>();
    for (const { where, expr } of all) {
      const names = [...expr.matchAll(/(queryapigate_\w+)(?:\{([^}]*)\})?/g)];
      assert.ok(names.length, `${where}: queries a queryapigate metric`);
      const labelsHere = new Set<string>();
      for (const [, name, matchers] of names) {
        used.add(name);
        assert.ok(series.has(name), `${where}: ${name} is in /metrics`);
        const labels = series.get(name) ?? new Set();
        for (const l of labels) labelsHere.add(l);
        for (const [, label, op, value] of (matchers ?? '').matchAll(/(\w+)\s*(=~|!=|!~|=)\s*"([^"]*)"/g)) {
          if (ADDED_BY_PROMETHEUS.has(label)) continue;
          assert.ok(labels.has(label), `${where}: ${name} has the label ${label}`);
          if (op === '=')
            assert.ok(scrape.includes(`${label}="${value}"`) || DOCS.includes(`\`${value}\``), `${where}: ${label}="${value}" is a value it takes`);
        }
      }
      for (const [, by] of expr.matchAll(/by \(([^)]*)\)/g)) {
        for (const label of by.split(',').map((l) => l.trim())) {
          if (!ADDED_BY_PROMETHEUS.has(label)) assert.ok(labelsHere.has(label), `${where}: grouped by ${label}, a label of its metrics`);
        }
      }
    }
    // The panels the brief asks for: calls, errors, latency, runs recorded and dropped, pool use, cache hits, refusals.
    for (const name of [
      'queryapigate_requests_total',
      'queryapigate_request_duration_seconds_bucket',
      'queryapigate_history_runs_total',
      'queryapigate_active_queries',
      'queryapigate_pool_active_connections',
      'queryapigate_pool_idle_connections',
      'queryapigate_cache_hits_total',
      'queryapigate_rate_limit_rejections_total',
    ]) {
      assert.ok(used.has(name), `the dashboard shows ${name}`);
    }
  } finally {
    await s.stop();
  }
});
