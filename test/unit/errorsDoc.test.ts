// docs/errors.md is the users' copy of the error table: every code, in its stage, with its status.
// This keeps it equal to src/contract/errors.ts, so a code added to one is added to the other.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ERRORS, statusOf } from '../../src/contract/errors.js';

const DOC = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');

/** Stage heading (the word before ':' in a '## ' line) → code → status, as the page lists them. */
function documented(): Map<string, Map<string, number>> {
  const stages = new Map<string, Map<string, number>>();
  let current: Map<string, number> | null = null;
  for (const line of DOC.split('\n')) {
    const heading = /^## (\w+)/.exec(line);
    if (heading) {
      current = new Map();
      stages.set(heading[1], current);
    }
    const row = /^\| `(\w+)` \| (\d{3}) \|/.exec(line);
    if (row && current) current.set(row[1], Number(row[2]));
  }
  return stages;
}

test('docs/errors.md lists every code of the table, in its stage, with its status, and no other', () => {
  const doc = documented();
  assert.deepEqual([...doc.keys()], Object.keys(ERRORS), 'the stages, in order');
  for (const [stage, codes] of Object.entries(ERRORS)) {
    assert.deepEqual(Object.fromEntries(doc.get(stage) ?? []), codes, `stage ${stage}`);
  }
});

test('statusOf reads the table', () => {
  assert.equal(statusOf('unauthorized'), 401);
  assert.equal(statusOf('query_timeout'), 504);
  assert.equal(statusOf('read_only'), 403);
});
