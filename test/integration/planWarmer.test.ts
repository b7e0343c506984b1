// Plans are made before the first call: each executor plans every published version when it starts
// and again after each change, off the calls' path (src/call/planWarmer.ts). Seen from outside in
// queryapigate_cache_entries{cache="plan"}, inline and with an executor thread.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, startTestServer, type TestServer } from '../helpers.js';

const planned = async (s: TestServer): Promise<number> => {
  const text = (await s.call('GET', '/metrics', { key: null })).text;
  return Number(text.match(/^queryapigate_cache_entries\{cache="plan"\} (\d+)/m)?.[1] ?? Number.NaN);
};

for (const workers of ['0', '1']) {
  test(`published versions are planned before their first call (QUERYAPIGATE_WORKERS=${workers})`, async () => {
    const s = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: workers });
    try {
      const list = await s.call('GET', '/api/v1/queries?status=published');
      assert.equal(list.status, 200);
      const published = list.json.items.length;
      assert.ok(published > 5, `the examples publish queries (${published})`);
      // Nothing has been called yet: every plan held was made by the warmer.
      await eventually(
        () => planned(s),
        (n) => n === published,
      );

      // A version published later is planned after the change reaches the executor, still before a call.
      const saved = await s.call('POST', '/api/v1/queries', {
        body: {
          name: 'film_title',
          connection_name: 'examples',
          description: 'a film by id',
          publish: true,
          sql: 'SELECT title FROM film WHERE film_id = :id',
          parameters: { id: { type: 'int', required: true } },
        },
      });
      assert.equal(saved.status, 201, saved.text);
      await eventually(
        () => planned(s),
        (n) => n === published + 1,
      );

      // A draft is not published: nothing to plan for it.
      const draft = await s.call('POST', '/api/v1/queries', {
        body: { name: 'film_draft', connection_name: 'examples', description: 'draft', publish: false, sql: 'SELECT 1 AS one' },
      });
      assert.equal(draft.status, 201, draft.text);
      const called = await s.call('GET', '/q/film_title?id=1');
      assert.equal(called.status, 200, called.text);
      assert.equal(called.json[0].title.length > 0, true);
      // The call found its plan: none was added.
      assert.equal(await planned(s), published + 1);
    } finally {
      await s.stop();
    }
  });
}
