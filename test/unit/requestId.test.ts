// Request ids: the caller's X-Request-Id when it is well formed, else 12 fresh hex characters,
// drawn from a pool of random bytes refilled as it runs out.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestIdFrom } from '../../src/http/respond.js';

test('a well-formed X-Request-Id is kept; anything else gets a fresh id', () => {
  assert.equal(requestIdFrom('abc-123_x.y:z'), 'abc-123_x.y:z');
  for (const bad of ['', 'a b', 'x'.repeat(65), 'id\u00e9', '<script>']) {
    const id = requestIdFrom(bad);
    assert.match(id, /^[0-9a-f]{12}$/, `for ${JSON.stringify(bad)}`);
  }
});

test('fresh ids stay distinct across many refills of the pool', () => {
  const ids = new Set<string>();
  const n = 5000; // the pool holds 682 ids: this crosses it seven times
  for (let i = 0; i < n; i++) {
    const id = requestIdFrom('');
    assert.match(id, /^[0-9a-f]{12}$/);
    ids.add(id);
  }
  assert.equal(ids.size, n);
});
