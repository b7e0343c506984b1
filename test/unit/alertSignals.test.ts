// The counts the alerts keep in memory (api/signals.ts): per name in time buckets over a window,
// with a clock the test moves; old buckets leave the sum, and the number of names is bounded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WindowCounts } from '../../src/api/signals.js';

const MIN = 60_000;

test('counts within the window (60 one-minute buckets), with the start of the earliest bucket', () => {
  const c = new WindowCounts(MIN, 60);
  const t0 = 1_000 * 60 * MIN; // a minute boundary
  c.note('a', 1, t0 + 5_000);
  c.note('a', 2, t0 + 10 * MIN);
  c.note('b', 1, t0 + 30 * MIN);
  assert.deepEqual(c.read(t0 + 30 * MIN), [
    { name: 'a', count: 3, firstMs: t0 },
    { name: 'b', count: 1, firstMs: t0 + 30 * MIN },
  ]);
  // An hour after the first: its bucket has left the window, the later one stays.
  assert.deepEqual(c.read(t0 + 60 * MIN), [
    { name: 'a', count: 2, firstMs: t0 + 10 * MIN },
    { name: 'b', count: 1, firstMs: t0 + 30 * MIN },
  ]);
  // A bucket reused a round later starts from zero, not from the old count.
  c.note('a', 1, t0 + 70 * MIN);
  assert.deepEqual(c.read(t0 + 70 * MIN)[0], { name: 'a', count: 1, firstMs: t0 + 70 * MIN });
  // Nothing left in the window: the name is forgotten.
  assert.deepEqual(c.read(t0 + 200 * MIN), []);
});

test('at most maxNames names: the one noted first goes', () => {
  const c = new WindowCounts(MIN, 60, 2);
  const t = 5 * MIN;
  c.note('a', 1, t);
  c.note('b', 1, t);
  c.note('c', 1, t);
  assert.deepEqual(
    c.read(t).map((r) => r.name),
    ['b', 'c'],
  );
});
