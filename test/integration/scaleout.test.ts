// Many instances as one service (deploy/scale-out/ as processes, test/scaleoutRig.ts): three gateways
// in their own network namespaces behind haproxy, one PostgreSQL store and one Redis. Everything is
// asked through haproxy, or of each instance directly where the point is that every one agrees.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually, request, scratchDatabase } from '../helpers.js';
import { killUnderLoad, type Rig, revocationDelays, rollingRestart, sample, startRig } from '../scaleoutRig.js';

let rig: Rig;
let data: Awaited<ReturnType<typeof scratchDatabase>>;
/** Key names are new per run: Redis keeps rate-limit buckets by key name across runs. */
const run = Math.floor(Math.random() * 1e9).toString(36);

before(async () => {
  data = await scratchDatabase('qag_scale_data');
  await data.sql.unsafe('CREATE TABLE scale_items (id int PRIMARY KEY, name text NOT NULL)');
  await data.sql.unsafe("INSERT INTO scale_items SELECT i, 'item ' || i FROM generate_series(1, 1000) i");
  rig = await startRig();
  const [g1] = rig.instances;
  const ok = (r: { status: number; text: string }) => assert.ok(r.status < 300, r.text);
  ok(
    await request(g1.url, 'POST', '/api/v1/connections', {
      body: { name: 'data', db: 'postgres', host: rig.serviceHost, port: 5432, database: data.name, user: 'postgres' },
    }),
  );
  ok(
    await request(g1.url, 'POST', '/api/v1/queries', {
      body: {
        name: 'item',
        description: 'one item',
        connection_name: 'data',
        sql: 'SELECT id, name FROM scale_items WHERE id = :id',
        parameters: { id: { type: 'int', required: true } },
        publish: true,
      },
    }),
  );
  ok(
    await request(g1.url, 'POST', '/api/v1/queries', {
      body: {
        name: 'nap',
        description: 'a slow call',
        connection_name: 'data',
        sql: 'SELECT pg_sleep(0.8)::text AS slept',
        publish: true,
      },
    }),
  );
});

after(async () => {
  await rig?.close();
  await data?.drop();
});

/** A key made on `on`, granted `queries`; its secret. */
async function key(on: string, name: string, queries: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const r = await request(on, 'POST', '/api/v1/api-keys', { body: { name: `${name}_${run}`, queries, connections: [], ...extra } });
  assert.equal(r.status, 201, r.text);
  return r.json.secret;
}

const scrape = async (url: string) => (await request(url, 'GET', '/metrics', { key: null })).text;
const callsOf = (text: string, keyName: string, status?: string) =>
  sample(text, 'queryapigate_requests_total', { endpoint: 'run_named_query', key: `${keyName}_${run}`, ...(status ? { status } : {}) });

test('the topology: three instances, each at its own address, all UP behind haproxy', async () => {
  assert.equal(rig.isolation, 'netns', 'each instance in its own network namespace (run as root)');
  assert.deepEqual(await rig.states(), { gateway1: 'UP', gateway2: 'UP', gateway3: 'UP' });
  for (const g of rig.instances) assert.equal((await request(g.url, 'GET', '/health', { key: null })).status, 200);
});

test('a query made on one instance and a key made on another work on every instance, and through haproxy', async () => {
  const [g1, g2, g3] = rig.instances;
  const made = await request(g2.url, 'POST', '/api/v1/queries', {
    body: { name: 'echo', description: 'made on gateway2', connection_name: 'data', sql: "SELECT 'echo' AS said", publish: true },
  });
  assert.equal(made.status, 201, made.text);
  const secret = await key(g1.url, 'spread', ['item', 'echo']);
  for (const g of [g1, g2, g3]) {
    const item = await request(g.url, 'GET', '/q/item?id=7', { key: secret });
    assert.deepEqual([item.status, item.json], [200, [{ id: 7, name: 'item 7' }]], `${g.name}: ${item.text}`);
    assert.deepEqual((await request(g.url, 'GET', '/q/echo', { key: secret })).json, [{ said: 'echo' }], g.name);
  }
  const before = await rig.served();
  const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => request(rig.lb, 'GET', `/q/item?id=${i + 1}`, { key: secret })));
  assert.deepEqual(
    answers.map((a) => a.status),
    Array(30).fill(200),
  );
  const served = await rig.served();
  for (const g of rig.instances) assert.ok(served[g.name] > before[g.name], `haproxy sent calls to ${g.name}`);
});

// How fast is measured, not asserted (bench/scaleout.ts: 10 revocations): here, that the change notice
// does it. A fifth of the cache's TTL is far beyond any delay the notice has (tens of ms), far short of
// the 5 s a cached row would otherwise be served.
test('a key revoked on one instance is refused by all three at once, not when their metadata cache (5 s) expires', async () => {
  const { secret, delays } = await revocationDelays(rig, { name: `revoked_${run}`, queries: ['item'], path: '/q/item?id=1', giveUpMs: 6000 });
  assert.ok(Math.max(...delays) < 1000, `refused after ${delays.map((ms) => ms.toFixed(1)).join(', ')} ms`);
  const through = await Promise.all(Array.from({ length: 6 }, () => request(rig.lb, 'GET', '/q/item?id=1', { key: secret })));
  assert.deepEqual(
    through.map((a) => a.status),
    Array(6).fill(401),
  );
});

test("a key's allowed_ips meet the address haproxy saw, whatever X-Forwarded-For the caller sends (deploy/scale-out/haproxy.cfg)", async () => {
  // haproxy adds a line of its own (option forwardfor); the caller, on this host, reaches it at its own address.
  const caller = new URL(rig.lb).hostname;
  const elsewhere = await key(rig.instances[0].url, 'elsewhere', ['item'], { allowed_ips: ['203.0.113.7'] });
  const here = await key(rig.instances[1].url, 'here', ['item'], { allowed_ips: [caller] });
  for (const claimed of [null, '203.0.113.7', `198.51.100.1, 203.0.113.7`, caller]) {
    const headers: Record<string, string> = claimed === null ? {} : { 'X-Forwarded-For': claimed };
    const claims = `claiming ${claimed ?? 'nothing'}`;
    assert.equal((await request(rig.lb, 'GET', '/q/item?id=1', { key: elsewhere, headers })).status, 401, claims);
    assert.equal((await request(rig.lb, 'GET', '/q/item?id=1', { key: here, headers })).status, 200, claims);
  }
});

test('a rate limit of 20/minute admits exactly 20 calls across the three (Redis)', async () => {
  const secret = await key(rig.instances[2].url, 'limited', ['item'], { rate_limit: '20/minute' });
  const statuses: number[] = [];
  for (let wave = 0; wave < 10; wave++) {
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => request(rig.lb, 'GET', `/q/item?id=${wave * 6 + i + 1}`, { key: secret })));
    statuses.push(...answers.map((a) => a.status));
  }
  assert.equal(statuses.filter((s) => s === 200).length, 20);
  assert.equal(statuses.filter((s) => s === 429).length, 40);
  const texts = await Promise.all(rig.instances.map((g) => scrape(g.url)));
  for (const [i, t] of texts.entries()) assert.ok(callsOf(t, 'limited') > 0, `${rig.instances[i].name} answered some of the calls`);
  assert.equal(
    texts.reduce((n, t) => n + callsOf(t, 'limited', '200'), 0),
    20,
  );
});

test("each instance's /metrics counts its own calls, their sum is every call; the event log holds each run once, ids increasing", async () => {
  const secret = await key(rig.instances[0].url, 'counted', ['item']);
  const M = 90;
  const before = await rig.served();
  for (let wave = 0; wave < M / 6; wave++) {
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) => {
        const n = wave * 6 + i;
        return request(rig.lb, 'GET', `/q/item?id=${n + 1}`, { key: secret, headers: { 'X-Request-Id': `counted-${run}-${n}` } });
      }),
    );
    assert.deepEqual(
      answers.map((a) => a.status),
      Array(6).fill(200),
    );
  }
  const served = await rig.served();
  const counted = await Promise.all(rig.instances.map(async (g) => callsOf(await scrape(g.url), 'counted')));
  rig.instances.forEach((g, i) => {
    assert.ok(counted[i] > 0, `${g.name} served some`);
    assert.equal(counted[i], served[g.name] - before[g.name], `${g.name} counts exactly the calls haproxy sent it`);
  });
  assert.equal(
    counted.reduce((a, b) => a + b, 0),
    M,
  );

  const events = await eventually(
    async () =>
      (await request(rig.instances[2].url, 'GET', `/api/v1/events?key=counted_${run}&limit=1000`)).json.items as Array<{ id: number; request_id: string }>,
    (items) => items.length >= M,
  );
  assert.equal(events.length, M, 'every run once');
  assert.deepEqual(new Set(events.map((e) => e.request_id)), new Set(Array.from({ length: M }, (_, n) => `counted-${run}-${n}`)));
  for (let i = 1; i < events.length; i++) assert.ok(events[i].id > events[i - 1].id, `ids increase: ${events[i - 1].id}, ${events[i].id}`);
});

test('an instance killed with SIGKILL under load costs only the calls in flight on it; the rest are served', async () => {
  const secret = await key(rig.instances[0].url, 'killed', ['item']);
  const out = await killUnderLoad(rig, {
    key: secret,
    index: 2,
    callers: 3,
    path: (i) => `/q/item?id=${(i % 1000) + 1}`,
    body: (i) => ({ params: { id: (i % 1000) + 1 } }),
    holdMs: 800,
  });
  const summary = JSON.stringify(out);
  // A POST is never repeated (it might have written): those in flight on it fail, with the ones
  // haproxy had just sent it on a connection it kept open. GETs in flight are retried elsewhere.
  assert.deepEqual(Object.keys(out.get), ['200'], `no GET lost: ${summary}`);
  assert.ok(out.failed <= 3, `at most one POST per caller (3): ${summary}`);
  for (const f of out.failures) {
    assert.equal(f.method, 'POST', summary);
    assert.ok(f.start < 100, `sent to it as it died, not after: ${summary}`);
  }
  assert.equal(out.failedAfterDown, 0, summary);
  assert.ok(out.get['200'] > 50 && out.post['200'] > 50, `the rest are served: ${summary}`);
});

test('a rolling restart under load (SIGTERM, /health 503 while draining, calls in flight finished, exit, start) loses no call', async () => {
  const secret = await key(rig.instances[0].url, 'rolling', ['item', 'nap']);
  const out = await rollingRestart(rig, { key: secret, callers: 4, path: (i) => `/q/item?id=${(i % 1000) + 1}`, slowPath: '/q/nap' });
  const summary = JSON.stringify(out);
  assert.deepEqual(Object.keys(out.statuses), ['200'], `no call lost: ${summary}`);
  assert.ok(out.calls > 100, summary);
  for (const s of out.steps) {
    assert.equal(s.healthWhileDraining, 503, `${s.instance}: /health answers 503 while draining`);
    assert.equal(s.inFlight, 200, `${s.instance}: the call in flight finished`);
    assert.equal(s.exitCode, 0, s.instance);
  }
  assert.deepEqual(await rig.states(), { gateway1: 'UP', gateway2: 'UP', gateway3: 'UP' });
});
