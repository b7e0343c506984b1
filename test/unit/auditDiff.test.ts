// The audit log's diffs and snapshots, and the ETag/If-Match comparison, as values: a secret is
// never shown (a fingerprint decides "changed"), an update records only what changed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { diff, etagOf, ifMatchHolds, type Snapshot, snapshotChanges } from '../../src/api/snapshots.js';
import { chainHash, GENESIS } from '../../src/store/audit.js';

const before: Snapshot = { fields: { name: 'wh', port: 5432, options: { ssl: true } }, secrets: { password: 'fp1' } };

test('diff: changed fields as {from, to}, nested values compared whole, a changed secret is "changed"', () => {
  const after: Snapshot = { fields: { name: 'wh', port: 6432, options: { ssl: true } }, secrets: { password: 'fp2' } };
  assert.deepEqual(diff(before, after), { port: { from: 5432, to: 6432 }, password: 'changed' });
  assert.deepEqual(diff(before, { ...before, fields: { ...before.fields, options: { ssl: false } } }), {
    options: { from: { ssl: true }, to: { ssl: false } },
  });
  assert.deepEqual(diff(before, before), {});
  assert.deepEqual(diff(before, { ...before, fields: { name: 'wh', port: 5432, options: { ssl: true }, added: 1 } }), { added: { from: null, to: 1 } });
});

test('snapshot: the whole object, a set secret as ********, an unset one null, never the fingerprint', () => {
  assert.deepEqual(snapshotChanges(before), { name: 'wh', port: 5432, options: { ssl: true }, password: '********' });
  assert.equal(snapshotChanges({ fields: {}, secrets: { password: null } }).password, null);
  assert.doesNotMatch(JSON.stringify(snapshotChanges(before)), /fp1/);
});

test('ETag: follows fields and secrets, not key order; If-Match takes a list, W/ and *', () => {
  const tag = etagOf(before);
  assert.match(tag, /^"[0-9a-f]{32}"$/);
  assert.equal(etagOf({ fields: { options: { ssl: true }, port: 5432, name: 'wh' }, secrets: { password: 'fp1' } }), tag);
  assert.notEqual(etagOf({ ...before, secrets: { password: 'fp2' } }), tag);
  assert.equal(ifMatchHolds(tag, before), true);
  assert.equal(ifMatchHolds(`"other", W/${tag}`, before), true);
  assert.equal(ifMatchHolds('*', before), true);
  assert.equal(ifMatchHolds('"0000"', before), false);
});

test('chain hash: depends on the previous hash and every field of the entry', () => {
  const e = { id: 1, timestamp: '2026-12-02 03:00:00', actor: 'alice', via: 'token' as const, action: 'update_key', target: 'k', changes: { a: 1 } };
  const h = chainHash(GENESIS, e);
  assert.match(h, /^[0-9a-f]{64}$/);
  assert.equal(chainHash(GENESIS, { ...e, changes: { a: 1 } }), h);
  for (const changed of [
    { ...e, id: 2 },
    { ...e, actor: 'bob' },
    { ...e, target: null },
    { ...e, changes: { a: 2 } },
    { ...e, via: 'cli' as const },
  ]) {
    assert.notEqual(chainHash(GENESIS, changed), h);
  }
  assert.notEqual(chainHash('f'.repeat(64), e), h);
});
