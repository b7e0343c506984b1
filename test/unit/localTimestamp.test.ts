// localTimestamp: local time as the contract writes it (YYYY-MM-DD HH:MM:SS). Every call records when
// it ran, so "now" is made once per second and reused: it must still be now, to the second.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { localTimestamp } from '../../src/store/store.js';

const format = (d: Date) => {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
};

test('localTimestamp: a given moment, in local time', () => {
  const d = new Date(2026, 0, 2, 3, 4, 5, 678);
  assert.equal(localTimestamp(d), '2026-01-02 03:04:05');
  assert.equal(localTimestamp(new Date(2026, 11, 31, 23, 59, 59, 999)), '2026-12-31 23:59:59');
});

test('localTimestamp: now is now to the second, and moves on with the clock', async () => {
  for (let i = 0; i < 3; i++) {
    const before = format(new Date());
    const now = localTimestamp();
    const after = format(new Date());
    assert.ok(now === before || now === after, `${now} is not between ${before} and ${after}`);
    await new Promise((r) => setTimeout(r, 600)); // over the three, the second changes at least once
  }
  const seen = new Set<string>();
  const t0 = Date.now();
  while (Date.now() - t0 < 1100) seen.add(localTimestamp());
  assert.ok(seen.size >= 2, `one text for 1.1 s: ${[...seen]}`);
});
