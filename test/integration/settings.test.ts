// GET /api/v1/settings on a real server: every setting in its group, the value it runs with and its
// source, secrets only as "configured"; administrators only.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { settingList } from '../../src/config.js';
import { ADMIN_KEY, startTestServer } from '../helpers.js';

const MASK_KEY = 'a-mask-key-of-some-length';

test('GET /api/v1/settings lists every setting with its value and source, never a secret, to the admin only', async () => {
  const s = await startTestServer({ QUERYAPIGATE_MAX_PAGE_SIZE: '77', QUERYAPIGATE_MASK_KEY: MASK_KEY, QUERYAPIGATE_WORKERS: '0' });
  try {
    const r = await s.call('GET', '/api/v1/settings');
    assert.equal(r.status, 200);
    const rows = new Map<string, Record<string, unknown>>();
    for (const g of r.json.items) {
      assert.ok(g.id && g.title && g.description, 'each group has an id, a title and a description');
      for (const row of g.rows) rows.set(row.env, row);
    }
    assert.deepEqual(
      [...rows.keys()].sort(),
      settingList()
        .map((x) => x.env)
        .sort(),
      'every setting, once',
    );
    assert.deepEqual(pick(rows.get('QUERYAPIGATE_MAX_PAGE_SIZE')!), { value: 77, source: 'env', env_value: '77', default: '1000' });
    assert.deepEqual(pick(rows.get('QUERYAPIGATE_POOL_SIZE')!), { value: 8, source: 'default', env_value: null, default: '8' });
    assert.deepEqual(pick(rows.get('QUERYAPIGATE_API_KEY')!), { value: 'configured', source: 'env', env_value: null, default: null });
    assert.deepEqual(pick(rows.get('QUERYAPIGATE_MASK_KEY')!), { value: 'configured', source: 'env', env_value: null, default: null });
    assert.deepEqual(pick(rows.get('QUERYAPIGATE_REDIS_URL')!), { value: null, source: 'default', env_value: null, default: null });
    assert.equal(rows.get('QUERYAPIGATE_HOME')!.value, s.home, 'the folder as used');
    for (const row of rows.values()) assert.ok(typeof row.label === 'string' && typeof row.description === 'string' && row.experimental === false);
    assert.ok(!r.text.includes(ADMIN_KEY) && !r.text.includes(MASK_KEY), 'no secret in the answer');

    assert.equal((await s.call('GET', '/api/v1/settings', { key: null })).status, 401);
    const made = await s.call('POST', '/api/v1/api-keys', { body: { name: 'scoped', queries: [] } });
    assert.equal(made.status, 201, made.text);
    assert.equal((await s.call('GET', '/api/v1/settings', { key: made.json.secret })).status, 403, 'a scoped key is not an administrator');
  } finally {
    await s.stop();
  }
});

function pick(row: Record<string, unknown>) {
  return { value: row.value, source: row.source, env_value: row.env_value, default: row.default };
}
