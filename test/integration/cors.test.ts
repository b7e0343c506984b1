// CORS for browser callers (QUERYAPIGATE_CORS_ORIGINS): preflights answered by the acceptor before
// any key or limit, the headers an answer to an allowed origin carries, nothing for another origin,
// and never credentials.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type TestServer } from '../helpers.js';

const APP = 'https://app.example.com';

/** A browser's preflight for a call with a key. */
const preflight = (s: TestServer, path: string, origin: string) =>
  s.call('OPTIONS', path, {
    key: null,
    headers: { Origin: origin, 'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'x-api-key' },
  });

describe('CORS with listed origins', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '1', QUERYAPIGATE_CORS_ORIGINS: `${APP}/, https://Admin.Example.com` });
  });
  after(() => s.stop());

  test('a preflight from an allowed origin: 204 with the methods, headers and max age, without a key', async () => {
    for (const path of ['/q/anything', '/execute_sql']) {
      const r = await preflight(s, path, APP);
      assert.equal(r.status, 204, `${path}: ${r.text}`);
      assert.equal(r.headers.get('access-control-allow-origin'), APP);
      assert.equal(r.headers.get('vary'), 'Origin');
      assert.equal(r.headers.get('access-control-allow-methods'), 'GET, POST, PATCH, DELETE, OPTIONS');
      assert.equal(r.headers.get('access-control-allow-headers'), 'Content-Type, X-API-Key, Authorization, X-Request-Id');
      assert.equal(r.headers.get('access-control-max-age'), '600');
      assert.equal(r.headers.get('access-control-allow-credentials'), null);
    }
    // Origins compare without case.
    assert.equal((await preflight(s, '/q/anything', 'https://admin.example.com')).headers.get('access-control-allow-origin'), 'https://admin.example.com');
  });

  test('a preflight from a refused origin: 204 and no CORS header, so the browser stops', async () => {
    for (const origin of ['https://evil.example.com', 'http://app.example.com', 'https://app.example.com:8443', 'https://app.example.com.evil.com', 'null']) {
      const r = await preflight(s, '/q/anything', origin);
      assert.equal(r.status, 204, origin);
      assert.equal(r.headers.get('access-control-allow-origin'), null, origin);
      assert.equal(r.headers.get('access-control-allow-methods'), null, origin);
    }
  });

  test("the actual call's headers: allowed origin echoed (errors too), exposed headers, nothing for others", async () => {
    const allowed = await s.call('GET', '/q/nothing_here', { headers: { Origin: APP } });
    assert.equal(allowed.status, 404);
    assert.equal(allowed.headers.get('access-control-allow-origin'), APP);
    assert.equal(allowed.headers.get('vary'), 'Origin');
    assert.match(allowed.headers.get('access-control-expose-headers') ?? '', /X-Page, X-Page-Size, X-Has-More.*X-Request-Id/);
    assert.equal(allowed.headers.get('access-control-allow-credentials'), null);
    const unauthorized = await s.call('GET', '/q/nothing_here', { key: null, headers: { Origin: APP } });
    assert.equal(unauthorized.status, 401);
    assert.equal(unauthorized.headers.get('access-control-allow-origin'), APP, 'a browser can read the 401');
    const adhoc = await s.call('POST', '/execute_sql', { key: null, headers: { Origin: APP }, body: { sql: 'SELECT 1', connection_name: 'x' } });
    assert.equal(adhoc.headers.get('access-control-allow-origin'), APP);
    const refused = await s.call('GET', '/q/nothing_here', { headers: { Origin: 'https://evil.example.com' } });
    assert.equal(refused.headers.get('access-control-allow-origin'), null);
    const none = await s.call('GET', '/q/nothing_here');
    assert.equal(none.headers.get('access-control-allow-origin'), null);
    // The management API is for administrators, not browsers elsewhere.
    assert.equal((await s.call('GET', '/api/v1/queries', { headers: { Origin: APP } })).headers.get('access-control-allow-origin'), null);
  });

  test('an OPTIONS that is not a preflight is an ordinary request', async () => {
    const r = await s.call('OPTIONS', '/q/anything', { key: null, headers: { Origin: APP } });
    assert.notEqual(r.status, 204);
    assert.equal(r.json.code, 'method_not_allowed');
  });
});

describe('CORS with *', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_CORS_ORIGINS: '*' });
  });
  after(() => s.stop());

  test('any origin gets *, never with credentials, and nothing varies by origin', async () => {
    const pre = await preflight(s, '/q/anything', 'https://anyone.example.org');
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), '*');
    assert.equal(pre.headers.get('access-control-allow-credentials'), null);
    assert.equal(pre.headers.get('vary'), null);
    const call = await s.call('GET', '/q/nothing_here', { headers: { Origin: 'https://anyone.example.org' } });
    assert.equal(call.headers.get('access-control-allow-origin'), '*');
    assert.equal(call.headers.get('access-control-allow-credentials'), null);
  });
});

describe('CORS off', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  });
  after(() => s.stop());

  test('no CORS header, and OPTIONS is not answered as a preflight', async () => {
    const pre = await preflight(s, '/q/anything', APP);
    assert.equal(pre.headers.get('access-control-allow-origin'), null);
    assert.equal(pre.json.code, 'method_not_allowed');
    assert.equal((await s.call('GET', '/q/nothing_here', { headers: { Origin: APP } })).headers.get('access-control-allow-origin'), null);
  });
});
