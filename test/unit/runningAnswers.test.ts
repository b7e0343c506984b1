// The result cache's runs in flight (call/resultCache.ts RunningAnswers): the calls that miss a key while
// another call runs its statement wait for that call's entry, and every waiter is settled, whatever
// runs after it for the same key.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type CachedAnswer, RunningAnswers } from '../../src/call/resultCache.js';

const entry = (body: string): CachedAnswer => ({ body, headers: [], etag: '"e"', meta: { name: 'q', version: 1, connection: 'c', format: 'json', page: 1 } });
/** The promise's value, or 'pending' if it is not settled within a few turns. */
const settled = async <T>(p: Promise<T> | undefined): Promise<T | 'pending'> =>
  Promise.race([p as Promise<T>, new Promise<'pending'>((r) => setTimeout(() => r('pending'), 20))]);

test('runs in flight: a waiter gets the entry the run makes; none runs once it is made', async () => {
  const running = new RunningAnswers();
  assert.equal(running.joined('k'), undefined);
  const made = running.lead('k');
  const waiting = running.joined('k');
  assert.ok(waiting);
  made(entry('rows'));
  assert.equal(((await settled(waiting)) as CachedAnswer).body, 'rows');
  assert.equal(running.joined('k'), undefined, 'the next miss runs the statement');
  made(null); // the run's finally: settling again changes nothing
  assert.equal(((await settled(waiting)) as CachedAnswer).body, 'rows');
});

test('runs in flight: a failed run hands its waiters null; a run that began after it is not ended by it, and every waiter is settled', async () => {
  const running = new RunningAnswers();
  const first = running.lead('k');
  const onFirst = running.joined('k');
  first(null);
  assert.equal(await settled(onFirst), null);
  // Two waiters of the failed run each run the statement; a call between them waits for the first of them.
  const second = running.lead('k');
  const onSecond = running.joined('k');
  const third = running.lead('k');
  const onThird = running.joined('k');
  second(entry('two'));
  assert.equal(((await settled(onSecond)) as CachedAnswer).body, 'two');
  assert.equal(running.joined('k'), onThird, "the second's end leaves the third's run in place");
  third(entry('three'));
  assert.equal(((await settled(onThird)) as CachedAnswer).body, 'three');
  assert.equal(running.joined('k'), undefined);
  first(null); // a late second settle of an ended run removes nothing
  assert.equal(running.joined('k'), undefined);
});
