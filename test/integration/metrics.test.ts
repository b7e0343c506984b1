// /metrics: the contract's names and labels, for the whole process: every executor thread and the
// recorder are gathered at scrape time, so each call is counted exactly once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, pgConnection, startTestServer } from '../helpers.js';

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
      assert.equal(sample(t, 'queryapigate_log_lines_dropped_total'), 0, 'a read output takes every line');
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

test('/metrics shows each connection pool (idle and active connections, summed over the executors) and the caches entries', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '2', QUERYAPIGATE_POOL_SIZE: '3', QUERYAPIGATE_METADATA_CACHE_TTL: '60' });
  const scrape = async () => (await s.call('GET', '/metrics', { key: null })).text;
  try {
    const post = async (path: string, body: unknown) => assert.equal((await s.call('POST', path, { body })).status, 201, path);
    await post('/api/v1/connections', pgConnection('pg'));
    const query = { sql: 'SELECT pg_sleep(:s)::text AS slept', parameters: { s: 'float' }, connection_name: 'pg', description: 'sleeps', publish: true };
    await post('/api/v1/queries', { name: 'nap', ...query });
    await post('/api/v1/queries', { name: 'kept', ...query, cache_ttl: 60 });

    const before = await scrape();
    assert.ok(before.includes('# TYPE queryapigate_pool_idle_connections gauge'));
    assert.equal(sample(before, 'queryapigate_pool_idle_connections', { connection: 'pg' }), 0, 'no pool before the first call');

    // Calls in flight hold connections: active while they sleep, idle once done.
    const sleeping = Array.from({ length: 4 }, () => s.call('GET', '/q/nap?s=3'));
    const during = await eventually(scrape, (t) => sample(t, 'queryapigate_pool_active_connections', { connection: 'pg' }) >= 2, 8000);
    const active = sample(during, 'queryapigate_pool_active_connections', { connection: 'pg' });
    // The naps, and beside the first ones the schema and catalog reads governance makes on the same
    // pools (pg_sleep is a function call: its volatility is read from pg_proc): at most POOL_SIZE per executor.
    assert.ok(active >= 2 && active <= 2 * 3, `active ${active}: at most POOL_SIZE per executor`);
    for (const r of await Promise.all(sleeping)) assert.equal(r.status, 200);
    const after = await scrape();
    assert.equal(sample(after, 'queryapigate_pool_active_connections', { connection: 'pg' }), 0);
    const idle = sample(after, 'queryapigate_pool_idle_connections', { connection: 'pg' });
    assert.ok(idle >= 2 && idle <= 2 * 3, `idle ${idle}: at most POOL_SIZE per executor`);

    // The result cache holds the answer of a version with cache_ttl; metadata caches hold the rows read.
    assert.equal((await s.call('GET', '/q/kept?s=0')).status, 200);
    const cached = await scrape();
    assert.ok(sample(cached, 'queryapigate_cache_entries', { cache: 'result' }) >= 1);
    assert.ok(sample(cached, 'queryapigate_cache_entries', { cache: 'metadata' }) >= 2);
  } finally {
    await s.stop();
  }
});
