// Tests for the statements' deadlines (src/sources/deadlines.ts): one timer for all of a thread's, each firing
// once after its time (at most a check's interval late) unless cleared, tokens of an earlier use clearing nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CHECK_MS, deadlines } from '../../src/sources/deadlines.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a deadline fires once, after its time and at most a check late; a cleared one never does', async () => {
  const fired: string[] = [];
  const at = new Map<string, number>();
  const t0 = performance.now();
  const mark = (name: string) => () => {
    fired.push(name);
    at.set(name, performance.now() - t0);
  };
  deadlines.set(50, mark('a'));
  const b = deadlines.set(50, mark('b'));
  deadlines.set(250, mark('c'));
  deadlines.clear(b);
  await sleep(250 + 2 * CHECK_MS + 50);
  assert.deepEqual(fired.sort(), ['a', 'c']);
  assert.ok(at.get('a')! >= 50 && at.get('a')! <= 50 + 2 * CHECK_MS, `a after ${at.get('a')} ms`);
  assert.ok(at.get('c')! >= 250 && at.get('c')! <= 250 + 2 * CHECK_MS, `c after ${at.get('c')} ms`);
});

test("a token cleared twice, or after its deadline fired, leaves the slot's next deadline alone", async () => {
  const fired: number[] = [];
  const first = deadlines.set(10, () => fired.push(1));
  await sleep(2 * CHECK_MS + 20);
  assert.deepEqual(fired, [1]);
  // Its slot is free again: the next deadline takes it, and the first one's late clear must not touch it.
  const second = deadlines.set(10, () => fired.push(2));
  deadlines.clear(first);
  const third = deadlines.set(10_000, () => fired.push(3));
  deadlines.clear(third);
  deadlines.clear(third);
  const fourth = deadlines.set(10, () => fired.push(4));
  deadlines.clear(-1); // none was set
  await sleep(2 * CHECK_MS + 20);
  assert.deepEqual(fired.sort(), [1, 2, 4]);
  assert.notEqual(second, fourth);
});

test('many deadlines at once, set and cleared in any order, fire exactly the ones left', async () => {
  const fired = new Set<number>();
  const tokens = Array.from({ length: 1000 }, (_, i) => deadlines.set(20 + (i % 7), () => fired.add(i)));
  for (let i = 0; i < tokens.length; i += 3) deadlines.clear(tokens[(i * 7) % tokens.length]);
  const cleared = new Set(Array.from({ length: Math.ceil(tokens.length / 3) }, (_, k) => (3 * k * 7) % tokens.length));
  await sleep(2 * CHECK_MS + 50);
  for (let i = 0; i < tokens.length; i++) assert.equal(fired.has(i), !cleared.has(i), `deadline ${i}`);
});
