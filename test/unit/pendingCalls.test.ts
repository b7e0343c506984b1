// PendingCalls (http/pendingCalls.ts): the calls waiting for answers, by id, in reused slots.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PendingCalls } from '../../src/http/pendingCalls.js';

test('a value is found by its id until taken, and taken once', () => {
  const p = new PendingCalls<string>(4);
  const a = p.add('a');
  const b = p.add('b');
  assert.notEqual(a, b);
  assert.equal(p.size, 2);
  assert.equal(p.get(a), 'a');
  assert.equal(p.take(a), 'a');
  assert.equal(p.take(a), undefined, 'a second answer for the same call is ignored');
  assert.equal(p.get(a), undefined);
  assert.equal(p.get(b), 'b');
  assert.equal(p.size, 1);
});

test("a slot reused by a later call never answers to the earlier call's id", () => {
  const p = new PendingCalls<string>(2);
  const first = p.add('first');
  p.take(first);
  const later = p.add('later'); // the slot `first` had
  assert.notEqual(later, first);
  assert.equal(p.get(first), undefined);
  assert.equal(p.take(first), undefined, 'a late answer for the settled call');
  assert.equal(p.get(later), 'later', 'leaves the later call waiting');
});

test('ids stay unique over many generations, and ids() lists exactly the values kept', () => {
  const p = new PendingCalls<number>(8);
  const seen = new Set<number>();
  const kept = new Map<number, number>();
  for (let i = 0; i < 10_000; i++) {
    const id = p.add(i);
    assert.ok(!seen.has(id), `id ${id} given twice`);
    seen.add(id);
    kept.set(id, i);
    // Keep between 1 and 8 waiting, taking them in an order that is not the order they came in.
    if (kept.size === 8 || i % 3 === 0) {
      const [oldest] = kept.keys();
      const newest = [...kept.keys()].at(-1)!;
      for (const take of i % 2 ? [oldest] : [newest, oldest]) {
        if (!kept.has(take)) continue;
        assert.equal(p.take(take), kept.get(take));
        kept.delete(take);
      }
    }
    assert.equal(p.size, kept.size);
  }
  assert.deepEqual(p.ids().sort(), [...kept.keys()].sort());
  for (const id of p.ids()) assert.equal(p.get(id), kept.get(id));
});

test('more values than the capacity at once is a bug, said so', () => {
  const p = new PendingCalls<number>(2);
  p.add(1);
  p.add(2);
  assert.throws(() => p.add(3), /more than 2 calls pending/);
  p.take(p.ids()[0]);
  assert.doesNotThrow(() => p.add(3), 'room again once one is taken');
});
