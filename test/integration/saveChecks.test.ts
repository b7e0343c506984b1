// Mistakes caught when they are made, not at call time: what a saved query and a key must pass when
// saved (on PostgreSQL, MariaDB and SQLite connections), POST /api/v1/queries/validate, the 403 for a
// query a key is not granted, readable body messages, and the start-up warning about unknown variables.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ADMIN_KEY, request, startProcess, startTestServer } from '../helpers.js';

test('an unknown QUERYAPIGATE_* variable is one warning line on stderr naming the closest setting; the server still starts', async () => {
  const home = mkdtempSync(join(tmpdir(), 'qag-vars-'));
  const p = startProcess({
    QUERYAPIGATE_HOME: home,
    QUERYAPIGATE_PORT: '0',
    QUERYAPIGATE_API_KEY: ADMIN_KEY,
    QUERYAPIGATE_WORKER: '0', // QUERYAPIGATE_WORKERS misspelt
    QUERYAPIGATE_HISTROY_LIMIT: 'secret-looking-value',
    QUERYAPIGATE_ZZZZ_NOTHING_LIKE_IT: '1',
  });
  let stderr = '';
  p.child.stderr.on('data', (d) => (stderr += d));
  try {
    const url = await p.listening;
    assert.equal((await request(url, 'GET', '/health')).status, 200);
    const lines = stderr.split('\n').filter((l) => l.startsWith('warning:'));
    assert.deepEqual(lines, [
      'warning: QUERYAPIGATE_HISTROY_LIMIT is not a QueryAPIGate setting and is ignored; did you mean QUERYAPIGATE_HISTORY_LIMIT?',
      'warning: QUERYAPIGATE_WORKER is not a QueryAPIGate setting and is ignored; did you mean QUERYAPIGATE_WORKERS?',
      'warning: QUERYAPIGATE_ZZZZ_NOTHING_LIKE_IT is not a QueryAPIGate setting and is ignored',
    ]);
    assert.doesNotMatch(stderr, /secret-looking-value/, 'a value is never shown');
  } finally {
    p.child.kill('SIGTERM');
    await p.exited;
    rmSync(home, { recursive: true, force: true });
  }
});

test('body problems are told in words a user reads, field first, every one at once', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  try {
    const cases: Array<[string, string, unknown, string, Record<string, string>]> = [
      ['POST', '/api/v1/queries', { name: 'q', sql: 'SELECT 1' }, 'description is required', { description: 'is required' }],
      ['POST', '/api/v1/queries', { name: 5, description: 'd', sql: 'SELECT 1' }, 'name must be text', { name: 'must be text' }],
      [
        'POST',
        '/api/v1/queries',
        { description: null, sql: '', tags: ['a', 2], cache_ttl: -1 },
        'name is required; description must be text; tags[1] must be text; sql is required; cache_ttl must be at least 0',
        { name: 'is required', description: 'must be text', sql: 'is required', 'tags[1]': 'must be text', cache_ttl: 'must be at least 0' },
      ],
      [
        'POST',
        '/api/v1/api-keys',
        { name: 'k', allow_writes: 'yes', mask: [{ column: '', action: 'blur' }] },
        'allow_writes must be true or false; mask[0].column must not be empty; mask[0].action must be hash, mask, null or drop',
        { allow_writes: 'must be true or false', 'mask[0].column': 'must not be empty', 'mask[0].action': 'must be hash, mask, null or drop' },
      ],
      ['POST', '/api/v1/connections', { name: 'c' }, 'db is required', { db: 'is required' }],
      ['POST', '/api/v1/queries/q/publish', { version: 1.5 }, 'version must be an integer', { version: 'must be an integer' }],
    ];
    for (const [method, path, body, error, errors] of cases) {
      const r = await s.call(method, path, { body });
      assert.equal(r.status, 400, `${path} ${r.text}`);
      assert.equal(r.json.code, 'invalid_body');
      assert.equal(r.json.error, error);
      assert.deepEqual(r.json.errors, errors);
      assert.doesNotMatch(r.text, /Invalid (key|type)|Expected|received/, "none of valibot's own wording");
    }
  } finally {
    await s.stop();
  }
});
