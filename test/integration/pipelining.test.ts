// Pipelined HTTP/1.1 (issue 20), several requests in one TCP write on one connection, in both
// executor modes. uWS answers pipelined requests only while each is answered at once (its parser
// runs on); a request that arrives while an earlier one is still unanswered makes it close the
// connection, answering neither (it denies async pipelining by design, ARCHITECTURE.md "HTTP
// requests uWS does not answer"). What the gateway holds to: the close is at once, never a hang, and
// a request with a body (a write) pipelined so never runs, so a client's retry is its only run.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type RawReply, rawExchangeAll, requestBytes } from '../rawHttp.js';
import { ADMIN_KEY, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const get = (target: string, id: string, key = ADMIN_KEY) =>
  requestBytes({
    method: 'GET',
    target,
    headers: [
      ['Host', 'localhost'],
      ['X-API-Key', key],
      ['X-Request-Id', id],
    ],
  });
const post = (target: string, id: string, body: unknown) =>
  requestBytes({
    method: 'POST',
    target,
    headers: [
      ['Host', 'localhost'],
      ['X-API-Key', ADMIN_KEY],
      ['X-Request-Id', id],
      ['Content-Type', 'application/json'],
    ],
    body: Buffer.from(JSON.stringify(body)),
  });
const ids = (replies: RawReply[]) => replies.map((r) => r.headers.get('x-request-id'));
const json = (r: RawReply) => JSON.parse(r.body.toString('utf8'));

for (const workers of ['0', '1']) {
  describe(`pipelined requests, QUERYAPIGATE_WORKERS=${workers}`, () => {
    let s: TestServer;
    let pg: Awaited<ReturnType<typeof scratchDatabase>>;
    let port: number;
    before(async () => {
      s = await startTestServer({ QUERYAPIGATE_WORKERS: workers, QUERYAPIGATE_ALLOW_WRITES: '1' });
      port = Number(new URL(s.url).port);
      pg = await scratchDatabase('qag_pipelining');
      await pg.sql.unsafe('CREATE TABLE hits (n int)');
      const add = async (path: string, body: unknown) => assert.equal((await s.call('POST', path, { body })).status, 201);
      await add('/api/v1/connections', { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' });
      await add('/api/v1/queries', { name: 'slow', connection_name: 'pg', description: 'slow', publish: true, sql: 'SELECT 1 AS n FROM pg_sleep(0.3)' });
      await add('/api/v1/queries', {
        name: 'echo',
        connection_name: 'pg',
        description: 'echo',
        publish: true,
        sql: 'SELECT CAST(:n AS int) AS n',
        parameters: { n: 'int' },
      });
      await add('/api/v1/queries', {
        name: 'hit',
        connection_name: 'pg',
        description: 'a write',
        publish: true,
        sql: 'INSERT INTO hits (n) VALUES (:n)',
        parameters: { n: 'int' },
      });
    });
    after(async () => {
      await s?.stop();
      await pg?.drop();
    });

    test('answers the server has at once are pipelined: /health, /openapi.json and /health again, in order', async () => {
      const bytes = Buffer.concat([get('/health', 'h-1'), get('/health', 'h-2'), get('/api/v1/nowhere', 'h-404'), get('/health', 'h-3')]);
      const replies = await rawExchangeAll(port, bytes, 4);
      assert.deepEqual(ids(replies), ['h-1', 'h-2', 'h-404', 'h-3']);
      assert.deepEqual(
        replies.map((r) => r.status),
        [200, 200, 404, 200],
      );
    });

    test('a request pipelined behind a /q/ call not yet answered: uWS closes the connection at once, answering neither', async () => {
      for (const pair of [
        [get('/q/slow', 'c-slow'), get('/q/echo?n=1', 'c-1')],
        [get('/q/echo?n=1', 'c-2'), get('/health', 'c-health')],
        [get('/q/echo?n=1', 'c-3'), post('/api/v1/queries/echo/validate', 'c-validate', {})],
      ]) {
        const t0 = performance.now();
        await assert.rejects(rawExchangeAll(port, Buffer.concat(pair), 2, { timeoutMs: 5000 }), /connection closed: 0 of 2 answers/);
        assert.ok(performance.now() - t0 < 4000, 'closed, not left hanging');
      }
      // The same calls, one after the other on their own, are served.
      assert.deepEqual(json((await rawExchangeAll(port, get('/q/echo?n=5', 'c-alone'), 1))[0]), [{ n: 5 }]);
    });

    test('pipelined writes: the connection is closed before any of them runs, so a retry runs each once', async () => {
      const n = 1000 + Number(workers);
      const writes = Buffer.concat(Array.from({ length: 5 }, (_, i) => post(`/q/hit?n=${n}`, `w-${i}`, {})));
      await assert.rejects(rawExchangeAll(port, Buffer.concat([writes, get('/q/echo?n=9', 'w-after')]), 6), /connection closed/);
      await assert.rejects(rawExchangeAll(port, Buffer.concat([post(`/q/hit?n=${n}`, 'w-a', {}), get('/health', 'w-h')]), 2), /connection closed/);
      await new Promise((r) => setTimeout(r, 300)); // anything that had started would have written by now
      const count = async () => (await pg.sql`SELECT count(*)::int AS c FROM hits WHERE n = ${n}`)[0].c;
      assert.equal(await count(), 0, 'nothing ran');
      for (let i = 0; i < 5; i++) {
        const [r] = await rawExchangeAll(port, post(`/q/hit?n=${n}`, `r-${i}`, {}), 1);
        assert.equal(r.status, 200, r.body.toString());
      }
      assert.equal(await count(), 5, 'five retries, five runs');
    });
  });
}
