// Mistakes caught when they are made, not at call time: what a saved query and a key must pass when
// saved (on PostgreSQL, MariaDB and SQLite connections), POST /api/v1/queries/validate, the 403 for a
// query a key is not granted, readable body messages, and the start-up warning about unknown variables.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ADMIN_KEY, request, startProcess } from '../helpers.js';

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
