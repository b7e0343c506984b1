// A full executor queue end to end: one executor thread taking one call at a time and a queue of
// one, a saved query that sleeps on PostgreSQL, and a burst of calls. The calls that fit (one
// running, one waiting) succeed; the rest are answered 503 unavailable at once, with Retry-After
// and their request id, without waiting for the database; and the server serves again afterwards.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { pgConnection, startTestServer, type Reply, type TestServer } from '../helpers.js';

const SLEEP_S = 0.6;
const BURST = 6;
// what fits: QUERYAPIGATE_WORKERS × QUERYAPIGATE_TASKS_PER_WORKER running, QUERYAPIGATE_MAX_QUEUE waiting
const FITS = 1 * 1 + 1;

let s: TestServer;

before(async () => {
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_TASKS_PER_WORKER: '1', QUERYAPIGATE_MAX_QUEUE: '1' });
  // pg_sleep needs no tables: the server's own maintenance database will do
  const post = async (path: string, body: unknown) => {
    const r = await s.call('POST', path, { body });
    assert.equal(r.status, 201, `${path}: ${r.text}`);
  };
  await post('/api/v1/connections', pgConnection('pg'));
  await post('/api/v1/queries', {
    name: 'nap',
    sql: 'SELECT pg_sleep(:s)::text AS slept',
    parameters: { s: 'float' },
    connection_name: 'pg',
    description: 'sleeps',
    publish: true,
  });
  // the executor is up and the plan built before the burst, so only the queue decides
  const warm = await s.call('GET', '/q/nap?s=0');
  assert.equal(warm.status, 200, warm.text);
});

after(async () => {
  await s?.stop();
});

interface Timed extends Reply {
  id: string;
  ms: number;
}

async function nap(id: string, seconds: number, t0: number): Promise<Timed> {
  const r = await s.call('GET', `/q/nap?s=${seconds}`, { headers: { 'X-Request-Id': id } });
  return { ...r, id, ms: performance.now() - t0 };
}

test('a full queue answers 503 unavailable at once; the calls that fit succeed', async () => {
  const t0 = performance.now();
  const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => nap(`burst-${i}`, SLEEP_S, t0)));
  const ok = answers.filter((a) => a.status === 200);
  const busy = answers.filter((a) => a.status === 503);
  assert.deepEqual([ok.length, busy.length], [FITS, BURST - FITS], JSON.stringify(answers.map((a) => [a.id, a.status, a.text])));

  for (const a of ok) assert.deepEqual(a.json, [{ slept: '' }]);
  // one ran while the other waited for the executor: the second finished a sleep later
  const [first, second] = ok.map((a) => a.ms).sort((x, y) => x - y);
  assert.ok(first >= SLEEP_S * 1000 * 0.9, `first admitted call took ${first} ms`);
  assert.ok(second >= first + SLEEP_S * 1000 * 0.9, `the queued call finished at ${second} ms, after the first at ${first} ms`);

  for (const a of busy) {
    assert.equal(a.json.code, 'unavailable', a.text);
    assert.equal(a.json.retry_after, 1);
    assert.equal(a.headers.get('retry-after'), '1');
    assert.equal(a.headers.get('content-type'), 'application/json');
    // the caller's request id, in the body and the header, so the refusal can be traced
    assert.equal(a.json.request_id, a.id);
    assert.equal(a.headers.get('x-request-id'), a.id);
    assert.equal(typeof a.json.error, 'string');
    // refused without waiting for the database
    assert.ok(a.ms < first, `a refusal took ${a.ms} ms, the first admitted call ${first} ms`);
  }

  // the queue drained: the server serves again, one call and then a pair that fits
  const again = await s.call('GET', '/q/nap?s=0');
  assert.equal(again.status, 200, again.text);
  const t1 = performance.now();
  const pair = await Promise.all([nap('after-0', 0.1, t1), nap('after-1', 0.1, t1)]);
  assert.deepEqual(
    pair.map((a) => a.status),
    [200, 200],
  );
});

test('refused calls are not runs: history holds only the calls that ran', async () => {
  // the recorder flushes every 50 ms in tests; wait for the burst's runs to land
  let items: Array<{ request_id: string; status: string }> = [];
  for (let i = 0; i < 40; i++) {
    const h = await s.call('GET', '/api/v1/history?query=nap&limit=100');
    assert.equal(h.status, 200, h.text);
    items = h.json.items;
    if (items.filter((x) => x.request_id.startsWith('after-')).length === 2) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const burst = items.filter((x) => x.request_id.startsWith('burst-'));
  assert.equal(burst.length, FITS, JSON.stringify(items));
  assert.ok(burst.every((x) => x.status === 'success'));
  // the 503s counted as requests, under their status
  const metrics = await s.call('GET', '/metrics', { key: null });
  const line = metrics.text
    .split('\n')
    .find((l) => l.startsWith('queryapigate_requests_total{') && l.includes('endpoint="run_named_query"') && l.includes('status="503"'));
  assert.ok(line, 'a requests_total sample for the 503s');
  assert.equal(Number(line.split(' ').pop()), BURST - FITS);
});
