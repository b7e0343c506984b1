// Run recording end to end: every run becomes an event with an increasing id; /events streams them
// per key and resumes after Last-Event-ID exactly once; the stream cap; drops counted above capacity.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

/** An event as /events sends it: the id, and the data line's JSON (src/http/events.ts, eventPayload). */
interface RunEvent {
  id: number;
  data: {
    type: 'execution' | 'adhoc_execution';
    filename?: string;
    version?: number | null;
    connection_name: string | null;
    entry: { key_name: string | null } & Record<string, unknown>;
  };
}

/** Reads an SSE stream until `until` says stop; returns the parsed events. */
async function readEvents(s: TestServer, key: string, until: (events: RunEvent[]) => boolean, headers: Record<string, string> = {}) {
  const ctl = new AbortController();
  const res = await fetch(`${s.url}/events`, { headers: { 'X-API-Key': key, ...headers }, signal: ctl.signal });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const events: RunEvent[] = [];
  const reader = res.body!.getReader();
  let buf = '';
  const decoder = new TextDecoder();
  const deadline = setTimeout(() => ctl.abort(), 8000);
  try {
    while (!until(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      for (let end = buf.indexOf('\n\n'); end !== -1; end = buf.indexOf('\n\n')) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const id = block.match(/^id: (\d+)$/m);
        const data = block.match(/^data: (.*)$/m);
        if (id && data) events.push({ id: Number(id[1]), data: JSON.parse(data[1]) });
      }
    }
  } catch {
    /* aborted */
  } finally {
    clearTimeout(deadline);
    ctl.abort();
  }
  return events;
}

test('/events: per-key view, resume after Last-Event-ID exactly once, stream cap', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '2', QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_EVENTS_MAX_STREAMS: '2' });
  try {
    const mk = async (name: string) =>
      (await s.call('POST', '/api/v1/api-keys', { body: { name, queries: ['example_film_lookup'], connections: [] } })).json.secret;
    const a = await mk('a');
    const b = await mk('b');
    const call = (key: string, i: number) => s.call('GET', `/q/example_film_lookup?film_id=${(i % 50) + 1}`, { key, headers: { 'X-Request-Id': `ev-${i}` } });

    // A live admin stream and a live stream for key a, while both keys call.
    const adminLive = readEvents(s, 'test-admin-key', (e) => e.length >= 20);
    const aLive = readEvents(s, a, (e) => e.length >= 10);
    await new Promise((r) => setTimeout(r, 200));
    const third = await fetch(`${s.url}/events`, { headers: { 'X-API-Key': b } });
    assert.equal(third.status, 503);
    assert.equal((await third.json()).code, 'too_many_streams');
    assert.equal(third.headers.get('retry-after'), '5');
    for (let i = 0; i < 10; i++) {
      await call(a, i);
      await call(b, 100 + i);
    }
    const all = await adminLive;
    const mine = await aLive;
    assert.equal(all.length, 20);
    assert.deepEqual(
      mine.map((e) => e.data.entry.key_name),
      Array(10).fill('a'),
    );
    for (let i = 1; i < all.length; i++) assert.ok(all[i].id > all[i - 1].id, 'ids increase');
    assert.equal(all[0].data.type, 'execution');
    assert.equal(all[0].data.filename, 'example_film_lookup');
    assert.equal(all[0].data.version, 1);
    assert.equal(all[0].data.connection_name, 'examples');

    // Resume after the 5th event: the rest, exactly once, then live.
    const resumeFrom = all[4].id;
    const resumed = readEvents(s, 'test-admin-key', (e) => e.length >= 25, { 'Last-Event-ID': String(resumeFrom) });
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 0; i < 10; i++) await call(a, 200 + i);
    const got = await resumed;
    assert.equal(got.length, 25);
    assert.deepEqual(
      got.slice(0, 15).map((e) => e.id),
      all.slice(5).map((e) => e.id),
    );
    assert.equal(new Set(got.map((e) => e.id)).size, 25, 'no event twice');

    // Every run is in the event log, paged by id.
    const page = await s.call('GET', `/api/v1/events?after=0&limit=1000&key=a`);
    assert.equal(page.json.items.length, 20);
    assert.equal(page.json.items[0].key_name, 'a');
    const byVersion = await s.call('GET', '/api/v1/events?version=1');
    assert.equal(byVersion.status, 400);
    assert.equal(byVersion.json.code, 'invalid_filter');
  } finally {
    await s.stop();
  }
});

test('with a PostgreSQL store (the recorder on the acceptor thread), runs reach a stream live, again after every stream closed', async () => {
  const store = await scratchDatabase('qag_events_live');
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_DATABASE_URL: store.url });
  try {
    const call = (i: number) => s.call('GET', `/q/example_film_lookup?film_id=${i + 1}`, { headers: { 'X-Request-Id': `live-${i}` } });
    for (const round of [0, 1]) {
      const live = readEvents(s, 'test-admin-key', (e) => e.length >= 5);
      await new Promise((r) => setTimeout(r, 200));
      for (let i = 0; i < 5; i++) await call(round * 10 + i);
      const got = await live;
      assert.deepEqual(
        got.map((e) => e.data.entry.request_id),
        Array.from({ length: 5 }, (_, i) => `live-${round * 10 + i}`),
        `round ${round}`,
      );
      // Runs made while nobody follows are still in the event log.
      await call(round * 10 + 5);
      await eventually(
        async () => (await s.call('GET', '/api/v1/events?after=0&limit=100')).json.items as unknown[],
        (items) => items.length === round * 6 + 6,
      );
    }
  } finally {
    await s.stop();
    await store.drop();
  }
});

test('no run lost below capacity; runs above it are dropped and counted', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '2', QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  try {
    const N = 300;
    const answers = await Promise.all(Array.from({ length: N }, (_, i) => s.call('GET', `/q/example_film_lookup?film_id=${(i % 60) + 1}`)));
    assert.ok(answers.every((r) => r.status === 200));
    const events = await eventually(
      () => s.call('GET', '/api/v1/events?limit=1000'),
      (r) => r.json.items.length >= N,
    );
    assert.equal(events.json.items.length, N, 'one event per call');
    assert.equal(new Set(events.json.items.map((e: { id: number }) => e.id)).size, N);
  } finally {
    await s.stop();
  }
  const tight = await startTestServer({
    QUERYAPIGATE_WORKERS: '1',
    QUERYAPIGATE_LOAD_EXAMPLES: '1',
    QUERYAPIGATE_HISTORY_MAX_PENDING: '5',
    QUERYAPIGATE_HISTORY_FLUSH_INTERVAL: '5',
  });
  try {
    const N = 200;
    await Promise.all(Array.from({ length: N }, (_, i) => tight.call('GET', `/q/example_film_lookup?film_id=${(i % 60) + 1}`)));
    const count = (text: string, outcome: string) =>
      Number(text.match(new RegExp(`queryapigate_history_runs_total\\{outcome="${outcome}"\\} (\\d+)`))?.[1] ?? 0);
    const m = await eventually(
      async () => (await tight.call('GET', '/metrics', { key: null })).text,
      (t) => count(t, 'recorded') + count(t, 'dropped') >= N,
      8000,
    );
    assert.ok(count(m, 'dropped') > 0, 'some runs were dropped');
    assert.equal(count(m, 'recorded') + count(m, 'dropped'), N, 'every run is either recorded or counted as dropped');
  } finally {
    await tight.stop();
  }
});
