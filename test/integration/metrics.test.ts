// /metrics: the contract's names and labels, for the whole process: every executor thread and the
// recorder are gathered at scrape time, so each call is counted exactly once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, startTestServer } from '../helpers.js';

/** Sums the samples of a metric whose labels include every given pair. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

for (const workers of ['3', '0']) {
  test(`/metrics counts every call once across ${workers === '0' ? 'the inline executor' : `${workers} executor threads`}`, async () => {
    const s = await startTestServer({ QUERYAPIGATE_WORKERS: workers, QUERYAPIGATE_LOAD_EXAMPLES: '1' });
    try {
      const key = (await s.call('POST', '/api/v1/api-keys', { body: { name: 'm', queries: ['example_film_lookup'], connections: [] } })).json.secret;
      const N = 40;
      const answers = await Promise.all(
        Array.from({ length: N }, (_, i) => s.call('GET', `/q/example_film_lookup?film_id=${i % 5 === 0 ? 'x' : (i % 60) + 1}`, { key })),
      );
      const ok = answers.filter((a) => a.status === 200).length;
      assert.equal(ok, N - 8);
      const scrape = await s.call('GET', '/metrics', { key: null });
      assert.equal(scrape.status, 200);
      assert.match(scrape.headers.get('content-type') ?? '', /text\/plain/);
      const t = scrape.text;
      assert.equal(sample(t, 'queryapigate_requests_total', { endpoint: 'run_named_query', key: 'm' }), N);
      assert.equal(sample(t, 'queryapigate_requests_total', { endpoint: 'run_named_query', status: '400' }), 8);
      assert.equal(sample(t, 'queryapigate_queries_total', { status: 'success', key: 'm', connection: 'examples', dialect: 'sqlite' }), ok);
      assert.equal(sample(t, 'queryapigate_query_duration_seconds_count', { connection: 'examples' }), ok);
      assert.equal(sample(t, 'queryapigate_rows_returned_total', { key: 'm' }), ok);
      assert.equal(sample(t, 'queryapigate_active_queries'), 0);
      for (const name of [
        'queryapigate_request_duration_seconds_bucket',
        'queryapigate_serialization_duration_seconds_count',
        'queryapigate_history_pending',
        'queryapigate_rate_limit_rejections_total',
        'queryapigate_rate_limit_fallbacks_total',
        'queryapigate_cache_hits_total',
        'queryapigate_cache_misses_total',
      ]) {
        assert.ok(t.includes(name), name);
      }
      const recorded = await eventually(
        async () => sample((await s.call('GET', '/metrics', { key: null })).text, 'queryapigate_history_runs_total', { outcome: 'recorded' }),
        (n) => n >= ok,
      );
      assert.equal(recorded, ok, 'validation failures are not runs');
    } finally {
      await s.stop();
    }
  });
}
