// The server's log lines as an operator reads them, from real server processes: the access line's
// fields (a /q/ call, an error, a management call; none for /health), JSON and text lines, level
// filtering, the slow-call WARNING, the start-up lines, and no secret anywhere in the output.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { ADMIN_KEY, eventually, request, startProcess } from '../helpers.js';

type Line = Record<string, unknown>;

interface Served {
  url: string;
  home: string;
  output(): string;
  /** SIGTERM, then the whole output (with what the shutdown logged). */
  stop(): Promise<string>;
}

/** A server process on its own home; `port` when the level hides the "listening on" line. */
async function serve(env: Record<string, string>, opts: { home?: string; port?: number } = {}): Promise<Served> {
  const home = opts.home ?? mkdtempSync(join(tmpdir(), 'qag-logs-'));
  const p = startProcess({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_PORT: String(opts.port ?? 0), QUERYAPIGATE_WORKERS: '1', ...env });
  let url: string;
  if (opts.port) {
    url = `http://127.0.0.1:${opts.port}`;
    const up = await eventually(
      () =>
        fetch(`${url}/health`).then(
          (r) => r.ok,
          () => false,
        ),
      (ok) => ok,
      15000,
    );
    assert.ok(up, `server did not start:\n${p.output()}`);
  } else url = await p.listening;
  return {
    url,
    home,
    output: p.output,
    async stop() {
      p.child.kill('SIGTERM');
      assert.equal(await p.exited, 0, p.output());
      return p.output();
    },
  };
}

const jsonLines = (out: string): Line[] =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);

/** The line of request `id`, once the acceptor's buffer is written out (every 250 ms at most). */
async function lineOf(s: Served, id: string): Promise<Line> {
  const line = await eventually(
    async () => jsonLines(s.output()).find((l) => l.request_id === id),
    (l) => l !== undefined,
  );
  assert.ok(line, `no line for ${id} in:\n${s.output()}`);
  return line;
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });

const ok = <R extends { status: number; text: string }>(r: R): R => {
  assert.ok(r.status < 300, r.text);
  return r;
};

test('JSON lines: the access line of a /q/ call, an error and a management call; none for /health', async () => {
  // No slow-call warning here: a cold first call on a busy machine can take a second.
  const s = await serve({
    QUERYAPIGATE_JSON_LOGS: '1',
    QUERYAPIGATE_API_KEY: ADMIN_KEY,
    QUERYAPIGATE_LOAD_EXAMPLES: '1',
    QUERYAPIGATE_SLOW_QUERY_THRESHOLD: '0',
  });
  try {
    const key = ok(await request(s.url, 'POST', '/api/v1/api-keys', { body: { name: 'reader', queries: ['example_film_lookup'], connections: [] } })).json
      .secret as string;
    ok(await request(s.url, 'GET', '/q/example_film_lookup?film_id=7', { key, headers: { 'X-Request-Id': 'log-q-1' } }));
    const bad = await request(s.url, 'GET', '/q/example_film_lookup?film_id=0', { key, headers: { 'X-Request-Id': 'log-err-1' } });
    assert.equal(bad.status, 400);
    ok(await request(s.url, 'GET', '/api/v1/queries', { headers: { 'X-Request-Id': 'log-api-1' } }));
    ok(await request(s.url, 'GET', '/health', { key: null, headers: { 'X-Request-Id': 'log-health-1' } }));

    const call = await lineOf(s, 'log-q-1');
    assert.deepEqual(
      { ...call, time: undefined, duration_ms: undefined },
      {
        level: 'INFO',
        time: undefined,
        logger: 'access',
        request_id: 'log-q-1',
        key: 'reader',
        method: 'GET',
        route: '/q/example_film_lookup',
        status: 200,
        duration_ms: undefined,
        message: 'request',
      },
    );
    assert.ok(typeof call.duration_ms === 'number' && call.duration_ms >= 0);
    assert.ok(!Number.isNaN(Date.parse(call.time as string)), String(call.time));

    const error = await lineOf(s, 'log-err-1');
    assert.equal(error.status, 400);
    assert.equal(error.key, 'reader');
    assert.equal(error.route, '/q/example_film_lookup', 'the query string is not logged');

    const api = await lineOf(s, 'log-api-1');
    assert.equal(api.key, 'admin');
    assert.equal(api.route, '/api/v1/queries');
    assert.equal(api.method, 'GET');

    const out = await s.stop();
    assert.ok(!out.includes('log-health-1'), 'probes are not logged');
    const lines = jsonLines(out);
    assert.equal(lines.length, out.split('\n').filter((l) => l.trim()).length, `every line is JSON:\n${out}`);
    for (const l of lines) {
      for (const field of ['time', 'level', 'logger', 'request_id', 'key', 'message']) assert.ok(field in l, `${field} in ${JSON.stringify(l)}`);
    }
    assert.ok(lines.some((l) => l.logger === 'serve' && /listening on http:\/\//.test(String(l.message))));
  } finally {
    rmSync(s.home, { recursive: true, force: true });
  }
});

test('text lines and the start-up: store, open mode warned, executors, address', async () => {
  const s = await serve({ QUERYAPIGATE_WORKERS: '2' });
  try {
    ok(await request(s.url, 'GET', '/api/v1/queries', { key: null, headers: { 'X-Request-Id': 'text-api-1' } }));
    const line = await eventually(
      async () => s.output().match(/^.*\[text-api-1 -\].*$/m)?.[0],
      (l) => l !== undefined,
    );
    assert.match(
      line ?? '',
      /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO access \[text-api-1 -\] request method=GET route=\/api\/v1\/queries status=200 duration_ms=[\d.]+$/,
    );
    const out = await s.stop();
    assert.ok(!out.split('\n').some((l) => l.startsWith('{')), 'no JSON line');
    assert.match(out, new RegExp(`Z INFO serve store: SQLite ${s.home}/queryapigate\\.db\\n`));
    assert.match(
      out,
      /Z WARNING serve mode: open - no QUERYAPIGATE_API_KEY and no API key, so every caller is an administrator\. Creating the first API key ends open mode/,
    );
    assert.match(out, /Z INFO serve executors: 2 threads \(QUERYAPIGATE_WORKERS\), 64 calls each at once; the recorder runs in a thread of its own\n/);
    assert.match(out, /Z INFO serve QueryAPIGate [\d.]+ listening on http:\/\/127\.0\.0\.1:\d+\n/);
    assert.match(out, /Z INFO serve SIGTERM: finishing calls in flight, then stopping\n/);
  } finally {
    rmSync(s.home, { recursive: true, force: true });
  }
});

test('start-up with examples: the secrets shown once, then where they went and the command that issues new ones', async () => {
  const env = { QUERYAPIGATE_API_KEY: ADMIN_KEY, QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: '0' };
  const first = await serve(env);
  try {
    const out = await first.stop();
    assert.match(out, /INFO serve Example key example-partner \(shown once\): sk_\S+ {2}queries: example_film_lookup/);
    assert.match(
      out,
      /examples: the example keys were made now and their secrets are the lines above, shown this once .*queryapigate keys rotate example-partner\n/,
    );
    assert.match(out, /INFO serve mode: admin key configured \(QUERYAPIGATE_API_KEY\)/);
    assert.match(out, /executors: none, calls run in the acceptor thread \(QUERYAPIGATE_WORKERS=0\); the recorder runs in a thread of its own\n/);
    assert.match(out, /Try: curl -H 'X-API-Key: <the example-partner secret>' 'http:\/\/127\.0\.0\.1:\d+\/q\/example_film_lookup\?film_id=7'/);
    assert.ok(!out.includes(ADMIN_KEY), 'the admin key is not printed');

    const again = await serve(env, { home: first.home });
    const second = await again.stop();
    assert.doesNotMatch(second, /sk_/, 'no secret on a later start');
    assert.match(
      second,
      /examples: the example keys exist; their secrets were shown once when they were made .*A new secret for one: queryapigate keys rotate example-partner\n/,
    );
  } finally {
    rmSync(first.home, { recursive: true, force: true });
  }
});

test('QUERYAPIGATE_LOG_LEVEL=warning: no access line for a fast call, a WARNING for a call over QUERYAPIGATE_SLOW_QUERY_THRESHOLD', async () => {
  const s = await serve(
    { QUERYAPIGATE_JSON_LOGS: '1', QUERYAPIGATE_LOG_LEVEL: 'warning', QUERYAPIGATE_SLOW_QUERY_THRESHOLD: '0.25', QUERYAPIGATE_API_KEY: ADMIN_KEY },
    { port: await freePort() },
  );
  try {
    ok(
      await request(s.url, 'POST', '/api/v1/connections', {
        body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: 'postgres', user: 'postgres' },
        headers: { 'X-Request-Id': 'lvl-api-1' },
      }),
    );
    for (const [name, sql] of [
      ['nap', 'SELECT pg_sleep(0.4)::text AS slept'],
      ['quick', 'SELECT 1 AS one'],
    ]) {
      ok(await request(s.url, 'POST', '/api/v1/queries', { body: { name, description: name, connection_name: 'pg', sql, publish: true } }));
    }
    ok(await request(s.url, 'GET', '/q/quick')); // the connection is opened
    ok(await request(s.url, 'GET', '/q/quick', { headers: { 'X-Request-Id': 'lvl-fast-1' } }));
    ok(await request(s.url, 'GET', '/q/nap', { headers: { 'X-Request-Id': 'lvl-slow-1' } }));

    const slow = await lineOf(s, 'lvl-slow-1');
    assert.equal(slow.level, 'WARNING');
    assert.equal(slow.logger, 'access');
    assert.equal(slow.status, 200);
    assert.equal(slow.route, '/q/nap');
    assert.ok((slow.duration_ms as number) >= 400, String(slow.duration_ms));
    assert.match(String(slow.message), /^slow call: took longer than QUERYAPIGATE_SLOW_QUERY_THRESHOLD \(0\.25 s\)$/);

    const out = await s.stop();
    const lines = jsonLines(out);
    // A fast call's line is INFO, filtered (a busy machine may make even this call slow: then it is a WARNING).
    const fast = lines.find((l) => l.request_id === 'lvl-fast-1');
    assert.ok(fast === undefined || fast.level === 'WARNING', JSON.stringify(fast));
    assert.ok(!out.includes('lvl-api-1'), 'so is a management call');
    assert.deepEqual(
      lines.filter((l) => l.level === 'INFO'),
      [],
      'no INFO line at all (the start-up lines neither)',
    );
    assert.ok(lines.some((l) => l.level === 'WARNING' && l.logger === 'access'));
  } finally {
    rmSync(s.home, { recursive: true, force: true });
  }
});

test('QUERYAPIGATE_SLOW_QUERY_THRESHOLD=0 turns the warning off; a bad log level stops the start naming the choices', async () => {
  assert.equal(loadConfig({ QUERYAPIGATE_SLOW_QUERY_THRESHOLD: '0' }).slowQueryThreshold, 0);
  assert.equal(loadConfig({}).slowQueryThreshold, 1);
  assert.equal(loadConfig({ QUERYAPIGATE_LOG_LEVEL: ' WARNING ' }).logLevel, 'warning');
  assert.throws(() => loadConfig({ QUERYAPIGATE_LOG_LEVEL: 'verbose' }), /QUERYAPIGATE_LOG_LEVEL="verbose": must be one of debug, info, warning, error, off/);

  const s = await serve({ QUERYAPIGATE_JSON_LOGS: '1', QUERYAPIGATE_SLOW_QUERY_THRESHOLD: '0', QUERYAPIGATE_API_KEY: ADMIN_KEY });
  try {
    ok(
      await request(s.url, 'POST', '/api/v1/connections', {
        body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: 'postgres', user: 'postgres' },
      }),
    );
    ok(
      await request(s.url, 'POST', '/api/v1/queries', {
        body: { name: 'nap', description: 'nap', connection_name: 'pg', sql: 'SELECT pg_sleep(0.3)::text AS slept', publish: true },
      }),
    );
    ok(await request(s.url, 'GET', '/q/nap', { headers: { 'X-Request-Id': 'off-slow-1' } }));
    const line = await lineOf(s, 'off-slow-1');
    assert.equal(line.level, 'INFO');
    assert.equal(line.message, 'request');
  } finally {
    await s.stop();
    rmSync(s.home, { recursive: true, force: true });
  }
});

for (const format of ['text', 'json'] as const) {
  test(`no secret in any line (${format}): admin key, key secrets, a connection password, secrets in headers and query strings`, async () => {
    const fresh = () => randomBytes(9).toString('hex');
    const adminKey = `admin-${fresh()}`;
    const password = `pw-${fresh()}`;
    const newPassword = `pw2-${fresh()}`;
    const wrongKey = `sk_wrong${fresh()}`;
    const s = await serve({ QUERYAPIGATE_API_KEY: adminKey, QUERYAPIGATE_LOG_LEVEL: 'debug', QUERYAPIGATE_JSON_LOGS: format === 'json' ? '1' : '0' });
    const secrets = [adminKey, password, newPassword, wrongKey];
    try {
      const admin = { key: adminKey };
      // PostgreSQL trusts local connections here: the password is sent and ignored.
      ok(
        await request(s.url, 'POST', '/api/v1/connections', {
          ...admin,
          body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: 'postgres', user: 'postgres', password },
        }),
      );
      ok(
        await request(s.url, 'POST', '/api/v1/queries', {
          ...admin,
          body: { name: 'one', description: 'one', connection_name: 'pg', sql: 'SELECT 1 AS one', publish: true },
        }),
      );
      const made = ok(await request(s.url, 'POST', '/api/v1/api-keys', { ...admin, body: { name: 'k1', queries: ['one'], connections: [] } })).json
        .secret as string;
      const rotated = ok(await request(s.url, 'POST', '/api/v1/api-keys/k1/rotate', { ...admin, body: {} })).json.secret as string;
      const other = ok(await request(s.url, 'POST', '/api/v1/api-keys', { ...admin, body: { name: 'k2', queries: ['one'], connections: [] } })).json
        .secret as string;
      secrets.push(made, rotated, other);
      ok(await request(s.url, 'PATCH', '/api/v1/connections/pg', { ...admin, body: { password: newPassword } }));

      ok(await request(s.url, 'GET', '/q/one', { key: rotated, headers: { 'X-Request-Id': 'secret-q-1' } }));
      await request(s.url, 'GET', `/q/one?api_key=${made}&password=${password}&token=${adminKey}`, { key: other });
      await request(s.url, 'GET', `/q/one?key=${rotated}`, { key: wrongKey });
      await request(s.url, 'GET', `/api/v1/queries?api_key=${adminKey}`, { key: wrongKey });
      await request(s.url, 'GET', `/catalog?password=${newPassword}`, { key: other });
      await request(s.url, 'GET', `/nowhere?secret=${made}`, { key: adminKey, headers: { Authorization: `Bearer ${other}` } });
      await request(s.url, 'DELETE', '/api/v1/api-keys/k2', { key: adminKey });
      await request(s.url, 'GET', '/q/one', { key: other }); // a revoked key's secret

      await eventually(
        async () => s.output().includes('secret-q-1'),
        (seen) => seen,
      );
      const out = await s.stop();
      const accessLines = out.split('\n').filter((l) => (format === 'json' ? l.includes('"logger":"access"') : / (INFO|WARNING) access /.test(l)));
      assert.ok(accessLines.length >= 14, `the calls were logged:\n${out}`);
      for (const secret of secrets) assert.ok(!out.includes(secret), `a secret (${secret.slice(0, 6)}...) appears in the output:\n${out}`);
    } finally {
      rmSync(s.home, { recursive: true, force: true });
    }
  });
}
