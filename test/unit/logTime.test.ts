// A line's time (log.ts isoNow): made a second at a time, it must read exactly as toISOString.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isoNow } from '../../src/log.js';

test("a line's time is the millisecond's ISO 8601 text, across seconds, days and years", () => {
  const starts = [Date.UTC(2026, 11, 31, 23, 59, 58), Date.UTC(2024, 1, 29, 12, 0, 0), 0, -1500, Date.UTC(10000, 0, 1) - 1200];
  for (const start of starts) {
    for (let ms = start; ms < start + 2500; ms += 7) assert.equal(isoNow(ms), new Date(ms).toISOString(), `at ${ms}`);
    for (const ms of [start, start + 1, start + 10, start + 99, start + 100, start + 999, start + 1000]) {
      assert.equal(isoNow(ms), new Date(ms).toISOString(), `at ${ms}`);
    }
  }
  const now = Date.now();
  assert.ok(Math.abs(Date.parse(isoNow()) - now) < 1000, 'without an argument: now');
});
