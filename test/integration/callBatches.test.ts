// Calls cross to the executors in batches (http/callBatches.ts, call/answerBatches.ts): every call
// taken in one turn of the acceptor's loop goes over as one batch. These tests hold what a caller must
// never notice: each call gets its own answer (its own request id and its own rows), and a fast call
// handed over beside a slow one is answered as soon as it is done, not when the batch is.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { pgConnection, startTestServer, type TestServer } from '../helpers.js';

const SLOW_S = 0.8;
let s: TestServer;

before(async () => {
  // A connection per call: a data source pipelines calls on its connections (calls arriving together
  // share one, QUERYAPIGATE_POOL_PIPELINE), so a fast call could wait behind the slow one in PostgreSQL
  // itself, which is not what is tested here.
  s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_POOL_SIZE: '32', QUERYAPIGATE_POOL_PIPELINE: '1' });
  const post = async (path: string, body: unknown) => {
    const r = await s.call('POST', path, { body });
    assert.equal(r.status, 201, `${path}: ${r.text}`);
  };
  await post('/api/v1/connections', pgConnection('pg'));
  await post('/api/v1/queries', {
    name: 'echo',
    sql: 'SELECT :n::int AS n, pg_sleep(:s)::text AS slept',
    parameters: { n: 'int', s: 'float' },
    connection_name: 'pg',
    description: 'answers its own n after s seconds',
    publish: true,
  });
  assert.equal((await s.call('GET', '/q/echo?n=0&s=0')).status, 200);
});

after(async () => {
  await s?.stop();
});

test('calls handed over together are answered each on its own, the fast ones without waiting for the slow one', async () => {
  let t0 = performance.now();
  const call = async (n: number, seconds: number) => {
    const id = `batch-${n}`;
    const r = await s.call('GET', `/q/echo?n=${n}&s=${seconds}`, { headers: { 'X-Request-Id': id } });
    return { n, id, r, ms: performance.now() - t0 };
  };
  // A first wave opens a kept-alive connection per caller; the second is written on them at once, so
  // its requests reach the acceptor in one turn and cross together.
  const wave = () => Promise.all([call(0, SLOW_S), ...Array.from({ length: 24 }, (_, i) => call(i + 1, 0))]);
  await wave();
  t0 = performance.now();
  const all = await wave();
  for (const { n, id, r } of all) {
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, [{ n, slept: '' }], `call ${n} got another call's rows`);
    assert.equal(r.headers.get('x-request-id'), id);
  }
  const [slow, ...fast] = all;
  assert.ok(slow.ms >= SLOW_S * 1000 * 0.9, `the slow call took ${slow.ms} ms`);
  const latest = Math.max(...fast.map((f) => f.ms));
  assert.ok(latest < slow.ms - 200, `a fast call took ${latest} ms, the slow one ${slow.ms} ms`);
});

test('many rounds of concurrent calls: every answer is its own', async () => {
  for (let round = 0; round < 5; round++) {
    const all = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const n = round * 100 + i;
        const r = await s.call('GET', `/q/echo?n=${n}&s=0`);
        return { n, r };
      }),
    );
    for (const { n, r } of all) assert.deepEqual(r.json, [{ n, slept: '' }]);
  }
});
