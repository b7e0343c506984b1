// Key lifecycle and limits end to end: rotation with grace, a key limit exact across executor
// threads and across two processes sharing Redis, the server-wide limit per client behind a proxy.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ADMIN_KEY, request, scratchDatabase, startProcess, startTestServer, type TestServer } from '../helpers.js';
import { rawExchange, requestBytes } from '../rawHttp.js';

async function keyFor(s: Pick<TestServer, 'call'>, body: Record<string, unknown>): Promise<string> {
  const r = await s.call('POST', '/api/v1/api-keys', { body: { queries: ['example_film_lookup'], connections: [], ...body } });
  assert.equal(r.status, 201, r.text);
  return r.json.secret;
}

test('rotation with grace: both secrets work, then only the new one; GET shows the grace', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_METADATA_CACHE_TTL: '30' });
  try {
    const old = await keyFor(s, { name: 'rotating' });
    const call = (key: string) => s.call('GET', '/q/example_film_lookup?film_id=1', { key }).then((r) => r.status);
    assert.equal(await call(old), 200);
    const rotated = await s.call('POST', '/api/v1/api-keys/rotating/rotate', { body: { grace_seconds: 1 } });
    assert.equal(rotated.status, 200, rotated.text);
    assert.equal(rotated.headers.get('cache-control'), 'no-store');
    const fresh = rotated.json.secret;
    assert.notEqual(fresh, old);
    assert.ok(rotated.json.previous_secret_valid_until);
    assert.deepEqual([await call(old), await call(fresh)], [200, 200]);
    await new Promise((r) => setTimeout(r, 1100));
    assert.deepEqual([await call(old), await call(fresh)], [401, 200], 'after the grace, the old secret is refused (cache on)');
    assert.equal((await s.call('GET', '/api/v1/api-keys/rotating')).json.previous_secret_valid_until, null);
    const seen = await s.call('GET', '/api/v1/api-keys/rotating');
    assert.match(seen.json.last_used_at ?? '', /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/, 'last_used_at is written');
    const h = await s.call('GET', '/api/v1/history?key=rotating');
    assert.equal(h.json.items.length, 4, 'both secrets are the same key in history');
    const now = await s.call('POST', '/api/v1/api-keys/rotating/rotate');
    assert.equal(await call(fresh), 401, 'without grace the old secret stops at once');
    assert.equal(await call(now.json.secret), 200);
  } finally {
    await s.stop();
  }
});

test('a key limit of N admits exactly N calls across 4 executor threads', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '4', QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  try {
    const N = 25;
    const key = await keyFor(s, { name: 'limited', rate_limit: `${N}/hour` });
    const answers = await Promise.all(Array.from({ length: 4 * N }, () => s.call('GET', '/q/example_film_lookup?film_id=2', { key })));
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    assert.equal(ok.length, N);
    assert.equal(refused.length, 3 * N);
    assert.equal(refused[0].json.code, 'rate_limited');
    assert.ok(Number(refused[0].headers.get('retry-after')) >= 1);
    assert.equal(refused[0].headers.get('x-ratelimit-key-limit'), String(N));
    assert.equal(refused[0].headers.get('x-ratelimit-key-remaining'), '0');
    assert.equal(ok[0].headers.get('x-ratelimit-key-limit'), String(N));
    // A per-query limit counts separately, on top.
    const perQuery = await keyFor(s, { name: 'per-query', rate_limits: { example_film_lookup: '3/minute' } });
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await s.call('GET', '/q/example_film_lookup?film_id=2', { key: perQuery })).status);
    assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
  } finally {
    await s.stop();
  }
});

test('a key limit is shared by two processes through Redis', async () => {
  const store = await scratchDatabase('qag_limits_store');
  const env = { QUERYAPIGATE_DATABASE_URL: store.url, QUERYAPIGATE_REDIS_URL: 'redis://127.0.0.1:6379', QUERYAPIGATE_WORKERS: '1' };
  const a = await startTestServer({ ...env, QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  const b = startProcess({ ...env, QUERYAPIGATE_HOME: a.home, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_API_KEY: ADMIN_KEY });
  try {
    const bUrl = await b.listening;
    const N = 20;
    const key = await keyFor(a, { name: `shared-${process.pid}-${Date.now()}`, rate_limit: `${N}/hour` });
    const calls = Array.from({ length: 3 * N }, (_, i) =>
      i % 2 ? request(bUrl, 'GET', '/q/example_film_lookup?film_id=3', { key }) : a.call('GET', '/q/example_film_lookup?film_id=3', { key }),
    );
    const statuses = (await Promise.all(calls)).map((r) => r.status);
    const fallbacks = async (url: string) =>
      (await request(url, 'GET', '/metrics', { key: null })).text.match(/queryapigate_rate_limit_fallbacks_total (\d+)/)?.[1];
    assert.deepEqual([await fallbacks(a.url), await fallbacks(bUrl)], ['0', '0'], 'both processes counted in Redis');
    assert.equal(statuses.filter((x) => x === 200).length, N);
    assert.equal(statuses.filter((x) => x === 429).length, 2 * N);
  } finally {
    b.child.kill('SIGTERM');
    await b.exited;
    await a.stop();
    await store.drop();
  }
});

test('the server-wide limit is per client address, before authentication, behind a trusted proxy', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_RATE_LIMIT: '3/minute', QUERYAPIGATE_TRUST_PROXY: '1' });
  try {
    const from = (ip: string, key: string | null) => s.call('GET', '/q/anything', { key, headers: { 'X-Forwarded-For': ip } });
    const first = await Promise.all([1, 2, 3, 4].map(() => from('203.0.113.1', 'sk_wrong')));
    assert.deepEqual(
      first.map((r) => r.status),
      [401, 401, 401, 429],
      'key guessing is throttled too',
    );
    assert.equal(first[3].json.code, 'rate_limited');
    assert.equal(first[3].headers.get('x-ratelimit-limit'), '3');
    assert.equal(first[0].headers.get('x-ratelimit-remaining'), '2');
    assert.ok(first[3].headers.get('retry-after'));
    assert.equal((await from('203.0.113.2', 'sk_wrong')).status, 401, 'another client has its own bucket');
    assert.equal((await s.call('GET', '/health', { key: null, headers: { 'X-Forwarded-For': '203.0.113.1' } })).status, 200, '/health is never limited');
  } finally {
    await s.stop();
  }
});

test('behind a trusted proxy the address is read from every X-Forwarded-For line, not the first (the caller may write that one)', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_TRUST_PROXY: '1' });
  try {
    const made = await s.call('POST', '/api/v1/api-keys', { body: { name: 'office', queries: '*', allowed_ips: ['203.0.113.7'] } });
    assert.equal(made.status, 201, made.text);
    const port = Number(new URL(s.url).port);
    /** The status of a call whose X-Forwarded-For lines are `lines`, as a proxy that adds its own line sends them. */
    const through = async (...lines: string[]) => {
      const headers: Array<[string, string]> = [['Host', 'x'], ['X-API-Key', made.json.secret], ...lines.map((l): [string, string] => ['X-Forwarded-For', l])];
      return (await rawExchange(port, requestBytes({ method: 'GET', target: '/q/none', headers }))).status;
    };
    // Past the address check, the call meets a query that does not exist.
    assert.equal(await through('203.0.113.7'), 404);
    assert.equal(await through('198.51.100.1, 203.0.113.7'), 404);
    assert.equal(await through('198.51.100.1', '203.0.113.7'), 404, 'the proxy saw the allowed address');
    assert.equal(await through('203.0.113.7', '198.51.100.1'), 401, 'the caller claimed the allowed address; the proxy saw another');
    assert.equal(await through('203.0.113.7', '198.51.100.1, 198.51.100.2'), 401);
  } finally {
    await s.stop();
  }
});
